"""The Dataflow model as a library: windows, triggers, accumulation, late data, joins,
tables, and the plain operators (map, filter, flat_map, split, union, dedup).

Built on the public user API only (``computations.Computation`` and
``Context``), so the same classes run on nodes, in ``TestHarness`` and in
backfills. See ``docs/windows.md``.
"""

from millrace.dataflow._aggregation import WindowedAggregation
from millrace.dataflow._combiners import Combined, Combiner, Count, Max, Mean, Min, Sum
from millrace.dataflow._joins import IntervalJoin, JoinType
from millrace.dataflow._json_combiners import Collect, MaxBy, MinBy, TopN
from millrace.dataflow._operators import Dedup, Filter, FlatMap, Map, Split, Union
from millrace.dataflow._outputs import JOIN_OUTPUT_VERSION, LATE_DROPPED, decode_join
from millrace.dataflow._panes import FORMAT_VERSION, Pane, Timing
from millrace.dataflow._sketches import ApproxDistinct, ApproxQuantiles, Distinct, TopK
from millrace.dataflow._stream_table import TableJoin
from millrace.dataflow._table_table import TableTableJoin
from millrace.dataflow._tables import Changelog, TableChanges, parse_change
from millrace.dataflow._triggers import (
    Accumulation,
    AfterWatermark,
    AtExpiry,
    EachLateRecord,
    EveryProcessingTime,
    EveryRecords,
    FirstOf,
)
from millrace.dataflow._windows import (
    Cumulating,
    FieldWindows,
    GlobalWindows,
    Hopping,
    Sessions,
    Sliding,
    Tumbling,
    Window,
    WindowAssigner,
)

__all__ = [
    "ApproxDistinct",
    "ApproxQuantiles",
    "Distinct",
    "TopK",
    "TopN",
    "MaxBy",
    "MinBy",
    "Collect",
    "FieldWindows",
    "FORMAT_VERSION",
    "LATE_DROPPED",
    "JOIN_OUTPUT_VERSION",
    "decode_join",
    "Accumulation",
    "AfterWatermark",
    "AtExpiry",
    "Changelog",
    "Dedup",
    "Filter",
    "FlatMap",
    "Combined",
    "Combiner",
    "Count",
    "Cumulating",
    "EachLateRecord",
    "EveryProcessingTime",
    "EveryRecords",
    "FirstOf",
    "GlobalWindows",
    "IntervalJoin",
    "Map",
    "JoinType",
    "Hopping",
    "Max",
    "Mean",
    "Min",
    "Pane",
    "Sessions",
    "Sliding",
    "Split",
    "Sum",
    "TableChanges",
    "TableJoin",
    "TableTableJoin",
    "Timing",
    "Tumbling",
    "Union",
    "Window",
    "WindowAssigner",
    "WindowedAggregation",
    "parse_change",
]
