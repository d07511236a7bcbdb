"""The gateway benchmark's floor trial: what one client's publish through any Python gateway must cost at
least on this machine, and the two structures a gateway's publish can have.

The same publish requests as the gateway side of ``bench.gateway``'s single-client publish (the same
``GatewayClient`` code and settings, the same 100 × 1 KiB body, one keep-alive connection) go to five
servers of :mod:`bench.gateway_floor_servers`, each its own process on loopback: two that do no work
(they read the body and answer what the gateway answers from a fixed buffer), on the gateway's HTTP stack
(uvicorn) and on the cheapest Python server (a bare uvloop protocol); two that publish for real with
that bare protocol's HTTP, the library on the event loop as the gateway runs it (``loop``) and the
synchronous library on a thread per connection (``thread``); and the ``loop`` publish under uvicorn from a
bare ASGI app (``asgi``), which splits the gateway's time between its HTTP stack and its own request
handling. Measured in the rounds of ``bench.gateway``, next to its direct and gateway sides.

A single client's publishes follow one another, so its rate is one over the time of a call: direct, the
library's time D; through a gateway, at least D plus the round trip F of a server that does nothing. So
no Python gateway over that server can pass D ÷ (D + F) of the direct rate: the ceiling this trial prints.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tms_hbase import MessagingClient
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.rest import codec as rest

from .common import Result, Settings, median, new_topic, ratio

SIDES = {  # server → what the table calls it
    "uvicorn": "floor: uvicorn (the gateway's HTTP stack), no work",
    "bare": "floor: a bare uvloop protocol, no work",
    "asgi": "uvicorn + publish on the event loop (a bare ASGI app: no Starlette, guard, metrics or log)",
    "loop": "bare protocol + publish on the event loop (the gateway's bridged call)",
    "thread": "bare parsing + publish on a thread per connection (the sync library)",
}
FLOORS = ("uvicorn", "bare")
GOAL = 0.7  # bench.gateway's single-client publish goal


def ceiling(direct_ms: float, floor_ms: float) -> float:
    """The largest gateway ÷ direct rate a single client can reach through a server whose round trip
    alone takes ``floor_ms``, when a direct publish takes ``direct_ms``: D ÷ (D + F)."""
    return ratio(direct_ms, direct_ms + floor_ms)


def start(server: str, settings: Settings, prefix: str) -> tuple[subprocess.Popen, str]:
    """One server of :mod:`bench.gateway_floor_servers` on a free loopback port, once it accepts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "bench.gateway_floor_servers", server, "--port", str(port)]
    if server not in FLOORS:
        command += ["--thrift", settings.address, "--prefix", prefix]
    proc = subprocess.Popen(command, cwd=Path(__file__).parent.parent)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit(f"the {server} floor server did not start") from None
            time.sleep(0.1)


class Servers:
    """The servers, a client of each (as the gateway side's), and a topic of each; :meth:`measure` times
    one round of publishes through one of them."""

    def __init__(
        self, procs: Mapping[str, subprocess.Popen], clients: Mapping[str, GatewayClient], direct: MessagingClient
    ):
        self.procs, self.clients = procs, clients
        self.topics = {server: new_topic(direct, f"pub-{server}") for server in SIDES}

    def measure(self, server: str, batch: Sequence[bytes], calls: int) -> tuple[float, float]:
        """``calls`` publishes of ``batch`` in a row through ``server``: ms per publish (wall) and the
        server's CPU µs per publish."""
        from .gateway import tree_cpu

        client, topic, pid = self.clients[server], self.topics[server], self.procs[server].pid
        cpu = tree_cpu(pid)
        started = time.perf_counter()
        for _ in range(calls):
            client.publish(topic, batch)
        elapsed = time.perf_counter() - started
        return elapsed * 1000 / calls, (tree_cpu(pid) - cpu) * 1e6 / calls


@contextmanager
def servers(settings: Settings, direct: MessagingClient, batch: Sequence[bytes]) -> Iterator[Servers]:
    """The servers started (each warmed by a few publishes), stopped at the end."""
    prefix = direct.installation.prefix
    with ExitStack() as stack:
        procs, clients = {}, {}
        for server in SIDES:
            proc, url = start(server, settings, prefix)
            procs[server] = proc
            stack.callback(stop, proc)
            clients[server] = stack.enter_context(GatewayClient(url, timeout_seconds=120, media=rest.AVRO))
        trial = Servers(procs, clients, direct)
        for server in SIDES:
            trial.measure(server, batch, 20)
        yield trial


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def report(
    result: Result,
    direct_ms: Sequence[float],
    gateway_ms: Sequence[float],
    gateway_cpu_us: float,
    times: Mapping[str, Sequence[float]],
    cpus: Mapping[str, Sequence[float]],
) -> None:
    """The floor table, its goal lines and notes: medians of the rounds' ms per publish (each round's
    mean), ratios of those medians."""
    d, g = median(direct_ms), median(gateway_ms)
    rows: list[list[object]] = [
        ["direct (the library, no HTTP)", d, "–", "–"],
        ["tms-gateway (measured)", g, gateway_cpu_us, f"{ratio(d, g):.2f}×"],
    ]
    for server, label in SIDES.items():
        t = median(times[server])
        reach = ceiling(d, t) if server in FLOORS else ratio(d, t)
        rows.append([label, t, median(cpus[server]), f"{reach:.2f}×"])
    result.table(
        ["single-client publish", "ms per publish (median)", "server CPU µs per publish", "gateway ÷ direct it allows"],
        rows,
    )
    for server in FLOORS:
        reach = ceiling(d, median(times[server]))
        where = "the gateway's HTTP stack (uvicorn)" if server == "uvicorn" else "a bare uvloop protocol"
        result.goal(
            f"floor: single-client publish ≥ {GOAL}× reachable over {where}, direct ÷ (direct + round trip)",
            f"{reach:.2f}×",
            reach >= GOAL,
        )
    bare = median(times["bare"])
    result.notes.append(
        f"largest ratio any Python gateway could reach: direct ÷ (direct + floor) = {d:.3f} ÷ ({d:.3f} + "
        f"{bare:.3f}) ms = {ceiling(d, bare):.2f}× (bare protocol), "
        f"{ceiling(d, median(times['uvicorn'])):.2f}× over uvicorn; the gateway measured {ratio(d, g):.2f}× "
        f"({g:.3f} ms a publish)"
    )
    result.notes.append(
        "floor trial: rows after the gateway's are each a server process of bench.gateway_floor_servers, "
        "sent the gateway side's publishes (same client, same body, one keep-alive connection); the three that "
        "publish for real neither authenticate, log nor count; server CPU in 10 ms ticks"
    )
    result.samples |= {f"floor_{server}": {"ms": list(times[server]), "cpu_us": list(cpus[server])} for server in SIDES}
