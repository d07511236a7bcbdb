"""SnapshotKeeper: refresh on its interval, keep the last good view through failures, and call a view
past its bound stale (the sweeper then does no invalid-list work)."""

from __future__ import annotations

import pytest

from tms_hbase.errors import InvalidArgument, TmsError
from tms_hbase.tx.snapshot import TransactionSnapshot
from tms_hbase.txserver.snapshot_source import SnapshotKeeper


class Source:
    description = "test source"

    def __init__(self) -> None:
        self.reads, self.down = 0, False

    def read(self) -> TransactionSnapshot:
        if self.down:
            raise TmsError("down")
        self.reads += 1
        return TransactionSnapshot(self.reads, self.reads, self.reads, invalid=(self.reads,))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_refreshes_on_its_interval_and_keeps_the_last_good_view(caplog: pytest.LogCaptureFixture) -> None:
    source, clock = Source(), Clock()
    keeper = SnapshotKeeper(source, refresh_seconds=30, max_age_seconds=100, monotonic=clock)
    assert keeper.stale() and keeper.age_seconds() is None
    assert keeper.refresh().invalid == (1,)
    clock.now += 10
    assert keeper.refresh().invalid == (1,) and source.reads == 1  # not due yet
    clock.now += 25
    assert keeper.refresh().invalid == (2,) and keeper.age_seconds() == 0
    source.down = True
    clock.now += 60
    assert keeper.refresh().invalid == (2,)  # the last good view
    assert keeper.age_seconds() == 60 and not keeper.stale()
    assert "keeping the last good view, 60 s old" in caplog.text
    clock.now += 41
    keeper.refresh()
    assert keeper.stale()  # 101 s > 100 s
    source.down = False
    assert keeper.refresh(force=True).invalid == (3,) and not keeper.stale()


def test_no_view_at_all_is_stale() -> None:
    source = Source()
    source.down = True
    keeper = SnapshotKeeper(source, refresh_seconds=0, max_age_seconds=10, monotonic=Clock())
    assert keeper.refresh() is None and keeper.stale()


@pytest.mark.parametrize("max_age", [0, -1, 5])
def test_a_bound_below_the_refresh_interval_is_refused(max_age: float) -> None:
    with pytest.raises(InvalidArgument, match="maximum snapshot age"):
        SnapshotKeeper(Source(), refresh_seconds=30, max_age_seconds=max_age)
