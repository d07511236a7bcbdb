"""One verification run: set up, the workload under faults, the final phase, the check.

Phases:

1. **Setup**: a table prefix of its own (``v<hex>``), for each ordering four topics: ``main`` (every kind
   of reader and the consumers), ``fresh`` (read only by new clients and new processes: no long-lived
   reader fills a dead writer's hole there), ``ttl`` (a short TTL, swept), ``tx`` (transactional only);
   one subscription per ``main`` topic; the TCP proxy every process reaches HBase through; the sweeper
   (``tms-sweeper run`` with the smallest grace the installation accepts) and, with ``--tx``, the
   transaction server (``tms-admin tx serve``).
2. **Workload** for ``--duration`` seconds: long-lived writers; short-lived writers that leave with
   ``close()`` or ``os._exit(0)``; every 20-30 s, on each ``fresh`` topic in turn, the
   reproducer (a script publishing 30-50 messages back to back, then ``os._exit(0)``; every other
   time it SIGKILLs itself between reserving offsets and writing); a long-lived reader; a reader with a
   new client per poll; one-shot probe processes (read from the start, then time seeks); consumers;
   transactional writer and reader.
   The nemesis injects the chosen faults; dead long-lived processes are replaced.
3. **Final phase**: every fault healed, writers stopped (they finish their publish), the sweeper
   stopped. Then, within ``--bound`` seconds, every kind of reader must see every acknowledged message:
   new processes (fetch from the start, fetch_range, a consumer on a new subscription, a transactional
   reader) are started one after another until they do or the bound passes, while the long-lived
   reader and consumers go on. Then, quiet: one sweeper pass (``tms-sweeper once``: it indexes the skip
   markers that killed fillers left unindexed), time seeks to sampled publish times from new clients, and
   ``topic_stats`` and every subscription's ``lag``.
4. **Check** (``checker``): the summary is printed and written to ``<run>/summary.json`` with the
   history in ``<run>/history/``; the exit code is 1 if there is any anomaly.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tms_hbase import MessagingClient, TopicId
from tms_hbase.config import PREFIX_ENV, THRIFT_ENV, thrift_address
from tms_hbase.model.tail_cache import minimum_grace

from ..hbase_server import hbase_for_tests
from ..tcp_proxy import TcpProxy
from .checker import check
from .history import MONO_BASE_ENV, Recorder, mono_base, read_history
from .nemesis import Nemesis, Proc, faketime_lib, initial_offset, write_offset
from .own_hbase import OwnHBase
from .proxy import RobustProxy

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "verify"
TTL_SECONDS = 20


class Run:
    def __init__(self, opts: Any) -> None:
        self.opts = opts
        self.rng = random.Random(opts.seed)
        self.prefix = f"v{uuid.UUID(int=self.rng.getrandbits(128)).hex[:8]}{uuid.uuid4().hex[:4]}"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.dir = Path(opts.run_dir or REPO / ".verify" / f"{stamp}-seed{opts.seed}").resolve()
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        (self.dir / "clock").mkdir(exist_ok=True)
        self.base = mono_base()
        self.rec = Recorder(self.dir / "history" / "runner.jsonl", "runner", self.base)
        self.faults: set[str] = set(opts.faults)
        self.faketime = faketime_lib() if "clock" in self.faults else ""
        self.procs: list[Proc] = []
        self.counter = 0
        self.topics: list[dict[str, Any]] = []
        self.own: OwnHBase | None = None
        self.address = ""
        self.proxy: TcpProxy | None = None
        self.tx_port = 0
        self.grace = 0

    # -- processes ----------------------------------------------------------------------------

    def env(self, clock_file: Path | None) -> dict[str, str]:
        env = dict(os.environ)
        assert self.proxy is not None
        env.update({THRIFT_ENV: self.proxy.address, PREFIX_ENV: self.prefix, MONO_BASE_ENV: repr(self.base)})
        env.pop("LD_PRELOAD", None)
        if clock_file is not None:
            env.update(
                {
                    "LD_PRELOAD": self.faketime,
                    "FAKETIME_TIMESTAMP_FILE": str(clock_file),
                    "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                    "FAKETIME_CACHE_DURATION": "1",
                }
            )
        return env

    def clock_file(self, name: str, skew: bool) -> tuple[Path | None, float]:
        if "clock" not in self.faults or not skew:
            return None, 0.0
        path = self.dir / "clock" / name
        offset = initial_offset(self.rng, self.opts.max_skew)
        write_offset(path, offset)
        return path, offset

    def spawn(self, role: str, prefix: str, *, long_lived: bool = False, skew: bool = True, **cfg: Any) -> Proc:
        self.counter += 1
        name = f"{prefix}{self.counter}"
        clock, offset = self.clock_file(name, skew)
        cfg = {
            "role": role,
            "name": name,
            "run_dir": str(self.dir),
            "seed": self.rng.getrandbits(32),
            "topics": self.topics,
            "timeout": self.opts.timeout,
            "tx_address": f"127.0.0.1:{self.tx_port}",
            **cfg,
        }
        log = open(self.dir / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
        popen = subprocess.Popen(
            [sys.executable, "-m", "tests.verify.worker", json.dumps(cfg)],
            cwd=REPO,
            env=self.env(clock),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        proc = Proc(name, role, popen, clock, long_lived, offset=offset, cfg=cfg)
        self.procs.append(proc)
        self.rec.event(
            "spawn",
            target=name,
            role=role,
            pid=popen.pid,
            offset=offset,
            cfg={k: cfg[k] for k in cfg if k in ("ops", "exit", "kinds", "burst", "topic", "die_after_reserve")},
        )
        return proc

    def spawn_command(self, role: str, argv: list[str], *, skew: bool) -> Proc:
        self.counter += 1
        name = f"{role}{self.counter}"
        clock, offset = self.clock_file(name, skew)
        log = open(self.dir / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
        popen = subprocess.Popen(
            argv, cwd=REPO, env=self.env(clock), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        proc = Proc(name, role, popen, clock, True, offset=offset)
        self.procs.append(proc)
        self.rec.event("spawn", target=name, role=role, pid=popen.pid, offset=offset, argv=argv)
        return proc

    def sweeper(self, *, once: bool = False) -> Proc:
        """The sweeper daemon (a pass every 3 s, under the nemesis), or one pass (``once``, the final phase's,
        unskewed): counts are exact once a pass has indexed the skip markers whose fillers were killed."""
        mode = ["once"] if once else ["run", "--interval", "3"]
        argv = [
            sys.executable,
            "-m",
            "tests.verify.shim",
            "tms_hbase_sweeper.cli:main",
            *mode,
            "--grace",
            str(self.grace),
            "--lease-seconds",
            "5",
            "--timeout",
            str(self.opts.timeout),
        ]
        return self.spawn_command("sweeper-once" if once else "sweeper", argv, skew=not once)

    def tx_server(self) -> Proc:
        argv = [
            sys.executable,
            "-m",
            "tests.verify.shim",
            "tms_hbase_admin.cli:main",
            "tx",
            "serve",
            "--port",
            str(self.tx_port),
            "--cleanup-interval",
            "0.5",
            "--short-timeout",
            "10",
        ]
        return self.spawn_command("txserver", argv, skew=False)

    def wait_tx_server(self, proc: Proc, seconds: float = 60.0) -> None:
        """Wait until the transaction server answers (or fail the run: nothing transactional works)."""
        from tms_hbase.tx.client import TransactionClient, TransactionServiceUnavailable

        deadline = time.monotonic() + seconds
        while True:
            try:
                with TransactionClient(f"127.0.0.1:{self.tx_port}", timeout_seconds=2) as c:
                    c.status()
                return
            except TransactionServiceUnavailable:
                if proc.popen.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the transaction server did not start: see {self.dir / 'logs'}") from None
                time.sleep(0.2)

    def alive(self, role: str) -> list[Proc]:
        return [p for p in self.procs if p.role == role and p.alive()]

    def reap(self, replace: bool) -> None:
        for p in list(self.procs):
            code = p.popen.poll()
            if code is None:
                continue
            self.procs.remove(p)
            self.rec.event("exited", target=p.name, role=p.role, code=code)
            if replace and p.long_lived:
                self.respawn(p)

    def respawn(self, p: Proc) -> None:
        if p.role == "sweeper":
            self.sweeper()
        elif p.role == "txserver":
            self.tx_server()
        else:
            self.spawn(
                p.role,
                p.name.rstrip("0123456789"),
                long_lived=True,
                **{k: v for k, v in p.cfg.items() if k in ("kinds",)},
            )

    def wait_exit(self, procs: list[Proc], seconds: float) -> None:
        """Wait (with a deadline) for processes to exit; SIGKILL what is left, and record it."""
        deadline = time.monotonic() + seconds
        for p in procs:
            try:
                p.popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.rec.event("note", what=f"{p.name} did not exit within {seconds}s: SIGKILL")
                p.popen.kill()
                p.popen.wait()

    # -- phases -------------------------------------------------------------------------------

    def setup(self) -> None:
        if "hbase" in self.faults and not self.opts.own_hbase:
            raise SystemExit("--faults hbase needs --own-hbase (the shared HBase is never restarted)")
        if self.opts.own_hbase:
            self.own = OwnHBase(self.dir / "hbase", self.dir / "logs" / "own-hbase.log")
            print(f"starting the run's own HBase in {self.dir / 'hbase'} ...", flush=True)
            self.address = self.own.start()
        else:
            self.address = self.opts.thrift
        self.proxy = RobustProxy(thrift_address(self.address))
        with MessagingClient(self.address, self.prefix, timeout_seconds=60) as client:
            client.admin.init_tables()
            if self.opts.tail_cache_seconds:
                client.admin.set_tail_cache_seconds(self.opts.tail_cache_seconds)
            for ordering in self.opts.orderings:
                kinds = ["main", "fresh", "ttl"] + (["tx"] if self.opts.tx else [])
                for kind in kinds:
                    topic = TopicId(NAMESPACE, f"{ordering}_{kind}")
                    props = {"ordering": ordering}
                    if kind == "ttl":
                        props["ttl"] = str(TTL_SECONDS)
                    if kind == "tx":
                        props["tx.mode"] = "transactional"
                    client.create_topic(topic, props)
                    self.topics.append(
                        {"name": str(topic), "ordering": ordering, "kind": kind, "ttl": props.get("ttl")}
                    )
                    if kind in ("main", "tx"):
                        client.create_subscription(topic, f"sub-{topic.topic}", start="earliest")
            self.grace = minimum_grace(client.admin.tail_cache_setting(), int(time.time() * 1000))
        self.tx_port = free_port()
        (self.dir / "config.json").write_text(
            json.dumps(
                {
                    "seed": self.opts.seed,
                    "argv": sys.argv,
                    "prefix": self.prefix,
                    "hbase": self.address,
                    "topics": self.topics,
                    "faults": sorted(self.faults),
                    "sweeper_grace": self.grace,
                },
                indent=2,
            )
        )

    def workload(self) -> None:
        o = self.opts
        if "sweeper" not in o.skip:
            self.sweeper()
        if o.tx:
            self.wait_tx_server(self.tx_server())
        for _ in range(o.writers):
            self.spawn("writer", "w", long_lived=True)
        self.spawn("reader", "r", long_lived=True)
        self.spawn("fresh-reader", "n", long_lived=True)
        for _ in range(o.consumers):
            self.spawn("consumer", "c", long_lived=True)
        if o.tx:
            self.spawn("tx-writer", "x", long_lived=True)
            self.spawn("tx-reader", "y", long_lived=True)
        assert self.proxy is not None
        nemesis = Nemesis(
            self.rng,
            self.faults,
            self.rec,
            lambda: self.procs,
            self.proxy,
            self.own,
            (o.fault_min, o.fault_max),
            o.max_skew,
            o.hbase_gap,
        )
        self.nemesis = nemesis
        end = self.rec.now() + o.duration
        next_short = next_probe = self.rec.now()
        next_script, scripts = self.rec.now() + 5.0, 0
        fresh = [t["name"] for t in self.topics if t["kind"] == "fresh"]
        next_note = self.rec.now() + 15
        while self.rec.now() < end:
            self.reap(replace=True)
            now = self.rec.now()
            if now >= next_short and len(self.alive("writer")) < o.writers + 2:
                exit_how = self.rng.choice(["close", "exit"])
                self.spawn("writer", "s", ops=self.rng.randint(1, 8), exit=exit_how, burst=self.rng.random() < 0.5)
                next_short = now + self.rng.uniform(0.5, 2.5)
            if now >= next_script:
                # the reproducer, on each fresh topic in turn: a script publishing 30-50 messages back
                # to back to one topic, leaving with os._exit(0) while its writer holds offsets reserved ahead
                # (if it was fast enough to reserve blocks); every other round on a topic it kills itself
                # between reserving offsets and writing them instead
                topic = fresh[scripts % len(fresh)]
                scripts += 1
                ops = self.rng.randint(30, 50)
                die = self.rng.randint(1, 3) if scripts % 4 in (2, 3) else None  # every other round per topic
                script = self.spawn("writer", "d", ops=ops, exit="exit", burst=True, topic=topic, die_after_reserve=die)
                script.spared = True  # the nemesis leaves the reproducer alone
                next_script = now + self.rng.uniform(20.0, 30.0)
            if now >= next_probe and not self.alive("probe"):
                self.spawn("probe", "p")
                next_probe = now + self.rng.uniform(2.0, 6.0)
            nemesis.tick()
            if now >= next_note:
                print(f"  {end - now:5.0f}s left: {len(self.procs)} processes", flush=True)
                next_note = now + 15
            time.sleep(0.1)  # the loop's tick, not a synchronisation

    def final(self) -> None:
        o = self.opts
        self.nemesis.heal()
        (self.dir / "stop-writers").touch()
        self.reap(replace=False)
        writers = [p for p in self.procs if p.role in ("writer", "tx-writer", "probe")]
        self.wait_exit(writers, 60)
        for p in self.alive("sweeper"):
            p.popen.send_signal(signal.SIGTERM)
        self.wait_exit(self.alive("sweeper"), 60)
        self.reap(replace=False)
        for role in ("reader", "fresh-reader", "consumer", "tx-reader", "txserver"):
            if not self.alive(role) and (role != "txserver" or o.tx) and (not role.startswith("tx") or o.tx):
                if role == "txserver":
                    self.tx_server()
                else:
                    self.spawn(role, role[0], long_lived=False)
        healed = self.rec.now()
        self.rec.event("healed", bound=o.bound)
        print(
            f"final phase: faults healed, writers stopped; every kind of reader must see everything within {o.bound}s",
            flush=True,
        )
        acked = acknowledged(read_history(self.dir), self.topics)
        deadline = healed + o.bound
        attempts = 0
        while True:
            attempts += 1
            p = self.spawn("final", "f", skew=False, kinds=["fetch", "range", "consumer"] + (["tx"] if o.tx else []))
            self.wait_exit([p], max(30.0, deadline - self.rec.now() + 30))
            kinds = ["final-fetch", "final-range", "final-consumer"] + (["final-tx"] if o.tx else [])
            missing = missing_now(
                read_history(self.dir), acked, self.topics, [q.name for q in self.alive("reader")], kinds
            )
            if not missing or self.rec.now() >= deadline:
                break
        print(f"  {attempts} final reader process(es); still missing at the end: {missing or 'nothing'}", flush=True)
        self.rec.event("final-long", processes=[q.name for q in self.alive("reader")])
        (self.dir / "stop").touch()
        self.wait_exit([q for q in self.procs if q.role != "txserver"], 60)
        self.reap(replace=False)
        if "sweeper" not in o.skip:  # the pass that indexes what killed fillers left unindexed
            sweep = self.sweeper(once=True)
            self.wait_exit([sweep], 300)
            self.rec.event("final-sweep", exit=sweep.popen.poll())
        p = self.spawn("final", "q", skew=False, kinds=["seek", "stats"], seeks=o.seeks)
        self.wait_exit([p], 300)
        self.reap(replace=False)

    def teardown(self) -> None:
        for p in list(self.procs):
            if p.alive():
                p.popen.send_signal(signal.SIGCONT)
                p.popen.terminate()
        self.wait_exit(list(self.procs), 30)
        if self.proxy is not None:
            self.proxy.close()
        if not self.opts.keep_tables and self.address:
            try:
                with MessagingClient(self.address, self.prefix, timeout_seconds=120) as client:
                    client.admin.drop_tables()
            except Exception as exc:
                print(f"could not drop the tables of prefix {self.prefix}: {exc}", file=sys.stderr)
        if self.own is not None:
            self.own.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def acknowledged(events: list[dict[str, Any]], topics: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Acknowledged payloads per topic (TTL topics left out: messages there expire)."""
    plain = {t["name"]: t for t in topics if not t["ttl"]}
    invokes: dict[tuple[str, int], dict[str, Any]] = {}
    acked: dict[str, set[str]] = {name: set() for name in plain}
    for e in events:
        if e["type"] == "invoke" and e["f"] in ("publish", "txpublish"):
            invokes[(e["p"], e["op"])] = e
        elif e["type"] == "ok" and (e["p"], e.get("op")) in invokes:
            inv = invokes[(e["p"], e["op"])]
            if inv["topic"] in acked:
                acked[inv["topic"]].update(inv["payloads"])
    return acked


