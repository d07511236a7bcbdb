"""tms-admin for shared subscriptions, as real processes on the real HBase: ``sub create --shared`` (and
its bad settings), ``sub consume --count N [--ack]``, ``sub pending``, ``sub get`` and ``sub dead-letters``
with ``--replay`` and ``--replay --dry-run``."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tms_hbase import DeadLetter, MessageId, MessagingClient, TopicId
from tms_hbase.shared.state import ClaimState

from .test_cli import ok, tms_admin

Q, DEAD = TopicId("cliq", "jobs"), TopicId("cliq", "dead")


@pytest.fixture(autouse=True)
def installation(installed_env: dict[str, str]) -> None:
    """Each test's installation, made through the library: `tms-admin init` (tested in test_cli.py) is not what
    these tests prove, and its process costs each of them a start."""


def test_shared_subscriptions_from_the_command_line(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(Q)
    client.create_topic(DEAD)
    client.publish(Q, [b"a", b"b", b"c"])

    for bad in (
        ["--ack-timeout", "0"],
        ["--max-deliveries", "0"],
        ["--dead-letter", "cliq:missing"],
        ["--claim-size", "0"],
    ):
        refused = tms_admin(tms_env, "sub", "create", str(Q), "work", "--shared", *bad)
        assert refused.returncode != 0 and refused.stderr.count("\n") == 1, (bad, refused.stderr)
    assert tms_admin(tms_env, "sub", "create", str(Q), "work", "--ack-timeout", "5").returncode != 0  # needs --shared
    assert client.list_subscriptions(Q) == []  # nothing created
    created = ok(
        tms_env, "sub", "create", str(Q), "work", "--shared", "--ack-timeout", "30", "--max-deliveries", "1",
        "--dead-letter", str(DEAD), "--json",
    )  # fmt: skip
    assert json.loads(created.stdout)["name"] == "work"
    ok(tms_env, "sub", "create", str(Q), "work", "--shared", "--if-not-exists")  # exists already: exit 0
    shared = client.get_subscription(Q, "work").shared
    assert shared is not None and (shared.ack_timeout_seconds, shared.max_deliveries, shared.dead_letter) == (
        30,
        1,
        DEAD,
    )

    # take two and acknowledge them
    taken = json.loads(ok(tms_env, "sub", "consume", str(Q), "work", "--count", "2", "--ack", "--json").stdout)
    assert [(r["payload"], r["deliveries"]) for r in taken] == [("a", 1), ("b", 1)]
    assert client.pending(Q, "work") == []
    # take one without --ack: shown, then given back (the delivery does not count)
    shown = ok(tms_env, "sub", "consume", str(Q), "work", "--count", "1").stdout
    assert shown.split()[1:] == ["#1", "c"]
    rows = json.loads(ok(tms_env, "sub", "pending", str(Q), "work", "--json").stdout)
    assert [(r["state"], r["deliveries"], r["consumer"]) for r in rows] == [("released", 0, None)]
    listing = ok(tms_env, "sub", "pending", str(Q), "work").stdout.splitlines()
    assert listing[0].split() == ["ID", "STATE", "DELIVERIES", "DEADLINE", "CONSUMER"] and "released" in listing[1]
    got = json.loads(ok(tms_env, "sub", "get", str(Q), "work", "--json").stdout)
    assert "acknowledged" in json.dumps(got) and got["shared"]["acknowledged"] == 2

    # c fails once (max_deliveries 1): the next consumer dead-letters it instead of delivering it
    with client.shared_consumer(Q, "work") as consumer:
        (c,) = consumer.receive(1, 5)
        consumer.nack(c)
    assert json.loads(ok(tms_env, "sub", "consume", str(Q), "work", "--wait", "2", "--json").stdout) == []
    letters = json.loads(ok(tms_env, "sub", "dead-letters", str(Q), "work", "--json").stdout)
    assert letters["dead_letter_topic"] == str(DEAD) and letters["refused"] == []
    assert [(r["topic"], r["subscription"], r["id"], r["deliveries"], r["payload"]) for r in letters["letters"]] == [
        (str(Q), "work", c.id.hex(), 1, "c")
    ]
    dry = ok(tms_env, "sub", "dead-letters", str(Q), "work", "--replay", "--dry-run").stdout
    assert dry.startswith(f"would replay {c.id.hex()} of {Q} (1 deliveries): c")
    assert [m.payload for m in client.fetch(Q)] == [b"a", b"b", b"c"]  # nothing published
    assert client.list_subscriptions(DEAD) == []  # nor the replay subscription created
    replayed = json.loads(ok(tms_env, "sub", "dead-letters", str(Q), "work", "--replay", "--json").stdout)
    assert [r["payload"] for r in replayed["letters"]] == ["c"]
    assert [m.payload for m in client.fetch(Q)] == [b"a", b"b", b"c", b"c"]  # back as a new message
    assert ok(tms_env, "sub", "dead-letters", str(Q), "work").stdout.strip() == "no dead letters"
    again = json.loads(ok(tms_env, "sub", "consume", str(Q), "work", "--count", "1", "--ack", "--json").stdout)
    assert [(r["payload"], r["deliveries"]) for r in again] == [("c", 1)]


def test_a_replay_publishes_only_to_the_subscriptions_own_topic(
    client: MessagingClient, tms_env: dict[str, str]
) -> None:
    """Whoever may publish to a dead-letter topic can write a letter naming any topic: the replay refuses it
    (with the reason) and publishes nothing there, and still replays the genuine letters after it."""
    jobs, dead, secret = TopicId("forge", "jobs"), TopicId("forge", "dead"), TopicId("forge", "secret")
    for topic in (jobs, dead, secret):
        client.create_topic(topic)
    client.create_subscription(jobs, "work", shared=True, dead_letter=dead)
    forged_id, genuine_id = b"\x01" * 8, b"\x02" * 8
    forged = DeadLetter(secret, "work", forged_id, 1, 0, b"stolen").record()
    genuine = DeadLetter(jobs, "work", genuine_id, 5, 0, b"retry me").record()
    client.publish(dead, [forged, genuine])

    listed = json.loads(ok(tms_env, "sub", "dead-letters", str(jobs), "work", "--json").stdout)
    assert [r["payload"] for r in listed["letters"]] == ["retry me"]
    assert [(r["topic"], r["payload"]) for r in listed["refused"]] == [(str(secret), "stolen")]
    shown = ok(tms_env, "sub", "dead-letters", str(jobs), "work", "--replay").stdout.splitlines()
    assert shown[0].startswith(f"replayed {genuine_id.hex()} of {jobs}")
    assert shown[1].startswith(f"refused {forged_id.hex()} in {dead}: it names topic {secret}, not {jobs}")
    assert list(client.fetch(secret)) == []
    assert [m.payload for m in client.fetch(jobs)] == [b"retry me"]
    # the refused letter is passed over, not offered again
    assert ok(tms_env, "sub", "dead-letters", str(jobs), "work").stdout.strip() == "no dead letters"


def refused(env: dict[str, str], *args: str) -> str:
    """Run tms-admin expecting a one-line error and a non-zero exit code; the error."""
    result = tms_admin(env, *args)
    assert result.returncode != 0 and result.stderr.count("\n") == 1, (args, result.returncode, result.stderr)
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    return result.stderr


def test_bad_counts_waits_and_via_names_are_refused(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(Q)
    client.create_topic(DEAD)
    client.publish(Q, [b"a"])
    client.create_subscription(Q, "work", shared=True, dead_letter=DEAD)
    for bad in (["--count", "0"], ["--count", "-1"], ["--wait", "-1"], ["--wait", "nan"], ["--wait", "inf"]):
        refused(tms_env, "sub", "consume", str(Q), "work", *bad)
    for replay in ([], ["--replay"], ["--replay", "--dry-run"]):
        error = refused(tms_env, "sub", "dead-letters", str(Q), "work", "--via", "bad name", *replay)
        assert "bad subscription name" in error
    assert client.pending(Q, "work") == [] and client.list_subscriptions(DEAD) == []  # nothing taken or created


def test_a_wait_past_the_ack_timeout_shows_each_message_once(client: MessagingClient, tms_env: dict[str, str]) -> None:
    """``consume --wait`` longer than the ack timeout holds what it took while it waits for more: nothing
    delivered twice, nothing counted as a failed delivery, nothing dead-lettered for being shown."""
    client.create_topic(Q)
    client.create_topic(DEAD)
    client.publish(Q, [b"a", b"b"])
    client.create_subscription(Q, "work", shared=True, ack_timeout_seconds=2, max_deliveries=1, dead_letter=DEAD)
    shown = json.loads(ok(tms_env, "sub", "consume", str(Q), "work", "--count", "3", "--wait", "7", "--json").stdout)
    assert [(r["payload"], r["deliveries"]) for r in shown] == [("a", 1), ("b", 1)]
    assert [(p.state, p.deliveries) for p in client.pending(Q, "work")] == [("released", 0)] * 2  # given back
    numbers = client.get_subscription(Q, "work").shared
    assert numbers is not None and (numbers.dead_lettered, numbers.redelivered) == (0, 0)
    assert list(client.fetch(DEAD)) == []
    taken = json.loads(ok(tms_env, "sub", "consume", str(Q), "work", "--count", "2", "--ack", "--json").stdout)
    assert [(r["payload"], r["deliveries"]) for r in taken] == [("a", 1), ("b", 1)]


def test_pending_shows_a_deadline_out_of_range(client: MessagingClient, tms_env: dict[str, str]) -> None:
    """A deadline no bound stops any more (an earlier version stored ``nack(delay_seconds=1e300)`` as given)
    is shown as its number, not a traceback."""
    client.create_topic(Q)
    client.publish(Q, [b"a"])
    client.create_subscription(Q, "work", shared=True, ack_timeout_seconds=30)
    with client.shared_consumer(Q, "work") as consumer:
        (d,) = consumer.receive(1, 5)
        stored = consumer._held[d.id]
        far = replace(stored.claim, state=ClaimState.FREE, owner=None, deadline=int(1e300 * 1000))
        assert consumer._store.swap_claim(consumer._keys, d.id, stored.data, far) is not None
        consumer._held.clear()
    rows = json.loads(ok(tms_env, "sub", "pending", str(Q), "work", "--json").stdout)
    assert [(r["deadline"], r["deadline_iso"]) for r in rows] == [(far.deadline, f"{far.deadline} ms (out of range)")]
    assert "out of range" in ok(tms_env, "sub", "pending", str(Q), "work").stdout


def test_a_replay_passes_over_letters_whose_topic_was_deleted(client: MessagingClient, tms_env: dict[str, str]) -> None:
    """A dead-letter topic shared with a topic since deleted: its letters name that topic, so the replay of
    the living subscription refuses them (with the reason) and goes on past them."""
    gone = TopicId("cliq", "gone")
    for t in (Q, gone, DEAD):
        client.create_topic(t)
    client.create_subscription(Q, "work", shared=True, dead_letter=DEAD)
    letters = [DeadLetter(t, "work", bytes(MessageId(1, n, 0)), 3, 0, p) for n, (t, p) in enumerate(
        [(Q, b"first"), (gone, b"lost"), (Q, b"last")], start=1
    )]  # fmt: skip
    client.publish(DEAD, [letter.record() for letter in letters])
    client.delete_topic(gone)
    done = json.loads(ok(tms_env, "sub", "dead-letters", str(Q), "work", "--replay", "--json").stdout)
    assert [r["payload"] for r in done["letters"]] == ["first", "last"]
    assert [(r["payload"], str(gone) in r["reason"]) for r in done["refused"]] == [("lost", True)]
    assert [m.payload for m in client.fetch(Q)] == [b"first", b"last"]
    assert ok(tms_env, "sub", "dead-letters", str(Q), "work").stdout.strip() == "no dead letters"


def test_a_key_ordered_subscription_from_the_command_line(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(Q)
    for bad in (["--ordering", "key"], ["--shared", "--ordering", "fifo"]):
        refused = tms_admin(tms_env, "sub", "create", str(Q), "work", *bad)
        assert refused.returncode != 0, (bad, refused.stderr)
    assert client.list_subscriptions(Q) == []  # nothing created
    ok(tms_env, "sub", "create", str(Q), "work", "--shared", "--ordering", "key")
    assert json.loads(ok(tms_env, "sub", "get", str(Q), "work", "--json").stdout)["shared"]["ordering"] == "key"
    shown = ok(tms_env, "sub", "get", str(Q), "work").stdout
    assert "ordered by key" in shown
