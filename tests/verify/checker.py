"""The checker: anomalies in a recorded history (``history.read_history``), by kind.

What it knows: every publish (its payloads, whether it was acknowledged, when, and the writer's clock
then), every read (the messages it returned with their ids and publish times), every consumer session
and commit, every time seek, and the final counts. Message ids sort in the topic's order, so the order
every reader must agree on is the known messages sorted by id. The kinds:

- ``phantom``: a payload read that nobody published, or whose publish certainly failed;
- ``disagreement``: one payload under two ids or publish times, or one id holding two payloads, or a
  payload read from a topic it was not published to;
- ``duplicate``: a message returned twice by one read, one stream of polls, or one consumer session;
- ``reorder``: a read that returned ids out of order;
- ``skip``: a read (or stream) passed over a message that had been acknowledged before the read began
  (not for TTL topics, where readers skip expired messages by design);
- ``appeared-behind``: a message a read or stream passed over that was written later: it appeared
  behind a position a reader had already passed;
- ``seek-skip``: ``fetch(start_time_ms=T)`` started after messages dated >= T that had been acknowledged
  before the seek began (one anomaly per seek);
- ``lost``: an acknowledged message that no read ever returned (on a TTL topic: only one that was still
  unexpired at the final reads, so a sweeper deleting unexpired messages shows up here);
- ``invisible:<kind>``: an acknowledged message some reader saw, missing from the last final view of
  one kind of reader (fresh process fetch, fetch_range, new consumer, long-lived reader, transactional
  reader) after the faults healed and the bound passed; ``invisible-unexpired:<kind>`` is the same on a
  TTL topic, for a message whose date (at least its writer's clock) says it had not expired yet;
- ``consumer-skip``: a subscription's committed mark passed a message no session of it delivered;
- ``count`` / ``lag``: ``topic_stats().messages`` or a subscription's ``lag().messages`` differing from
  the truth (the distinct messages the checker knows, after the mark);
- ``tx-aborted-read`` / ``tx-uncommitted-read``: a committed-only reader (a transactional reader, or a
  consumer: subscriptions deliver committed messages only) saw a message of an aborted transaction, or
  one before its transaction began to commit;
- ``lease-overlap``: a consumer committed after a later consumer of the same subscription had opened.
"""

from __future__ import annotations

import bisect
import signal
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

Id = tuple[int, int, int]
EXAMPLES = 10
TTL_MARGIN = 5.0  # seconds: a TTL message counts as surely unexpired only this long before its expiry


@dataclass
class Publish:
    payload: str
    topic: str
    process: str
    status: str = "info"  # ok | fail | info (unknown: an error left it open, or the process died)
    invoke_t: float = 0.0
    done_t: float | None = None
    local: float = 0.0  # the writer's own clock at invoke (its date unless clamped: see surely_unexpired)
    tx: bool = False
    commit_start: float | None = None


@dataclass
class Read:
    process: str
    op: int
    f: str
    topic: str
    invoke_t: float
    ok_t: float
    local: float
    msgs: list[list[Any]]
    kind: str = ""
    stream: str | None = None
    start: Id | None = None
    whole: bool = False
    final: bool = False
    checked_from: int = 0  # messages before this index were checked as part of an earlier read
    T: int | None = None
    sub: str | None = None

    @property
    def committed_only(self) -> bool:
        """A reader that must never return an uncommitted message: a transactional one, or a consumer."""
        return self.f in ("txread", "consume") or self.kind == "final-consumer"


@dataclass
class Report:
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))

    def add(self, kind: str, **detail: Any) -> None:
        self.anomalies[kind].append(detail)

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in sorted(self.anomalies.items())}

    def examples(self) -> dict[str, list[dict[str, Any]]]:
        return {k: v[:EXAMPLES] for k, v in sorted(self.anomalies.items())}


def _id(value: Iterable[int] | None) -> Id | None:
    return None if value is None else tuple(value)  # type: ignore[return-value]


UNAVAILABLE = 5  # the programs' exit code for HBase unavailable (tms_hbase.model.exit_codes)
CUT_OFF_SLACK = 30.0  # seconds after a fault on the link to HBase ends in which its effects are still seen


