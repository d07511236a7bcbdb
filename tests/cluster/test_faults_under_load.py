"""Publishing from several processes and consuming through a subscription while the cluster is hurt: region
servers SIGKILLed, regions moved and split, a Thrift gateway killed. Nothing acknowledged is lost, nothing is
stored twice, every reader sees one order, and writers and the consumer go on within RESUME_BOUND seconds of
each fault.

``TMS_CLUSTER_FAULT_ROUNDS`` (default 4: each fault once) is how many faults, taken in turn from FAULTS.
``TMS_CLUSTER_RESULTS`` names a JSON file to write the per-fault resume times to (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tms_hbase import MessagingClient, TopicId
from tms_hbase_launcher.cluster import ClusterHBase

from .workload import Workload

WRITERS = 3
FAULTS = ("kill-regionserver", "move-region", "split-region", "kill-thrift")


def _fault(cluster: ClusterHBase, kind: str, table: str) -> str:
    """Do one fault to the cluster; returns what was done."""
    regions = cluster.regions(table)
    if kind == "kill-regionserver":
        name = cluster.server_of_last_region(table)  # where the sequencer writes
        cluster.kill(name)
        return f"SIGKILL {name} (holding {regions[-1].name})"
    if kind == "move-region":
        return f"moved {regions[-1].name} to {cluster.move_region(regions[-1].name)}"
    if kind == "split-region":
        return f"split {table}: {len(cluster.split_region(table))} regions"
    cluster.kill("thrift1")
    return "SIGKILL thrift1"


def test_no_loss_no_duplicates_one_order_under_faults(
    cluster: ClusterHBase, client: MessagingClient, tms_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    topic = TopicId("cluster", "faults")
    client.create_topic(topic)
    client.create_subscription(topic, "sink")
    table = f"{prefix}_messages"
    load = Workload(tms_env, topic, tmp_path, WRITERS, ["sink"], interval=0.02)
    rounds = int(os.environ.get("TMS_CLUSTER_FAULT_ROUNDS", "4"))
    report = []
    try:
        load.running()
        for n in range(rounds):
            kind = FAULTS[n % len(FAULTS)]
            time.sleep(3)  # some load between faults
            began = time.time()
            done = _fault(cluster, kind, table)
            ended = time.time()
            writers, consumer = load.stalls(began, ended)
            report.append(
                {
                    "fault": kind,
                    "done": done,
                    "fault_s": round(ended - began, 2),
                    "writers_stalled_s": round(writers, 2),
                    "consumer_stalled_s": round(consumer, 2),
                }
            )
            print(report[-1], flush=True)
            cluster.start(timeout=300)  # a new process for whatever the fault killed, on its ports
        load.finish()
    finally:
        load.kill()
    if os.environ.get("TMS_CLUSTER_RESULTS"):
        Path(os.environ["TMS_CLUSTER_RESULTS"]).write_text(json.dumps(report, indent=2))
    print(load.check(client))
