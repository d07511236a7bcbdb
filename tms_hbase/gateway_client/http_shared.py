"""GatewaySharedConsumer: :class:`tms_hbase.shared.SharedConsumer`'s surface through ``tms-gateway``
(``GatewayClient.shared_consumer``; docs/gateway.md, "Shared subscriptions").

The consumer is a gateway session: its first ``receive`` gets the session's secret in the
``TMS-Consumer`` header, every later call sends it back, and the gateway settles deliveries under an
owner derived from it and the caller's principal. Give ``owner`` (a secret of your own) to settle a
session's deliveries from another process. Errors are the library's: NotHeld (409) for a delivery this
session does not hold, InvalidArgument (400) for bad input, SubscriptionNotFound (404).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from tms_hbase.errors import InvalidArgument, TmsError
from tms_hbase.gateway_client import rest, rest_shared
from tms_hbase.model import checks
from tms_hbase.model.topic import TopicId
from tms_hbase.shared.consumer import Delivery

if TYPE_CHECKING:
    from tms_hbase.gateway_client.http import GatewayClient, _Reply


class GatewaySharedConsumer:
    """One consumer of a shared subscription through the gateway: ``receive``, iteration, ``ack``,
    ``nack``, ``release``, ``extend``, ``held`` and ``close`` (which gives back what it holds). Not
    thread-safe: one thread per consumer, as the library's."""

    def __init__(
        self, client: GatewayClient, topic: TopicId, name: str, owner: str | None = None, max_wait_seconds: float = 5.0
    ) -> None:
        checks.seconds("max_wait_seconds", max_wait_seconds)
        if owner is not None and (not isinstance(owner, str) or not owner or not owner.isprintable() or " " in owner):
            raise InvalidArgument(f"bad owner {owner!r}: a non-empty name without spaces")
        self.client, self.topic, self.name, self.max_wait_seconds = client, topic, name, max_wait_seconds
        self._token = owner  # the session's secret; None until the gateway gives one
        self._held: dict[bytes, int] = {}  # what this session holds: id -> deadline (HBase ms)
        self._closed = False

    def __enter__(self) -> GatewaySharedConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GatewaySharedConsumer({self.topic}, {self.name!r}, {self.client.url!r})"

    @property
    def owner(self) -> str | None:
        """The session's secret (what ``owner=`` takes to settle its deliveries from elsewhere)."""
        return self._token

    @property
    def held(self) -> list[bytes]:
        """Ids of the messages delivered to this consumer and not settled by it."""
        return list(self._held)

    def close(self) -> None:
        """Give back what this consumer holds (its messages go to others at once). Idempotent; never
        raises (what cannot be given back is delivered again after its deadline)."""
        if self._closed:
            return
        try:
            if self._held:
                with contextlib.suppress(TmsError):
                    self._settle("release", list(self._held))
        finally:
            self._closed = True

    def __iter__(self) -> Iterator[Delivery]:
        """Deliveries one by one; the iteration ends after ``max_wait_seconds`` seconds without one."""
        while True:
            got = self.receive(1, self.max_wait_seconds)
            if not got:
                return
            yield got[0]

    def receive(self, max_messages: int = 10, timeout_seconds: float = 1.0) -> list[Delivery]:
        """Up to ``max_messages`` deliveries, redeliveries first, as soon as there is one; ``[]`` after
        ``timeout_seconds`` (``GET .../deliveries``)."""
        checks.positive_int("max_messages", max_messages)
        checks.seconds("timeout_seconds", timeout_seconds)
        query = urlencode({"wait": timeout_seconds, "max": max_messages})
        reply = self._call("receive", "GET", f"deliveries?{query}", None, wait=timeout_seconds)
        got = rest_shared.decode_deliveries(reply.body, self.client.media)
        self._held.update((d.id, d.deadline) for d in got)
        return got

    def ack(self, *deliveries: Delivery | bytes) -> None:
        """Acknowledge; NotHeld (after settling the others) lists those this session does not hold."""
        self._settle("ack", self._ids(deliveries))

    def nack(self, delivery: Delivery | bytes, delay_seconds: float = 0.0) -> None:
        """Deliver again after ``delay_seconds``, to any consumer; the delivery counts."""
        checks.seconds("delay_seconds", delay_seconds)
        self._settle("nack", self._ids([delivery]), float(delay_seconds))

    def release(self, delivery: Delivery | bytes) -> None:
        """Give it back at once without counting this delivery."""
        self._settle("release", self._ids([delivery]))

    def extend(self, delivery: Delivery | bytes, timeout_seconds: float | None = None) -> int:
        """Hold it until ``timeout_seconds`` from now (default: the ack timeout); the new deadline (HBase ms)."""
        if timeout_seconds is not None:
            checks.seconds("timeout_seconds", timeout_seconds)
        ids = self._ids([delivery])
        body = self._settle("extend", ids, None if timeout_seconds is None else float(timeout_seconds))
        (deadline,) = rest_shared.decode_deadlines(body, self.client.media)
        self._held[ids[0]] = deadline
        return deadline

    def _settle(self, action: str, ids: list[bytes], seconds: float | None = None) -> bytes:
        if self._token is None:
            raise InvalidArgument(f"nothing to {action}: this consumer has received nothing yet")
        body = rest_shared.encode_settle(rest_shared.SettleRequest(ids, seconds), self.client.media)
        try:
            reply = self._call(action, "POST", action, body)
        finally:
            if action != "extend":
                for message_id in ids:  # settled, or not held (NotHeld): not this consumer's any more
                    self._held.pop(message_id, None)
        return reply.body

    def _ids(self, deliveries: Iterable[Delivery | bytes]) -> list[bytes]:
        ids = [d.id if isinstance(d, Delivery) else d for d in deliveries]
        if not ids or not all(isinstance(i, bytes) for i in ids):
            raise InvalidArgument("give one or more deliveries or message ids (bytes)")
        return ids

    def _call(self, what: str, method: str, action: str, body: bytes | None, wait: float = 0.0) -> _Reply:
        if self._closed:
            raise TmsError(f"{self!r} is closed")
        headers = {"Accept": self.client.media}
        if self._token is not None:
            headers[rest.CONSUMER_HEADER] = self._token
        reply = self.client._request(
            what,
            method,
            rest.subscription_path(self.topic, self.name, action),
            body,
            self.topic,
            headers=headers,
            subscription=self.name,
            wait=wait,
        )
        if reply.consumer:
            self._token = reply.consumer
        return reply