def missing_now(
    events: list[dict[str, Any]],
    acked: dict[str, set[str]],
    topics: list[dict[str, Any]],
    long_readers: list[str],
    final_kinds: list[str],
) -> dict[str, int]:
    """How many acknowledged messages each kind of final reader (and the live long-lived reader) still
    misses, by kind (empty: every reader sees everything)."""
    invokes: dict[tuple[str, int], dict[str, Any]] = {}
    last: dict[tuple[str, str], set[str]] = {}
    streams: dict[tuple[str, str], set[str]] = {}
    kinds = {t["name"]: t["kind"] for t in topics}
    for e in events:
        key = (e["p"], e.get("op", -1))
        if e["type"] == "invoke":
            invokes[key] = e
        elif e["type"] == "ok" and key in invokes and "msgs" in e and "base" not in e:
            inv = invokes[key]
            payloads = {m[0] for m in e["msgs"]}
            if inv.get("final") and inv.get("whole"):
                last[(inv.get("kind", inv["f"]), inv["topic"])] = payloads
            elif inv.get("kind") == "long" and e["p"] in long_readers:
                streams.setdefault((e["p"], inv["topic"]), set()).update(payloads)
    missing: dict[str, int] = {}
    for kind in final_kinds:
        for topic, payloads in acked.items():
            if (kind == "final-tx") != (kinds[topic] == "tx"):
                continue
            n = len(payloads - last.get((kind, topic), set()))
            if n:
                missing[kind] = missing.get(kind, 0) + n
    for (_, topic), seen in streams.items():
        if topic in acked and kinds[topic] == "main":
            n = len(acked[topic] - seen)
            if n:
                missing["long"] = missing.get("long", 0) + n
    return missing


