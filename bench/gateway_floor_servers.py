"""The servers of the gateway benchmark's floor trial (:mod:`bench.gateway_floor`), one a process:
``python -m bench.gateway_floor_servers SERVER --port N [--thrift HOST:PORT --prefix P]``.

Each answers ``POST .../topics/<t>/publish`` as ``tms-gateway`` answers it (200, no body, ``content-length:
0`` and a ``tms-published`` header), over keep-alive connections, and nothing else:

- ``uvicorn``: no work, on the gateway's HTTP stack (uvicorn with uvloop and httptools, the gateway's
  settings): a bare ASGI app that reads the body and answers from a fixed list of headers;
- ``bare``: no work, on the cheapest Python server: a uvloop ``asyncio.Protocol`` that finds the end of
  the head, reads ``Content-Length`` bytes of body and writes a fixed answer;
- ``loop``: the ``bare`` protocol with the real publish the gateway's way: the body decoded and the sync
  client's protocol code run on the loop by one ``run_to_end`` a publish under a semaphore
  (``tms_hbase_gateway.service.Gateway.run``);
- ``asgi``: that publish on the loop under uvicorn as ``uvicorn`` runs, from a bare ASGI app (no Starlette,
  no guard, metrics or access log): what the gateway's stack costs up to its own request handling;
- ``thread``: a thread per connection on a blocking socket, the same parsing, the body decoded and
  published by the synchronous :class:`~tms_hbase.MessagingClient`: no event loop between the request
  and the Thrift call.

``loop`` and ``thread`` are the two structures side by side with the same minimal HTTP. None of the three
that publish authenticates, logs or counts (the gateway's guard, access log and metrics), so each is a
lower bound for a gateway built that way.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import socketserver
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, cast

from tms_hbase import MessagingClient, TopicId
from tms_hbase.rest import codec as rest

SERVERS = ("uvicorn", "bare", "asgi", "loop", "thread")
PUBLISHED = b"1:0"  # the no-work servers' tms-published header: a batch row's generation and position
DATE = b"Fri, 27 Nov 2026 00:00:00 GMT"  # uvicorn sends a date header; the fixed answers carry one as long
CALLS_AT_ONCE = 16  # the gateway's default --threads: the semaphore around each library call on the loop
MAX_HEAD = 65536


def answer(published: bytes) -> bytes:
    """The whole answer to a publish, as uvicorn writes the gateway's (date, content-length, tms-published)."""
    return b"HTTP/1.1 200 OK\r\ndate: %s\r\ncontent-length: 0\r\n%s: %s\r\n\r\n" % (
        DATE,
        rest.PUBLISHED_HEADER.lower().encode(),
        published,
    )


FIXED_ANSWER = answer(PUBLISHED)


class Head(NamedTuple):
    """What the servers read of a request's head."""

    target: str
    content_length: int
    media: str


def parse_head(head: bytes) -> Head:
    """The request line's target, ``Content-Length`` (0 without one) and the body's media type (Avro
    without a ``Content-Type``) of a head without its closing blank line; ValueError for a malformed one."""
    lines = head.split(b"\r\n")
    method, target, _version = lines[0].split(b" ")
    length, media = 0, rest.AVRO
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"content-type":
            media = rest.media_type(value.decode("latin-1"), default=rest.AVRO)
    if method != b"POST" or length < 0:
        raise ValueError(f"not a publish this server answers: {lines[0]!r}")
    return Head(target.decode("latin-1"), length, media)


def topic_of(target: str) -> TopicId:
    """The topic of ``/v1/namespaces/<ns>/topics/<t>/publish[?...]``; ValueError for another path."""
    parts = target.split("?", 1)[0].split("/")
    if len(parts) != 7 or parts[1:3] != ["v1", "namespaces"] or parts[4] != "topics" or parts[6] != "publish":
        raise ValueError(f"not a publish path: {target!r}")
    return TopicId(parts[3], parts[5])


def published(client: MessagingClient, head: Head, body: bytes) -> bytes:
    """Decode a publish body and publish it with ``client`` (what the gateway's publish endpoint does);
    the answer's ``tms-published`` header."""
    request = rest.decode_publish(body, head.media)
    result = client.publish(topic_of(head.target), request.messages, request.transaction_write_pointer)
    return rest.encode_published(result.generation, result.position).encode()


async def loop_publisher(thrift: str, prefix: str) -> Callable[[Head, bytes], Awaitable[bytes]]:
    """A publish on this event loop the gateway's way (``tms_hbase_gateway.service.Gateway.run``): the
    sync client's protocol code over the asyncio driver, one ``run_to_end`` a publish under a semaphore."""
    from tms_hbase.runtime.bridge import run_sync, run_to_end
    from tms_hbase_gateway.service import LoopClient

    client = await run_sync(LoopClient, thrift, prefix, pool_size=CALLS_AT_ONCE, create_tables=False)
    calls = asyncio.Semaphore(CALLS_AT_ONCE)

    async def publish(head: Head, body: bytes) -> bytes:
        async with calls:
            return await run_to_end(published, client, head, body)

    return publish


# -- uvicorn, no work ---------------------------------------------------------------------------


def _start(published: bytes) -> dict[str, Any]:
    """The ASGI start of the answer to a publish (uvicorn adds the date)."""
    headers = [(b"content-length", b"0"), (rest.PUBLISHED_HEADER.lower().encode(), published)]
    return {"type": "http.response.start", "status": 200, "headers": headers}


