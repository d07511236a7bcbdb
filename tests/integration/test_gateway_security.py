"""Authentication, authorization and TLS of the real gateway process: tokens made by
``tms-gateway --new-token`` and stored hashed, rules per namespace/topic pattern/action, HTTPS with
certificates generated here (trustme), and mutual TLS."""

from __future__ import annotations

import asyncio
import re
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trustme

from tms_hbase import MessagingClient, TopicId
from tms_hbase.errors import HBaseUnavailable, NotAuthenticated, NotAuthorized, TopicNotFound
from tms_hbase.gateway_client.aio import AsyncGatewayClient
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.tx import write_pointer_now
from tms_hbase_gateway.auth import hash_token
from tms_hbase_gateway.auth import new_token as random_token

from ..gateway_server import TMS_GATEWAY, GatewayProcess, gateway_env

RULES = """
[[rules]]
principal = "alice"
namespace = "a"
topics = "*"
actions = ["admin", "publish", "consume"]

[[rules]]
principal = "bob"
namespace = "b"
topics = "in-*"
actions = ["publish", "consume"]

[[rules]]
principal = "reader"
namespace = "c"
topics = "*"
actions = ["consume"]

[[rules]]
principal = "writer"
namespace = "c"
topics = "*"
actions = ["publish"]

[[rules]]
principal = "ops"
namespace = "*"
topics = "*"
actions = ["admin"]
"""


