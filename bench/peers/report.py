"""What the peer workloads measured, and the markdown report: one table per workload with each system's
median over the rounds and its ratio to tms-hbase, then the machine, versions and durability settings."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..common import fmt, median
from ..report import machine
from .system import BASELINE, ServerInfo, label

FAILED = "failed"
NO_EQUIVALENT = "no equivalent"


@dataclass
class Row:
    """One measured quantity of one case: samples (one per round) per system."""

    case: str
    metric: str
    samples: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class Workload:
    """One workload's rows, and which systems failed it (with why) or have no equivalent of it."""

    name: str
    title: str
    rows: list[Row] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    no_equivalent: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    goals: list[dict[str, object]] = field(default_factory=list)  # what bench/report.py's goals table shows
    seconds: float = 0.0

    def add(self, case: str, metric: str, system: str, value: float) -> None:
        """One sample (one round) of ``metric`` for ``system`` in ``case``."""
        for row in self.rows:
            if row.case == case and row.metric == metric:
                break
        else:
            row = Row(case, metric)
            self.rows.append(row)
        row.samples.setdefault(system, []).append(value)

    def goal(self, goal: str, measured: str, met: bool) -> str:
        """Record a goal's verdict (written with ``--json``) and return its line for the notes."""
        self.goals.append({"goal": goal, "measured": measured, "met": met})
        return f"Goal: {goal}: {measured}, {'met' if met else '**not met**'}"

    def fail(self, system: str, why: str) -> None:
        self.failed.setdefault(system, why)

    def value(self, row: Row, system: str) -> float:
        """The median of ``system``'s samples in ``row`` (NaN without any)."""
        return median(row.samples.get(system, []))

    def cell(self, row: Row, system: str) -> str:
        if row.samples.get(system):
            return fmt(self.value(row, system))
        if system in self.no_equivalent:
            return NO_EQUIVALENT
        if system in self.failed:
            return FAILED
        return "–"

    def table(self, systems: list[str]) -> list[str]:
        """The markdown table: a column per system, and after each other system its ratio to the baseline."""
        ratios = BASELINE in systems
        columns = ["case", "metric"]
        for name in systems:
            columns.append(label(name))
            if ratios and name != BASELINE:
                columns.append(f"{label(name)} ÷ {label(BASELINE)}")
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        for row in self.rows:
            cells = [row.case, row.metric]
            for name in systems:
                cells.append(self.cell(row, name))
                if ratios and name != BASELINE:
                    cells.append(times(self.value(row, name), self.value(row, BASELINE)))
            lines.append("| " + " | ".join(cells) + " |")
        return lines


def times(value: float, baseline: float) -> str:
    """``value / baseline`` as ``2.50×``, with more digits for small ratios; ``–`` when either is missing."""
    if math.isnan(value) or math.isnan(baseline) or baseline == 0:
        return "–"
    r = value / baseline
    if r >= 100:
        return f"{r:,.0f}×"
    if r >= 10:
        return f"{r:.1f}×"
    if r >= 0.1:
        return f"{r:.2f}×"
    return f"{r:.3f}×"


@dataclass
class Report:
    """Everything one run found, and how it was run."""

    command: str
    systems: list[str]  # as asked for
    rounds: int
    measured: list[str] = field(default_factory=list)  # those that started and passed the warm-up: the columns
    servers: dict[str, ServerInfo] = field(default_factory=dict)
    workloads: list[Workload] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    load_before: str = ""
    started: float = field(default_factory=time.time)
    wall: float = 0.0

    def markdown(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(self.started))
        lines = [
            "# tms-hbase side by side with Kafka, NATS JetStream and Redis Streams",
            "",
            f"- command: `{self.command}`",
            f"- when: {when}; wall time {self.wall:.0f} s; {self.rounds} round(s) per case, medians reported",
            f"- machine: {machine()}; load average at the start {self.load_before}",
            "- every server on 127.0.0.1, started by the benchmark and stopped at the end",
            "",
            "| system | versions | durability of an acknowledged publish |",
            "|---|---|---|",
        ]
        for name in self.systems:
            info = self.servers.get(name)
            if info is None:
                lines.append(f"| {label(name)} | did not start | |")
            else:
                lines.append(f"| {label(name)} | {info.versions} | {info.durability} |")
        for w in self.workloads:
            lines += ["", f"## {w.name}: {w.title}", ""]
            lines += w.table(self.measured) if w.rows else ["(no system measured this workload)"]
            lines.append("")
            lines += [f"- {note}" for note in w.notes]
            lines += [f"- {label(s)} failed: {why}" for s, why in w.failed.items()]
            lines.append(f"- took {w.seconds:.0f} s; ratios are each system's median ÷ tms-hbase's")
        if self.failures:
            lines += ["", "## Failures", ""] + [f"- {f}" for f in self.failures]
        return "\n".join(lines) + "\n"

    def write_json(self, path: str) -> None:
        data = {
            "command": self.command,
            "started": self.started,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.started)),
            "wall_seconds": round(self.wall, 1),
            "machine": machine(),
            "load_before": self.load_before,
            "servers": {n: {"versions": i.versions, "durability": i.durability} for n, i in self.servers.items()},
            "workloads": [
                {
                    "name": w.name,
                    "title": w.title,
                    "rows": [{"case": r.case, "metric": r.metric, "samples": r.samples} for r in w.rows],
                    "failed": w.failed,
                    "no_equivalent": sorted(w.no_equivalent),
                    "notes": w.notes,
                    "goals": w.goals,
                }
                for w in self.workloads
            ],
            "failures": self.failures,
        }
        Path(path).write_text(json.dumps(data, indent=2) + "\n")
