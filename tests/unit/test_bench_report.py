"""docs/benchmarks.md's goals table is what bench/report.py renders from the kept runs (bench/results/*.json),
so the page cannot drift from the figures; the newest run of a goal wins."""

from __future__ import annotations

import json
from pathlib import Path

from bench import console, report


def test_the_benchmarks_page_is_what_the_kept_runs_render() -> None:
    page = report.PAGE.read_text()
    paths = sorted(Path(report.RESULTS).parent.glob("*.json"))
    assert paths, "bench/results/ has no runs"
    assert report.render_page(page, paths) == page, "run: python -m bench.report --write"
    assert report.main(["--check"]) == 0


def _run(path: Path, when: str, key: str, name: str, measured: str, met: bool) -> Path:
    goal = {"goal": "g ≥ 1×", "measured": measured, "met": met}
    path.write_text(json.dumps({"command": f"cmd {when}", "time": when, key: [{"name": name, "goals": [goal]}]}))
    return path


def test_the_newest_run_of_a_goal_wins_and_the_peers_come_last(tmp_path: Path) -> None:
    paths = [
        _run(tmp_path / "b.json", "2026-01-02T00:00:00+0000", "results", "publish", "0.5×", False),
        _run(tmp_path / "a.json", "2026-01-03T00:00:00+0000", "results", "publish", "1.5×", True),
        _run(tmp_path / "c.json", "2026-01-01T00:00:00+0000", "workloads", "latency", "1 vs 2 ms", True),
        _run(tmp_path / "d.json", "2026-01-01T00:00:00+0000", "results", "fetch", "2.0×", True),
    ]
    table = report.goals_table(paths).splitlines()
    rows = [line for line in table if line.startswith("| ") and not line.startswith("| benchmark")]
    assert rows == [
        "| publish | g ≥ 1× | 1.5× | met | 2026-01-03 | `cmd 2026-01-03T00:00:00+0000` |",
        "| fetch | g ≥ 1× | 2.0× | met | 2026-01-01 | `cmd 2026-01-01T00:00:00+0000` |",
        "| peers: latency | g ≥ 1× | 1 vs 2 ms | met | 2026-01-01 | `cmd 2026-01-01T00:00:00+0000` |",
    ]
    page = f"intro\n{report.BEGIN}\nstale\n{report.END}\nafter\n"
    rendered = report.render_page(page, paths)
    assert rendered.startswith("intro\n" + report.BEGIN) and rendered.endswith(report.END + "\nafter\n")
    assert "stale" not in rendered


def _screens(path: Path, when: str, figures: dict[str, tuple[str, bool]]) -> Path:
    goals = [
        {"goal": console.FIRST_VIEW_GOAL.format(item=screen), "measured": measured, "met": met}
        for screen, (measured, met) in figures.items()
    ]
    run = {"command": f"cmd {when}", "time": when, "results": [{"name": "console", "goals": goals}]}
    path.write_text(json.dumps(run))
    return path


def test_a_goal_recorded_per_screen_is_one_row_naming_the_screens_that_missed_it_from_the_newest_run(
    tmp_path: Path,
) -> None:
    old, new = "2026-01-01T00:00:00+0000", "2026-01-02T00:00:00+0000"
    figures = {"overview": ("201 ms", True), "topics": ("455 ms", False), "sweeper": ("290 ms", True)}
    missed = _screens(tmp_path / "a.json", old, figures)
    met = _screens(tmp_path / "b.json", new, {"overview": ("263 ms", True), "topics": ("182 ms", True)})
    row = "| console | every screen's first view < 300 ms | {} | {} | `cmd {}` |"
    assert row.format("missed by topics 455 ms | **not met**", old[:10], old) in report.goals_table([missed])
    # the newest run's screens only: the sweeper's 290 ms of the older run is not the worst
    assert row.format("worst: overview 263 ms | met", new[:10], new) in report.goals_table([missed, met])