def new_token(name: str) -> tuple[str, str]:
    """(token, its [[tokens]] entry) as ``tms-gateway --new-token`` prints them."""
    out = subprocess.run([TMS_GATEWAY, "--new-token", name], capture_output=True, text=True, timeout=60, check=True)
    token = re.search(r"^# (\S{40,})$", out.stdout, re.M).group(1)  # type: ignore[union-attr]
    entry = out.stdout[out.stdout.index("[[tokens]]") :]
    return token, entry


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A server CA and certificate for 127.0.0.1, and a separate client CA with one client certificate."""
    tmp = tmp_path_factory.mktemp("pki")
    server_ca, client_ca = trustme.CA(), trustme.CA()
    server, client = server_ca.issue_cert("127.0.0.1"), client_ca.issue_cert("client.example")
    files = {name: tmp / f"{name}.pem" for name in ("ca", "cert", "key", "client_ca", "client_cert", "client_key")}
    server_ca.cert_pem.write_to_path(files["ca"])
    server.cert_chain_pems[0].write_to_path(files["cert"])
    server.private_key_pem.write_to_path(files["key"])
    client_ca.cert_pem.write_to_path(files["client_ca"])
    client.cert_chain_pems[0].write_to_path(files["client_cert"])
    client.private_key_pem.write_to_path(files["client_key"])
    return files


@pytest.fixture(scope="module")
def tokens() -> dict[str, tuple[str, str]]:
    """alice's as ``tms-gateway --new-token`` prints it; the others' made with the functions it calls (one
    process start, not five: its output is test_the_config_holds_hashes_only's and test_gateway_ops's)."""
    made = {"alice": new_token("alice")}
    for name in ("bob", "ops", "reader", "writer"):
        token = random_token()
        made[name] = token, f'[[tokens]]\nname = "{name}"\nsha256 = "{hash_token(token)}"\n'
    return made


@pytest.fixture(scope="module")
def gateway(
    hbase_address: str,
    module_prefix: str,
    pki: dict[str, Path],
    tokens: dict[str, tuple[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    """HTTPS with tokens and rules (no client certificates)."""
    tmp = tmp_path_factory.mktemp("gateway")
    config = tmp / "gateway.toml"
    entries = "\n".join(entry for _, entry in tokens.values())
    config.write_text(f'[tls]\ncert = "{pki["cert"]}"\nkey = "{pki["key"]}"\n\n{entries}\n{RULES}')
    env = gateway_env(hbase_address, module_prefix)
    process = GatewayProcess(env, tmp / "gateway.log", "--config", str(config), tls=True).start()
    yield process
    assert process.stop() == 0, process.log()


@pytest.fixture(scope="module")
def https(gateway: GatewayProcess, pki: dict[str, Path]) -> Iterator[httpx.Client]:
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    with httpx.Client(base_url=gateway.url, verify=context, timeout=60) as client:
        yield client


def auth(tokens: dict[str, tuple[str, str]], name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens[name][0]}"}


def test_the_config_holds_hashes_only(tokens: dict[str, tuple[str, str]], gateway: GatewayProcess) -> None:
    token, entry = tokens["alice"]  # the entry --new-token printed, which the gateway runs with
    assert token not in entry and re.search(r'sha256 = "[0-9a-f]{64}"', entry)


def test_requests_without_a_valid_token_are_401(https: httpx.Client, tokens: dict[str, tuple[str, str]]) -> None:
    for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic YTpi"}):
        response = https.get("/v1/namespaces/a/topics", headers=headers)
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.headers["tms-error"] == "NotAuthenticated" and response.text.count("\n") == 1
    assert https.put("/v1/namespaces/a/topics/t").status_code == 401
    assert https.get("/health").status_code == 200  # health and metrics stay open
    assert https.get("/metrics").status_code == 200
    assert https.get("/v1/namespaces/a/topics", headers=auth(tokens, "alice")).status_code == 200


def test_a_token_for_namespace_a_is_refused_on_b_and_nothing_is_written(
    https: httpx.Client, tokens: dict[str, tuple[str, str]], direct: MessagingClient
) -> None:
    alice, ops = auth(tokens, "alice"), auth(tokens, "ops")
    assert https.put("/v1/namespaces/b/topics/in-1", headers=ops).status_code == 200
    body = {"messages": ["aGVsbG8="]}
    for method, path, kwargs in [
        ("POST", "/v1/namespaces/b/topics/in-1/publish", {"json": body}),
        (
            "POST",
            "/v1/namespaces/b/topics/in-1/store",
            {"json": {**body, "transactionWritePointer": write_pointer_now()}},
        ),
        ("POST", "/v1/namespaces/b/topics/in-1/poll", {"json": {}}),
        ("PUT", "/v1/namespaces/b/topics/in-9", {}),
        ("DELETE", "/v1/namespaces/b/topics/in-1", {}),
        ("GET", "/v1/namespaces/b/topics", {}),
    ]:
        response = https.request(method, path, headers=alice, **kwargs)
        assert response.status_code == 403, (path, response.text)
        assert response.headers["tms-error"] == "NotAuthorized"
    assert list(direct.fetch(TopicId("b", "in-1"))) == []
    assert direct.get_topic(TopicId("b", "in-1")).generation == 1
    with pytest.raises(TopicNotFound):
        direct.get_topic(TopicId("b", "in-9"))
    # and on its own namespace alice may do everything
    assert https.put("/v1/namespaces/a/topics/t", headers=alice).status_code == 200
    assert https.post("/v1/namespaces/a/topics/t/publish", headers=alice, json=body).status_code == 200
    assert [m.payload for m in direct.fetch(TopicId("a", "t"))] == [b"hello"]


def test_rules_by_action_and_topic_pattern(
    https: httpx.Client, tokens: dict[str, tuple[str, str]], direct: MessagingClient
) -> None:
    bob, ops = auth(tokens, "bob"), auth(tokens, "ops")
    for topic in ("in-2", "other"):
        assert https.put(f"/v1/namespaces/b/topics/{topic}", headers=ops).status_code == 200
    body = {"messages": ["aGVsbG8="]}
    assert https.post("/v1/namespaces/b/topics/in-2/publish", headers=bob, json=body).status_code == 200
    assert len(https.post("/v1/namespaces/b/topics/in-2/poll", headers=bob, json={}).json()) == 1
    assert https.get("/v1/namespaces/b/topics/in-2", headers=bob).status_code == 200  # any action: may read it
    refused = [
        https.put("/v1/namespaces/b/topics/in-3", headers=bob),  # admin is not bob's
        https.put("/v1/namespaces/b/topics/in-2/properties", headers=bob, json={"ttl": 5}),
        https.post("/v1/namespaces/b/topics/other/publish", headers=bob, json=body),  # not in-*
        https.get("/v1/namespaces/b/topics/other", headers=bob),
        https.get("/v1/namespaces/a/topics", headers=bob),  # nothing of namespace a is bob's
        https.post("/v1/namespaces/b/topics/in-2/publish", headers=ops, json=body),  # ops: admin only
    ]
    assert [r.status_code for r in refused] == [403] * len(refused)
    assert "in-2" in https.get("/v1/namespaces/b/topics", headers=bob).json()
    assert all(name.startswith("in-") for name in https.get("/v1/namespaces/b/topics", headers=bob).json())
    assert [m.payload for m in direct.fetch(TopicId("b", "other"))] == []


def test_subscriptions_need_consume_and_publishing_needs_publish(
    https: httpx.Client, tokens: dict[str, tuple[str, str]], direct: MessagingClient
) -> None:
    """A consume-only token reads its subscription and cannot publish; a publish-only token publishes
    and can neither read nor create, reset, commit or delete a subscription (403, nothing changed)."""
    reader, writer, ops = auth(tokens, "reader"), auth(tokens, "writer"), auth(tokens, "ops")
    topic, subs = "/v1/namespaces/c/topics/t", "/v1/namespaces/c/topics/t/subscriptions"
    assert https.put(topic, headers=ops).status_code == 200
    body = {"messages": ["aGVsbG8="]}
    assert https.put(f"{subs}/svc", headers=reader, json={"start": "earliest"}).status_code == 200
    assert https.post(f"{topic}/publish", headers=writer, json=body).status_code == 200
    refused = [
        https.post(f"{topic}/publish", headers=reader, json=body),
        https.get(f"{subs}/svc/messages", headers=writer),
        https.get(f"{subs}/svc", headers=writer),
        https.get(subs, headers=writer),
        https.put(f"{subs}/other", headers=writer),
        https.post(f"{subs}/svc/reset", headers=writer, json={"start": "latest"}),
        https.post(f"{subs}/svc/commit", headers=writer, json={}),
        https.post(f"{subs}/svc/consumer", headers=writer),
        https.delete(f"{subs}/svc", headers=writer),
        https.get(f"{subs}/svc/messages", headers=ops),  # admin alone does not consume
    ]
    assert [(r.status_code, r.headers["tms-error"]) for r in refused] == [(403, "NotAuthorized")] * len(refused)
    got = https.get(f"{subs}/svc/messages", headers=reader)
    assert got.status_code == 200 and [m["payload"] for m in got.json()] == ["aGVsbG8="]
    assert [s.name for s in direct.list_subscriptions(TopicId("c", "t"))] == ["svc"]
    assert [m.payload for m in direct.fetch(TopicId("c", "t"))] == [b"hello"]
    assert https.get(f"{topic}/stats", headers=writer).json()["messages"] == 1  # stats: any action on the topic


def test_plain_http_and_unknown_certificates_are_refused(gateway: GatewayProcess) -> None:
    with pytest.raises(httpx.HTTPError):
        httpx.get(gateway.url.replace("https://", "http://") + "/health", timeout=10)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(gateway.url + "/health", timeout=10)  # the system's CAs do not know the test CA


def test_gateway_client_over_tls_maps_auth_errors(
    gateway: GatewayProcess, pki: dict[str, Path], tokens: dict[str, tuple[str, str]]
) -> None:
    topic = TopicId("b", "in-5")
    with GatewayClient(gateway.url, tokens["ops"][0], ca_file=str(pki["ca"]), timeout_seconds=60) as ops:
        ops.create_topic(topic)
    with GatewayClient(gateway.url, tokens["bob"][0], ca_file=str(pki["ca"]), timeout_seconds=60) as bob:
        bob.publish(topic, [b"x"])
        assert [m.payload for m in bob.fetch(topic)] == [b"x"]
        with pytest.raises(NotAuthorized, match="bob may not admin"):
            bob.delete_topic(topic)
    with (
        GatewayClient(gateway.url, ca_file=str(pki["ca"]), timeout_seconds=60) as nobody,
        pytest.raises(NotAuthenticated),
    ):
        nobody.publish(topic, [b"y"])


def test_the_asyncio_client_over_tls_maps_auth_errors(
    gateway: GatewayProcess, pki: dict[str, Path], tokens: dict[str, tuple[str, str]]
) -> None:
    topic = TopicId("b", "in-6")
    ca = str(pki["ca"])

    async def main() -> None:
        async with AsyncGatewayClient(gateway.url, tokens["ops"][0], ca_file=ca, timeout_seconds=60) as ops:
            await ops.create_topic(topic)
        async with AsyncGatewayClient(gateway.url, tokens["bob"][0], ca_file=ca, timeout_seconds=60) as bob:
            await bob.publish(topic, [b"x"])
            assert [m.payload async for m in bob.fetch(topic)] == [b"x"]
            with pytest.raises(NotAuthorized, match="bob may not admin"):
                await bob.delete_topic(topic)
        async with AsyncGatewayClient(gateway.url, ca_file=ca, timeout_seconds=60) as nobody:
            with pytest.raises(NotAuthenticated):
                await nobody.publish(topic, [b"y"])
        async with AsyncGatewayClient(gateway.url, timeout_seconds=60) as unverified:
            with pytest.raises(HBaseUnavailable, match="CERTIFICATE_VERIFY_FAILED"):  # the system's CAs
                await unverified.ping()

    asyncio.run(main(), debug=True)


def test_mutual_tls_requires_a_client_certificate(
    hbase_address: str, module_prefix: str, pki: dict[str, Path], tmp_path: Path
) -> None:
    config = tmp_path / "mtls.toml"
    config.write_text(f'[tls]\ncert = "{pki["cert"]}"\nkey = "{pki["key"]}"\nclient_ca = "{pki["client_ca"]}"\n')
    env = gateway_env(hbase_address, module_prefix)
    process = GatewayProcess(env, tmp_path / "mtls.log", "--config", str(config), tls=True).start()
    try:
        anonymous = ssl.create_default_context(cafile=str(pki["ca"]))
        with pytest.raises(httpx.HTTPError):  # the handshake (or, in TLS 1.3, the first read) fails
            httpx.get(process.url + "/health", verify=anonymous, timeout=10)
        holder = ssl.create_default_context(cafile=str(pki["ca"]))
        holder.load_cert_chain(str(pki["client_cert"]), str(pki["client_key"]))
        assert httpx.get(process.url + "/health", verify=holder, timeout=30).status_code == 200
        with GatewayClient(
            process.url,
            ca_file=str(pki["ca"]),
            client_cert=str(pki["client_cert"]),
            client_key=str(pki["client_key"]),
            timeout_seconds=60,
        ) as client:
            client.ping()

        async def asyncio_client() -> None:
            with_cert = AsyncGatewayClient(
                process.url,
                ca_file=str(pki["ca"]),
                client_cert=str(pki["client_cert"]),
                client_key=str(pki["client_key"]),
                timeout_seconds=60,
            )
            async with with_cert:
                await with_cert.ping()
            async with AsyncGatewayClient(process.url, ca_file=str(pki["ca"]), timeout_seconds=60) as without:
                with pytest.raises(HBaseUnavailable):  # the handshake (or, in TLS 1.3, the first read) fails
                    await without.ping()

        asyncio.run(asyncio_client(), debug=True)
    finally:
        assert process.stop() == 0, process.log()
