"""`tms-admin topic publish -K: -H name=value` and `topic tail` with keys and headers, as real processes; a line
piped into publish is sent while the input stays open (no waiting for 100 lines or the end of input)."""

from __future__ import annotations

import json
import subprocess
import time

from tms_hbase import MessagingClient, TopicId

from .test_cli import TMS_ADMIN, ok, tms_admin

T = TopicId("ns", "orders")


def test_publish_with_a_key_delimiter_and_headers_then_tail_shows_them(
    installed_env: dict[str, str], client: MessagingClient
) -> None:
    ok(installed_env, "topic", "create", str(T), "--ordering", "chain")
    lines = "order-7:paid\nno key here\n:empty key\n\xe9t\xe9:caf\xe9\n"
    done = subprocess.run(
        [TMS_ADMIN, "topic", "publish", str(T), "-K:", "-H", "source=shop", "-H", "trace=00-1", "--json"],
        input=lines.encode(),
        env=installed_env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["published"] == 4
    headers = (("source", b"shop"), ("trace", b"00-1"))
    got = [(m.key, m.payload, m.headers) for m in client.fetch(T)]
    assert got == [
        (b"order-7", b"paid", headers),
        (None, b"no key here", headers),
        (b"", b"empty key", headers),
        ("\xe9t\xe9".encode(), "caf\xe9".encode(), headers),
    ]
    shown = [json.loads(line) for line in ok(installed_env, "topic", "tail", str(T), "--json").stdout.splitlines()]
    assert [(s["key"], s["payload"]) for s in shown] == [
        ("order-7", "paid"),
        (None, "no key here"),
        ("", "empty key"),
        ("\xe9t\xe9", "caf\xe9"),
    ]
    assert shown[0]["headers"] == [
        {"name": "source", "value": "shop", "value_hex": b"shop".hex()},
        {"name": "trace", "value": "00-1", "value_hex": b"00-1".hex()},
    ]
    text = ok(installed_env, "topic", "tail", str(T)).stdout.splitlines()
    assert "key=order-7  source=shop  trace=00-1  paid" in text[0]
    assert "key=" not in text[1] and "source=shop  trace=00-1  no key here" in text[1]
    bad = tms_admin(installed_env, "topic", "publish", str(T), "-H", "novalue")
    assert bad.returncode != 0 and "NAME=VALUE" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_a_piped_line_is_published_while_the_input_stays_open(
    installed_env: dict[str, str], client: MessagingClient
) -> None:
    ok(installed_env, "topic", "create", str(T))
    publisher = subprocess.Popen(
        [TMS_ADMIN, "topic", "publish", str(T), "-K", "="],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=installed_env,
    )
    assert publisher.stdin is not None
    try:
        publisher.stdin.write(b"k=first\n")
        publisher.stdin.flush()
        deadline = time.monotonic() + 60
        while not list(client.fetch(T)):
            assert publisher.poll() is None, publisher.stderr.read() if publisher.stderr else ""
            assert time.monotonic() < deadline, "the line was not published while the input stayed open"
            time.sleep(0.1)
        assert [(m.key, m.payload) for m in client.fetch(T)] == [(b"k", b"first")]
        publisher.stdin.write(b"second\n")
    finally:
        publisher.stdin.close()
    assert publisher.wait(timeout=120) == 0
    assert [(m.key, m.payload) for m in client.fetch(T)] == [(b"k", b"first"), (None, b"second")]