def _cut_off(events: list[dict[str, Any]]) -> Callable[[float], bool]:
    """Whether HBase was out of reach at a time: within a fault of HBase itself or of the proxy (from its start
    to its end, or to the heal when it has none), or up to CUT_OFF_SLACK seconds after. A daemon that starts
    then exits with 'HBase unavailable' (5) as the programs promise: that is not a crash of the suite."""
    windows: list[tuple[float, float]] = []
    opened: dict[str, float] = {}
    for e in events:
        if e["type"] != "fault":
            continue
        if e.get("mode") == "cut":  # the proxy's connections cut at one moment: no end of its own
            windows.append((e["t"], e["t"]))
        elif e["fault"] in ("hbase", "proxy"):
            if e.get("phase", "start") == "start":
                opened.setdefault(e["fault"], e["t"])
            elif e["fault"] in opened:
                windows.append((opened.pop(e["fault"]), e["t"]))
        elif e["fault"] == "heal":
            windows.extend((start, e["t"]) for start in opened.values())
            opened.clear()
    windows.extend((start, float("inf")) for start in opened.values())
    return lambda t: any(start <= t <= end + CUT_OFF_SLACK for start, end in windows)


class History:
    """The history indexed for the checks."""

    def __init__(self, events: list[dict[str, Any]], topics: dict[str, dict[str, Any]]) -> None:
        self.topics = topics
        self.publishes: dict[str, Publish] = {}
        self.reads: list[Read] = []
        self.opens: list[dict[str, Any]] = []  # consumer sessions opened: session, topic, sub, t, mark
        self.commits: list[dict[str, Any]] = []  # ok commits: session, topic, sub, invoke t, id
        self.stats: list[dict[str, Any]] = []
        self.final_long: set[str] = set()  # long-lived readers alive to the end of the final phase
        self.ops: Counter[str] = Counter()
        self.harness_errors: list[str] = []  # worker processes that crashed (not killed by the nemesis)
        self.faults: Counter[str] = Counter()
        invokes: dict[tuple[str, int], dict[str, Any]] = {}
        views: dict[tuple[str, int], list[list[Any]]] = {}
        cut_off = _cut_off(events)
        for e in events:
            kind = e["type"]
            if kind == "fault":
                if e.get("phase", "start") == "start":
                    self.faults[e["fault"]] += 1
                continue
            if kind == "exited" and e["code"] not in (0, -signal.SIGKILL, -signal.SIGTERM):
                if not (e["code"] == UNAVAILABLE and cut_off(e["t"])):  # a daemon started while HBase was away
                    self.harness_errors.append(f"{e['target']} ({e['role']}) exited with code {e['code']}")
                continue
            if kind == "final-long":
                self.final_long.update(e["processes"])
                continue
            if kind not in ("invoke", "ok", "fail", "info"):
                continue
            key = (e["p"], e["op"])
            if kind == "invoke":
                invokes[key] = e
                if e["f"] in ("publish", "txpublish"):
                    for payload in e["payloads"]:
                        self.publishes[payload] = Publish(
                            payload, e["topic"], e["p"], "info", e["t"], None, e["local"], e["f"] == "txpublish"
                        )
                continue
            inv = invokes.get(key)
            if inv is None:
                continue
            f = inv["f"]
            self.ops[f"{f}:{kind}"] += 1
            if f in ("publish", "txpublish"):
                for payload in inv["payloads"]:
                    p = self.publishes[payload]
                    p.status, p.done_t, p.commit_start = kind, e["t"], e.get("commit_start")
            elif kind == "ok" and f in ("read", "seek", "consume", "txread"):
                msgs = e.get("msgs", [])
                checked_from = 0
                if "base" in e:
                    old = views.get((e["p"], e["base"]), [])
                    kept = old[e["drop"] :]
                    checked_from = max(0, len(kept) - 1)
                    msgs = kept + msgs
                views[key] = msgs
                self.reads.append(
                    Read(
                        e["p"],
                        e["op"],
                        f,
                        inv["topic"],
                        inv["t"],
                        e["t"],
                        inv["local"],
                        msgs,
                        kind=inv.get("kind", f),
                        stream=e.get("stream") or inv.get("stream"),
                        start=_id(inv.get("start")),
                        whole=bool(inv.get("whole")),
                        final=bool(inv.get("final")),
                        checked_from=checked_from,
                        T=inv.get("T"),
                        sub=inv.get("sub"),
                    )
                )
            elif kind == "ok" and f == "open":
                self.opens.append(
                    {
                        "session": inv["session"],
                        "topic": inv["topic"],
                        "sub": inv["sub"],
                        "t": e["t"],
                        "mark": _id(e.get("mark")),
                    }
                )
            elif kind == "ok" and f == "commit":
                self.commits.append(
                    {
                        "session": inv["session"],
                        "topic": inv["topic"],
                        "sub": inv["sub"],
                        "t": inv["t"],
                        "id": _id(inv["id"]),
                    }
                )
            elif kind == "ok" and f == "stats":
                self.stats.append({**e, "topic": inv["topic"], "invoke_t": inv["t"]})


