"""What a web page makes a browser send to an open gateway (no ``[[tokens]]``) is refused: a real gateway
process, httpx, and headless Chromium on a page of another origin and on a DNS name rebound to the
gateway (``--host-resolver-rules``). Programs that send their bodies' Content-Type are not affected, and an
open gateway does not start on a non-loopback address unless told to."""

from __future__ import annotations

import base64
import http.server
import json
import subprocess
import threading
from collections.abc import Iterator

import httpx
import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tms_hbase import MessagingClient, TopicId

from ..browser import chromium, wait_for_page
from ..gateway_server import TMS_GATEWAY, GatewayProcess, gateway_env, module_gateway
from ..tx_server import free_port

ORDERS = TopicId("shop", "orders")
PUBLISH = "/v1/namespaces/shop/topics/orders/publish"
BODY = json.dumps({"messages": [base64.b64encode(b"from a page").decode()]})
gateway = module_gateway('allowed_hosts = ["gateway.example", "*.tms.example"]\n')


@pytest.fixture(scope="module")
def client(gateway: GatewayProcess, hbase_address: str, module_prefix: str) -> Iterator[MessagingClient]:
    with MessagingClient(hbase_address, module_prefix) as client:
        client.create_topic(ORDERS)
        client.create_subscription(ORDERS, "billing")
        yield client


@pytest.fixture(scope="module")
def other_site() -> Iterator[str]:
    """An empty page served from another origin (another port) than the gateway's."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = b"<!doctype html><title>another site</title>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium("--host-resolver-rules=MAP rebound.example 127.0.0.1") as driver:
        yield driver


NO_CORS = """const [url, body, done] = arguments;
fetch(url, {method: "POST", mode: "no-cors", body: new Blob([body])})
  .then(() => done("sent"), (error) => done(String(error)));"""


def test_a_page_of_another_origin_cannot_publish_or_reset(
    gateway: GatewayProcess, client: MessagingClient, other_site: str, browser: WebDriver
) -> None:
    """The issue's page: a no-cors POST with a Blob body (no Content-Type, so no CORS preflight)."""
    client.publish(ORDERS, [b"first"])
    with client.consumer(ORDERS, "billing") as consumer:
        consumer.commit(consumer.poll(1, timeout_seconds=10)[-1])
    browser.get(other_site)
    assert browser.execute_async_script(NO_CORS, gateway.url + PUBLISH, BODY) == "sent"
    subscription = "/v1/namespaces/shop/topics/orders/subscriptions/billing"
    start = json.dumps({"start": "earliest"})
    assert browser.execute_async_script(NO_CORS, gateway.url + subscription + "/reset", start) == "sent"
    # both came (the access log has them) and were refused
    for path in (PUBLISH, subscription + "/reset"):
        wait_for_page(lambda path=path: f'"POST {path}" 403 ' in gateway.log(), f"the refusal of {path}")
    assert [m.payload for m in client.fetch(ORDERS)] == [b"first"]
    assert client.lag(ORDERS, "billing").messages == 0


def test_a_rebound_dns_name_is_refused_even_for_the_console(
    gateway: GatewayProcess, client: MessagingClient, browser: WebDriver
) -> None:
    """DNS rebinding: a name of the attacker's that resolves to the gateway makes its page same-origin
    with it; the Host and Origin both carry that name, and the gateway serves nothing under it."""
    rebound = f"http://rebound.example:{gateway.port}"
    browser.get(rebound + "/console/")
    assert "is not a name of this gateway" in browser.page_source
    deleted = """const [done] = arguments;
    fetch("/console/api/topics/shop/orders", {method: "DELETE", headers: {"X-CSRF-Token": "x"}})
      .then((r) => done(r.status), (error) => done(String(error)));"""
    assert browser.execute_async_script(deleted) == 403
    published = """const [body, done] = arguments;
    fetch("/v1/namespaces/shop/topics/orders/publish",
          {method: "POST", headers: {"Content-Type": "application/json"}, body})
      .then((r) => done(r.status), (error) => done(String(error)));"""
    assert browser.execute_async_script(published, BODY) == 403
    # the same with httpx, with a session and its CSRF token from the gateway's own name
    with httpx.Client(base_url=gateway.url, timeout=60) as http:
        assert http.get("/console/").status_code == 200  # an open gateway: an anonymous session
        csrf = http.get("/console/api/session").json()["csrf"]
        attacker = {"Host": f"rebound.example:{gateway.port}", "Origin": rebound, "X-CSRF-Token": csrf}
        assert http.delete("/console/api/topics/shop/orders", headers=attacker).status_code == 403
        assert (
            http.post(PUBLISH, content=BODY, headers={**attacker, "Content-Type": "application/json"}).status_code
            == 403
        )
    assert client.get_topic(ORDERS).exists
    assert b"from a page" not in [m.payload for m in client.fetch(ORDERS)]


def test_programs_get_what_they_ask_and_bodies_need_their_type(
    gateway: GatewayProcess, client: MessagingClient
) -> None:
    topic = TopicId("shop", "typed")
    with httpx.Client(base_url=gateway.url, timeout=60) as http:
        path = "/v1/namespaces/shop/topics/typed"
        assert http.put(path, content=b'{"ttl": "60"}').status_code == 200  # CDAP's client: a PUT without a type
        assert client.get_topic(topic).ttl == 60
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
            headers = {} if kind is None else {"Content-Type": kind}
            refused = http.post(path + "/publish", content=BODY, headers=headers)
            assert refused.status_code == 415 and refused.headers["TMS-Error"] == "UnsupportedMediaType", kind
            assert http.put(path + "/properties", content=b'{"ttl": "120"}', headers=headers).status_code == (
                200 if kind is None else 415
            )
        assert client.get_topic(topic).ttl == 120  # the one PUT without a type
        assert (
            http.post(path + "/publish", content=BODY, headers={"Content-Type": "application/json"}).status_code == 200
        )
        # the names it serves: addresses, localhost, allowed_hosts (globs); an Origin of its own is fine
        port = gateway.port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"gateway.example:{port}", f"a.tms.example:{port}"):
            headers = {"Host": host, "Origin": f"http://{host}"}
            assert http.get(path, headers=headers).status_code == 200, host
        assert http.get(path, headers={"Host": f"tms.example:{port}"}).status_code == 403
        assert http.get(path, headers={"Origin": "http://127.0.0.1:1"}).status_code == 403
    assert [m.payload for m in client.fetch(topic)] == [b"from a page"]


def test_an_open_gateway_listens_on_loopback_unless_told(
    gateway: GatewayProcess, hbase_address: str, module_prefix: str
) -> None:
    assert "no [[tokens]]: listening on loopback only" in gateway.log()  # it says so at start
    env = gateway_env(hbase_address, module_prefix)
    refused = subprocess.run(
        [TMS_GATEWAY, "--host", "0.0.0.0", "--port", str(free_port())], env=env, capture_output=True, text=True
    )
    assert refused.returncode == 2 and "an open gateway listens on loopback only" in refused.stderr
    assert refused.stderr.count("\n") == 1
