"""The exactly-once engine: one key interval's batches in, one atomic commit out.

:class:`IntervalProcessor` takes a batch of records (or due timers), runs the
user's computation on them, routes what it produced to the consuming
intervals and commits state, dedup ids, timers and outbox frames in one
transaction of the interval's ``statestore``. Pure: no gRPC, no threads, no
clocks of its own; the ``node`` package drives it over the network.

Also here: the outbox's ids and frames (what a sender sends and a receiver
dedups on) and the low-watermark arithmetic the injector's authority and the
harness share.
"""

from millrace.dataplane import state_key
from millrace.engine._driver import (
    Admission,
    IntervalDriver,
    SenderEpochCheck,
    any_valid_epoch,
    refusal,
    sender_progress,
)
from millrace.engine._frames import FRAME_BYTES, Frame, decode_frame, encode_batch, frames_of
from millrace.engine._interval_halves import cut_to_half, merge_into
from millrace.engine._local_network import InFlight, LocalNetwork, receive
from millrace.engine._outcome import BatchOutcome
from millrace.engine._processor import IntervalProcessor, IntervalStatus
from millrace.engine._production_ids import Production, split_outbox_key
from millrace.engine._received import Received
from millrace.engine._routing import (
    SINK_PREFIX,
    Route,
    reroute,
    routes_of,
    source_productions,
)
from millrace.engine._scope import state_prefix
from millrace.engine._tuples import new_tuple
from millrace.engine._watermarks import (
    SOURCE_PREFIX,
    ComputationWatermark,
    compute_watermarks,
    feeders,
    input_watermark,
    saturate,
    source_name,
)

__all__ = [
    "Admission",
    "IntervalDriver",
    "SenderEpochCheck",
    "receive",
    "refusal",
    "sender_progress",
    "SINK_PREFIX",
    "SOURCE_PREFIX",
    "BatchOutcome",
    "ComputationWatermark",
    "FRAME_BYTES",
    "Frame",
    "InFlight",
    "IntervalProcessor",
    "IntervalStatus",
    "LocalNetwork",
    "Route",
    "Production",
    "Received",
    "any_valid_epoch",
    "compute_watermarks",
    "feeders",
    "decode_frame",
    "encode_batch",
    "frames_of",
    "input_watermark",
    "new_tuple",
    "cut_to_half",
    "merge_into",
    "reroute",
    "routes_of",
    "saturate",
    "source_name",
    "source_productions",
    "split_outbox_key",
    "state_key",
    "state_prefix",
]
