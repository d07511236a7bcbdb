"""The verification suite's checker (tests/verify/checker.py) on synthetic histories: it must pass a
correct one and flag each kind of anomaly it promises to find."""

from __future__ import annotations

from typing import Any

from tests.verify.checker import check

T = "verify:sequencer_main"
TTL = "verify:sequencer_ttl"
TX = "verify:sequencer_tx"
TOPICS = {
    T: {"name": T, "kind": "main", "ttl": None},
    TTL: {"name": TTL, "kind": "ttl", "ttl": "20"},
    TX: {"name": TX, "kind": "tx", "ttl": None},
}


class History:
    """Builds events as the workers record them; each operation takes 0.1 s of real time."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.t = 1000.0
        self.ops: dict[str, int] = {}

    def op(self, p: str, f: str, fields: dict[str, Any], outcome: str = "ok", **done: Any) -> None:
        self.ops[p] = n = self.ops.get(p, 0) + 1
        self.events.append({"type": "invoke", "p": p, "t": self.t, "local": self.t, "f": f, "op": n, **fields})
        self.t += 0.05
        if outcome:
            self.events.append({"type": outcome, "p": p, "t": self.t, "local": self.t, "f": f, "op": n, **done})
        self.t += 0.05

    def publish(self, payloads: list[str], topic: str = T, outcome: str = "ok", **done: Any) -> None:
        self.op("w1", "publish", {"topic": topic, "payloads": payloads}, outcome, **done)

    def read(self, msgs: list[tuple[str, int, int]], topic: str = T, f: str = "read", p: str = "r1", **fields: Any):
        encoded = [[payload, [1, position, 0], when] for payload, position, when in msgs]
        self.op(p, f, {"topic": topic, **fields}, "ok", msgs=encoded)

    def final(self, msgs: list[tuple[str, int, int]], kind: str = "final-fetch", topic: str = T) -> None:
        self.read(msgs, topic, p="f9", kind=kind, whole=True, final=True)

    def check(self) -> dict[str, Any]:
        return check(self.events, TOPICS)


ABC = [("a", 1, 100), ("b", 2, 200), ("c", 3, 300)]


def published_abc() -> History:
    h = History()
    for payload, _, _ in ABC:
        h.publish([payload])
    return h


def test_a_correct_history_is_valid() -> None:
    h = published_abc()
    h.read(ABC[:2], kind="long", stream="r1/t")
    h.read(ABC[2:], kind="long", stream="r1/t", start=[1, 2, 0])
    h.op("q1", "seek", {"topic": T, "T": 150}, "ok", msgs=[["b", [1, 2, 0], 200], ["c", [1, 3, 0], 300]])
    h.final(ABC)
    h.final(ABC, kind="final-range")
    h.op("q1", "stats", {"topic": T, "final": True}, "ok", messages=3, exact=True, subs=[["s", [1, 1, 0], 2, True]])
    summary = h.check()
    assert summary["valid"], summary["anomalies"]
    assert summary["messages"]["published_ok"] == 3


def test_a_lost_message() -> None:
    h = published_abc()
    h.publish(["d"])
    h.final(ABC)
    assert h.check()["anomalies"] == {"lost": 1}


def test_a_message_some_reader_saw_but_a_fresh_process_does_not() -> None:
    h = published_abc()
    h.read(ABC, kind="long", stream="r1/t")
    h.final(ABC[:2], kind="final-fetch")
    h.final(ABC, kind="final-range")
    assert h.check()["anomalies"] == {"invisible:final-fetch": 1}


def test_a_duplicate() -> None:
    h = published_abc()
    h.final([*ABC, ("c", 3, 300)])
    assert h.check()["anomalies"]["duplicate"] == 1


def test_a_reorder() -> None:
    h = published_abc()
    h.read([("a", 1, 100), ("c", 3, 300), ("b", 2, 200)], kind="long")
    h.final(ABC)
    assert h.check()["anomalies"]["reorder"] == 1


def test_a_read_that_passes_over_an_acknowledged_message() -> None:
    h = published_abc()
    h.read([("a", 1, 100), ("c", 3, 300)], kind="long")
    h.final(ABC)
    assert h.check()["anomalies"] == {"skip": 1}


def test_a_message_appearing_behind_a_reader() -> None:
    h = History()
    h.publish(["a"])
    h.publish(["c"])
    h.read([("a", 1, 100), ("c", 3, 300)], kind="long")
    h.publish(["b"])  # acknowledged after the read, at a position the reader had passed
    h.final(ABC)
    assert h.check()["anomalies"] == {"appeared-behind": 1}


def test_a_seek_that_skips_a_message_dated_after_its_time() -> None:
    h = published_abc()
    h.final(ABC)
    # b is dated 200 >= T = 150, acknowledged before the seek, but the seek started at c
    h.op("q1", "seek", {"topic": T, "T": 150}, "ok", msgs=[["c", [1, 3, 0], 300]])
    anomalies = h.check()
    assert anomalies["anomalies"] == {"seek-skip": 1}
    assert anomalies["examples"]["seek-skip"][0]["skipped"] == 1


def test_a_seek_may_start_early_but_not_late() -> None:
    h = published_abc()
    h.final(ABC)
    h.op("q1", "seek", {"topic": T, "T": 250}, "ok", msgs=[["b", [1, 2, 0], 200], ["c", [1, 3, 0], 300]])
    h.op("q1", "seek", {"topic": T, "T": 301}, "ok", msgs=[])
    assert h.check()["valid"]


def test_a_wrong_count_and_a_wrong_lag() -> None:
    h = published_abc()
    h.final(ABC)
    # 3 messages; the mark is on a, so 2 are still to be consumed
    h.op("q1", "stats", {"topic": T, "final": True}, "ok", messages=7, exact=False, subs=[["s", [1, 1, 0], 5, False]])
    anomalies = h.check()["anomalies"]
    assert anomalies == {"count": 1, "lag": 1}


def test_a_phantom() -> None:
    h = published_abc()
    h.final([*ABC, ("zz", 4, 400)])
    assert h.check()["anomalies"] == {"phantom": 1}


def test_two_readers_disagreeing_on_the_order() -> None:
    h = published_abc()
    h.read([("a", 1, 100), ("b", 2, 200)], kind="long")
    h.final([("b", 1, 200), ("a", 2, 100), ("c", 3, 300)])
    assert "disagreement" in h.check()["anomalies"]


def test_a_transactional_reader_seeing_an_aborted_transaction() -> None:
    h = History()
    h.op("x1", "txpublish", {"topic": TX, "payloads": ["t1"]}, "fail", aborted=True)
    h.read([("t1", 1, 100)], topic=TX, f="txread")
    assert h.check()["anomalies"] == {"tx-aborted-read": 1}


def test_a_consumer_session_skipping_from_its_mark() -> None:
    h = published_abc()
    h.final(ABC)
    h.op("c1", "open", {"topic": T, "sub": "s", "session": "c1/1"}, "ok", mark=None)
    h.op(
        "c1", "consume", {"topic": T, "sub": "s", "session": "c1/1"}, "ok", msgs=[["b", [1, 2, 0], 200]], stream="c1/1"
    )
    assert h.check()["anomalies"] == {"skip": 1}


def test_an_expired_message_on_a_ttl_topic_is_not_lost() -> None:
    h = History()
    h.publish(["old"], topic=TTL)
    h.t += 60  # past its 20 s TTL by the writer's clock
    h.publish(["new"], topic=TTL)
    h.final([("new", 2, int(h.t * 1000))], topic=TTL)
    assert h.check()["valid"]


def test_an_unexpired_message_missing_on_a_ttl_topic_is_lost() -> None:
    h = History()
    h.publish(["kept"], topic=TTL)
    h.publish(["swept"], topic=TTL)
    h.final([("kept", 1, int(h.t * 1000))], topic=TTL)
    assert h.check()["anomalies"] == {"lost": 1}


def test_a_daemon_that_cannot_reach_hbase_at_start_is_no_crash_while_hbase_is_away() -> None:
    h = published_abc()
    h.final(ABC)

    def exited(t: float, target: str) -> None:
        h.events.append({"type": "exited", "p": "runner", "t": t, "target": target, "role": "sweeper", "code": 5})

    h.events.append({"type": "fault", "p": "runner", "t": 2000.0, "fault": "hbase", "phase": "start"})
    exited(2100.0, "sweeper7")  # started while HBase was down: 'HBase unavailable', as promised
    h.events.append({"type": "fault", "p": "runner", "t": 2200.0, "fault": "hbase", "phase": "end"})
    exited(2210.0, "sweeper8")  # reaped just after it came back
    assert h.check()["harness_errors"] == []
    exited(2500.0, "sweeper9")  # HBase was up: the daemon should have reached it
    h.events.sort(key=lambda e: e["t"])
    assert h.check()["harness_errors"] == ["sweeper9 (sweeper) exited with code 5"]


def test_a_ttl_message_of_a_writer_whose_clock_is_ahead_expires_by_its_clamped_date() -> None:
    """The library dates a publish of a writer whose clock is outside the band around HBase's clock about the
    real time, so the message expires by the real time, not by that writer's clock."""
    for later, expected in ((16.0, {}), (10.0, {"invisible-unexpired:final-fetch": 1})):
        h = History()
        h.publish(["early"], topic=TTL)
        h.events[0]["local"] += 17.0  # the writer's clock was 17 s ahead at invoke
        published = h.t
        h.read([("early", 1, int(published * 1000))], topic=TTL)
        h.t = published + later  # its 20 s TTL, counted from about the real time of the publish
        h.final([], topic=TTL)
        assert h.check()["anomalies"] == expected, later