def reproduce_command(opts: Any) -> str:
    args = [
        "python -m tests.verify",
        f"--duration {opts.duration:g}",
        f"--seed {opts.seed}",
        f"--faults {','.join(opts.faults) or 'none'}",
        f"--orderings {','.join(opts.orderings)}",
        f"--writers {opts.writers}",
        f"--consumers {opts.consumers}",
        f"--bound {opts.bound:g}",
        f"--max-skew {opts.max_skew:g}",
        f"--fault-min {opts.fault_min:g}",
        f"--fault-max {opts.fault_max:g}",
        *([f"--hbase-gap {opts.hbase_gap:g}"] if opts.hbase_gap else []),
        f"--seeks {opts.seeks}",
        f"--timeout {opts.timeout:g}",
    ]
    if opts.tail_cache_seconds:
        args.append(f"--tail-cache-seconds {opts.tail_cache_seconds}")
    if opts.skip:
        args.append(f"--skip {','.join(opts.skip)}")
    args.append("--tx" if opts.tx else "--no-tx")
    if opts.own_hbase:
        args.append("--own-hbase")
    if opts.thrift and not opts.own_hbase:
        args.append(f"--thrift {shlex.quote(opts.thrift)}")
    return " ".join(args)


def main(opts: Any) -> int:
    run = Run(opts)
    command = reproduce_command(opts)
    print(f"verify: seed {opts.seed}, run folder {run.dir}\n  reproduce: {command}", flush=True)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        return _run(run, opts, command, started, stack)


