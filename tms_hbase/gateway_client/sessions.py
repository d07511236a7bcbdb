"""The consumer sessions of the gateway's Python clients, without I/O: the exclusive consumer's
(:class:`ConsumerSession`) and a shared subscription's (:class:`SharedSession`), each building the
:class:`~tms_hbase.gateway_client.calls.Request` of every call and keeping the session's state from the
answers (the ``TMS-Consumer`` secret, the marks, what is held). The blocking consumers
(:mod:`tms_hbase.gateway_client.http`, :mod:`tms_hbase.gateway_client.http_shared`) and the asyncio ones
(:mod:`tms_hbase.gateway_client.aio_consumers`) only carry these requests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar
from urllib.parse import urlencode

from tms_hbase import tracing
from tms_hbase.errors import ClientClosed, InvalidArgument, NotHeld
from tms_hbase.gateway_client.calls import Calls, Reply, Request, nothing, with_query
from tms_hbase.model import checks
from tms_hbase.model.isolation import COMMITTED, check_isolation
from tms_hbase.model.message import Delivery, DeliveryRef, Message
from tms_hbase.model.topic import TopicId
from tms_hbase.rest import codec as rest
from tms_hbase.rest import shared as rest_shared

T = TypeVar("T")


class _Session:
    """A gateway session: the ``TMS-Consumer`` secret that each answer may carry (None until one does)
    and goes back with every later call, on one subscription."""

    def __init__(self, calls: Calls, topic: TopicId, name: str, token: str | None) -> None:
        self.calls, self.topic, self.name, self.token = calls, topic, name, token
        self.closed = False

    def _request(
        self,
        what: str,
        method: str,
        path: str,
        decode: Callable[[Reply], T],
        *,
        body: bytes | None = None,
        content_type: str | None = None,
        wait: float = 0.0,
        closing: bool = False,
    ) -> Request[T]:
        """``path``: the subscription's action (and query); ``closing`` allows the call after close."""
        if self.closed and not closing:
            raise ClientClosed(f"the consumer of {self.topic} {self.name!r} is closed")
        headers = {"Accept": self.calls.media}
        if self.token is not None:
            headers[rest.CONSUMER_HEADER] = self.token

        def read(reply: Reply) -> T:  # an answer that does not decode leaves the session as it was
            got = decode(reply)
            if reply.consumer:
                self.token = reply.consumer
            return got

        full = rest.subscription_path(self.topic, self.name, path)
        return Request(what, method, full, read, body, self.topic, self.name, content_type, headers, wait)


class ConsumerSession(_Session):
    """The exclusive consumer's gateway session (``.../consumer``, ``.../messages``, ``.../commit``):
    the ``TMS-Consumer`` secret each answer carries, the committed mark and the last delivered id. The
    clients check the waits (in their own argument names) before building these requests."""

    def __init__(self, calls: Calls, topic: TopicId, name: str, isolation: str = COMMITTED) -> None:
        super().__init__(calls, topic, name, None)
        self.isolation = check_isolation(isolation)
        self.committed: bytes | None = None
        self.delivered: bytes | None = None

    def open(self) -> Request[None]:
        def decode(reply: Reply) -> None:
            self.committed = self.delivered = rest.decode_committed(reply.body)

        return self._request("open consumer", "POST", "consumer", decode, content_type=rest.JSON)

    def poll(self, max_messages: int, timeout_seconds: float, commit: bool = False) -> Request[list[Message]]:
        """Up to ``max_messages`` messages, as soon as there is one; ``[]`` after ``timeout_seconds``.
        ``commit``: store the last delivered message as the mark first, in the same call (``?commit=true``)."""
        checks.positive_int("max_messages", max_messages)
        query: dict[str, object] = {"wait": timeout_seconds, "max": max_messages, "publishTime": "true"}
        if self.isolation != COMMITTED:
            query["isolation"] = self.isolation
        mark = self.delivered if commit else None
        if mark is not None:
            query["commit"] = "true"

        def decode(reply: Reply) -> list[Message]:
            committed = rest.decode_committed_header(reply.committed) if mark is not None else self.committed
            got = rest.decode_messages(reply.body, self.calls.media, publish_time=True)
            self.committed = committed
            if got:
                self.delivered = got[-1].id
            return tracing.received(self.topic, self.name, got)

        path = with_query("messages", query)
        return self._request("poll subscription", "GET", path, decode, content_type=rest.JSON, wait=timeout_seconds)

    def commit(self, message: Message | bytes | None) -> Request[None] | None:
        """Store the last delivered message (or ``message``) as the mark; None: nothing delivered yet."""
        mark = self.delivered if message is None else message.id if isinstance(message, Message) else message
        if mark is None:
            return None

        def decode(reply: Reply) -> None:
            self.committed = rest.decode_committed(reply.body)

        body = rest.encode_commit(mark)
        return self._request("commit", "POST", "commit", decode, body=body, content_type=rest.JSON)

    def close(self) -> Request[None] | None:
        """Give the lease back; None if closed already (the clients ignore errors of this call)."""
        if self.closed:
            return None
        self.closed = True
        return self._request("close consumer", "DELETE", "consumer", nothing, content_type=rest.JSON, closing=True)