def test_a_consumer_receiving_a_rolled_back_or_uncommitted_message() -> None:
    """Subscriptions deliver committed messages only: a consumer session or a final consumer that returns an
    aborted transaction's message, or one before its transaction began to commit, is an anomaly; one that
    passes over the aborted message is not a skip."""
    h = History()
    h.op("x1", "txpublish", {"topic": TX, "payloads": ["t1"]}, "fail", aborted=True)
    h.op("x1", "txpublish", {"topic": TX, "payloads": ["t2"]}, "ok", commit_start=h.t + 0.04)
    h.op("c1", "open", {"topic": TX, "sub": "s", "session": "c1/1"}, "ok", mark=None)
    consumed = [["t1", [1, 1, 0], 100], ["t2", [1, 2, 0], 200]]
    h.op("c1", "consume", {"topic": TX, "sub": "s", "session": "c1/1"}, "ok", msgs=consumed, stream="c1/1")
    h.final([("t2", 2, 200)], kind="final-consumer", topic=TX)
    h.read([("t2", 2, 200)], topic=TX, f="txread", p="f9", kind="final-tx", whole=True, final=True)
    assert h.check()["anomalies"] == {"tx-aborted-read": 1}
    early = History()
    early.op("x1", "txpublish", {"topic": TX, "payloads": ["t2"]}, "", commit_start=None)
    early.op("c1", "open", {"topic": TX, "sub": "s", "session": "c1/1"}, "ok", mark=None)
    early.op(
        "c1",
        "consume",
        {"topic": TX, "sub": "s", "session": "c1/1"},
        "ok",
        msgs=[["t2", [1, 1, 0], 100]],
        stream="c1/1",
    )
    early.events.append(
        {"type": "ok", "p": "x1", "t": early.t, "local": early.t, "f": "txpublish", "op": 1, "commit_start": early.t}
    )
    early.read([("t2", 1, 100)], topic=TX, f="txread", p="f9", kind="final-tx", whole=True, final=True)
    early.final([("t2", 1, 100)], kind="final-consumer", topic=TX)
    assert early.check()["anomalies"] == {"tx-uncommitted-read": 1}


def test_a_consumer_passing_an_aborted_message_is_valid() -> None:
    h = History()
    h.op("x1", "txpublish", {"topic": TX, "payloads": ["t1"]}, "fail", aborted=True)
    h.op("x1", "txpublish", {"topic": TX, "payloads": ["t2"]}, "ok", commit_start=h.t + 0.04)
    h.read([("t2", 2, 200)], topic=TX, f="txread")
    h.read([("t1", 1, 100)], topic=TX, f="read", kind="inspect")  # a raw read knows where the aborted one is
    h.op("c1", "open", {"topic": TX, "sub": "s", "session": "c1/1"}, "ok", mark=None)
    h.op(
        "c1",
        "consume",
        {"topic": TX, "sub": "s", "session": "c1/1"},
        "ok",
        msgs=[["t2", [1, 2, 0], 200]],
        stream="c1/1",
    )
    h.op("c1", "commit", {"topic": TX, "sub": "s", "session": "c1/1", "id": [1, 2, 0]}, "ok")
    h.final([("t2", 2, 200)], kind="final-consumer", topic=TX)
    summary = h.check()
    assert summary["valid"], summary["anomalies"]
