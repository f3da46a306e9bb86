"""Replay's comparison takes an identity's latest result in production order.

Issue 31's smallest case: two auctions of one category expire at the same
millisecond, so the category's average is updated twice at one event time (300,
then 200). Ranked by event time and record id, the backfill's "latest" was
whichever id sorted last, and a replay would have overwritten the sink's right
value (200) with the older one.
"""

from __future__ import annotations

from millrace.spark_jobs.batch import Output, compare


def update(id_byte: int, value: bytes, seq: int) -> Output:
    return Output(bytes([id_byte]) * 16, b"category-1", value, 5_000, seq)


def test_the_later_produced_of_two_updates_at_one_time_is_current() -> None:
    backfill = [update(0xFF, b"300", seq=7), update(0x00, b"200", seq=8)]
    online = [update(0xAA, b"300", 0), update(0xBB, b"200", 0)]  # arrival order
    report = compare(backfill, online)
    assert (report.checked, report.changed, report.corrections) == (1, 0, [])


def test_a_sink_holding_the_older_update_gets_the_later_one() -> None:
    backfill = [update(0x00, b"300", seq=7), update(0xFF, b"200", seq=8)]
    online = [update(0xBB, b"200", 0), update(0xAA, b"300", 0)]
    report = compare(backfill, online)
    assert report.changed == 1
    (correction,) = report.corrections
    assert correction.value == b"200"


def test_production_order_wins_over_event_time() -> None:
    """A key's later production is current even when it carries an earlier time."""
    backfill = [
        Output(b"\x01" * 16, b"k", b"new", 1_000, 9),
        Output(b"\x02" * 16, b"k", b"old", 2_000, 3),
    ]
    assert compare(backfill, [Output(b"\x03" * 16, b"k", b"new", 0)]).corrections == []


def test_a_stream_of_results_is_compared_by_content_not_id() -> None:
    """A join's matches: the online ids came from arrival order, the results agree."""
    from millrace.spark_jobs.batch import compare_content

    backfill = [
        Output(b"\x01" * 16, b"order-1", b"match-a", 1_000, 1),
        Output(b"\x02" * 16, b"order-1", b"match-b", 1_000, 2),
        Output(b"\x03" * 16, b"order-2", b"match-c", 2_000, 3),
        Output(b"\x04" * 16, b"order-2", b"match-c", 2_000, 4),  # the same result twice
    ]
    online = [
        Output(b"\x09" * 16, b"order-1", b"match-b", 1_000),
        Output(b"\x08" * 16, b"order-1", b"match-a", 1_000),
        Output(b"\x07" * 16, b"order-2", b"match-c", 2_000),
        Output(b"\x06" * 16, b"order-3", b"stale", 3_000),
    ]
    report = compare_content(backfill, online)
    assert (report.checked, report.missing, report.online_only) == (4, 1, 1)
    (correction,) = report.corrections
    assert (correction.key, correction.value) == (b"order-2", b"match-c")
    assert compare_content(backfill, [*online, correction]).corrections == []