def _run(run: Run, opts: Any, command: str, started: float, stack: contextlib.ExitStack) -> int:
    try:
        if opts.thrift is None and not opts.own_hbase:
            hbase = stack.enter_context(hbase_for_tests())
            opts.thrift = hbase[0]
            print(f"HBase Thrift at {hbase[0]} ({hbase[1]})", flush=True)
        run.setup()
        print(f"prefix {run.prefix}, topics {[t['name'] for t in run.topics]}, sweeper grace {run.grace}s", flush=True)
        run.workload()
        run.final()
    finally:
        run.teardown()
    summary = check(read_history(run.dir), {t["name"]: t for t in run.topics})
    summary.update(
        {
            "seed": opts.seed,
            "command": command,
            "run_dir": str(run.dir),
            "prefix": run.prefix,
            "seconds": round(time.monotonic() - started, 1),
            "options": {k: v for k, v in vars(opts).items() if k != "check"},
            "sweeper_grace": run.grace,
        }
    )
    (run.dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print_summary(summary)
    if summary["harness_errors"]:
        return 2
    return 0 if summary["valid"] else 1


def print_summary(s: dict[str, Any]) -> None:
    print("\noperations:")
    for k, v in s["operations"].items():
        print(f"  {k:24} {v}")
    print("faults:")
    for k, v in s["faults"].items() or [("none", 0)]:
        print(f"  {k:24} {v}")
    print(f"messages: {s['messages']}")
    print("anomalies:" if s["anomalies"] else "anomalies: none")
    for k, v in s["anomalies"].items():
        print(f"  {k:24} {v}   e.g. {json.dumps(s['examples'][k][:2], default=str)}")
    for error in s.get("harness_errors", []):
        print(f"HARNESS ERROR (the suite itself, not the library; see the process's log): {error}")
    print(f"\n{'VALID' if s['valid'] else 'INVALID'} after {s['seconds']}s; history and summary in {s['run_dir']}")
    print(f"reproduce: {s['command']}")
