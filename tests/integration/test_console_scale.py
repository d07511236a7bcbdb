"""The console past the size it sorts in one request, in headless Chromium against a real ``tms-gateway`` on a
real HBase: twice :data:`SORT_LIMIT` topics and 1,000 subscriptions listed, paged and sorted (a sort by a number
then reads every topic's numbers in the background); a key found among 100,000 messages. bench/console.py
times the same screens at 10,000 topics.

The topics that hold messages and subscriptions come last by name, so a list that sorted only what it read
first (a page, or the first :data:`SORT_LIMIT` topics) would show others on top.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tms_hbase import MessagingClient, TopicId
from tms_hbase_gateway.console.lists import SORT_LIMIT

from ..browser import chromium, wait_for_page
from ..gateway_server import GatewayProcess, gateway_env
from ..haystack import fill_haystack

pytestmark = pytest.mark.slow  # creating 2,000 topics takes minutes on a loaded machine

TOPICS = 2 * SORT_LIMIT
BUSY = 100  # the last topics by name: topic i of them holds i + 1 messages and 10 subscriptions
PER_TOPIC = 10
PAGE = 50


def name(n: int) -> TopicId:
    return TopicId("big", f"t-{n:05d}")


@dataclass
class Big:
    url: str
    client: MessagingClient


@pytest.fixture(scope="module")
def big(hbase_address: str, module_prefix: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Big]:
    folder = tmp_path_factory.mktemp("console-scale")
    # Eight threads share the client's eight connections: at load 26 a thread waited more than the default 10 s
    # for a free one. The set-up is not what is tested, so it gets a deadline that holds at any load.
    with MessagingClient(hbase_address, module_prefix, create_tables=True, timeout_seconds=180) as client:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: client.create_topic(name(n)), range(TOPICS)))
        busy = [name(n) for n in range(TOPICS - BUSY, TOPICS)]
        for i, topic in enumerate(busy):
            client.publish(topic, [f"message {m}".encode() for m in range(i + 1)])
        subscriptions = [(topic, f"s-{s}") for topic in busy for s in range(PER_TOPIC)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda ts: client.create_subscription(*ts), subscriptions))
        gateway = GatewayProcess(gateway_env(hbase_address, module_prefix), folder / "gateway.log").start()
        try:
            yield Big(gateway.url, client)
        finally:
            assert gateway.stop() == 0, gateway.log()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def show(browser: WebDriver, big: Big, route: str, screen: str) -> None:
    browser.get(f"{big.url}/console/#/{route}")
    browser.refresh()
    wait_for_page(lambda: browser.execute_script("return document.body.dataset.ready") == screen, screen, 300)


def cells(browser: WebDriver, table: str, column: int) -> list[str]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")
    return [r.find_elements(By.TAG_NAME, "td")[column].text for r in rows]


def sort_by(browser: WebDriver, table: str, column: str, timeout: float = 300) -> None:
    browser.find_element(By.CSS_SELECTOR, f'#{table} th button[data-sort="{column}"]').click()
    wait_for_page(
        lambda: browser.find_element(By.CSS_SELECTOR, f'#{table} th[aria-sort] button[data-sort="{column}"]'),
        f"{table} sorted by {column}",
        timeout,
    )


def count(browser: WebDriver, table: str) -> str:
    return browser.find_element(By.ID, f"{table}-count").text


def test_more_topics_than_a_sort_reads_at_once_are_listed_paged_and_sorted(big: Big, browser: WebDriver) -> None:
    show(browser, big, "topics", "topics")
    browser.find_element(By.ID, "topics-filter").send_keys("big:t-")  # the search test's topic left out
    expected = f"{TOPICS:,} topics, page 1 of {TOPICS // PAGE}"
    first = [str(name(n)) for n in range(PAGE)]
    wait_for_page(lambda: count(browser, "topics") == expected and cells(browser, "topics", 0) == first, "filtered")
    sort_by(browser, "topics", "name")  # again: the other way
    wait_for_page(lambda: cells(browser, "topics", 0)[0] == str(name(TOPICS - 1)), "the last topic first")
    browser.find_element(By.ID, "topics-next").click()
    second = [str(name(TOPICS - 1 - n)) for n in range(PAGE, 2 * PAGE)]
    wait_for_page(lambda: "page 2 of" in count(browser, "topics") and cells(browser, "topics", 0) == second, "page 2")

    sort_by(browser, "topics", "messages")  # every topic's numbers are needed: read in the background
    wait_for_page(lambda: browser.find_element(By.ID, "topics-progress").text == "", "every topic's numbers", 900)
    wait_for_page(lambda: "page 1 of" in count(browser, "topics"), "page 1")
    top = [name(n) for n in range(TOPICS - 1, TOPICS - 1 - PAGE, -1)]
    wait_for_page(lambda: cells(browser, "topics", 0) == [str(t) for t in top], "the biggest topics first")
    assert [int(c) for c in cells(browser, "topics", 1)] == [big.client.topic_stats(t).messages for t in top]
    assert cells(browser, "topics", 1)[0] == str(BUSY)


def test_a_thousand_subscriptions_are_listed_paged_and_sorted(big: Big, browser: WebDriver) -> None:
    show(browser, big, "subscriptions", "subscriptions")
    total = BUSY * PER_TOPIC
    assert count(browser, "all-subscriptions") == f"{total:,} subscriptions, page 1 of {total // PAGE}"
    first = name(TOPICS - BUSY)
    assert cells(browser, "all-subscriptions", 0)[:PER_TOPIC] == [str(first)] * PER_TOPIC

    sort_by(browser, "all-subscriptions", "lag_messages")  # the largest first
    wait_for_page(
        lambda: cells(browser, "all-subscriptions", 0)[:PER_TOPIC] == [str(name(TOPICS - 1))] * PER_TOPIC,
        "the subscriptions furthest behind first",
    )
    lags = [int(c) for c in cells(browser, "all-subscriptions", 3)]
    assert lags == sorted(lags, reverse=True) and lags[0] == big.client.lag(name(TOPICS - 1), "s-0").messages == BUSY
    browser.find_element(By.ID, "all-subscriptions-next").click()
    wait_for_page(
        lambda: (
            "page 2 of" in count(browser, "all-subscriptions")
            and max(int(c) for c in cells(browser, "all-subscriptions", 3)) <= lags[-1]
        ),
        "page 2, further down",
    )


def test_search_finds_a_key_among_a_hundred_thousand_messages(big: Big, browser: WebDriver) -> None:
    """The search reads the topic in bounded steps, with its progress, until it has read every message."""
    hay = TopicId("hay", "stack")
    needle = fill_haystack(big.client, hay, 100)
    assert big.client.topic_stats(hay).messages == 100_000
    show(browser, big, "search/hay/stack", "search")
    browser.find_element(By.ID, "search-text").send_keys("needle-key")
    Select(browser.find_element(By.ID, "search-in")).select_by_value("key")
    browser.find_element(By.ID, "search-go").click()
    progress = browser.find_element(By.ID, "search-progress")
    wait_for_page(lambda: progress.text.endswith("."), "the search to end", 600)
    assert progress.text == "Scanned 100000 messages, found 1."
    shown = [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#search-results tbody tr")]
    assert shown == [needle.id.hex()]
