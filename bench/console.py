"""The web console's screen times on a big installation: each screen that lists topics or subscriptions is on
the page within 300 ms of the navigation (goal), with 1,000 topics and 100 subscriptions on one topic (200
topics and 20 subscriptions with --quick).

A real ``tms-gateway`` (open: no tokens) serves the console to headless Chromium (Debian's, as the console's
tests use: tests/browser.py). The time of one load is the ``tms-console-ready`` mark (the performance API:
milliseconds since the navigation started) that the page sets once the screen's data is drawn: HTML,
scripts, the JSON calls to the gateway and the library's reads of HBase, and the rendering. Each screen is
loaded once to warm up (the gateway's first reads), then 7 times a round (3 with --quick); the goal is on
the median of all of a screen's loads. Figures from a loaded machine mean little: the load average is noted.
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser import chromium, wait_for_page
from tms_hbase import TopicId

from .common import Result, Settings, bench_tables, median, percentile, progress
from .gateway import start_gateway

GOAL_MS = 300.0
BUSY = TopicId("load", "busy")
SCREENS = (  # (route, the screen's name in data-ready, the rows it lists)
    ("topics", "topics", "#topics tbody tr"),  # the first page of the topics
    (f"topics/{BUSY.namespace}/{BUSY.topic}", "topic", "#topic-subscriptions tbody tr"),
    (f"subscriptions/{BUSY.namespace}/{BUSY.topic}", "subscriptions", "#subscriptions tbody tr"),
)
TOPICS_PAGE = 50  # topics on the first page of the topics screen


def run(settings: Settings) -> Result:
    topics, subscriptions, loads = settings.pick(1000, 200), settings.pick(100, 20), settings.pick(7, 3)
    result = Result("console", f"Console screen times: {topics:,} topics, {subscriptions} subscriptions on one")
    with bench_tables(settings, "console") as (client, _raw, _raw_name):
        progress(f"console: creating {topics} topics and {subscriptions} subscriptions")
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: client.create_topic(TopicId("load", f"topic-{n:04d}")), range(topics - 1)))
        client.create_topic(BUSY)
        for batch in range(10):
            client.publish(BUSY, [f"message {batch}-{n}".encode() for n in range(100)])
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: client.create_subscription(BUSY, f"sub-{n:03d}"), range(subscriptions)))
        gateway, url = start_gateway(settings, settings.prefix("console"))
        try:
            with chromium() as browser:
                times = {}
                for route, screen, rows_shown in SCREENS:
                    times[screen] = _screen_times(browser, f"{url}/console/#/{route}", screen, loads * settings.rounds)
                    shown = len(browser.find_elements(By.CSS_SELECTOR, rows_shown))
                    expected = min(topics, TOPICS_PAGE) if screen == "topics" else subscriptions
                    if shown != expected:
                        raise RuntimeError(f"the {screen} screen lists {shown} rows, not {expected}")
        finally:
            gateway.send_signal(signal.SIGTERM)
            gateway.wait(timeout=60)
    rows: list[list[object]] = []
    for screen, (first, measured) in times.items():
        middle = median(measured)
        rows.append([screen, first, middle, percentile(measured, 90), max(measured)])
        result.goal(f"console {screen} screen median < {GOAL_MS:.0f} ms", f"{middle:.0f} ms", middle < GOAL_MS)
    result.table(["screen", "first load (cold), ms", "median, ms", "p90, ms", "max, ms"], rows)
    result.notes.append(
        f"{loads} loads a round after a warm-up load, {settings.rounds} round(s); load average"
        f" {' '.join(Path('/proc/loadavg').read_text().split()[:3])} on {os.cpu_count()} cores at the end"
    )
    result.samples = {screen: measured for screen, (_first, measured) in times.items()}
    return result


def _screen_times(browser: WebDriver, page: str, screen: str, loads: int) -> tuple[float, list[float]]:
    """The first (cold) load's time and the ``loads`` after it of one screen, in ms."""
    first = _load_ms(browser, page, screen)
    return first, [_load_ms(browser, page, screen) for _ in range(loads)]


def _load_ms(browser: WebDriver, page: str, screen: str) -> float:
    """One fresh load of ``page``: milliseconds from the navigation to the screen's data drawn."""
    browser.get("about:blank")
    browser.get(page)
    wait_for_page(
        lambda: browser.execute_script("return document.body.dataset.ready") == screen, f"the {screen} screen", 120
    )
    if browser.execute_script("return performance.getEntriesByType('navigation')[0].type") != "navigate":
        raise RuntimeError(f"the {screen} screen was not a fresh navigation")
    return float(browser.execute_script("return performance.getEntriesByName('tms-console-ready')[0].startTime"))
