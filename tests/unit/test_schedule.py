"""The scheduling headers (tms_hbase.model.schedule): made, read and checked without HBase."""

from __future__ import annotations

import pytest

from tms_hbase import InvalidArgument, Record, deliver_after, deliver_at
from tms_hbase.model import schedule
from tms_hbase.model.checks import validate_payloads
from tms_hbase.model.message import Message


def test_the_headers_say_when_a_message_is_due() -> None:
    assert deliver_at(1_700_000_000_123) == ("tms-deliver-at", b"1700000000123")
    assert deliver_after(2.5) == ("tms-deliver-after", b"2500")
    at = Message(b"i", b"p", 1000, headers=(("a", b"x"), deliver_at(5000)))
    after = Message(b"i", b"p", 1000, headers=(deliver_after(3),))
    assert (at.deliver_at_ms, after.deliver_at_ms, Message(b"i", b"p", 1000).deliver_at_ms) == (5000, 4000, None)
    # a value stored before the names were reserved is no time: not scheduled
    assert schedule.due_ms(1000, (("tms-deliver-at", b"soon"),)) is None


@pytest.mark.parametrize("bad", [-1, 1.5, "5", True, None, 10**15])
def test_bad_times_are_refused(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="bad time_ms"):
        deliver_at(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-0.5, "5", True, None, float("nan"), float("inf")])
def test_bad_delays_are_refused(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="bad delay"):
        deliver_after(bad)  # type: ignore[arg-type]


def test_a_batch_with_a_bad_time_is_refused_whole() -> None:
    good = Record(b"a", headers=(deliver_at(5),))
    assert validate_payloads([good, b"b"], 1 << 20, allow_empty=False) == (good, b"b")
    with pytest.raises(InvalidArgument, match="message 1"):
        validate_payloads([good, Record(b"b", headers=[("tms-deliver-at", b"+5")])], 1 << 20, allow_empty=False)
