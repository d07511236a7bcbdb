"""The default ordering (the sequencer) keeps what the chain keeps, tried the way the world breaks it:
writers that exit without closing, readers and consumers that are new processes, writers whose clocks
are wrong (libfaketime), short-lived writers by the dozen (docs/guarantees.md, "Sequencer generations").

Each of these failed before the fixes of the sequencer's hole rule, its publish dates and its counts."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.rows import MESSAGE_COLUMN, generation_prefix, message_key, past_last, peek_row, position_of
from tms_hbase.ordering import sequencer

T = TopicId("guar", "orders")
H = sequencer.hole_wait(1)  # the writers' tail-cache time is 1 s while the installation has no setting
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def _env(env: dict[str, str], faketime: str | None) -> dict[str, str]:
    """``env``, with the process's wall clock shifted by ``faketime`` (libfaketime; monotonic time left real,
    as on a real host whose clock is wrong) if given."""
    env = dict(env)
    if faketime is not None:
        env.update(LD_PRELOAD=str(LIBFAKETIME), FAKETIME=faketime, FAKETIME_DONT_FAKE_MONOTONIC="1")
    return env


def run(env: dict[str, str], code: str, *, faketime: str | None = None, timeout: float = 60) -> str:
    """Run ``code`` in a new Python process (its clock shifted by ``faketime`` if given); its output."""
    command = [sys.executable, "-c", textwrap.dedent(code)]
    done = subprocess.run(command, env=_env(env, faketime), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def start(env: dict[str, str], code: str, *, faketime: str | None = None) -> subprocess.Popen[str]:
    """Start ``code`` in a new Python process, as :func:`run` does, without waiting for it."""
    command = [sys.executable, "-c", textwrap.dedent(code)]
    pipe = subprocess.PIPE
    return subprocess.Popen(command, env=_env(env, faketime), stdout=pipe, stderr=pipe, text=True)


PRELUDE = """
import json, os, sys, threading, time
if os.environ.get("FAKETIME"):  # libfaketime 0.9.10 fails clock_nanosleep on the real monotonic clock: sleep
    time.sleep = lambda seconds: threading.Event().wait(seconds)  # on a condition variable instead