class SharedSession(_Session):
    """A shared subscription's consumer session (docs/gateway.md, "Shared subscriptions"): its secret
    (given by the gateway at the first ``receive``, or ``owner``) and what it holds. Acking, nacking or
    releasing a message forgets it whatever the answer (:attr:`Request.done`)."""

    def __init__(self, calls: Calls, topic: TopicId, name: str, owner: str | None, isolation: str = COMMITTED) -> None:
        self.isolation = check_isolation(isolation)
        if owner is not None and (not isinstance(owner, str) or not owner or not owner.isprintable() or " " in owner):
            raise InvalidArgument(f"bad owner {owner!r}: a non-empty name without spaces")
        super().__init__(calls, topic, name, owner)
        self.held: dict[bytes, int] = {}  # id -> deadline (HBase ms)
        self.deferred: list[DeliveryRef] = []  # acknowledgements noted with wait=False, not sent yet
        self.refused: list[str] = []  # why those sent since the last flush were refused

    def note_ack(self, deliveries: Sequence[Delivery | bytes]) -> None:
        """Note acknowledgements (``ack(wait=False)``): sent together by :meth:`send_deferred`."""
        if self.closed:
            raise ClientClosed(f"the consumer of {self.name!r} of {self.topic} is closed")
        if self.token is None:  # as an ack that waits: else these would be dropped unsent
            raise InvalidArgument("nothing to ack: this consumer has received nothing yet")
        self.deferred.extend(self.refs(deliveries))

    def send_deferred(self) -> Request[None] | None:
        """The one request acknowledging every noted delivery; None when none is noted. A NotHeld it
        answers goes to :meth:`refuse`, for the next flush to raise."""
        refs, self.deferred = self.deferred, []
        return self._settle("ack", refs, None, nothing) if refs and self.token is not None else None

    def refuse(self, error: NotHeld) -> None:
        self.refused.append(str(error))

    def raise_refused(self) -> None:
        """NotHeld for the noted acknowledgements refused since the last call, if any."""
        refused, self.refused = self.refused, []
        if refused:
            raise NotHeld("; ".join(refused))

    def receive(self, max_messages: int, timeout_seconds: float) -> Request[list[Delivery]]:
        checks.positive_int("max_messages", max_messages)
        query = urlencode(
            {"wait": timeout_seconds, "max": max_messages}
            | ({} if self.isolation == COMMITTED else {"isolation": self.isolation})
        )

        def decode(reply: Reply) -> list[Delivery]:
            got = rest_shared.decode_deliveries(reply.body, self.calls.media)
            self.held.update((d.id, d.deadline) for d in got)
            return tracing.received(self.topic, self.name, got)

        return self._request("receive", "GET", f"deliveries?{query}", decode, wait=timeout_seconds)

    def ack(self, deliveries: Sequence[Delivery | bytes]) -> Request[None]:
        return self._settle("ack", self.refs(deliveries), None, nothing)

    def nack(self, delivery: Delivery | bytes, delay_seconds: float) -> Request[None]:
        return self._settle("nack", self.refs([delivery]), float(delay_seconds), nothing)

    def release(self, delivery: Delivery | bytes) -> Request[None]:
        return self._settle("release", self.refs([delivery]), None, nothing)

    def extend(self, delivery: Delivery | bytes, timeout_seconds: float | None) -> Request[int]:
        """The new deadline (HBase ms) of holding it ``timeout_seconds`` from now (None: the ack timeout)."""
        refs = self.refs([delivery])

        def decode(reply: Reply) -> int:
            (deadline,) = rest_shared.decode_deadlines(reply.body, self.calls.media)
            self.held[refs[0].id] = deadline
            return deadline

        return self._settle("extend", refs, None if timeout_seconds is None else float(timeout_seconds), decode)

    def close(self) -> Request[None] | None:
        """Give back what this consumer holds; None when it holds nothing or is closed already (the
        clients ignore errors of this call: what is not given back is delivered again at its deadline)."""
        if self.closed:
            return None
        self.closed = True
        if not self.held or self.token is None:
            return None
        return self._settle("release", self.refs(list(self.held)), None, nothing, closing=True)

    @staticmethod
    def refs(deliveries: Sequence[Delivery | bytes]) -> list[DeliveryRef]:
        """The deliveries named (a :class:`Delivery` with its incarnation, a bare id with none)."""
        refs = [DeliveryRef(d.id, d.incarnation) if isinstance(d, Delivery) else DeliveryRef(d, 0) for d in deliveries]
        if not refs or not all(isinstance(r.id, bytes) for r in refs):
            raise InvalidArgument("give one or more deliveries or message ids (bytes)")
        return refs

    def _settle(
        self,
        action: str,
        refs: list[DeliveryRef],
        seconds: float | None,
        decode: Callable[[Reply], T],
        closing: bool = False,
    ) -> Request[T]:
        if self.token is None:
            raise InvalidArgument(f"nothing to {action}: this consumer has received nothing yet")
        ids = [r.id for r in refs]
        body = rest_shared.encode_settle(rest_shared.SettleRequest(refs, seconds), self.calls.media)
        request = self._request(action, "POST", action, decode, body=body, closing=closing)
        if action == "extend":
            return request

        def forget() -> None:  # settled, or not held (NotHeld): not this consumer's any more
            for message_id in ids:
                self.held.pop(message_id, None)

        return replace(request, done=forget)
