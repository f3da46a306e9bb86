"""The ``Admin`` gRPC service of a node: status, state by key, dead letters."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import grpc

from millrace import __version__
from millrace.computations import IntervalId, Topology, interval_of
from millrace.deployment import abort
from millrace.engine import IntervalProcessor, state_prefix
from millrace.statestore import wall_clock_ms
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc, record_pb2

_DEFAULT_LIMIT = 100


class AdminService(admin_pb2_grpc.AdminServicer):
    """Read-only views of a node's intervals (reads are safe beside the workers: RocksDB
    reads are thread-safe and nothing here touches the dedup filters)."""

    def __init__(
        self,
        node_id: str,
        topology: Topology,
        processors: Mapping[IntervalId, IntervalProcessor],
        fenced_reason: Callable[[str, int], str] = lambda computation, interval: "",
        hand_over: Callable[[admin_pb2.HandOverRequest], Iterator[admin_pb2.StoreFilePiece]]
        | None = None,
    ) -> None:
        """``fenced_reason``: why the node stopped writing an interval ("" while it owns
        it); ``hand_over(request)``: stop running an interval moved away and stream its
        store (raises ``PermissionError`` when the registry does not move it there,
        ``FileNotFoundError`` when it is not here)."""
        self._node_id = node_id
        self._topology = topology
        self._processors = processors
        self._fenced_reason = fenced_reason
        self._hand_over = hand_over
        self._started_ms = wall_clock_ms()

    def Status(
        self, request: admin_pb2.StatusRequest, context: grpc.ServicerContext
    ) -> admin_pb2.StatusResponse:
        response = admin_pb2.StatusResponse(
            node_id=self._node_id,
            role="node",
            version=__version__,
            started_at_ms=self._started_ms,
        )
        for _, processor in sorted(self._processors.items()):
            status = processor.status()
            entry = response.intervals.add(
                interval=record_pb2.KeyInterval(
                    computation=status.computation,
                    index=status.share.index,
                    count=status.share.count,
                ),
                epoch=status.epoch,
                outbox_size=status.outbox_size,
                records_committed=status.records_committed,
                pending_timers=status.pending_timers,
                fenced_reason=self._fenced_reason(status.computation, status.interval),
            )
            if status.input_watermark is not None:
                entry.input_low_watermark_ms = status.input_watermark
        return response

    def GetState(
        self, request: admin_pb2.GetStateRequest, context: grpc.ServicerContext
    ) -> admin_pb2.GetStateResponse:
        spec = self._topology.computations.get(request.computation)
        if spec is None:
            abort(context, grpc.StatusCode.NOT_FOUND, f"no computation {request.computation!r}")
        index = interval_of(request.key, spec.intervals)
        processor = self._processors.get(IntervalId(request.computation, index))
        if processor is None:  # split here? the half that holds the key
            processor = next(
                (
                    p
                    for (name, _), p in list(self._processors.items())
                    if name == request.computation and p.share.holds(request.key)
                ),
                None,
            )
        if processor is None:
            where = f"interval {index} of {request.computation!r}"
            abort(
                context, grpc.StatusCode.FAILED_PRECONDITION, f"{where} is not on {self._node_id}"
            )
        prefix = state_prefix(request.key)
        response = admin_pb2.GetStateResponse(
            interval=record_pb2.KeyInterval(
                computation=request.computation, index=processor.interval, count=spec.intervals
            )
        )
        for key, value in processor.store.scan_state(prefix):
            response.entries.add(tag=key[len(prefix) :].decode(errors="replace"), value=value)
        response.found = bool(response.entries)
        return response

    def ListDeadLetters(
        self, request: admin_pb2.ListDeadLettersRequest, context: grpc.ServicerContext
    ) -> admin_pb2.ListDeadLettersResponse:
        limit = request.limit or _DEFAULT_LIMIT
        response = admin_pb2.ListDeadLettersResponse()
        for (name, _), processor in sorted(self._processors.items()):
            if request.computation and name != request.computation:
                continue
            for letter in processor.dead_letters():
                if letter.record.record_id > request.after_record_id:
                    response.dead_letters.append(letter)
        response.dead_letters.sort(key=lambda letter: letter.record.record_id)
        del response.dead_letters[limit:]
        return response

    def HandOver(
        self, request: admin_pb2.HandOverRequest, context: grpc.ServicerContext
    ) -> Iterator[admin_pb2.StoreFilePiece]:
        interval = request.interval
        where = f"{interval.computation}/{interval.index}"
        if self._hand_over is None:
            abort(context, grpc.StatusCode.FAILED_PRECONDITION, "moves need the injector")
        try:
            yield from self._hand_over(request)
        except PermissionError as exc:
            abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except FileNotFoundError as exc:
            abort(context, grpc.StatusCode.NOT_FOUND, str(exc))
        except grpc.RpcError as exc:
            abort(
                context,
                grpc.StatusCode.UNAVAILABLE,
                f"cannot check the move of {where} with the registry: {exc.code()}",
            )
        except (OSError, RuntimeError) as exc:
            abort(context, grpc.StatusCode.UNAVAILABLE, f"cannot hand {where} over: {exc}")