from tms_hbase import MessagingClient, TopicId
from tms_hbase.model.message_id import MessageId
T = TopicId("guar", "orders")
"""


# A publishes one message at a time (busy: it reserves blocks ahead, which a slow machine may have used up or
# given back by its end), then dies between an increment and its write, without close(): a hole for sure.
DEAD_WRITER = (
    PRELUDE
    + "from tms_hbase.ordering import sequencer\nc = MessagingClient()\n"
    + "for i in range(50): c.publish(T, [b'a%d' % i])\n"
    + "sequencer.reserve(c.installation.messages, T, c.get_topic(T).generation, 10)\nos._exit(0)"
)


def _holes(client: MessagingClient, topic: TopicId) -> list[int]:
    """The offsets where an empty run of the generation's dense order begins below its newest row, read from
    the stored rows (no reader runs, so none is filled: a read would pass a hole already due on a slow machine)."""
    stored = [
        (position_of(key), peek_row(key, row[MESSAGE_COLUMN]))
        for key, row in client.installation.messages.scan(
            message_key(topic, 1, 0), past_last(generation_prefix(topic, 1))
        )
        if MESSAGE_COLUMN in row
    ]
    return [head.next_position(p) for (p, head), (q, _) in itertools.pairwise(stored) if head.next_position(p) < q]


@pytest.fixture
def topic(client: MessagingClient) -> TopicId:
    client.create_topic(T)  # the defaults: the sequencer
    assert client.get_topic(T).sequencer
    return T


def test_a_dead_writers_hole_is_passed_by_readers_and_consumers_in_new_processes(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    client.create_subscription(T, "early")  # from the start: its lag is checked at the end
    run(tms_env, DEAD_WRITER)
    run(tms_env, PRELUDE + "with MessagingClient() as c: c.publish(T, [b'b'])")
    assert _holes(client, T), "A's unused block is not a hole below B's row"

    fetch_once = PRELUDE + "with MessagingClient() as c: print(json.dumps([m.payload.decode() for m in c.fetch(T)]))"
    # a process that waited H from its own first sighting would never pass it: each poll is a new one
    deadline = time.monotonic() + H + 120  # H after B's row was stored, plus process starts at load 10
    while True:  # every poll a new process, as a cron job or a CLI call would be
        seen = json.loads(run(tms_env, fetch_once).splitlines()[0])
        if "b" in seen:
            break
        assert time.monotonic() < deadline, f"a new process still sees {len(seen)} of 51 messages"
    assert seen == [f"a{i}" for i in range(50)] + ["b"]

    # the other read paths, each from a new process, now that the hole is due for everyone
    first = client.fetch(T).__next__().id.hex()
    ranged = run(
        tms_env,
        PRELUDE + f"with MessagingClient() as c:\n"
        f"    print(len(list(c.slices.fetch_range(T, MessageId.decode(bytes.fromhex('{first}'))))))",
    )
    assert ranged.split()[0] == "51"
    consumed = run(
        tms_env,
        PRELUDE + "with MessagingClient() as c:\n"
        "    c.create_subscription(T, 'late-joiner')\n"
        "    with c.consumer(T, 'late-joiner', max_wait_seconds=0.5) as con:\n"
        "        print(sum(1 for _ in con))",
    )
    assert consumed.split()[0] == "51"
    lag = client.lag(T, "early")  # the filled hole is skipped offsets, not messages
    assert (lag.messages, lag.exact) == (51, True)
    assert client.topic_stats(T).messages == 51


def test_a_new_client_per_poll_passes_a_dead_writers_hole_as_soon_as_a_long_lived_one(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    run(tms_env, DEAD_WRITER)
    client.publish(T, [b"b"])
    assert _holes(client, T), "A's unused block is not a hole below B's row"
    deadline = time.monotonic() + H + 120  # a client that waited H from its own sighting would never pass it
    polls = 0
    while True:
        polls += 1
        with MessagingClient(config=client.config) as fresh:
            if [m.payload for m in fresh.fetch(T)][-1:] == [b"b"]:
                break
        assert time.monotonic() < deadline, f"{polls} polls by new clients did not pass the hole"


@pytest.mark.parametrize("offsets", [("+2.5s", "+0s"), ("+45s", "-45s")])
def test_time_seeks_skip_nothing_whatever_the_writers_clocks_say(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str], offsets: tuple[str, str]
) -> None:
    began = time.time()
    writer = PRELUDE + textwrap.dedent(
        """
        name = os.environ["NAME"]
        with MessagingClient() as c:
            for i in range(40):
                c.publish(T, [f"{name}{i}".encode()])
                time.sleep(0.01)
        """
    )
    procs = [
        start({**tms_env, "NAME": name}, writer, faketime=None if offset == "+0s" else offset)
        for name, offset in zip("AB", offsets, strict=True)
    ]
    logs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), logs
    ended = time.time()
    got = list(client.fetch(T))
    assert len(got) == 80
    for m in got[::3]:  # a time seek to any message's date returns every message dated at or after it
        want = {x.payload for x in got if x.publish_time >= m.publish_time}
        with MessagingClient(config=client.config) as fresh:  # a new reader, as a new process would be
            found = {x.payload for x in fresh.fetch(T, start_time_ms=m.publish_time)}
            span = fresh.slices.positions(T, start_time_ms=m.publish_time)
        assert want <= found, sorted(want - found)
        first_wanted = min(x.id for x in got if x.publish_time >= m.publish_time)
        assert span.first <= MessageId.decode(first_wanted).position, "positions() starts after a message"
    # every publish is dated within the band around HBase's clock (the installation's 1 s bound), never
    # by a host clock that is far off, and a host clock far off is reported with the writer named
    for m in got:
        assert began * 1000 - 1500 <= m.publish_time <= ended * 1000 + 1500, (m.payload, m.publish_time - began * 1000)
    skewed = [log for (out, log), offset in zip(logs, offsets, strict=True) if offset not in ("+0s",)]
    assert all("clock is" in log and "off HBase's" in log for log in skewed), skewed


SEEK_FROM = (
    PRELUDE
    + """