class Checker:
    def __init__(self, events: list[dict[str, Any]], topics: dict[str, dict[str, Any]]) -> None:
        self.h = History(events, topics)
        self.report = Report()
        self.id_of: dict[str, Id] = {}
        self.time_of: dict[str, int] = {}
        self.payload_at: dict[tuple[str, Id], str] = {}
        self.order: dict[str, list[Id]] = {}

    # -- helpers ------------------------------------------------------------------------------

    def ttl(self, topic: str) -> int | None:
        value = self.h.topics.get(topic, {}).get("ttl")
        return int(value) if value else None

    def acked_before(self, payload: str, t: float) -> bool:
        p = self.h.publishes.get(payload)
        return p is not None and p.status == "ok" and p.done_t is not None and p.done_t < t

    def surely_unexpired(self, payload: str, at: float) -> bool:
        """Whether the message certainly had not expired at real time ``at`` (an unskewed reader compares
        with real time). Its date is its writer's clock at invoke, unless that clock was outside the band
        the library keeps around HBase's clock: then it was clamped into the band, so a writer whose clock
        is ahead dates it about the real time. Either way it is dated at least the earlier of the two, less
        the band's half-width and the clock probe's uncertainty (which TTL_MARGIN covers)."""
        p = self.h.publishes[payload]
        ttl = self.ttl(p.topic)
        return ttl is None or min(p.local, p.invoke_t) + ttl > at + TTL_MARGIN

    # -- the checks ---------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        self.learn()
        self.check_reads()
        self.check_streams()
        self.check_seeks()
        self.check_visibility()
        self.check_consumers()
        self.check_counts()
        return {
            "operations": dict(sorted(self.h.ops.items())),
            "faults": dict(sorted(self.h.faults.items())),
            "messages": {
                "published_ok": sum(p.status == "ok" for p in self.h.publishes.values()),
                "published_unknown": sum(p.status == "info" for p in self.h.publishes.values()),
                "published_failed": sum(p.status == "fail" for p in self.h.publishes.values()),
                "distinct_read": len(self.id_of),
            },
            "anomalies": self.report.counts(),
            "examples": self.report.examples(),
            "harness_errors": self.h.harness_errors,
            "valid": not self.report.anomalies,
        }

    def learn(self) -> None:
        """Every message's id and publish time; phantoms and disagreements on the way."""
        for r in self.h.reads:
            for payload, raw_id, when in r.msgs:
                mid = _id(raw_id)
                assert mid is not None
                p = self.h.publishes.get(payload)
                if p is None:
                    self.report.add("phantom", payload=payload, read=f"{r.process}#{r.op}", why="never published")
                elif p.status == "fail" and not (p.tx and not r.committed_only):
                    if p.tx:
                        self.report.add("tx-aborted-read", payload=payload, read=f"{r.process}#{r.op}")
                    else:
                        self.report.add(
                            "phantom", payload=payload, read=f"{r.process}#{r.op}", why="its publish failed"
                        )
                if p is not None and p.topic != r.topic:
                    self.report.add("disagreement", payload=payload, why=f"published to {p.topic}, read from {r.topic}")
                tx_ok = r.committed_only and p is not None and p.tx and p.status == "ok"
                if tx_ok and p is not None and p.commit_start is not None and r.ok_t < p.commit_start:
                    self.report.add("tx-uncommitted-read", payload=payload, read=f"{r.process}#{r.op}")
                known = self.id_of.setdefault(payload, mid)
                if known != mid:
                    self.report.add("disagreement", payload=payload, ids=[known, mid], read=f"{r.process}#{r.op}")
                if self.time_of.setdefault(payload, when) != when:
                    self.report.add("disagreement", payload=payload, times=[self.time_of[payload], when])
                holder = self.payload_at.setdefault((r.topic, mid), payload)
                if holder != payload:
                    self.report.add("disagreement", id=mid, payloads=[holder, payload], topic=r.topic)
        by_topic: dict[str, set[Id]] = defaultdict(set)
        for (topic, mid), _payload in self.payload_at.items():
            by_topic[topic].add(mid)
        self.order = {topic: sorted(ids) for topic, ids in by_topic.items()}

    def _between(self, topic: str, low: Id | None, high: Id | None) -> list[str]:
        """Known messages strictly between two ids (None: the topic's start / end), as payloads."""
        order = self.order.get(topic, [])
        i = 0 if low is None else bisect.bisect_right(order, low)
        j = len(order) if high is None else bisect.bisect_left(order, high)
        return [self.payload_at[(topic, mid)] for mid in order[i:j]]

    def _gap(self, r: Read, low: Id | None, high: Id | None, where: str) -> None:
        """Report the known messages a read passed over between two ids."""
        if self.ttl(r.topic) is not None:
            return  # readers skip expired messages by design; the final phase checks TTL topics
        for payload in self._between(r.topic, low, high):
            p = self.h.publishes.get(payload)
            if r.f == "txread" and (p is None or not p.tx or p.status != "ok"):
                continue  # transactional readers skip what did not commit
            if r.committed_only and p is not None and p.tx and p.status != "ok":
                continue  # ... and so do consumers
            kind = "skip" if self.acked_before(payload, r.invoke_t) else "appeared-behind"
            self.report.add(
                kind, payload=payload, read=f"{r.process}#{r.op}", reader=r.kind, topic=r.topic, where=where
            )

    def check_reads(self) -> None:
        for r in self.h.reads:
            ids = [_id(m[1]) for m in r.msgs]
            seen: set[Id | None] = set()
            for i, mid in enumerate(ids):
                if mid in seen:
                    self.report.add("duplicate", payload=r.msgs[i][0], read=f"{r.process}#{r.op}", reader=r.kind)
                seen.add(mid)
                if i and ids[i - 1] >= mid:  # type: ignore[operator]
                    self.report.add("reorder", read=f"{r.process}#{r.op}", ids=[ids[i - 1], mid], reader=r.kind)
            if r.f in ("consume",):
                continue  # consumer sessions are checked as streams
            if ids and r.checked_from == 0:
                if r.whole:
                    self._gap(r, None, ids[0], "before the first message of a read from the start")
                elif r.start is not None:
                    self._gap(r, r.start, ids[0], "between the read's start and its first message")
            for i in range(max(1, r.checked_from), len(ids)):
                if ids[i - 1] < ids[i]:  # type: ignore[operator]
                    self._gap(r, ids[i - 1], ids[i], "inside one read")

    def check_streams(self) -> None:
        """A consumer session's deliveries: from its mark on (the topic's start without one), in order,
        contiguous, without duplicates."""
        marks = {o["session"]: o["mark"] for o in self.h.opens}
        sessions: dict[str, list[Read]] = defaultdict(list)
        for r in self.h.reads:
            if r.f == "consume" and r.stream is not None and r.stream in marks:
                sessions[r.stream].append(r)
        for session, reads in sessions.items():
            last: Id | None = marks[session]
            seen: set[Id] = set()
            for r in reads:
                for payload, raw_id, _ in r.msgs:
                    mid = _id(raw_id)
                    assert mid is not None
                    if mid in seen:
                        self.report.add("duplicate", payload=payload, session=session, reader="consumer")
                        continue
                    seen.add(mid)
                    if last is not None and mid <= last:
                        self.report.add("reorder", session=session, ids=[last, mid], reader="consumer")
                        continue
                    self._gap(r, last, mid, f"consumer session {session}")
                    last = mid

    def check_seeks(self) -> None:
        """One anomaly per seek that started after messages dated >= T (the skipped ones in it)."""
        for r in self.h.reads:
            if r.f != "seek" or r.T is None:
                continue
            first = _id(r.msgs[0][1]) if r.msgs else None
            skipped = []
            for payload in self._between(r.topic, None, first):
                when = self.time_of.get(payload)
                if when is None or when < r.T or not self.acked_before(payload, r.invoke_t):
                    continue
                if not self.surely_unexpired(payload, r.invoke_t + 60):
                    continue  # the seek floor skips expired messages (the prober's clock may be 60 s ahead)
                p = self.h.publishes[payload]
                skipped.append([payload, when, round(p.local - p.invoke_t, 1)])
            if skipped:
                self.report.add(
                    "seek-skip",
                    topic=r.topic,
                    T=r.T,
                    skipped=len(skipped),
                    first_skipped=skipped[:3],  # payload, its date, its writer's clock offset (s) then
                    started_at=r.msgs[0][0] if r.msgs else None,
                    read=f"{r.process}#{r.op}",
                    final=r.final,
                )

    def check_visibility(self) -> None:
        """After the faults healed: every acknowledged message in every kind of reader's last final view."""
        ever_read = set(self.id_of)
        finals: dict[tuple[str, str], Read] = {}
        for r in self.h.reads:
            if r.final and r.whole:
                finals[(r.kind, r.topic)] = r  # the last one wins (reads are in time order)
        long_streams: dict[tuple[str, str], set[str]] = defaultdict(set)
        for r in self.h.reads:
            if r.kind == "long" and r.process in self.h.final_long:
                long_streams[(r.process, r.topic)].update(m[0] for m in r.msgs)
        views: list[tuple[str, str, set[str], float]] = [
            (kind, topic, {m[0] for m in r.msgs}, r.invoke_t) for (kind, topic), r in finals.items()
        ]
        end = max((r.invoke_t for r in finals.values()), default=0.0)
        for (process, topic), payloads in long_streams.items():
            views.append((f"long({process})", topic, payloads, end))
        for p in self.h.publishes.values():
            if p.status != "ok":
                continue
            if p.payload not in ever_read:
                if self.surely_unexpired(p.payload, end):
                    self.report.add("lost", payload=p.payload, topic=p.topic, acked_at=p.done_t)
                continue
            for kind, topic, payloads, at in views:
                if topic != p.topic or p.payload in payloads:
                    continue
                # a consumer's final view must hold committed transactional messages too
                if (kind == "final-tx" and not p.tx) or (p.tx and kind not in ("final-tx", "final-consumer")):
                    continue
                if not self.surely_unexpired(p.payload, at):
                    continue
                name = "invisible-unexpired" if self.ttl(topic) else "invisible"
                self.report.add(f"{name}:{kind.split('(')[0]}", payload=p.payload, topic=topic, acked_at=p.done_t)

    def check_consumers(self) -> None:
        delivered: dict[tuple[str, str], set[Id]] = defaultdict(set)
        session_of: dict[str, tuple[str, str]] = {}
        for o in self.h.opens:
            session_of[o["session"]] = (o["topic"], o["sub"])
        for r in self.h.reads:
            if r.f == "consume" and r.stream in session_of:
                delivered[session_of[r.stream]].update(_id(m[1]) for m in r.msgs)  # type: ignore[misc]
        last_mark: dict[tuple[str, str], Id] = {}
        for c in self.h.commits:
            key = (c["topic"], c["sub"])
            if c["id"] is not None and (key not in last_mark or c["id"] > last_mark[key]):
                last_mark[key] = c["id"]
        for (topic, sub), mark in last_mark.items():
            if self.ttl(topic) is not None:
                continue
            for payload in self._between(topic, None, mark):
                p = self.h.publishes.get(payload)
                if p is not None and p.tx and p.status != "ok":
                    continue  # (a transaction whose outcome is unknown: a consumer may rightly never deliver it)
                if self.id_of[payload] not in delivered[(topic, sub)]:
                    self.report.add("consumer-skip", topic=topic, sub=sub, payload=payload, mark=mark)
        # at most one lease holder: no commit by a session after a later session of the subscription opened
        opened: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
        for o in self.h.opens:
            opened[(o["topic"], o["sub"])].append((o["t"], o["session"]))
        open_t = {o["session"]: o["t"] for o in self.h.opens}
        for c in self.h.commits:
            mine = open_t.get(c["session"])
            if mine is None:
                continue
            for t, other in opened[(c["topic"], c["sub"])]:
                if mine < t < c["t"] and other != c["session"]:
                    self.report.add(
                        "lease-overlap", sub=c["sub"], committer=c["session"], opened=other, commit_t=c["t"]
                    )
                    break

    def check_counts(self) -> None:
        for s in self.h.stats:
            topic = s["topic"]
            if self.ttl(topic) is not None:
                continue
            known = set(self.order.get(topic, []))
            unseen = sum(
                1
                for p in self.h.publishes.values()
                if p.topic == topic and p.status == "ok" and p.payload not in self.id_of
            )
            truth = len(known) + unseen
            if s["messages"] != truth:
                self.report.add("count", topic=topic, reported=s["messages"], truth=truth, exact=s.get("exact"))
            for name, mark, lag, exact in s.get("subs", []):
                mark_id = _id(mark)
                behind = len([m for m in known if mark_id is None or m > mark_id]) + unseen
                if lag != behind:
                    self.report.add("lag", topic=topic, sub=name, reported=lag, truth=behind, exact=exact)


def check(events: list[dict[str, Any]], topics: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Check a history; the summary (operations, faults, anomalies by kind with examples, valid)."""
    return Checker(events, topics).run()
