"""The peer benchmark's report (bench/peers/report.py): medians over rounds, ratios to tms-hbase, and how
failed systems and systems without an equivalent show. Pure code: no servers."""

from __future__ import annotations

from bench.peers.report import FAILED, NO_EQUIVALENT, Report, Workload, times
from bench.peers.system import ServerInfo


def _rows(lines: list[str]) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_table_has_medians_and_ratios_to_tms_hbase() -> None:
    w = Workload("publish", "t")
    for value in (100.0, 400.0, 200.0):  # median 200, mean 233
        w.add("1 KiB", "msg/s", "tms", value)
    w.add("1 KiB", "msg/s", "kafka", 500.0)
    w.add("1 KiB", "p99 ms", "kafka", 4.0)  # a row tms-hbase has nothing in
    header, rule, first, second = _rows(w.table(["tms", "kafka"]))
    assert header == ["case", "metric", "tms-hbase", "Kafka", "Kafka ÷ tms-hbase"]
    assert rule == ["---"] * 5
    assert first == ["1 KiB", "msg/s", "200", "500", "2.50×"]  # median of the three rounds, then 500 / 200
    assert second == ["1 KiB", "p99 ms", "–", "4.00", "–"]


def test_failed_and_unsupported_systems_are_named_not_blank() -> None:
    w = Workload("tx", "t")
    w.add("batch 1", "commit p50 ms", "tms", 2.0)
    w.add("batch 1", "commit p50 ms", "kafka", 8.0)
    w.fail("nats", "boom")
    w.no_equivalent.add("redis")
    (_, _, row) = _rows(w.table(["tms", "kafka", "nats", "redis"]))
    assert row == ["batch 1", "commit p50 ms", "2.00", "8.00", "4.00×", FAILED, "–", NO_EQUIVALENT, "–"]


def test_no_ratio_columns_without_tms_hbase() -> None:
    w = Workload("seek", "t")
    w.add("c", "ms", "redis", 0.5)
    header, _, row = _rows(w.table(["redis"]))
    assert header == ["case", "metric", "Redis Streams"]
    assert row == ["c", "ms", "0.50"]


def test_ratio_precision_follows_its_size() -> None:
    assert times(250.0, 1.0) == "250×"
    assert times(1234.0, 1.0) == "1,234×"
    assert times(12.34, 1.0) == "12.3×"
    assert times(1.0, 4.0) == "0.25×"
    assert times(1.0, 50.0) == "0.020×"
    assert times(float("nan"), 1.0) == "–"
    assert times(1.0, 0.0) == "–"


def test_report_names_what_failed_and_what_did_not_start() -> None:
    report = Report("python -m bench.peers", ["tms", "kafka"], 3, measured=["tms"])
    report.servers["tms"] = ServerInfo({}, "tms-hbase 0.1.0", "WAL")
    w = Workload("consume", "Consume")
    w.add("c", "msg/s", "tms", 10.0)
    report.workloads.append(w)
    report.failures.append("Kafka did not start: no java")
    text = report.markdown()
    assert "| Kafka | did not start | |" in text
    assert "| c | msg/s | 10.0 |" in text  # only the systems measured are columns
    assert "## Failures\n\n- Kafka did not start: no java" in text


def test_batch_publish_goal_lines_compare_tms_hbase_with_kafka_per_producer_count() -> None:
    from bench.peers.workloads import batch_goals

    w = Workload("publish", "t")
    for tms, kafka in ((90.0, 100.0), (110.0, 100.0), (100.0, 100.0)):  # medians 100 and 100: met at equal
        w.add("1 KiB, batch 100, 1 producer", "msg/s", "tms", tms)
        w.add("1 KiB, batch 100, 1 producer", "msg/s", "kafka", kafka)
    w.add("1 KiB, batch 100, 4 producers", "msg/s", "tms", 90.0)
    w.add("1 KiB, batch 100, 4 producers", "msg/s", "kafka", 120.0)
    w.add("1 KiB, sync, batch 1, 1 producer", "msg/s", "tms", 1.0)  # not a batch case: no line
    one, four = batch_goals(w)
    assert one.startswith("Goal: batch publish ≥ Kafka's (1 KiB, batch 100, 1 producer)")
    assert one.endswith("1.00×, met")
    assert "(1 KiB, batch 100, 4 producers)" in four and four.endswith("0.75×, **not met**")
    assert [(g["goal"], g["met"]) for g in w.goals] == [  # written with --json, for bench/report.py's table
        ("batch publish ≥ Kafka's (1 KiB, batch 100, 1 producer)", True),
        ("batch publish ≥ Kafka's (1 KiB, batch 100, 4 producers)", False),
    ]


def test_no_batch_goal_line_without_kafkas_figures() -> None:
    from bench.peers.workloads import batch_goals

    w = Workload("publish", "t")
    w.add("1 KiB, batch 100, 1 producer", "msg/s", "tms", 100.0)
    assert batch_goals(w) == []
