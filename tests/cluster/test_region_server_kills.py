"""Region servers SIGKILLed again and again under load: three writer processes publish to a topic and two
consumer processes consume it through two subscriptions while the region server holding the topic's region
(where new messages go) is killed, ``TMS_CLUSTER_KILLS`` times (default 2; ``make test-cluster
CLUSTER_KILLS=20`` for the long run), a new one started on its ports after each recovery.

After each kill, publishing and consuming resume within RESUME_BOUND seconds; at the end nothing
acknowledged is lost, nothing is stored twice, every reader sees one order. ``TMS_CLUSTER_RESULTS`` names a
JSON file for the per-kill figures (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tms_hbase import MessagingClient, TopicId
from tms_hbase_launcher.cluster import ClusterHBase

from .workload import Workload

KILLS = int(os.environ.get("TMS_CLUSTER_KILLS", "2"))
WRITERS = 3
PAUSE = 0.05
"""Seconds each writer waits between batches: the consumers, committing every message, keep up, so a
consumer's stall is the kill's and not a backlog's."""


def test_region_server_kills_under_load(
    cluster: ClusterHBase, client: MessagingClient, tms_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    topic = TopicId("cluster", "kills")
    client.create_topic(topic)
    for name in ("audit", "billing"):
        client.create_subscription(topic, name)
    table = f"{prefix}_messages"
    started = time.monotonic()
    load = Workload(tms_env, topic, tmp_path, WRITERS, ["audit", "billing"], interval=PAUSE)
    report = []
    try:
        load.running()
        for n in range(KILLS):
            time.sleep(3)  # some load between kills
            victim = cluster.server_of_last_region(table)
            began = time.time()
            cluster.kill(victim)
            ended = time.time()
            writers, consumers = load.stalls(began, ended)
            restart = time.monotonic()
            cluster.start_process(victim, timeout=300)
            report.append(
                {
                    "kill": n + 1,
                    "server": victim,
                    "writers_stalled_s": round(writers, 2),
                    "consumers_stalled_s": round(consumers, 2),
                    "restart_s": round(time.monotonic() - restart, 2),
                }
            )
            print(report[-1], flush=True)
        load.finish()
    finally:
        load.kill()
    summary = load.check(client)
    print(f"{KILLS} kills in {time.monotonic() - started:.0f}s: {summary}")
    if os.environ.get("TMS_CLUSTER_RESULTS"):
        Path(os.environ["TMS_CLUSTER_RESULTS"]).write_text(json.dumps({"kills": report, "summary": summary}, indent=2))
