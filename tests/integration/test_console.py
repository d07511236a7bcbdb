"""The web console in a real browser: headless Chromium (Debian's) against a real ``tms-gateway`` process on a
real HBase, with a real transaction server and sweeper. Every screen shows what the library reads; a topic
created, a subscription reset and a dead letter replayed through the console are what the library then sees;
a read-only token changes nothing; an unknown token sees nothing; a change without the CSRF token is refused.

Screenshots of every screen go to ``$TMS_CONSOLE_SCREENSHOTS`` (``make console-screenshots`` sets it to
docs/console), else to the test's temporary folder.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest
from axe_selenium_python import Axe
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tms_hbase import MessagingClient, Record, TopicId, deliver_at
from tms_hbase.config import TX_ENV
from tms_hbase.errors import NotHeld, TopicNotFound
from tms_hbase.model.dead_letter import DeadLetter
from tms_hbase.shared.state import ClaimState
from tms_hbase.sweep.status import sweeper_state
from tms_hbase.tx.client import TransactionClient
from tms_hbase_gateway.auth import hash_token, new_token

from ..browser import chromium, screenshot, wait_for_page
from ..gateway_server import GatewayProcess, gateway_env
from ..haystack import fill_haystack
from ..tx_server import TxServer, free_port

ORDERS, PAYMENTS, DEAD = TopicId("shop", "orders"), TopicId("shop", "payments"), TopicId("shop", "dead")
# A gateway and a headless browser: in `make test-slow` and CI's loaded step, not `make test`.
pytestmark = pytest.mark.slow

TOKENS = {name: new_token() for name in ("ops", "viewer", "writer", "shopops", "deadwriter")}
RULES = """
[[rules]]
principal = "ops"
namespace = "*"
topics = "*"
actions = ["admin", "consume"]

[[rules]]
principal = "viewer"
namespace = "*"
topics = "*"
actions = ["consume"]

[[rules]]
principal = "writer"
namespace = "*"
topics = "*"
actions = ["publish"]

[[rules]]
principal = "shopops"
namespace = "shop"
topics = "*"
actions = ["admin", "consume", "publish"]

