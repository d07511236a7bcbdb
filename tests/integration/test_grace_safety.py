"""The sweeper's grace and the writers' tail cache bound each other (docs/guarantees.md).

Real processes throughout: two publishing clients and a tailing reader that live across the sweep (so
the writers keep their remembered tails), ``tms-admin init`` and ``tms-sweeper`` as subprocesses.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tms_hbase import InvalidArgument, MessagingClient, TopicId
from tms_hbase.model.clock import now_ms
from tms_hbase.model.tail_cache import minimum_grace, writer_tail_cache
from tms_hbase_sweeper.sweep import Sweeper

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
T = TopicId("ns", "tailed")


def run(env: dict[str, str], program: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / program), *args], env=env, capture_output=True, text=True, timeout=120)


class Shell:
    """A client process (tests/workers/client_shell.py) that keeps its MessagingClient between commands."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.workers.client_shell", str(T)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def do(self, *words: str) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(" ".join(words) + "\n")
        self.proc.stdin.flush()
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=60), f"client process gave no answer to {words}"
        answer = json.loads(self.proc.stdout.readline())
        assert answer["ok"], answer
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            self.do_quit()

    def do_quit(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=60)


def sweep_until_dropped(env: dict[str, str], grace: str, expected: int) -> None:
    """Run ``tms-sweeper once --grace`` until it has deleted ``expected`` message rows in all."""
    dropped, deadline = 0, time.monotonic() + 90
    while dropped < expected:
        assert time.monotonic() < deadline, f"the sweeper deleted only {dropped} of {expected} rows"
        done = run(env, "tms-sweeper", "once", "--grace", grace, "--json")
        assert done.returncode == 0, done.stderr
        dropped += json.loads(done.stdout)["messages_dropped"]
        time.sleep(0.5)  # the next poll of the condition


def test_small_grace_never_loses_a_publish_of_a_writer_with_a_remembered_tail(tms_env: dict[str, str]) -> None:
    """The scenario: A's remembered tail is older than the sweep; its next publish must not land
    in a position the sweeper freed (behind the reader), it must land after every existing row."""
    assert run(tms_env, "tms-admin", "init", "--tail-cache-seconds", "1").returncode == 0
    # TTL 3 s: short, so the sweep comes soon, yet long enough that a2 and b6 (below) are read before they
    # expire even on a loaded machine (a reader never returns an expired message: missing would look lost)
    assert run(tms_env, "tms-admin", "topic", "create", str(T), "--ttl", "3").returncode == 0
    a, b, reader = Shell(tms_env), Shell(tms_env), Shell(tms_env)
    try:
        a.do("publish", "a1")  # position 1; A remembers it as its tail
        for i in range(1, 6):
            b.do("publish", f"b{i}")  # positions 2-6
        seen = [p for _, p in reader.do("fetch")["messages"]]
        # the reader is at the tail; a1 may be gone already (expired: a loaded machine may take longer than the
        # TTL for these calls)
        assert seen in (["a1", "b1", "b2", "b3", "b4", "b5"], ["b1", "b2", "b3", "b4", "b5"])

        # the smallest grace this installation accepts: 4 x the 1 s tail cache
        sweep_until_dropped(tms_env, "4", expected=5)  # positions 1-5 go; 6, the newest, stays

        a.do("publish", "a2")  # acknowledged
        b.do("publish", "b6")
        seen += [p for _, p in reader.do("fetch")["messages"]]
        assert seen[-7:] == ["b1", "b2", "b3", "b4", "b5", "a2", "b6"]  # a2 reached the reader
    finally:
        for shell in (a, b, reader):
            shell.close()


def test_sweeper_refuses_a_grace_below_the_installation_minimum(client: MessagingClient, tms_env) -> None:
    client.admin.init_tables()  # tables, but no tail-cache setting yet: the sweeper assumes the default 30 s
    refused = run(tms_env, "tms-sweeper", "once", "--grace", "60")
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: ") and "minimum is 120 s" in line and "tail-cache-seconds 30" in line

    assert run(tms_env, "tms-admin", "init", "--tail-cache-seconds", "1").returncode == 0
    for command in ("once", "run"):
        refused = run(tms_env, "tms-sweeper", command, "--grace", "3.5")
        assert refused.returncode == 2, refused.stderr
        assert "minimum is 4 s" in refused.stderr and "Traceback" not in refused.stderr
    assert run(tms_env, "tms-sweeper", "once", "--grace", "4").returncode == 0

    # library users get the same refusal, before anything is swept
    with pytest.raises(InvalidArgument, match="minimum is 4 s"):
        Sweeper(client.installation, grace_seconds=3.9)
    Sweeper(client.installation, grace_seconds=4).sweep_once()


@pytest.mark.slow  # waits 2 min for the transition to end
def test_lowering_the_setting_keeps_the_old_minimum_until_old_writers_are_done(
    client: MessagingClient, tms_env: dict[str, str]
) -> None:
    """Writers that still hold the old value trust their tails for the old time: for one (old) minimum
    grace after a change, the sweeper honours the larger value and writers use the smaller one.

    From 30 s: the transition (4 x 30 s) outlasts the commands run during it on a loaded machine (from 10 s it did
    not at load averages of 11-42, where each command took seconds to start)."""
    assert run(tms_env, "tms-admin", "init", "--tail-cache-seconds", "30").returncode == 0
    changed = now_ms()
    lowered = run(tms_env, "tms-admin", "init", "--tail-cache-seconds", "1", "--json")
    assert lowered.returncode == 0, lowered.stderr
    shown = json.loads(run(tms_env, "tms-admin", "settings", "--json").stdout)
    assert (shown["tail_cache_seconds"], shown["previous_tail_cache_seconds"]) == (1, 30)
    assert shown["minimum_grace_seconds"] == 120 and shown["transition_ends_ms"] >= changed + 120_000

    refused = run(tms_env, "tms-sweeper", "once", "--grace", "4")
    assert refused.returncode == 2 and "minimum is 120 s" in refused.stderr and "until" in refused.stderr
    again = run(tms_env, "tms-admin", "init", "--tail-cache-seconds", "3")  # mid-transition: refused
    assert again.returncode == 2 and "previous change" in again.stderr

    deadline = time.monotonic() + 300
    while run(tms_env, "tms-sweeper", "once", "--grace", "4").returncode != 0:  # after the transition
        assert time.monotonic() < deadline, "the old minimum was never lifted"
        time.sleep(0.5)
    assert json.loads(run(tms_env, "tms-admin", "settings", "--json").stdout)["minimum_grace_seconds"] == 4


def test_a_first_value_above_the_default_is_a_raise_from_it(client: MessagingClient) -> None:
    """Without a row, sweepers assumed 30 s: writers may not trust a tail longer until they have all re-read."""
    setting = client.admin.set_tail_cache_seconds(60)
    assert (setting.tail_cache_seconds, setting.previous) == (60, 30)
    now = now_ms()
    assert (writer_tail_cache(setting, now), minimum_grace(setting, now)) == (30, 240)


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "x", "86401"])
def test_bad_tail_cache_values_are_refused(tms_env: dict[str, str], value: str) -> None:
    result = run(tms_env, "tms-admin", "init", "--tail-cache-seconds", value)
    assert result.returncode == 2 and "Traceback" not in result.stderr
