"""Render benchmark results as markdown (stdout) and JSON."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path

from .common import Result, Settings


def markdown(results: list[Result], settings: Settings, command: str, wall: float) -> str:
    lines = [
        "# tms-hbase benchmarks",
        "",
        f"- command: `{command}`",
        f"- when: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; wall time {wall:.0f} s; "
        f"{settings.rounds} rounds per benchmark, medians reported",
        f"- machine: {machine()}",
        f"- HBase Thrift: {settings.address}",
        "",
        "## Goals (docs/design.md, requirement 24; docs/benchmarks.md)",
        "",
        "| benchmark | goal | measured | met |",
        "|---|---|---|---|",
    ]
    for result in results:
        for goal, measured, met in result.goals:
            lines.append(f"| {result.name} | {goal} | {measured} | {'met' if met else '**not met**'} |")
    failed = [r for r in results if r.error]
    if failed:
        lines += ["", "## Failed", ""] + [f"- **{r.name}** failed: {r.error}" for r in failed]
    for result in results:
        lines += ["", f"## {result.name}: {result.title}", ""]
        for columns, rows in result.tables:
            lines.append("| " + " | ".join(columns) + " |")
            lines.append("|" + "---|" * len(columns))
            for row in rows:
                lines.append("| " + " | ".join(row) + " |")
            lines.append("")
        lines += [f"- {note}" for note in result.notes]
        lines.append(f"- took {result.seconds:.0f} s")
    return "\n".join(lines) + "\n"


def write_json(path: str, results: list[Result], settings: Settings, command: str, wall: float) -> None:
    data = {
        "command": command,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_seconds": round(wall, 1),
        "quick": settings.quick,
        "rounds": settings.rounds,
        "address": settings.address,
        "machine": machine(),
        "results": [r.to_json() for r in results],
    }
    Path(path).write_text(json.dumps(data, indent=2) + "\n")


def machine() -> str:
    """Cores, memory, Python and the load average when the run ended."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = float("nan")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} cores ({cpu_model()}), {mem:.0f} GiB RAM, Python {platform.python_version()}, "
        f"load average at the end {load}"
    )


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def busy_pytest() -> list[str]:
    """Other pytest runs on the machine (they would disturb the numbers)."""
    try:
        out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return []
    me = str(os.getpid())
    return [line.strip() for line in out.splitlines()[1:] if "pytest" in line and not line.strip().startswith(me)]