_START = _start(PUBLISHED)
_END = {"type": "http.response.body", "body": b""}


async def floor_app(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
    """An ASGI app that reads the whole body and answers from fixed messages."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send(_START)
    await send(_END)


class PublishApp:
    """An ASGI app that publishes each request's body on the loop (:func:`loop_publisher`, made at the
    lifespan's startup, as the gateway makes its client) and answers with its ``tms-published``."""

    def __init__(self, thrift: str, prefix: str) -> None:
        self.thrift, self.prefix = thrift, prefix
        self.publish: Callable[[Head, bytes], Awaitable[bytes]] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":  # startup, then shutdown
                self.publish = await loop_publisher(self.thrift, self.prefix)
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        assert self.publish is not None
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        content_type = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
        head = Head(scope["path"], 0, rest.media_type(content_type, default=rest.AVRO))
        await send(_start(await self.publish(head, b"".join(chunks))))
        await send(_END)


def serve_uvicorn(port: int, app: Callable[..., Any] = floor_app) -> None:
    """``app`` (default ``floor_app``) under uvicorn as ``tms-gateway`` runs its app (``gateway.cli.serve``)."""
    import uvicorn

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="off" if app is floor_app else "on",
        log_level="warning",
        access_log=False,
        timeout_keep_alive=30,
        server_header=False,
    )


# -- a bare protocol on uvloop --------------------------------------------------------------------


class BareProtocol(asyncio.Protocol):
    """Requests one at a time from a connection's bytes: the head up to its blank line, then
    ``Content-Length`` bytes of body, each handed to ``handle``, whose answer is written before the next
    request is read. ``handle`` is None for the fixed answer (no work, no task)."""

    def __init__(self, handle: Callable[[Head, bytes], Any] | None) -> None:
        self.handle = handle
        self.buffer = bytearray()
        self.busy = False
        self.transport: asyncio.Transport | None = None
        self.answering: asyncio.Future[None] | None = None  # the request being answered (handle's task)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next()

    def _next(self) -> None:
        assert self.transport is not None
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD:
                    self.transport.close()
                return
            head = parse_head(bytes(self.buffer[:end]))
            if len(self.buffer) < end + 4 + head.content_length:
                return
            body = bytes(self.buffer[end + 4 : end + 4 + head.content_length])
            del self.buffer[: end + 4 + head.content_length]
            if self.handle is None:
                self.transport.write(FIXED_ANSWER)
                continue
            self.busy = True
            self.answering = asyncio.ensure_future(self._answer(head, body))
            return

    async def _answer(self, head: Head, body: bytes) -> None:
        assert self.transport is not None and self.handle is not None
        try:
            self.transport.write(await self.handle(head, body))
        except Exception:  # a prototype: the client sees the connection close
            self.transport.close()
            raise
        self.busy = False
        self._next()


async def _serve_bare(port: int, thrift: str | None, prefix: str | None) -> None:
    handle = None
    if thrift is not None and prefix is not None:
        publish = await loop_publisher(thrift, prefix)

        async def handle(head: Head, body: bytes) -> bytes:
            return answer(await publish(head, body))

    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: BareProtocol(handle), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def serve_bare(port: int, thrift: str | None = None, prefix: str | None = None) -> None:
    """The bare protocol on uvloop: the fixed answer, or with ``thrift`` the real publish on the loop."""
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_serve_bare(port, thrift, prefix))


# -- a thread per connection, the synchronous library -----------------------------------------------


def serve_thread(port: int, thrift: str, prefix: str) -> None:
    """A thread per connection reading requests from its blocking socket and publishing each with the
    synchronous client (one client, a connection per concurrent call) before reading the next."""
    client = MessagingClient(thrift, prefix, pool_size=CALLS_AT_ONCE, create_tables=False)

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                lines = []
                while (line := self.rfile.readline(MAX_HEAD)) not in (b"\r\n", b""):
                    lines.append(line)
                if not lines:
                    return  # the client closed the connection
                head = parse_head(b"".join(lines).rstrip(b"\r\n"))
                self.connection.sendall(answer(published(client, head, self.rfile.read(head.content_length))))

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    with Server(("127.0.0.1", port), Handler) as server:
        server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("server", choices=SERVERS, help="which server (see above)")
    parser.add_argument("--port", type=int, required=True, help="loopback port to listen on")
    parser.add_argument("--thrift", help="HBase Thrift HOST:PORT (the servers that publish)")
    parser.add_argument("--prefix", help="table prefix of the topics published to (the servers that publish)")
    args = parser.parse_args()
    if args.server not in ("uvicorn", "bare") and not (args.thrift and args.prefix):
        parser.error(f"{args.server} publishes: it needs --thrift and --prefix")
    if args.server == "uvicorn":
        serve_uvicorn(args.port)
    elif args.server == "bare":
        serve_bare(args.port)
    elif args.server == "asgi":
        serve_uvicorn(args.port, PublishApp(args.thrift, args.prefix))
    elif args.server == "loop":
        serve_bare(args.port, args.thrift, args.prefix)
    else:
        serve_thread(args.port, args.thrift, args.prefix)


if __name__ == "__main__":
    main()
