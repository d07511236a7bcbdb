"""Keys and headers through the real gateway: published and read by the gateway clients in JSON and in Avro with
keys and headers (``application/vnd.tms-hbase.records+avro``), by fetch, consumer and shared consumer; the JSON
extension as raw HTTP; and the seed's REST API unchanged for bare payloads."""

from __future__ import annotations

import base64
import uuid

import httpx
import pytest

from tms_hbase import InvalidArgument, MessagingClient, TopicId
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.rest import codec as rest

from ..gateway_server import GatewayProcess, module_gateway
from .test_keys_headers import BATCH, EXPECTED, seen

gateway = module_gateway("workers = 2\n")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def new_topic(direct: MessagingClient) -> TopicId:
    topic = TopicId(f"k{uuid.uuid4().hex[:10]}", "orders")
    direct.create_topic(topic)
    direct.create_subscription(topic, "svc")
    direct.create_subscription(topic, "work", shared=True)
    return topic


@pytest.mark.parametrize("media", [rest.JSON, rest.AVRO_RECORDS])
def test_the_gateway_clients_carry_keys_and_headers(
    gateway: GatewayProcess, direct: MessagingClient, media: str
) -> None:
    topic = new_topic(direct)
    with GatewayClient(gateway.url, media=media, timeout_seconds=60) as client:
        client.publish(topic, BATCH)
        assert seen(list(client.fetch(topic))) == EXPECTED
        with client.consumer(topic, "svc", max_wait_seconds=1) as consumer:
            assert seen(consumer.poll(max_messages=10, timeout_seconds=30)) == EXPECTED
        got: list = []
        with client.shared_consumer(topic, "work") as shared:
            for _ in range(60):
                got += shared.receive(10, 1.0)
                if len(got) >= len(EXPECTED):
                    break
            shared.ack(*got)
        assert sorted(seen(got), key=EXPECTED.index) == EXPECTED
    assert seen(list(direct.fetch(topic))) == EXPECTED  # stored as the library stores them


def test_the_json_extension_on_the_wire(gateway: GatewayProcess, direct: MessagingClient, http: httpx.Client) -> None:
    topic = new_topic(direct)
    path = rest.topic_path(topic)
    body = {
        "messages": [
            b64(b"plain"),
            {"payload": b64(b"body"), "key": b64(b"order-7"), "headers": [["h", b64(b"1")], ["h", b64(b"2")]]},
        ]
    }
    assert http.post(f"{path}/publish", json=body).is_success
    plain, keyed = http.post(f"{path}/poll").json()
    assert set(plain) == {"id", "payload", "publishTime"}  # a bare payload reads as in the seed's API
    assert (keyed["key"], keyed["headers"]) == (b64(b"order-7"), [["h", b64(b"1")], ["h", b64(b"2")]])
    assert seen(list(direct.fetch(topic))) == [(b"plain", None, ()), (b"body", b"order-7", (("h", b"1"), ("h", b"2")))]
    bad = {"messages": [{"payload": b64(b"x"), "headers": [[1, b64(b"v")]]}]}
    refused = http.post(f"{path}/publish", json=bad)
    assert refused.status_code == 400
    assert len(list(direct.fetch(topic))) == 2  # nothing stored


def test_the_seed_avro_client_reads_payloads_and_refuses_to_drop_keys(
    gateway: GatewayProcess, direct: MessagingClient
) -> None:
    topic = new_topic(direct)
    direct.publish(topic, BATCH)
    with GatewayClient(gateway.url, media=rest.AVRO, timeout_seconds=60) as client:
        assert [m.payload for m in client.fetch(topic)] == [p for p, _, _ in EXPECTED]
        with pytest.raises(InvalidArgument, match="key or headers"):
            client.publish(topic, BATCH)
    assert len(list(direct.fetch(topic))) == len(EXPECTED)