with MessagingClient() as c:
    print(json.dumps([m.payload.decode() for m in c.fetch(T, start_time_ms=int(sys.argv[1]))]))
"""
)


def _seek_in_new_process(env: dict[str, str], time_ms: int) -> list[str]:
    command = [sys.executable, "-c", textwrap.dedent(SEEK_FROM), str(time_ms)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[0])


def _from_first_dated(messages: list, time_ms: int) -> list[str]:
    """The payloads a time seek for ``time_ms`` must return: from the first message, in order, dated >= it."""
    first = next(i for i, m in enumerate(messages) if m.publish_time >= time_ms)
    return [m.payload.decode() for m in messages[first:]]


def test_a_young_time_seek_in_a_new_process_never_skips_a_batch_behind_a_dead_writers_hole(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    run(tms_env, DEAD_WRITER)  # a hole; B's batch lands above it
    run(tms_env, PRELUDE + "with MessagingClient() as c: c.publish(T, [b'b'])")
    assert _holes(client, T), "A's unused block is not a hole below B's row"
    key, row = client.installation.messages.last_row(generation_prefix(T, 1))
    b_at, b_time = position_of(key), peek_row(key, row[MESSAGE_COLUMN]).publish_time
    # the topic is seconds old (the installation's default settle time is 61 s): the seek must pass the hole
    first = _seek_in_new_process(tms_env, b_time)
    everything = list(client.fetch(T))
    assert [m.payload.decode() for m in everything][-1] == "b"
    assert first == _from_first_dated(everything, b_time)
    assert sequencer.frontier(client.installation.messages, T, 1).offset >= b_at  # up to B: the hole below it filled
    for m in everything[::7]:  # later seeks, each a new process, answer from the frontier: the same messages
        assert _seek_in_new_process(tms_env, m.publish_time) == _from_first_dated(everything, m.publish_time)


def test_a_young_time_seek_past_the_frontier_skips_nothing_a_skewed_clock_writer_published(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    writer = PRELUDE + textwrap.dedent(
        """
        name = os.environ["NAME"]
        with MessagingClient() as c:
            for i in range(30):
                c.publish(T, [f"{name}{i}".encode()])
                time.sleep(0.01)
        """
    )
    run({**tms_env, "NAME": "N"}, writer)
    before = list(client.fetch(T))
    with MessagingClient(config=client.config) as fresh:  # a seek reads the young rows and moves the frontier
        assert [m.payload for m in fresh.fetch(T, start_time_ms=before[-1].publish_time)][:1] == [b"N29"]
    moved = sequencer.frontier(client.installation.messages, T, 1).offset
    assert moved > 1
    # then a writer whose clock is 2.5 s ahead and one whose clock is right publish at once, above the frontier
    procs = [start({**tms_env, "NAME": n}, writer, faketime=f) for n, f in (("S", "+2.5s"), ("R", None))]
    logs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), logs
    got = list(client.fetch(T))
    assert len(got) == 90
    for m in got[::4]:  # every seek, from a new reader, returns everything from the first message dated >= T on
        with MessagingClient(config=client.config) as fresh:
            found = [x.payload.decode() for x in fresh.fetch(T, start_time_ms=m.publish_time)]
        assert found == _from_first_dated(got, m.publish_time), m.payload
    assert sequencer.frontier(client.installation.messages, T, 1).offset > moved


def test_counts_and_lag_are_exact_for_short_lived_writers(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    client.create_subscription(T, "s")
    for _ in range(7):  # seven `tms-admin topic publish`-like processes, one after the other
        run(tms_env, PRELUDE + "with MessagingClient() as c:\n    for i in range(3): c.publish(T, [b'x' * 10])")
    stats = client.topic_stats(T)
    # published counts offsets: the messages plus what skip markers hold (a writer paused past its block's age
    # on a loaded machine releases the rest with a marker rather than giving it back); nothing is swept here
    markers = sequencer.skipped(client.installation.messages, T, 1, 1, stats.published + 1)
    assert (stats.messages, stats.published) == (21, 21 + markers)
    # four at once: their releases race, so some become skip markers inside the topic, not give-backs
    procs = [
        start(tms_env, PRELUDE + "with MessagingClient() as c:\n    for i in range(25): c.publish(T, [b'y'])")
        for _ in range(4)
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.communicate()
    assert client.topic_stats(T).messages == 121
    assert client.lag(T, "s").messages == 121
    with client.consumer(T, "s", max_wait_seconds=0.5) as consumer:
        for n, _ in enumerate(consumer, 1):
            if n == 110:
                consumer.commit()
                break
    lag = client.lag(T, "s")
    assert (lag.messages, lag.exact) == (11, True)


def test_a_skip_marker_whose_filler_died_before_indexing_it_is_counted_once_the_sweeper_passed(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    client.create_subscription(T, "s")
    run(tms_env, PRELUDE + "with MessagingClient() as c:\n    for i in range(5): c.publish(T, [b'before'])")
    # a filler killed between putting a skip marker over 10 offsets and recording it in the skip index
    run(
        tms_env,
        PRELUDE
        + """
