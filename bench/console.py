"""The web console's screen times on a big installation: every screen is on the page within 300 ms of the
navigation (goal), with 10,000 topics and 1,000 subscriptions (100 on one topic, 10 on each of 90 others);
1,000 topics and 100 subscriptions with --quick.

A real ``tms-gateway`` (open: no tokens) serves the console to headless Chromium (Debian's, as the console's
tests use: tests/browser.py). The time of one load is the ``tms-console-ready`` mark (the performance API:
milliseconds since the navigation started) that the page sets once the screen's data is drawn: HTML,
scripts, the JSON calls to the gateway and the library's reads of HBase, and the rendering. Each screen gets
a gateway of its own, just started: its first load is the first view after the gateway starts (cold, noted
apart), then 7 loads a round (3 with --quick); the goal is on the median of all of a screen's loads. Figures
from a loaded machine mean little: the load average is noted.
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

from .common import GoalFamily, Result, Settings, bench_tables, median, percentile, progress
from .gateway import start_gateway

GOAL_MS = 300.0
MEDIAN_GOAL = f"console {{item}} screen median < {GOAL_MS:.0f} ms"
FIRST_VIEW_GOAL = f"console {{item}} first view < {GOAL_MS:.0f} ms"
GOAL_FAMILIES = (  # one verdict per screen in the runs, one row each in docs/benchmarks.md
    GoalFamily(MEDIAN_GOAL, f"every screen's median < {GOAL_MS:.0f} ms", highest_is_worst=True),
    GoalFamily(FIRST_VIEW_GOAL, f"every screen's first view < {GOAL_MS:.0f} ms", highest_is_worst=True),
)
BUSY = TopicId("load", "busy")
ROUTE = f"{BUSY.namespace}/{BUSY.topic}"
SCREENS = (  # (route, the screen's name in data-ready, the rows it lists, how many: None for at least one)
    ("overview", "overview", "#overview .card", None),
    ("topics", "topics", "#topics tbody tr", 50),  # the first page of the topics
    (f"topics/{ROUTE}", "topic", "#topic-subscriptions tbody tr", "busy"),
    (f"subscriptions/{ROUTE}", "subscriptions", "#subscriptions tbody tr", "busy"),
    ("subscriptions", "subscriptions", "#all-subscriptions tbody tr", 50),  # every subscription, first page
    (f"messages/{ROUTE}?mode=last&value=100&format=text&limit=100", "messages", "#messages tbody tr", 100),
    ("transactions", "transactions", "#in-progress", None),
    ("sweeper", "sweeper", "#regions tbody tr", None),
)
SPREAD = 10  # subscriptions on each topic other than the busy one


def run(settings: Settings) -> Result:
    topics, subscriptions, loads = settings.pick(10_000, 1000), settings.pick(1000, 100), settings.pick(7, 3)
    on_busy = subscriptions // 10
    others = (subscriptions - on_busy) // SPREAD
    result = Result("console", f"Console screen times: {topics:,} topics, {subscriptions:,} subscriptions")
    with bench_tables(settings, "console") as (client, _raw, _raw_name):
        progress(f"console: creating {topics:,} topics and {subscriptions:,} subscriptions")
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: client.create_topic(_topic(n)), range(topics - 1)))
        client.create_topic(BUSY)
        for batch in range(10):
            client.publish(BUSY, [f"message {batch}-{n}".encode() for n in range(100)])
        made = [(BUSY, f"sub-{n:03d}") for n in range(on_busy)]
        made += [(_topic(t), f"sub-{n}") for t in range(others) for n in range(SPREAD)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda ts: client.create_subscription(*ts), made))
        times = {}
        with chromium() as browser:
            for route, screen, rows_shown, expected in SCREENS:
                label = route.split("?")[0].replace(ROUTE, "<topic>")
                progress(f"console: {label}")
                gateway, url = start_gateway(settings, settings.prefix("console"))
                try:  # a gateway of its own: the first load is the first view after it starts
                    times[label] = _screen_times(browser, f"{url}/console/#/{route}", screen, loads * settings.rounds)
                finally:
                    gateway.send_signal(signal.SIGTERM)
                    gateway.wait(timeout=60)
                shown = len(browser.find_elements(By.CSS_SELECTOR, rows_shown))
                wanted = on_busy if expected == "busy" else expected
                if shown != (wanted or max(1, shown)):
                    raise RuntimeError(f"the {label} screen lists {shown} rows, not {wanted or 'any'}")
    rows: list[list[object]] = []
    for label, (first, measured) in times.items():
        middle = median(measured)
        rows.append([label, first, middle, percentile(measured, 90), max(measured)])
        result.goal(MEDIAN_GOAL.format(item=label), f"{middle:.0f} ms", middle < GOAL_MS)
        result.goal(FIRST_VIEW_GOAL.format(item=label), f"{first:.0f} ms", first < GOAL_MS)
    result.table(["screen", "first view after start, ms", "median, ms", "p90, ms", "max, ms"], rows)
    result.notes.append(
        f"{loads} loads a round after the first, {settings.rounds} round(s); load average"
        f" {' '.join(Path('/proc/loadavg').read_text().split()[:3])} on {os.cpu_count()} cores at the end"
    )
    result.samples = {label: measured for label, (_first, measured) in times.items()}
    return result


def _topic(n: int) -> TopicId:
    return TopicId("load", f"topic-{n:05d}")


def _screen_times(browser: WebDriver, page: str, screen: str, loads: int) -> tuple[float, list[float]]:
    """The first load's time (the gateway's first view) and the ``loads`` after it of one screen, in ms."""
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
