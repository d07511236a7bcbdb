"""GatewaySharedConsumer: :class:`tms_hbase.shared.SharedConsumer`'s surface through ``tms-gateway``
(``GatewayClient.shared_consumer``; docs/gateway.md, "Shared subscriptions").

The consumer is a gateway session: its first ``receive`` gets the session's secret in the
``TMS-Consumer`` header, every later call sends it back, and the gateway settles deliveries under an
owner derived from it and the caller's principal. Give ``owner`` (a secret of your own) to settle a
session's deliveries from another process. Errors are the library's: NotHeld (409) for a delivery this
session does not hold, InvalidArgument (400) for bad input, SubscriptionNotFound (404). The session's
requests are :class:`tms_hbase.gateway_client.sessions.SharedSession`'s, shared with the asyncio client.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tms_hbase.api import SharedSubscriptionConsumer
from tms_hbase.errors import NotHeld, TmsError
from tms_hbase.gateway_client.sessions import SharedSession
from tms_hbase.model import checks
from tms_hbase.model.isolation import COMMITTED
from tms_hbase.model.message import Delivery
from tms_hbase.model.topic import TopicId

if TYPE_CHECKING:
    from tms_hbase.gateway_client.http import GatewayClient


class GatewaySharedConsumer(SharedSubscriptionConsumer):
    """One consumer of a shared subscription through the gateway: ``receive``, iteration, ``ack``,
    ``nack``, ``release``, ``extend``, ``held`` and ``close`` (which gives back what it holds). Not
    thread-safe: one thread per consumer, as the library's."""

    def __init__(
        self,
        client: GatewayClient,
        topic: TopicId,
        name: str,
        owner: str | None = None,
        max_wait_seconds: float = 5.0,
        isolation: str = COMMITTED,
    ) -> None:
        checks.seconds("max_wait_seconds", max_wait_seconds)
        self.client, self.topic, self.name, self.max_wait_seconds = client, topic, name, max_wait_seconds
        self._session = SharedSession(client.calls, topic, name, owner, isolation)

    def __enter__(self) -> GatewaySharedConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GatewaySharedConsumer({self.topic}, {self.name!r}, {self.client.url!r})"

    @property
    def owner(self) -> str | None:
        """The session's secret (what ``owner=`` takes to settle its deliveries from elsewhere)."""
        return self._session.token

    @property
    def held(self) -> list[bytes]:
        """Ids of the messages delivered to this consumer and not settled by it."""
        return list(self._session.held)

    def close(self) -> None:
        """Write the acknowledgements noted with ``wait=False``, then give back what this consumer holds
        (its messages go to others at once). Idempotent; never raises (what cannot be given back is
        delivered again after its deadline)."""
        with contextlib.suppress(TmsError):
            self._send_deferred()
        request = self._session.close()
        if request is not None:
            with contextlib.suppress(TmsError):
                self.client.run(request)

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
        self._send_deferred()
        return self.client.run(self._session.receive(max_messages, timeout_seconds))

    def ack(self, *deliveries: Delivery | bytes, wait: bool = True) -> None:
        """Acknowledge; NotHeld (after settling the others) lists those this session does not hold.
        ``wait=False``: noted, and sent in one request with the next receive, :meth:`flush` or close."""
        if wait:
            self.client.run(self._session.ack(deliveries))
        else:
            self._session.note_ack(deliveries)

    def flush(self) -> None:
        """Send the acknowledgements noted with ``wait=False``; NotHeld for those refused since the last."""
        self._send_deferred()
        self._session.raise_refused()

    def _send_deferred(self) -> None:
        request = self._session.send_deferred()
        if request is not None:
            try:
                self.client.run(request)
            except NotHeld as exc:
                self._session.refuse(exc)

    def nack(self, delivery: Delivery | bytes, delay_seconds: float = 0.0) -> None:
        """Deliver again after ``delay_seconds``, to any consumer; the delivery counts."""
        checks.seconds("delay_seconds", delay_seconds)
        self.client.run(self._session.nack(delivery, delay_seconds))

    def release(self, delivery: Delivery | bytes) -> None:
        """Give it back at once without counting this delivery."""
        self.client.run(self._session.release(delivery))

    def extend(self, delivery: Delivery | bytes, timeout_seconds: float | None = None) -> int:
        """Hold it until ``timeout_seconds`` from now (default: the ack timeout); the new deadline (HBase ms)."""
        checks.seconds("timeout_seconds", timeout_seconds, optional=True)
        return self.client.run(self._session.extend(delivery, timeout_seconds))


# mypy holds the class to its whole interface: a member missing (abstract) is an error here.
_SHARED_CONSUMER: type[SharedSubscriptionConsumer] = GatewaySharedConsumer