from tms_hbase.ordering import sequencer
c = MessagingClient()
first = sequencer.reserve(c.installation.messages, T, 1, 10)
sequencer.fill_cell(c.installation.messages, T, 1, first, 10, 0, index=False)
os._exit(0)
""",
    )
    run(tms_env, PRELUDE + "with MessagingClient() as c:\n    for i in range(5): c.publish(T, [b'after'])")
    assert client.topic_stats(T).messages == 20, "the unindexed marker's offsets count (what the sweeper repairs)"
    sweeper = str(Path(sys.executable).with_name("tms-sweeper"))
    done = subprocess.run(
        [sweeper, "once", "--grace", "120", "--json"], env=tms_env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["skip_markers_indexed"] == 1
    assert (client.topic_stats(T).messages, client.lag(T, "s").messages) == (10, 10)
    counted = run(
        tms_env, PRELUDE + "with MessagingClient() as c: print(c.topic_stats(T).messages, c.lag(T, 's').messages)"
    )
    assert counted.split()[:2] == ["10", "10"]
    again = subprocess.run(
        [sweeper, "once", "--grace", "120", "--json"], env=tms_env, capture_output=True, text=True, timeout=120
    )
    assert json.loads(again.stdout)["skip_markers_indexed"] == 0, "an indexed marker is not indexed again"


def test_close_releases_every_block_even_when_one_cannot_be_released(client: MessagingClient) -> None:

    one, two = TopicId("guar", "one"), TopicId("guar", "two")
    for t in (one, two):
        client.create_topic(t)
    writer = MessagingClient(config=client.config)
    queues = writer._writer.sequencer.reservations._queues
    deadline = time.monotonic() + 30
    while not all(q.block or q.ahead for q in queues.values()) or len(queues) < 2:  # busy on both: blocks ahead
        assert time.monotonic() < deadline, "the writer reserved no block ahead"
        for t in (one, two):
            writer.publish(t, [b"m"])
    blocked = next(q.block or q.ahead for (t, _), q in queues.items() if t == one)
    assert blocked is not None
    # garbage where the unused block of `one` begins, so releasing it meets a corrupt row ... and `two` is after it
    client.publish(one, [b"after"])  # somebody reserved after it: it cannot be given back, it must be filled
    client.installation.messages.put(message_key(one, 1, blocked.first), {MESSAGE_COLUMN: b"\x07garbage"})
    writer.close()  # does not raise, and releases `two` anyway
    assert sequencer.end_offset(client.installation.messages, two, 1) == client.topic_stats(two).messages


def test_libfaketime_shifts_the_wall_clock_of_a_python_process(tms_env: dict[str, str]) -> None:
    """The clock tests above rely on this: the shifted process sees a clock an hour ahead."""
    assert LIBFAKETIME.exists(), "libfaketime is missing: make test installs Debian's faketime"
    out = run(tms_env, "import time; print(time.time())", faketime="+1h")
    assert abs(float(out.split()[0]) - time.time() - 3600) < 60
    assert os.environ.get("LD_PRELOAD") is None


def test_a_consumer_whose_clock_is_a_minute_ahead_does_not_take_a_held_lease(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    client.create_subscription(T, "s")
    with client.consumer(T, "s", lease_seconds=30, max_wait_seconds=0.1):
        out = run(
            tms_env,
            PRELUDE + "from tms_hbase.errors import SubscriptionBusy\n"
            "with MessagingClient() as c:\n"
            "    try:\n"
            "        c.consumer(T, 's', lease_seconds=30, wait_for_lease=0).close()\n"
            "        print('took it')\n"
            "    except SubscriptionBusy:\n"
            "        print('busy')\n",
            faketime="+60s",
        )
    assert out.split()[0] == "busy"  # its lease would have looked expired by its own clock


def test_topic_tail_follow_stops_before_a_hole_and_shows_the_batch_that_lands_in_it(
    client: MessagingClient, topic: TopicId
) -> None:
    from tms_hbase.model.inspection import Cursor
    from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, message_key

    client.publish(T, [b"first"])
    slow = sequencer.reserve(client.installation.messages, T, 1, 1)  # a live writer, about to write
    client.publish(T, [b"third"])
    inspector = client.admin.inspector()
    shown = list(inspector.entries(T, 1, Cursor(1), ttl=3600, view=None))
    assert [e.payload for e in shown] == [b"first"]  # not past the hole while its writer may still write
    late = BatchRow(publish_time=client.hbase_clock.now_ms(), writer_id=b"w" * 16, batch_no=1, payloads=(b"second",))
    assert client.installation.messages.put_if_absent(
        message_key(T, 1, slow), MESSAGE_COLUMN, BatchRow(**{**late.__dict__, "span": 1}).encode()
    )
    cursor = Cursor(shown[-1].position, shown[-1].index + 1)  # where --follow goes on from
    assert [e.payload for e in inspector.entries(T, 1, cursor, ttl=3600, view=None)] == [b"second", b"third"]


def test_a_reader_whose_clock_is_a_minute_ahead_does_not_hide_unexpired_messages(
    client: MessagingClient, tms_env: dict[str, str]
) -> None:
    client.create_topic(T, {"ttl": "30"})
    client.publish(T, [b"fresh"])
    out = run(
        tms_env,
        PRELUDE + "with MessagingClient() as c:\n    print(json.dumps([m.payload.decode() for m in c.fetch(T)]))",
        faketime="+60s",
    )
    assert json.loads(out.splitlines()[0]) == ["fresh"]  # its TTL runs on HBase's clock, not the reader's


def test_a_gateway_started_after_a_writer_died_passes_its_hole(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str], hbase_address: str, prefix: str, tmp_path: Path
) -> None:
    from tms_hbase.gateway_client.http import GatewayClient

    from ..gateway_server import running_gateway

    run(tms_env, DEAD_WRITER)
    client.publish(T, [b"b"])
    assert _holes(client, T), "A's unused block is not a hole below B's row"
    gateway = running_gateway(hbase_address, prefix, tmp_path, "workers = 1\n")  # a new process
    with gateway as process, GatewayClient(process.url) as remote:
        deadline = time.monotonic() + H + 15
        while [m.payload for m in remote.fetch(T)][-1:] != [b"b"]:
            assert time.monotonic() < deadline, "the gateway never passed the dead writer's hole"
            time.sleep(0.1)
