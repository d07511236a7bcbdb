"""Headless Chromium for tests of the web console: Debian's ``chromium`` and ``chromium-driver``, installed
with apt-get when missing (as the test setup installs HBase), driven through WebDriver (selenium)."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from typing import TypeVar

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from .waiting import wait_for

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# Headless as root on a closed network: no sandbox (root), and none of the background connections
# (updates, sync, QUIC probes) that this network refuses.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)
T = TypeVar("T")


def install_chromium() -> None:
    """Debian's chromium and chromium-driver, unless both are there (needs root, as CI is)."""
    if os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600)
    packages = ["chromium", "chromium-driver"]
    subprocess.run(["apt-get", "install", "-y", "-qq", *packages], check=True, env=env, timeout=1200)


@contextlib.contextmanager
def chromium(*flags: str) -> Iterator[WebDriver]:
    """A headless Chromium with a new empty profile and ``flags`` besides the usual ones, quit (and its
    profile removed) afterwards."""
    install_chromium()
    profile = tempfile.mkdtemp(prefix="tms-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, *flags, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for_page(condition: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
    """:func:`~tests.waiting.wait_for` on a page: any error (an element not there yet) counts as "not yet"."""
    return wait_for(condition, what, timeout, ignore=(Exception,))


def screenshot(driver: WebDriver, path: str) -> None:
    """A PNG of the whole page, below the window's bottom too (Chrome DevTools' captureScreenshot)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 4000), "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    with open(path, "wb") as file:
        file.write(base64.b64decode(shot["data"]))
