"""The one retry policy: attempts, backoff with jitter, and only errors that can succeed later."""

from __future__ import annotations

import time

import pytest

from tms_hbase.errors import HBaseError, HBaseUnavailable, InvalidArgument, TopicNotFound
from tms_hbase.model.retry import Retry


class Flaky:
    """Fails with the given errors, one per call, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_retriable_errors_are_retried_until_success() -> None:
    sleeps: list[float] = []
    fn = Flaky(HBaseUnavailable("down"), HBaseUnavailable("still down"))
    assert Retry(attempts=3, backoff_seconds=0.1, jitter=False).call(fn, sleep=sleeps.append) == "ok"
    assert fn.calls == 3 and sleeps == [0.1, 0.2]  # exponential


def test_refusals_and_bad_input_are_not_retried() -> None:
    for error in (HBaseError("refused"), TopicNotFound("ns:t"), InvalidArgument("bad"), ValueError("x")):
        fn = Flaky(error)
        with pytest.raises(type(error)):
            Retry(attempts=5).call(fn, sleep=lambda _: None)
        assert fn.calls == 1


def test_gives_up_after_the_attempts_with_the_last_error() -> None:
    fn = Flaky(*(HBaseUnavailable(f"down {i}") for i in range(5)))
    with pytest.raises(HBaseUnavailable, match="down 2"):
        Retry(attempts=3).call(fn, sleep=lambda _: None)
    assert fn.calls == 3
    fn = Flaky(HBaseUnavailable("once"))
    with pytest.raises(HBaseUnavailable):
        Retry.never().call(fn)
    assert fn.calls == 1


def test_backoff_is_capped_and_jittered_below_the_cap() -> None:
    policy = Retry(attempts=10, backoff_seconds=0.5, max_backoff_seconds=2.0, jitter=False)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 2.0, 2.0]
    jittered = {Retry(backoff_seconds=1.0, max_backoff_seconds=1.0).delay(3) for _ in range(50)}
    assert all(0 <= d <= 1.0 for d in jittered) and len(jittered) > 40  # spread out, not in lockstep


def test_a_pause_that_would_pass_the_deadline_gives_up_instead() -> None:
    policy = Retry(attempts=10, backoff_seconds=5.0, max_backoff_seconds=5.0, jitter=False)
    slept: list[float] = []
    assert not policy.pause(HBaseUnavailable("down"), 1, deadline=time.monotonic() + 1.0, sleep=slept.append)
    assert slept == []
    assert policy.pause(HBaseUnavailable("down"), 1, deadline=time.monotonic() + 60, sleep=slept.append)
    assert slept == [5.0]


def test_a_custom_predicate_decides_which_errors_qualify() -> None:
    in_transition = Retry(attempts=4, retry_if=lambda e: "Internal error" in str(e))
    fn = Flaky(HBaseError("Internal error processing getTableRegions"))
    assert in_transition.call(fn, sleep=lambda _: None) == "ok"
    with pytest.raises(HBaseUnavailable):
        in_transition.call(Flaky(HBaseUnavailable("down")), sleep=lambda _: None)


@pytest.mark.parametrize("bad", [{"attempts": 0}, {"attempts": True}, {"backoff_seconds": -1}])
def test_bad_settings_are_refused(bad: dict) -> None:
    with pytest.raises(InvalidArgument):
        Retry(**bad)
