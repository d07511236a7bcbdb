"""What ``python -m bench.run`` runs: ``--quick`` (CI's ``make bench-quick``) leaves out the benchmarks that start
servers of their own for minutes, unless they are named."""

from __future__ import annotations

from bench.run import BENCHMARKS, NOT_QUICK, parse_args


def test_quick_leaves_out_the_slow_to_start_benchmarks_unless_named() -> None:
    assert "transports-sasl" in NOT_QUICK
    assert parse_args(["--quick"]).names == [n for n in BENCHMARKS if n not in NOT_QUICK]
    assert parse_args(["--quick", "--only", "transports-sasl"]).names == ["transports-sasl"]


def test_a_full_run_runs_every_benchmark() -> None:
    assert parse_args([]).names == list(BENCHMARKS)
