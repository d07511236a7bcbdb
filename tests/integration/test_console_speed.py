"""The console stays quick on a big installation: with 1,000 topics and 100 subscriptions on one topic, each
screen that lists them is on the page within 300 ms of the navigation, measured by the browser itself.

The time is the ``tms-console-ready`` mark (the performance API: milliseconds since the navigation started)
that the page sets once the screen's data is drawn: HTML, scripts, the JSON calls to the gateway and the
library's reads of HBase, and the rendering. Each screen is loaded once to warm up, then
:data:`LOADS` times; the median must be under the bound, so one load slowed by the other processes of
a busy machine does not decide it. The load average is printed with the figures.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tms_hbase import MessagingClient, TopicId
from tms_hbase_gateway.auth import hash_token, new_token

from ..browser import chromium, wait_for_page
from ..gateway_server import GatewayProcess, gateway_env

TOPICS, SUBSCRIPTIONS, LOADS, BOUND_MS = 1000, 100, 7, 300.0
BUSY = TopicId("load", "busy")
TOKEN = new_token()


@dataclass
class Installation:
    url: str
    client: MessagingClient


@pytest.fixture(scope="module")
def big(hbase_address: str, module_prefix: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installation]:
    folder = tmp_path_factory.mktemp("console-speed")
    env = gateway_env(hbase_address, module_prefix)
    with MessagingClient(hbase_address, module_prefix, pool_size=8, create_tables=True) as client:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: client.create_topic(TopicId("load", f"topic-{n:04d}")), range(TOPICS - 1)))
        client.create_topic(BUSY)
        for batch in range(10):
            client.publish(BUSY, [f"message {batch}-{n}".encode() for n in range(100)])
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: client.create_subscription(BUSY, f"sub-{n:03d}"), range(SUBSCRIPTIONS)))
        assert len(client.list_topics("load")) == TOPICS
        config = folder / "gateway.toml"
        config.write_text(f'[[tokens]]\nname = "ops"\nsha256 = "{hash_token(TOKEN)}"\n')
        gateway = GatewayProcess(env, folder / "gateway.log", "--config", str(config)).start()
        try:
            yield Installation(gateway.url, client)
        finally:
            assert gateway.stop() == 0, gateway.log()


@pytest.fixture(scope="module")
def browser(big: Installation) -> Iterator[WebDriver]:
    with chromium() as driver:
        driver.get(big.url + "/console/login")
        driver.find_element(By.ID, "token").send_keys(TOKEN)
        driver.find_element(By.ID, "sign-in").click()
        wait_for_page(lambda: driver.execute_script("return document.body.dataset.ready") == "overview", "the overview")
        yield driver


def load_ms(browser: WebDriver, url: str, screen: str) -> float:
    """One fresh page load of ``url``: milliseconds from the navigation to the screen's data drawn."""
    browser.get("about:blank")
    browser.get(url)
    wait_for_page(
        lambda: browser.execute_script("return document.body.dataset.ready") == screen, f"the {screen} screen"
    )
    mark = browser.execute_script("return performance.getEntriesByName('tms-console-ready')[0].startTime")
    assert browser.execute_script("return performance.getEntriesByType('navigation')[0].type") == "navigate"
    return float(mark)


@pytest.mark.parametrize(
    ("route", "screen", "rows", "count"),
    [
        ("topics", "topics", "#topics tbody tr", 100),  # the first page of the 1,000
        (f"topics/{BUSY.namespace}/{BUSY.topic}", "topic", "#topic-subscriptions tbody tr", SUBSCRIPTIONS),
        (f"subscriptions/{BUSY.namespace}/{BUSY.topic}", "subscriptions", "#subscriptions tbody tr", SUBSCRIPTIONS),
    ],
)
def test_a_screen_loads_within_300_ms(
    big: Installation, browser: WebDriver, route: str, screen: str, rows: str, count: int, capsys: pytest.CaptureFixture
) -> None:
    url = f"{big.url}/console/#/{route}"
    first = load_ms(browser, url, screen)  # the worker's first reads: no recent answer to show yet
    assert len(browser.find_elements(By.CSS_SELECTOR, rows)) == count
    times = [load_ms(browser, url, screen) for _ in range(LOADS)]
    median = statistics.median(times)
    loads = ", ".join(f"{t:.0f}" for t in times)
    with capsys.disabled():
        print(
            f"\nconsole {screen} with {TOPICS} topics, {SUBSCRIPTIONS} subscriptions on one: median {median:.0f} ms"
            f" (loads {loads}; the first, cold: {first:.0f} ms), load average"
            f" {' '.join(Path('/proc/loadavg').read_text().split()[:3])} on {os.cpu_count()} cores"
        )
    assert median < BOUND_MS, f"median load {median:.0f} ms of {times}"
