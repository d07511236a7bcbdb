"""The sweeper's /health verdict (compactor/metrics.py) on a clock the test moves; the endpoint itself is
scraped from a real sweeper in tests/integration/test_sweeper_metrics.py."""

from __future__ import annotations

from tms_hbase_sweeper.metrics import Health, SweeperMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_healthy_while_sweeps_complete_within_the_bound() -> None:
    clock = Clock()
    health = Health(60, clock)
    assert health.check()[0] == 503 and health.check()[1]["status"] == "stopped"  # the loop has not started
    health.loop_started()
    clock.now += 59
    assert health.check() == (
        200,
        {"status": "ok", "loop_alive": True, "seconds_since_last_sweep": None, "max_age_seconds": 60},
    )
    clock.now += 2  # no sweep completed within the bound since the start
    assert health.check()[1]["status"] == "stale"
    health.sweep_ended()
    clock.now += 60
    assert health.check()[0] == 200
    clock.now += 1
    code, body = health.check()
    assert code == 503 and body["status"] == "stale" and body["seconds_since_last_sweep"] == 61
    health.sweep_ended()
    health.loop_ended()
    assert health.check()[1]["status"] == "stopped"


def test_region_series_of_regions_gone_are_removed() -> None:
    metrics = SweeperMetrics()
    metrics.set_region_lags({"t[-..-)": 5.0})
    metrics.set_region_lags({"t[-..aa)": 1.0, "t[aa..-)": 2.0})
    series = {
        s.labels["region"]: s.value
        for family in metrics.registry.collect()
        if family.name == "tms_sweeper_region_lag_seconds"
        for s in family.samples
    }
    assert series == {"t[-..aa)": 1.0, "t[aa..-)": 2.0}
