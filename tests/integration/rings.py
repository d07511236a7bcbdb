"""What the doorbell-ring tests share: a topic of each ordering with one subscription, and a counter of the
reads a client's reader makes (each goes to HBase), so a test can say a ring was delivered without one."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tms_hbase import MessagingClient, TopicId


def payloads(messages) -> list[bytes]:
    return [m.payload for m in messages]


def reads_of(client: MessagingClient, *methods: str) -> Callable[[], int]:
    """How many calls of the reader's message table ``methods`` (e.g. "get", "scan") the client has made
    since this call."""
    table = client._reader.messages
    count = [0]

    def counting(name: str) -> Callable[..., object]:
        call = getattr(table, name)

        def counted(*args, **kwargs):
            count[0] += 1
            return call(*args, **kwargs)

        return counted

    for name in methods:
        setattr(table, name, counting(name))
    return lambda: count[0]


def topic_of_each_ordering(topic: TopicId) -> Callable[..., TopicId]:
    """A fixture that creates ``topic`` once with each ordering, with the subscription "svc"."""

    @pytest.fixture(params=["chain", "sequencer"])
    def made(request: pytest.FixtureRequest, client: MessagingClient) -> TopicId:
        client.create_topic(topic, {"ordering": request.param})
        client.create_subscription(topic, "svc")
        return topic

    return made
