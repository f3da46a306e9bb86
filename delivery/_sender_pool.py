"""``SenderPool``: the downstream senders of one process, started on first use."""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc

from millrace.computations import IntervalId
from millrace.delivery._sender import (
    DownstreamSender,
    Origin,
    SenderCallbacks,
    insecure_channel,
)
from millrace.engine import Frame


class SenderPool:
    """Senders started on first use: one per address (:meth:`get`), or one per destination
    interval that follows its owner wherever ``resolve`` says it is (:meth:`to`)."""

    def __init__(
        self,
        *,
        sender_id: str,
        callbacks: SenderCallbacks,
        channel_factory: Callable[[str], grpc.Channel] = insecure_channel,
        resolve: Callable[[str, int], str] | None = None,
    ) -> None:
        self._sender_id = sender_id
        self._callbacks = callbacks
        self._channel_factory = channel_factory
        self._resolve = resolve
        self._senders: dict[str | IntervalId, DownstreamSender] = {}
        self._lock = threading.Lock()

    def get(self, address: str) -> DownstreamSender:
        """The sender to ``address`` (thread-safe)."""
        return self._sender(address, address)

    def to(self, consumer: str, interval: int) -> DownstreamSender:
        """The sender to ``consumer``'s ``interval``, wherever it is served (thread-safe)."""
        assert self._resolve is not None, "a pool of routed senders needs resolve"
        return self._sender(IntervalId(consumer, interval), None)

    def refresh(self) -> None:
        """Routes changed: move every routed sender whose destination now resolves elsewhere."""
        if self._resolve is None:
            return
        with self._lock:
            routed = [(key, s) for key, s in self._senders.items() if isinstance(key, tuple)]
        for (consumer, interval), sender in routed:
            sender.retarget(self._resolve(consumer, interval))

    def _sender(self, key: str | IntervalId, address: str | None) -> DownstreamSender:
        with self._lock:
            sender = self._senders.get(key)
            if sender is None:
                if address is None:
                    assert self._resolve is not None and isinstance(key, tuple)
                    address = self._resolve(*key)
                sender = DownstreamSender(
                    address,
                    sender_id=self._sender_id,
                    callbacks=self._callbacks,
                    channel_factory=self._channel_factory,
                )
                sender.start()
                self._senders[key] = sender
            return sender

    def retire(self, consumer: str, interval: int) -> list[tuple[Origin, list[Frame]]]:
        """``consumer``'s ``interval`` is gone (split into halves): stop its sender and
        hand back what it had not delivered, to be routed again (nothing, if it had
        no sender)."""
        with self._lock:
            sender = self._senders.pop(IntervalId(consumer, interval), None)
        return [] if sender is None else sender.take_all()

    def all(self) -> list[DownstreamSender]:
        """The senders created so far."""
        with self._lock:
            return list(self._senders.values())

    def stop(self) -> None:
        """Stop every sender; what they did not deliver stays in the outboxes."""
        for sender in self.all():
            sender.stop()