[[rules]]
principal = "deadwriter"
namespace = "shop"
topics = "forged-dead"
actions = ["publish"]
"""


@dataclass
class Console:
    url: str
    client: MessagingClient
    open_tx: int
    invalid_tx: int
    dead_lettered: bytes
    screenshots: Path
    gateway: GatewayProcess


@pytest.fixture(scope="module")
def console(hbase_address: str, module_prefix: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """A gateway with two tokens on an installation holding real data: two topics, an exclusive and a
    shared subscription, one transaction left open and one invalid, and one sweep done."""
    folder = tmp_path_factory.mktemp("console")
    env = gateway_env(hbase_address, module_prefix)
    tx_server = TxServer(env, free_port(), "--short-timeout", "3600").start()
    env[TX_ENV] = tx_server.address
    config = folder / "gateway.toml"
    entries = "".join(f'[[tokens]]\nname = "{n}"\nsha256 = "{hash_token(t)}"\n\n' for n, t in TOKENS.items())
    config.write_text(entries + RULES)
    with (
        MessagingClient(hbase_address, module_prefix, create_tables=True) as client,
        TransactionClient(tx_server.address) as tx,
    ):
        client.create_topic(ORDERS, {"ttl": "86400"})
        client.publish(ORDERS, [json.dumps({"order": n, "total": n * 10}).encode() for n in range(1, 6)])
        client.publish(ORDERS, [b"plain text", bytes(range(250, 256))])
        client.create_subscription(ORDERS, "billing")
        with client.consumer(ORDERS, "billing", max_wait_seconds=1) as consumer:
            taken = consumer.poll(3, timeout_seconds=5)
            consumer.commit(taken[-1])
        client.create_topic(DEAD)
        client.create_subscription(
            ORDERS, "workers", shared=True, ack_timeout_seconds=600, max_deliveries=1, dead_letter=DEAD
        )
        shared = client.shared_consumer(ORDERS, "workers", max_wait_seconds=0)
        held = shared.receive(2, timeout_seconds=5)  # held, not acknowledged: in flight
        shared.nack(held[0], 0)  # given back after its one delivery: the next receive dead-letters it

        def dead_letters() -> int:
            shared.receive(1, timeout_seconds=0.5)
            numbers = client.get_subscription(ORDERS, "workers").shared
            return 0 if numbers is None else numbers.dead_lettered

        wait_for_page(dead_letters, "a dead letter")
        dead_lettered = held[0].id
        client.create_topic(PAYMENTS, {"tx.mode": "transactional"})
        client.create_subscription(PAYMENTS, "audit")
        committed = tx.start_short()
        client.publish(PAYMENTS, [b"paid 1"], tx_write_pointer=committed.write_pointer)
        tx.can_commit(committed, [])
        tx.commit(committed)
        swept_away = tx.start_short()  # invalid before the sweep: the sweeper marks its rows rolled back
        client.publish(PAYMENTS, [b"never mind"], tx_write_pointer=swept_away.write_pointer)
        tx.invalidate(swept_away.tx_id)
        sweeper = Path(sys.executable).with_name("tms-sweeper")
        done = subprocess.run([str(sweeper), "once"], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        invalid = tx.start_short()  # invalid after it: still invalid
        client.publish(PAYMENTS, [b"timed out"], tx_write_pointer=invalid.write_pointer)
        tx.invalidate(invalid.tx_id)
        still_open = tx.start_short()
        client.publish(PAYMENTS, [b"pending 1", b"pending 2"], tx_write_pointer=still_open.write_pointer)
        gateway = GatewayProcess(env, folder / "gateway.log", "--config", str(config)).start()
        screenshots = Path(os.environ.get("TMS_CONSOLE_SCREENSHOTS") or folder)
        screenshots.mkdir(parents=True, exist_ok=True)
        try:
            opened = still_open.write_pointer
            yield Console(gateway.url, client, opened, invalid.write_pointer, dead_lettered, screenshots, gateway)
        finally:
            shared.close()
            assert gateway.stop() == 0, gateway.log()
    tx_server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def sign_in(browser: WebDriver, console: Console, token: str) -> None:
    browser.delete_all_cookies()
    browser.get(console.url + "/console/")
    wait_for_page(lambda: browser.find_element(By.ID, "token"), "the login form")
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.ID, "sign-in").click()
    wait_for_page(lambda: browser.execute_script("return document.body.dataset.ready") == "overview", "the overview")


def show(browser: WebDriver, console: Console, route: str, screen: str) -> None:
    """Open a screen as a fresh page load and wait until its data is on it."""
    browser.get(f"{console.url}/console/#/{route}")
    browser.refresh()
    wait_for_page(
        lambda: browser.execute_script("return document.body.dataset.ready") == screen, f"the {screen} screen"
    )


def text(browser: WebDriver, element_id: str) -> str:
    return browser.find_element(By.ID, element_id).text


def shot(browser: WebDriver, console: Console, name: str) -> None:
    screenshot(browser, str(console.screenshots / f"{name}.png"))


def test_an_unknown_token_sees_nothing(console: Console, browser: WebDriver) -> None:
    browser.delete_all_cookies()
    browser.get(console.url + "/console/")
    assert browser.current_url.endswith("/console/login")
    browser.find_element(By.ID, "token").send_keys(new_token())
    browser.find_element(By.ID, "sign-in").click()
    wait_for_page(lambda: browser.find_element(By.ID, "failed").is_displayed(), "the refusal")
    assert "token" not in browser.current_url.split("?")[1]  # the token never goes into a URL
    browser.get(console.url + "/console/#/topics")
    assert browser.current_url.split("#")[0].endswith("/console/login")
    assert "orders" not in browser.page_source
    paths = ("/console/api/topics", "/console/api/overview", "/console/api/topics/shop/orders/messages")
    with httpx.Client(base_url=console.url, timeout=60) as http:
        assert [http.get(path).status_code for path in paths] == [401, 401, 401]
    with httpx.Client(base_url=console.url, timeout=60, cookies={"tms_console": new_token()}) as http:
        assert [http.get(path).status_code for path in paths] == [401, 401, 401]


def test_every_screen_shows_the_real_data(console: Console, browser: WebDriver) -> None:
    client = console.client
    sign_in(browser, console, TOKENS["ops"])
    show(browser, console, "overview", "overview")
    overview = text(browser, "overview")
    assert client.installation.prefix in overview and "reachable" in overview and "OK" in overview
    assert "all regions swept" in overview
    shot(browser, console, "overview")

    show(browser, console, "topics", "topics")
    rows = [r.get_attribute("data-topic") for r in browser.find_elements(By.CSS_SELECTOR, "#topics tbody tr")]
    assert rows == [str(t) for t in sorted(client.list_topics("shop"), key=str)]
    shot(browser, console, "topics")

    show(browser, console, "topics/shop/orders", "topic")
    stats = client.topic_stats(ORDERS)
    assert text(browser, "topic-messages") == f"{stats.messages} messages" == "7 messages"
    subscriptions = text(browser, "topic-subscriptions")
    assert "billing" in subscriptions and "workers" in subscriptions
    shot(browser, console, "topic")

    show(browser, console, "messages/shop/payments?mode=last&value=10&format=text&limit=100", "messages")
    states = [r.get_attribute("data-state") for r in browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr")]
    payloads = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#messages td.payload")]
    assert payloads == ["paid 1", "never mind", "timed out", "pending 1", "pending 2"]
    assert states == ["committed", "rolled back", "invalid", "in progress", "in progress"]
    shot(browser, console, "messages")
    show(browser, console, "messages/shop/orders?mode=last&value=3&format=json&limit=100", "messages")
    payloads = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#messages td.payload")]
    assert payloads[0] == json.dumps({"order": 5, "total": 50}, indent=2) and payloads[1] == "(not JSON) plain text"
    Select(browser.find_element(By.ID, "format")).select_by_visible_text("hex")
    browser.find_element(By.CSS_SELECTOR, "#browse button").click()
    wait_for_page(lambda: "fa fb fc fd fe ff" in text(browser, "messages"), "the payload in hex")
    shot(browser, console, "messages-hex")

    show(browser, console, "subscriptions", "subscriptions")  # no topic yet: pick one
    picker = browser.find_element(By.ID, "topic-pick")
    picker.click()
    options = "#topic-names option"
    wait_for_page(
        lambda: len(browser.find_elements(By.CSS_SELECTOR, options)) == len(client.list_topics()), "suggestions"
    )
    picker.send_keys("shop:orders\n")
    wait_for_page(lambda: "billing" in text(browser, "subscriptions"), "the topic's subscriptions")
    assert "workers" in text(browser, "subscriptions")

    show(browser, console, "subscriptions/shop/orders/billing", "subscription")
    lag = client.lag(ORDERS, "billing")
    assert text(browser, "lag-messages") == f"{lag.messages} messages" == "4 messages"
    shot(browser, console, "subscription")
    show(browser, console, "subscriptions/shop/orders/workers", "subscription")
    in_flight = browser.find_elements(By.CSS_SELECTOR, "#in-flight tbody tr")
    assert [r.text.split()[0] for r in in_flight] == [p.id.hex() for p in client.pending(ORDERS, "workers")]
    assert in_flight and console.dead_lettered.hex() not in text(browser, "in-flight")
    assert text(browser, "dead-letters").splitlines()[1].startswith(f"{console.dead_lettered.hex()} 1 ")
    shot(browser, console, "shared-subscription")

    show(browser, console, "transactions", "transactions")
    open_rows = text(browser, "in-progress")
    assert str(console.open_tx) in open_rows and "shop:payments" in open_rows
    assert "holds back transactional readers of audit" in open_rows
    assert str(console.invalid_tx) in text(browser, "invalid")
    shot(browser, console, "transactions")

    show(browser, console, "sweeper", "sweeper")
    regions = browser.find_elements(By.CSS_SELECTOR, "#regions tbody tr")
    assert len(regions) == len(client.installation.messages.regions()) + len(client.installation.payloads.regions())
    assert all("never" not in r.text for r in regions)
    recorded = [r["prune_bound"] for r in sweeper_state(client.installation)["regions"]]
    shown = [r.find_elements(By.TAG_NAME, "td")[4].text for r in regions]
    assert shown == ["-" if bound is None else str(bound) for bound in recorded] and recorded[0] is not None
    shot(browser, console, "sweeper")


def confirm(browser: WebDriver) -> None:
    wait_for_page(lambda: browser.find_element(By.ID, "confirm").is_displayed(), "the confirmation")
    browser.find_element(By.ID, "confirm").click()
    wait_for_page(lambda: not browser.find_element(By.ID, "modal").is_displayed(), "the dialog to close")


def open_topic_actions(browser: WebDriver) -> bool:
    """Open the topic screen's "Change this topic" card if it is closed (the screen is drawn anew after a
    change, with the card closed: a click on the old one would miss)."""
    card = browser.find_element(By.ID, "topic-actions")
    if card.get_attribute("open") is None:
        card.find_element(By.TAG_NAME, "summary").click()
    return True


def test_a_topic_made_through_the_console_is_what_the_library_sees(console: Console, browser: WebDriver) -> None:
    client, created = console.client, TopicId("made", "by-console")
    sign_in(browser, console, TOKENS["ops"])
    show(browser, console, "topics", "topics")
    browser.find_element(By.ID, "new-namespace").send_keys("made")
    browser.find_element(By.ID, "new-topic").send_keys("by-console")
    browser.find_element(By.ID, "new-ttl").send_keys("7200")
    Select(browser.find_element(By.ID, "new-tx-mode")).select_by_visible_text("transactional")
    browser.find_element(By.CSS_SELECTOR, "#create-topic button").click()
    confirm(browser)
    wait_for_page(lambda: browser.execute_script("return document.body.dataset.ready") == "topic", "the new topic")
    meta = client.get_topic(created)
    assert (meta.ttl, meta.tx_mode) == (7200, "transactional")

    def edit_properties() -> bool:
        open_topic_actions(browser)
        editor = browser.find_element(By.ID, "properties")
        editor.clear()
        editor.send_keys(json.dumps({"ttl": "60", "tx.mode": "transactional"}))
        browser.find_element(By.ID, "update-topic").click()
        return True

    wait_for_page(edit_properties, "the properties edited")  # again if the screen was drawn anew meanwhile
    wait_for_page(lambda: browser.find_element(By.ID, "property-diff"), "the changes")
    assert text(browser, "property-diff").splitlines()[1:] == ["ttl 7200 60"]
    confirm(browser)
    wait_for_page(lambda: client.get_topic(created).ttl == 60, "the new TTL")

    wait_for_page(
        lambda: open_topic_actions(browser) and browser.find_element(By.ID, "delete-topic").click() is None, "Delete"
    )
    wait_for_page(lambda: browser.find_element(By.ID, "confirm-name"), "the delete confirmation")
    browser.find_element(By.ID, "confirm").click()  # the name was not typed: refused
    wait_for_page(lambda: "does not match" in text(browser, "modal-error"), "the refusal")
    assert client.get_topic(created).exists
    browser.find_element(By.ID, "confirm-name").send_keys(str(created))
    confirm(browser)
    wait_for_page(lambda: browser.execute_script("return document.body.dataset.ready") == "topics", "the topic list")
    with pytest.raises(TopicNotFound):
        client.get_topic(created)
    log = console.gateway.log()  # each change is logged with who made it
    assert "console: ops created topic made:by-console with {'ttl': '7200', 'tx.mode': 'transactional'}" in log
    assert "console: ops set the properties of topic made:by-console to {'ttl': '60'" in log
    assert "console: ops deleted topic made:by-console" in log


def test_a_reset_through_the_console_is_what_the_library_sees(console: Console, browser: WebDriver) -> None:
    client = console.client
    client.create_subscription(ORDERS, "replay")
    with client.consumer(ORDERS, "replay", max_wait_seconds=1) as consumer:
        consumer.commit(consumer.poll(7, timeout_seconds=5)[-1])
    assert client.lag(ORDERS, "replay").messages == 0
    sign_in(browser, console, TOKENS["ops"])
    show(browser, console, "subscriptions/shop/orders/replay", "subscription")
    Select(browser.find_element(By.ID, "reset-mode")).select_by_value("earliest")
    browser.find_element(By.ID, "preview").click()
    wait_for_page(lambda: browser.find_element(By.ID, "reset-preview"), "the preview")
    assert "delivers again 7 messages already consumed" in text(browser, "reset-preview")
    assert client.lag(ORDERS, "replay").messages == 0  # a preview changes nothing
    confirm(browser)
    wait_for_page(lambda: client.lag(ORDERS, "replay").messages == 7, "the reset to earliest")
    wait_for_page(lambda: text(browser, "lag-messages") == "7 messages", "the new lag on the screen")

    Select(browser.find_element(By.ID, "reset-mode")).select_by_value("latest")
    browser.find_element(By.ID, "preview").click()
    wait_for_page(lambda: "skips 7 messages not consumed yet" in text(browser, "reset-preview"), "the preview")
    confirm(browser)
    wait_for_page(lambda: client.lag(ORDERS, "replay").messages == 0, "the reset to latest")
    with client.consumer(ORDERS, "replay", max_wait_seconds=0) as consumer:
        assert consumer.poll(10, timeout_seconds=0.5) == []

    start = list(client.fetch(ORDERS))[-1].publish_time  # back to the last batch, by its time
    again = [m.id for m in client.fetch(ORDERS, start_time_ms=start)]
    Select(browser.find_element(By.ID, "reset-mode")).select_by_value("time")
    value = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start / 1000)) + f".{start % 1000:03d}"
    browser.find_element(By.ID, "reset-value").send_keys(value)
    browser.find_element(By.ID, "preview").click()
    wait_for_page(lambda: f"delivers again {len(again)} messages" in text(browser, "reset-preview"), "the preview")
    confirm(browser)
    wait_for_page(lambda: client.lag(ORDERS, "replay").messages == len(again), "the reset to a time")
    with client.consumer(ORDERS, "replay", max_wait_seconds=0) as consumer:
        assert [m.id for m in consumer.poll(10, timeout_seconds=5)] == again


def test_a_read_only_token_changes_nothing(console: Console, browser: WebDriver) -> None:
    client = console.client
    sign_in(browser, console, TOKENS["viewer"])
    show(browser, console, "topics", "topics")
    assert not browser.find_elements(By.ID, "create-topic")
    show(browser, console, "topics/shop/orders", "topic")
    assert not browser.find_elements(By.ID, "topic-actions")
    show(browser, console, "subscriptions/shop/orders/billing", "subscription")
    assert not browser.find_elements(By.ID, "reset")
    before = client.lag(ORDERS, "billing")
    # the server refuses what the page does not offer, even with the session's CSRF token
    statuses = browser.execute_async_script(
        """const done = arguments[arguments.length - 1];
        (async () => {
          const session = await (await fetch("/console/api/session")).json();
          const send = (method, path, body) => fetch("/console/api" + path, {method,
            headers: {"X-CSRF-Token": session.csrf, "Content-Type": "application/json"}, body: JSON.stringify(body)});
          return [(await send("PUT", "/topics/shop/sneaky", {properties: {}})).status,
                  (await send("PUT", "/topics/shop/orders/properties", {properties: {ttl: "1"}})).status,
                  (await send("DELETE", "/topics/shop/orders")).status,
                  (await send("POST", "/topics/shop/orders/subscriptions/billing/reset", {start: "latest"})).status];
        })().then(done);"""
    )
    assert statuses == [403, 403, 403, 403]
    assert TopicId("shop", "sneaky") not in client.list_topics("shop")
    assert client.get_topic(ORDERS).ttl == 86400
    assert client.lag(ORDERS, "billing").messages == before.messages == 4


def test_dead_letters_replayed_through_the_console_are_new_messages_of_their_topic(
    console: Console, browser: WebDriver
) -> None:
    client = console.client
    before = {m.id for m in client.fetch(ORDERS)}
    payload = next(m.payload for m in client.fetch(ORDERS) if m.id == console.dead_lettered)
    sign_in(browser, console, TOKENS["viewer"])  # read-only: no button, and the server refuses
    show(browser, console, "subscriptions/shop/orders/workers", "subscription")
    assert console.dead_lettered.hex() in text(browser, "dead-letters")
    assert not browser.find_elements(By.ID, "replay")
    statuses = browser.execute_async_script(
        """const done = arguments[arguments.length - 1];
        (async () => {
          const session = await (await fetch("/console/api/session")).json();
          const send = (path) => fetch("/console/api/topics/shop/orders/subscriptions/workers" + path, {
            method: "POST", headers: {"X-CSRF-Token": session.csrf, "Content-Type": "application/json"}, body: "{}"});
          return [(await send("/replay/preview")).status, (await send("/replay")).status];
        })().then(done);"""
    )
    assert statuses == [403, 403]
    assert {m.id for m in client.fetch(ORDERS)} == before
    assert [letter.message_id for letter in client.admin.dead_letters(ORDERS, "workers").letters] == [
        console.dead_lettered
    ]

    sign_in(browser, console, TOKENS["ops"])  # admin, but may not publish to shop:orders: no replay either
    show(browser, console, "subscriptions/shop/orders/workers", "subscription")
    assert not browser.find_elements(By.ID, "replay")
    assert browser.execute_async_script(REPLAY, "workers") == 403
    assert {m.id for m in client.fetch(ORDERS)} == before

    sign_in(browser, console, TOKENS["shopops"])
    show(browser, console, "subscriptions/shop/orders/workers", "subscription")
    browser.find_element(By.ID, "replay").click()
    wait_for_page(lambda: browser.find_element(By.ID, "replay-preview"), "the preview")
    preview = text(browser, "replay-preview")
    assert f"{console.dead_lettered.hex()} workers" in preview
    assert "Publishes these 1 dead letters of shop:dead back to shop:orders" in preview
    assert {m.id for m in client.fetch(ORDERS)} == before  # a preview publishes nothing
    shot(browser, console, "replay-preview")
    confirm(browser)
    new = wait_for_page(lambda: [m for m in client.fetch(ORDERS) if m.id not in before], "the replayed message")
    assert [m.payload for m in new] == [payload] and new[0].id != console.dead_lettered
    wait_for_page(lambda: text(browser, "dead-letters") == "nothing left to replay", "the empty dead-letter list")
    assert not browser.find_elements(By.ID, "replay")
    assert client.admin.dead_letters(ORDERS, "workers").letters == []
    assert "console: shopops replayed 1 dead letters of shop:dead to shop:orders, refused 0" in console.gateway.log()


REPLAY = """const [name, done] = arguments;
(async () => {
  const session = await (await fetch("/console/api/session")).json();
  const sent = await fetch(`/console/api/topics/shop/orders/subscriptions/${name}/replay`, {
    method: "POST", headers: {"X-CSRF-Token": session.csrf, "Content-Type": "application/json"}, body: "{}"});
  return sent.status;
})().then(done);"""


def test_a_forged_dead_letter_is_refused_not_published_to_the_topic_it_names(
    console: Console, browser: WebDriver
) -> None:
    """The confused deputy: deadwriter may publish only to shop:forged-dead and writes there a dead letter
    naming secret:payments, where it may not publish; shopops (admin on shop's topics only) presses Replay
    for subscription forged of shop:orders. The letter is shown as refused and lands nowhere; the genuine
    letter beside it goes back to shop:orders."""
    client, forged_dead, secret = console.client, TopicId("shop", "forged-dead"), TopicId("secret", "payments")
    client.create_topic(forged_dead)
    client.create_topic(secret)
    client.create_subscription(ORDERS, "forged", shared=True, dead_letter=forged_dead)
    forged_id = b"\x01" * 8
    forged = DeadLetter(secret, "forged", forged_id, 1, 0, b"stolen").record()
    genuine = DeadLetter(ORDERS, "forged", b"\x02" * 8, 1, 0, b"genuine").record()
    writer = {"Authorization": f"Bearer {TOKENS['deadwriter']}"}
    with httpx.Client(base_url=console.url, timeout=60, headers=writer) as http:
        b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
        letters = {
            "messages": [
                {"payload": b64(m.payload), "headers": [[n, b64(v)] for n, v in m.headers]} for m in (forged, genuine)
            ]
        }
        assert http.post("/v1/namespaces/secret/topics/payments/publish", json=letters).status_code == 403
        assert http.post("/v1/namespaces/shop/topics/forged-dead/publish", json=letters).status_code == 200
    before = {m.id for m in client.fetch(ORDERS)}

    sign_in(browser, console, TOKENS["shopops"])
    show(browser, console, "subscriptions/shop/orders/forged", "subscription")
    browser.find_element(By.ID, "replay").click()
    wait_for_page(lambda: browser.find_element(By.ID, "replay-preview"), "the preview")
    assert "Publishes these 1 dead letters of shop:forged-dead back to shop:orders" in text(browser, "replay-preview")
    refused = text(browser, "replay-refused")
    assert forged_id.hex() in refused and "it names topic secret:payments, not shop:orders" in refused
    confirm(browser)
    new = wait_for_page(lambda: [m for m in client.fetch(ORDERS) if m.id not in before], "the replayed message")
    assert [m.payload for m in new] == [b"genuine"]
    wait_for_page(lambda: text(browser, "dead-letters") == "nothing left to replay", "the empty dead-letter list")
    assert list(client.fetch(secret)) == []
    assert f"refused dead letter {forged_id.hex()} of shop:forged-dead" in console.gateway.log()


def test_a_dead_letter_topic_holding_something_else_is_shown_not_replayed(console: Console, browser: WebDriver) -> None:
    client, junk = console.client, TopicId("shop", "junk")
    client.create_topic(junk)
    client.publish(junk, [b"not a dead letter at all"])
    client.create_subscription(ORDERS, "broken", shared=True, dead_letter=junk)
    before = {m.id for m in client.fetch(ORDERS)}
    sign_in(browser, console, TOKENS["shopops"])
    show(browser, console, "subscriptions/shop/orders/broken", "subscription")
    assert (
        text(browser, "dead-letters") == "shop:junk: not a dead letter (no tms-dead-letter headers, no TMSDL1 header)"
    )
    assert not browser.find_elements(By.ID, "replay")
    answer = browser.execute_async_script(
        """const done = arguments[arguments.length - 1];
        (async () => {
          const session = await (await fetch("/console/api/session")).json();
          const sent = await fetch("/console/api/topics/shop/orders/subscriptions/broken/replay", {
            method: "POST", headers: {"X-CSRF-Token": session.csrf, "Content-Type": "application/json"},
            body: JSON.stringify({target: "shop:orders/broken"})});
          return [sent.status, await sent.text()];
        })().then(done);"""
    )
    assert answer[0] == 400 and "not a dead letter" in answer[1]
    assert {m.id for m in client.fetch(ORDERS)} == before


def test_payloads_need_consume_or_admin(console: Console, browser: WebDriver) -> None:
    sign_in(browser, console, TOKENS["writer"])  # may publish: sees the topics, not what they hold
    show(browser, console, "topics/shop/orders", "topic")
    assert text(browser, "topic-messages") == f"{console.client.topic_stats(ORDERS).messages} messages"
    show(browser, console, "messages/shop/orders?mode=last&value=3&format=text&limit=100", "messages")
    assert "writer may not read the messages of shop:orders" in text(browser, "browse-error")
    assert not browser.find_elements(By.CSS_SELECTOR, "#messages td.payload")


def test_a_change_without_the_csrf_token_is_refused(console: Console) -> None:
    with httpx.Client(base_url=console.url, timeout=60) as http:
        signed_in = http.post("/console/login", json={"token": TOKENS["ops"]})
        assert signed_in.status_code == 200 and signed_in.json() == {"principal": "ops"}
        cookie = signed_in.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
        assert TOKENS["ops"] not in cookie  # the cookie carries a session id, never the token
        csrf = http.get("/console/api/session").json()["csrf"]
        body = {"properties": {"ttl": "60"}, "target": "csrf:t1"}
        assert http.put("/console/api/topics/csrf/t1", json=body).status_code == 403
        assert http.put("/console/api/topics/csrf/t1", json=body, headers={"X-CSRF-Token": "0" * 64}).status_code == 403
        other_site = {"X-CSRF-Token": csrf, "Origin": "http://evil.example"}
        assert http.put("/console/api/topics/csrf/t1", json=body, headers=other_site).status_code == 403
        assert console.client.list_topics("csrf") == []
        assert http.put("/console/api/topics/csrf/t1", json=body, headers={"X-CSRF-Token": csrf}).status_code == 200
        assert console.client.get_topic(TopicId("csrf", "t1")).ttl == 60
        # signing out ends the session on the server: a copy of its cookie stops working too
        copied = httpx.Client(base_url=console.url, timeout=60, cookies={"tms_console": http.cookies["tms_console"]})
        with copied:
            assert copied.get("/console/api/session").json()["principal"] == "ops"
            assert http.post("/console/logout", headers={"X-CSRF-Token": csrf}).status_code == 200
            assert http.get("/console/api/session").status_code == 401
            assert copied.get("/console/api/session").status_code == 401
            again = {**body, "target": "csrf:t2"}
            assert (
                copied.put("/console/api/topics/csrf/t2", json=again, headers={"X-CSRF-Token": csrf}).status_code == 401
            )
        assert TopicId("csrf", "t2") not in console.client.list_topics("csrf")


def test_the_charts_draw_the_numbers_over_time(console: Console, browser: WebDriver) -> None:
    client, clicks = console.client, TopicId("shop", "clicks")
    client.create_topic(clicks)
    client.create_subscription(clicks, "stats")
    sign_in(browser, console, TOKENS["ops"])
    show(browser, console, "subscriptions/shop/clicks/stats", "subscription")
    for lag in (10, 20, 30):  # the screen refreshes itself: each refresh adds a sample
        client.publish(clicks, [b"click"] * 10)
        wait_for_page(lambda lag=lag: text(browser, "lag-messages") == f"{lag} messages", f"a lag of {lag}", timeout=60)
    points = browser.find_element(By.CSS_SELECTOR, ".chart polyline").get_attribute("points") or ""
    heights = [float(point.split(",")[1]) for point in points.split()]
    assert len(heights) >= 3 and heights[0] > heights[-1]  # the lag went up: the line too (y grows downwards)
    assert heights == sorted(heights, reverse=True)
    shot(browser, console, "subscription-chart")

    show(browser, console, "topics/shop/clicks", "topic")
    for total in (40, 50, 60):
        client.publish(clicks, [b"click"] * 10)
        wait_for_page(
            lambda t=total: text(browser, "topic-messages") == f"{t} messages", f"{total} messages", timeout=60
        )
    rates = browser.find_element(By.CSS_SELECTOR, ".chart polyline").get_attribute("points") or ""
    assert len(rates.split()) >= 2  # messages per second between samples of the published count
    shot(browser, console, "topic-chart")


def test_the_message_browser_starts_where_asked_and_downloads_what_it_shows(
    console: Console, browser: WebDriver, tmp_path: Path
) -> None:
    client = console.client
    everything = list(client.fetch(ORDERS))
    sign_in(browser, console, TOKENS["ops"])

    def shown() -> list[str]:
        return [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr")]

    middle = everything[3]
    show(browser, console, f"messages/shop/orders?mode=id&value={middle.id.hex()}&format=hex&limit=2", "messages")
    assert shown() == [m.id.hex() for m in everything[3:5]]
    start = everything[-1].publish_time  # the last batch: from its publish time on
    later = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start / 1000)) + f".{start % 1000:03d}"  # UTC
    show(browser, console, f"messages/shop/orders?mode=time&value={later}&format=text&limit=100", "messages")
    expected = [m.id.hex() for m in client.fetch(ORDERS, start_time_ms=start)]
    assert shown() == expected and len(expected) < len(everything)

    browser.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)})
    browser.find_element(By.ID, "download").click()
    saved = tmp_path / "shop-orders-messages.json"
    data = json.loads(wait_for_page(lambda: saved.exists() and saved.read_text(), "the download"))
    assert [m["id"] for m in data["messages"]] == expected
    assert [bytes.fromhex(m["payload"]) for m in data["messages"]] == [m.payload for m in everything[-len(expected) :]]


def test_bad_input_to_the_json_endpoints_is_a_400(console: Console) -> None:
    """Arrays nested 30,000 deep and a time past a 64-bit integer are bad input, not server errors."""
    with httpx.Client(base_url=console.url, timeout=60) as http:
        assert http.post("/console/login", json={"token": TOKENS["ops"]}).status_code == 200
        csrf = {"X-CSRF-Token": http.get("/console/api/session").json()["csrf"], "Content-Type": "application/json"}
        nested = http.put("/console/api/topics/shop/deep", content=b"[" * 30_000, headers=csrf)
        assert nested.status_code == 400 and "nested too deeply" in nested.text
        preview = "/console/api/topics/shop/orders/subscriptions/billing/preview"
        assert http.post(preview, json={"start": -(10**20)}, headers=csrf).status_code == 400
        for query in ("time=-99999999999999999999", "last=99999999999999999999", "limit=1e400"):
            assert http.get(f"/console/api/topics/shop/orders/messages?{query}").status_code == 400, query
        for query in ("sort=nope", "size=1000", "page=-1", "desc=maybe"):
            for path in ("/console/api/topic-page", "/console/api/subscription-page"):
                assert http.get(f"{path}?{query}").status_code == 400, (path, query)
    assert TopicId("shop", "deep") not in console.client.list_topics("shop")


def test_a_deadline_out_of_range_is_shown_not_an_error(console: Console, browser: WebDriver) -> None:
    """A deadline no bound stops any more (an earlier version stored ``nack(delay_seconds=1e300)``):
    the subscription screen shows it as its number."""
    client = console.client
    client.create_subscription(ORDERS, "far", shared=True, ack_timeout_seconds=600)
    with client.shared_consumer(ORDERS, "far") as consumer:
        (d,) = consumer.receive(1, 5)
        stored = consumer._held.pop(d.id)
        far = replace(stored.claim, state=ClaimState.FREE, owner=None, deadline=int(1e300 * 1000))
        assert consumer._store.swap_claim(consumer._keys, d.id, stored.data, far) is not None
    sign_in(browser, console, TOKENS["ops"])
    show(browser, console, "subscriptions/shop/orders/far", "subscription")
    row = text(browser, "in-flight").splitlines()[-1]
    assert row.startswith(d.id.hex()) and "1e+303 ms (out of range)" in row


def modal_shown(browser: WebDriver) -> bool:
    return bool(browser.execute_script("return !document.getElementById('modal').hidden"))


def test_a_dialog_closes_with_the_screen_that_opened_it(console: Console, browser: WebDriver) -> None:
    """The issue's case: Reset → Preview… on one subscription, then the browser's Back button: the screen
    below is another subscription, and the dialog must be gone with the screen that opened it, so its Reset
    button cannot reset anything. Typing another address closes it too."""
    client = console.client
    client.create_subscription(ORDERS, "undo")
    with client.consumer(ORDERS, "undo", max_wait_seconds=1) as consumer:
        consumer.commit(consumer.poll(2, timeout_seconds=5)[-1])
    before = {name: client.lag(topic, name).messages for topic, name in ((ORDERS, "undo"), (PAYMENTS, "audit"))}
    sign_in(browser, console, TOKENS["ops"])
    show(browser, console, "subscriptions/shop/payments/audit", "subscription")
    browser.execute_script("location.hash = '#/subscriptions/shop/orders/undo'")
    wait_for_page(lambda: "Subscription undo of shop:orders" in text(browser, "screen"), "the subscription undo")
    Select(browser.find_element(By.ID, "reset-mode")).select_by_value("latest")
    browser.find_element(By.ID, "preview").click()
    wait_for_page(lambda: browser.find_element(By.ID, "reset-preview"), "the preview")
    title = browser.find_element(By.CSS_SELECTOR, "#modal-body h2").text
    browser.back()
    wait_for_page(lambda: "Subscription audit of shop:payments" in text(browser, "screen"), "the screen before")
    wait_for_page(lambda: not modal_shown(browser), "the dialog to close")
    assert title == "Reset subscription shop:orders/undo"  # it named its target
    assert browser.find_elements(By.ID, "confirm") == []  # no Reset button left to press
    after = {name: client.lag(topic, name).messages for topic, name in ((ORDERS, "undo"), (PAYMENTS, "audit"))}
    assert after == before

    browser.forward()  # the same with an address typed: the dialog goes with its screen
    wait_for_page(lambda: "Subscription undo of shop:orders" in text(browser, "screen"), "the subscription undo")
    browser.find_element(By.ID, "preview").click()
    wait_for_page(lambda: modal_shown(browser), "the dialog")
    browser.get(f"{console.url}/console/#/topics/shop/payments")
    wait_for_page(lambda: "Topic shop:payments" in text(browser, "screen"), "the topic typed")
    assert not modal_shown(browser)
    assert client.lag(ORDERS, "undo").messages == before["undo"]


CHANGE = """const [method, path, body, done] = arguments;
(async () => {
  const session = await (await fetch("/console/api/session")).json();
  const sent = await fetch("/console/api" + path, {method,
    headers: {"X-CSRF-Token": session.csrf, "Content-Type": "application/json"}, body: JSON.stringify(body)});
  return [sent.status, await sent.text()];
})().then(done);"""


def test_a_change_for_another_target_changes_nothing(console: Console, browser: WebDriver) -> None:
    """Every change carries the target its confirmation named; the server refuses one that names another
    (or none), whatever the page did."""
    client = console.client
    client.create_subscription(ORDERS, "guarded")
    before = client.lag(ORDERS, "guarded").messages
    sign_in(browser, console, TOKENS["ops"])
    reset = "/topics/shop/orders/subscriptions/guarded/reset"
    for body in ({"start": "latest", "target": "shop:orders/billing"}, {"start": "latest"}):
        status, answer = browser.execute_async_script(CHANGE, "POST", reset, body)
        assert status == 400 and ("not shop:orders/guarded" in answer or "must name its target" in answer)
    assert client.lag(ORDERS, "guarded").messages == before > 0
    status, answer = browser.execute_async_script(CHANGE, "DELETE", "/topics/shop/orders", {"target": "shop:payments"})
    assert status == 400 and "confirmed for shop:payments, not shop:orders" in answer
    update = {"properties": {"ttl": "5"}, "target": "shop:payments"}
    assert browser.execute_async_script(CHANGE, "PUT", "/topics/shop/orders/properties", update)[0] == 400
    assert client.get_topic(ORDERS).ttl == 86400
    status, _ = browser.execute_async_script(
        CHANGE, "POST", reset, {"start": "latest", "target": "shop:orders/guarded"}
    )
    assert status == 200 and client.lag(ORDERS, "guarded").messages == 0


def cells(browser: WebDriver, table: str, column: int) -> list[str]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")
    return [r.find_elements(By.TAG_NAME, "td")[column].text for r in rows]


def sort_by(browser: WebDriver, table: str, column: str) -> None:
    """Press a column's header (a button: the keyboard reaches it) and wait for the list sorted by it."""
    browser.find_element(By.CSS_SELECTOR, f'#{table} th button[data-sort="{column}"]').click()
    wait_for_page(
        lambda: browser.find_element(By.CSS_SELECTOR, f'#{table} th[aria-sort] button[data-sort="{column}"]'),
        f"{table} sorted by {column}",
    )


def test_the_lists_show_each_topics_and_subscriptions_numbers(console: Console, browser: WebDriver) -> None:
    """The topic list shows each topic's size and worst lag, sorted by any column and filtered; the
    subscriptions screen lists every topic's subscriptions with their lag, kind and dead letters; the
    overview adds the totals and the slowest subscriptions."""
    client = console.client
    sign_in(browser, console, TOKENS["ops"])
    messages = client.topic_stats(ORDERS).messages
    worst = max(client.lag(ORDERS, s.name).messages for s in client.list_subscriptions(ORDERS))

    def orders_row() -> bool:
        """The list as loaded now: the console serves a topic's numbers read up to a few seconds ago (and
        reads them again behind), and the tests before this one consumed through the library."""
        show(browser, console, "topics", "topics")
        orders = browser.find_element(By.CSS_SELECTOR, '#topics tr[data-topic="shop:orders"]').text.split()
        return orders[1] == str(messages) and str(worst) in orders

    wait_for_page(orders_row, "shop:orders's messages and worst lag as the library reads them", timeout=120)
    sort_by(browser, "topics", "messages")  # numbers sort the largest first
    counts = [int(c) for c in cells(browser, "topics", 1)]
    assert counts == sorted(counts, reverse=True) and counts[0] >= messages
    browser.find_element(By.ID, "topics-filter").send_keys("shop:pay")
    wait_for_page(lambda: cells(browser, "topics", 0) == ["shop:payments"], "the filtered list")

    show(browser, console, "subscriptions", "subscriptions")
    shown = {
        r.get_attribute("data-subscription"): r.text
        for r in browser.find_elements(By.CSS_SELECTOR, "#all-subscriptions tbody tr")
    }
    assert "shop:orders/billing" in shown and "shop:payments/audit" in shown
    assert shown["shop:orders/billing"].split()[2:4] == ["exclusive", str(client.lag(ORDERS, "billing").messages)]
    assert "shared" in shown["shop:orders/workers"]
    sort_by(browser, "all-subscriptions", "lag_messages")
    lags = [int(c) for c in cells(browser, "all-subscriptions", 3) if c]
    assert lags == sorted(lags, reverse=True) and len(lags) >= 3
    shot(browser, console, "subscriptions")

    show(browser, console, "overview", "overview")
    totals = text(browser, "totals")
    assert f"{len(client.list_topics())}" in totals.split()
    slowest = text(browser, "slowest")
    assert len(slowest.splitlines()) >= 2  # a header and the subscriptions furthest behind


def test_a_shared_subscription_shows_its_scheduled_messages_late_settlements_and_key_order(
    console: Console, browser: WebDriver
) -> None:
    """A key-ordered shared subscription with a message scheduled an hour ahead and an acknowledgement refused
    as late: its screen shows the scheduled count with the next one's time, the late settlements and the key
    order, and the list of every subscription its kind, scheduled and late counts, the numbers
    ``client.get_subscription(...).shared`` gives."""
    client, jobs = console.client, TopicId("shop", "jobs")
    client.create_topic(jobs)
    client.create_subscription(jobs, "reminders", shared=True, ordering="key", ack_timeout_seconds=600)
    due = client.hbase_clock.now_ms() + 3_600_000
    client.publish(jobs, [Record(b"remind me", key=b"a", headers=[deliver_at(due)]), Record(b"now", key=b"b")])
    with client.shared_consumer(jobs, "reminders", max_wait_seconds=0) as consumer:
        taken: list = []
        wait_for_page(lambda: taken.extend(consumer.receive(1, timeout_seconds=1)) or taken, "the unscheduled message")
        assert [d.payload for d in taken] == [b"now"]
        consumer.ack(taken[0])
        with pytest.raises(NotHeld):
            consumer.ack(taken[0])  # settled already: refused, counted as a late settlement
    numbers = client.get_subscription(jobs, "reminders").shared
    assert numbers is not None
    assert (numbers.scheduled, numbers.next_scheduled_ms, numbers.late_acks, numbers.ordering) == (1, due, 1, "key")

    sign_in(browser, console, TOKENS["ops"])
    show(browser, console, "subscriptions/shop/jobs/reminders", "subscription")
    next_due = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(due // 1000))
    assert text(browser, "shared-scheduled").startswith(f"{numbers.scheduled} (the next {next_due}, in ")
    assert text(browser, "shared-late-acks") == str(numbers.late_acks)
    assert text(browser, "shared-ordering").startswith("by key")
    axe = Axe(browser)
    axe.inject()
    assert serious_only(axe.run()["violations"]) == []

    show(browser, console, "subscriptions", "subscriptions")
    browser.find_element(By.ID, "all-subscriptions-filter").send_keys("shop:jobs")
    row = '#all-subscriptions tr[data-subscription="shop:jobs/reminders"]'
    wait_for_page(lambda: cells(browser, "all-subscriptions", 1) == ["reminders"], "the filtered list")
    shown = [td.text for td in browser.find_element(By.CSS_SELECTOR, row).find_elements(By.TAG_NAME, "td")]
    assert shown[2] == "shared, key order"
    assert shown[-2:] == [str(numbers.scheduled), str(numbers.late_acks)]


def test_the_overview_shows_recent_sweeps_and_the_transactions_holding_consumers_back(
    console: Console, browser: WebDriver
) -> None:
    """The overview lists the latest complete region sweeps with their rows (from the sweeper's records), and
    in words the transactions in progress (oldest first, with when each started) and the subscriptions that
    wait for one, with how many messages it holds back."""
    client = console.client
    sign_in(browser, console, TOKENS["ops"])
    show(browser, console, "overview", "overview")
    swept = sorted(
        (r for r in sweeper_state(client.installation)["regions"] if r["completed"] is not None),
        key=lambda r: -r["completed"],
    )
    rows = browser.find_elements(By.CSS_SELECTOR, "#recent-sweeps tbody tr")
    shown = [(cells[0].text, cells[2].text) for cells in (r.find_elements(By.TAG_NAME, "td") for r in rows)]
    assert shown == [(r["region"], str(r["rows"])) for r in swept[:5]]
    assert swept and sum(r["rows"] for r in swept) > 0
    opened = text(browser, "open-transactions")
    in_progress = sorted(client.admin.tx_state().in_progress)
    assert f"{len(in_progress)} transaction" in opened and f"Transaction {console.open_tx}, open since" in opened
    assert opened.index(str(in_progress[0])) < opened.index("open since")  # the oldest first
    held = client.lag(PAYMENTS, "audit").held
    assert held == 2  # "pending 1" and "pending 2", of the transaction left open
    held_rows = browser.find_elements(By.CSS_SELECTOR, "#held tbody tr")
    waiting = {r.find_elements(By.TAG_NAME, "td")[0].text: r.text for r in held_rows}
    assert "shop:payments" in waiting["audit"] and f"{held} messages wait for a transaction" in waiting["audit"]
    shot(browser, console, "overview")


def test_produce_publishes_one_message_for_a_publisher_only(console: Console, browser: WebDriver) -> None:
    """A principal with publish rights produces a message with a key and headers, and one in a transaction
    of its own (committed: a transactional reader sees it); a read-only one gets no form and a 403."""
    client = console.client
    before = {m.id for m in client.fetch(ORDERS)}
    sign_in(browser, console, TOKENS["viewer"])
    show(browser, console, "topics/shop/orders", "topic")
    assert not browser.find_elements(By.ID, "produce-link")
    show(browser, console, "produce/shop/orders", "produce")
    assert text(browser, "produce-refused") == "viewer may not publish to shop:orders."
    body = {"target": "shop:orders", "payload": "sneaky", "encoding": "text"}
    status, _ = browser.execute_async_script(CHANGE, "POST", "/topics/shop/orders/publish", body)
    assert status == 403 and {m.id for m in client.fetch(ORDERS)} == before

    sign_in(browser, console, TOKENS["shopops"])
    show(browser, console, "topics/shop/orders", "topic")
    browser.find_element(By.ID, "produce-link").click()
    wait_for_page(lambda: browser.execute_script("return document.body.dataset.ready") == "produce", "the form")
    browser.find_element(By.ID, "produce-payload").send_keys('{"order": 99}')
    Select(browser.find_element(By.ID, "produce-encoding")).select_by_value("json")
    browser.find_element(By.ID, "produce-key").send_keys("order-99")
    browser.find_element(By.ID, "produce-headers").send_keys("source: console\ntrace: abc")
    browser.find_element(By.ID, "produce-send").click()
    wait_for_page(lambda: browser.find_element(By.ID, "produce-preview"), "the confirmation")
    assert browser.find_element(By.CSS_SELECTOR, "#modal-body h2").text == "Publish to shop:orders"
    assert {m.id for m in client.fetch(ORDERS)} == before  # nothing until confirmed
    confirm(browser)
    new = wait_for_page(lambda: [m for m in client.fetch(ORDERS) if m.id not in before], "the message")
    assert [(m.payload, m.key, m.headers) for m in new] == [
        (b'{"order": 99}', b"order-99", (("source", b"console"), ("trace", b"abc")))
    ]
    assert f"Published message {new[0].id.hex()}." == text(browser, "produce-result")

    paid = {m.id for m in client.fetch(PAYMENTS)}
    show(browser, console, "produce/shop/payments", "produce")
    browser.find_element(By.ID, "produce-payload").send_keys(base64.b64encode(b"\x00paid 2").decode())
    Select(browser.find_element(By.ID, "produce-encoding")).select_by_value("base64")
    browser.find_element(By.ID, "produce-tx").click()
    browser.find_element(By.ID, "produce-send").click()
    confirm(browser)
    wait_for_page(lambda: "in transaction" in text(browser, "produce-result"), "the transactional publish")
    (new,) = [m for m in client.fetch(PAYMENTS) if m.id not in paid]
    assert new.payload == b"\x00paid 2"
    show(browser, console, "messages/shop/payments?mode=last&value=1&format=text&limit=1", "messages")
    row = browser.find_element(By.CSS_SELECTOR, "#messages tbody tr")  # its transaction committed at once
    assert row.text.split()[0] == new.id.hex() and row.get_attribute("data-state") == "committed"
    assert "console: shopops published message" in console.gateway.log()


PUBLISH_ONE = """import sys
from tms_hbase import MessagingClient, Record, TopicId
with MessagingClient(sys.argv[1], sys.argv[2]) as client:
    client.publish(TopicId("shop", "live"), [Record(sys.argv[3].encode(), key=b"k", headers=[("from", b"elsewhere")])])
"""


def publish_elsewhere(console: Console, payload: str) -> None:
    """Publish one message to shop:live from another process, as another application would."""
    installation = console.client.installation
    args = [sys.executable, "-c", PUBLISH_ONE, installation.address, installation.prefix, payload]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_live_tail_shows_what_another_process_publishes(console: Console, browser: WebDriver) -> None:
    client, live = console.client, TopicId("shop", "live")
    client.create_topic(live)
    client.publish(live, [b"before the tail"])
    sign_in(browser, console, TOKENS["viewer"])
    show(browser, console, "tail/shop/live", "tail")

    def tailed() -> list[str]:
        return [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#tail td.payload")]

    publish_elsewhere(console, "first from elsewhere")
    wait_for_page(lambda: tailed() == ["first from elsewhere"], "the message in the tail", timeout=60)
    row = browser.find_element(By.CSS_SELECTOR, "#tail tbody tr").text
    assert "from: elsewhere" in row  # its key and headers are shown too
    assert row.split()[0] == list(client.fetch(live))[-1].id.hex()
    browser.find_element(By.ID, "tail-pause").click()
    wait_for_page(lambda: "Paused" in text(browser, "tail-status"), "the pause")
    publish_elsewhere(console, "while paused")
    browser.find_element(By.ID, "tail-pause").click()  # resumed: from where it paused, nothing missed
    wait_for_page(lambda: tailed() == ["first from elsewhere", "while paused"], "the message published meanwhile")
    shot(browser, console, "tail")


def test_search_finds_a_key_header_or_payload_within_a_range(console: Console, browser: WebDriver) -> None:
    needle = fill_haystack(console.client, TopicId("shop", "haystack"), 20)
    sign_in(browser, console, TOKENS["viewer"])
    show(browser, console, "search/shop/haystack", "search")

    def search(what: str, where: str) -> list[str]:
        field = browser.find_element(By.ID, "search-text")
        field.clear()
        field.send_keys(what)
        Select(browser.find_element(By.ID, "search-in")).select_by_value(where)
        browser.find_element(By.ID, "search-go").click()
        wait_for_page(lambda: text(browser, "search-progress").endswith("."), "the search to end", timeout=120)
        return [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#search-results tbody tr")]

    assert search("needle-key", "key") == [needle.id.hex()]
    assert text(browser, "search-progress") == "Scanned 20000 messages, found 1."  # every message, in steps
    assert search("needle-trace", "header") == [needle.id.hex()]
    assert search("the needle", "payload") == [needle.id.hex()]
    limit = browser.find_element(By.ID, "search-limit")  # bounded: reads at most what it is told to
    limit.clear()
    limit.send_keys("7000")
    assert search("needle-key", "key") == []
    assert text(browser, "search-progress").startswith("Scanned 7000 messages, found 0 (stopped at the limit")


SCREENS = (
    ("overview", "overview"),
    ("topics", "topics"),
    ("topics/shop/orders", "topic"),
    ("messages/shop/payments?mode=last&value=10&format=text&limit=100", "messages"),
    ("subscriptions", "subscriptions"),
    ("subscriptions/shop/orders", "subscriptions"),
    ("subscriptions/shop/orders/billing", "subscription"),
    ("subscriptions/shop/orders/workers", "subscription"),
    ("produce/shop/orders", "produce"),
    ("tail/shop/orders", "tail"),
    ("search/shop/orders", "search"),
    ("transactions", "transactions"),
    ("sweeper", "sweeper"),
)


def serious_only(violations: list[dict]) -> list[dict]:
    return [v for v in violations if v["impact"] in ("serious", "critical")]


def test_every_screen_passes_an_accessibility_check(console: Console, browser: WebDriver) -> None:
    """axe-core (the rules browsers' accessibility audits use) finds no serious or critical violation on any
    screen, nor on the login page or an open dialog."""
    sign_in(browser, console, TOKENS["shopops"])
    axe = Axe(browser)
    found = {}
    for route, screen in SCREENS:
        show(browser, console, route, screen)
        axe.inject()
        found[route] = serious_only(axe.run()["violations"])
    show(browser, console, "subscriptions/shop/orders/billing", "subscription")
    browser.find_element(By.ID, "preview").click()  # a dialog: the reset's preview
    wait_for_page(lambda: browser.find_element(By.ID, "reset-preview"), "the dialog")
    axe.inject()
    found["the reset dialog"] = serious_only(axe.run()["violations"])
    browser.delete_all_cookies()
    browser.get(console.url + "/console/login")
    axe.inject()
    found["login"] = serious_only(axe.run()["violations"])
    serious = {
        where: [f"{v['id']}: {v['help']} {[n['target'] for n in v['nodes']][:3]}" for v in violations]
        for where, violations in found.items()
    }
    serious = {where: found for where, found in serious.items() if found}
    assert serious == {}


def tab_to(browser: WebDriver, selector: str, most: int = 80) -> None:
    """Press Tab until the element ``selector`` has the focus (as a keyboard user reaches it)."""
    target = browser.find_element(By.CSS_SELECTOR, selector)
    for _ in range(most):
        if browser.switch_to.active_element == target:
            return
        browser.switch_to.active_element.send_keys(Keys.TAB)
    raise AssertionError(f"{selector} is not reachable with Tab")


def test_the_console_works_with_the_keyboard_only(console: Console, browser: WebDriver) -> None:
    """Sign in, sort a list, open a subscription, preview a reset, close the dialog with Escape, and reset,
    with keys only."""
    client = console.client
    client.create_subscription(ORDERS, "keys", start="latest")
    browser.delete_all_cookies()
    browser.get(console.url + "/console/")
    wait_for_page(lambda: browser.find_element(By.ID, "token"), "the login form")
    browser.find_element(By.ID, "token").send_keys(TOKENS["ops"] + Keys.ENTER)
    wait_for_page(lambda: browser.execute_script("return document.body.dataset.ready") == "overview", "the overview")

    link = '#all-subscriptions a[href="#/subscriptions/shop/orders/keys"]'

    def listed() -> bool:  # the list shows a topic's numbers as the worker read them lately
        show(browser, console, "subscriptions", "subscriptions")
        return bool(browser.find_elements(By.CSS_SELECTOR, link))

    wait_for_page(listed, "the new subscription in the list", timeout=60)
    tab_to(browser, '#all-subscriptions th button[data-sort="lag_messages"]')
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    wait_for_page(lambda: browser.find_element(By.CSS_SELECTOR, "#all-subscriptions th[aria-sort]"), "the sort")
    wait_for_page(lambda: browser.find_element(By.CSS_SELECTOR, link), "the sorted list")
    tab_to(browser, link, most=200)
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    wait_for_page(lambda: "Subscription keys of shop:orders" in text(browser, "screen"), "the subscription")

    tab_to(browser, "#preview")
    browser.switch_to.active_element.send_keys(Keys.ENTER)  # the reset to earliest: its preview
    wait_for_page(lambda: modal_shown(browser), "the dialog")
    assert browser.switch_to.active_element == browser.find_element(By.ID, "cancel")  # the focus moved into it
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)
    wait_for_page(lambda: not modal_shown(browser), "the dialog closed by Escape")
    wait_for_page(  # back where it was (the page moves the focus once the dialog has gone)
        lambda: browser.switch_to.active_element == browser.find_element(By.ID, "preview"), "the focus back on Preview"
    )
    assert client.lag(ORDERS, "keys").messages == 0  # Escape reset nothing

    browser.switch_to.active_element.send_keys(Keys.ENTER)
    wait_for_page(lambda: modal_shown(browser), "the dialog")
    browser.switch_to.active_element.send_keys(Keys.TAB)
    assert browser.switch_to.active_element == browser.find_element(By.ID, "confirm")
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    total = client.topic_stats(ORDERS).messages
    wait_for_page(lambda: client.lag(ORDERS, "keys").messages == total, "the reset")
