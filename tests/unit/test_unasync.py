"""tools/unasync.py: tms_hbase/aio/api.py is generated from tms_hbase/api.py, and ``--check`` (run by ``make
lint``) fails as soon as the two drift apart."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tools import unasync

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of the interface and its twin, as a repository of its own."""
    for path in (unasync.SOURCE, unasync.TARGET):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    return tmp_path


def test_the_asyncio_interface_is_generated_from_the_blocking_one() -> None:
    assert unasync.main(["--check"]) == 0


def test_a_keyword_added_to_the_source_only_fails_the_check_until_regenerated(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = repo / unasync.SOURCE
    text = source.read_text()
    keyword = "        ttl_seconds: float | None = None,\n"
    assert text.count(keyword) == 1
    source.write_text(text.replace(keyword, keyword + "        priority: int = 0,\n"))

    assert unasync.main(["--check", "--root", str(repo)]) == 1
    assert "tms_hbase/aio/api.py is not generated from tms_hbase/api.py" in capsys.readouterr().err

    assert unasync.main(["--root", str(repo)]) == 0
    twin = (repo / unasync.TARGET).read_text()
    publish = twin[twin.index("    async def publish(") :]
    assert "priority: int = 0," in publish[: publish.index("-> PublishResult")]
    assert unasync.main(["--check", "--root", str(repo)]) == 0


def test_a_hand_edit_of_the_twin_fails_the_check(repo: Path) -> None:
    twin = repo / unasync.TARGET
    twin.write_text(twin.read_text().replace('"""The topic\'s metadata; TopicNotFound."""', '"""Edited."""'))
    assert unasync.main(["--check", "--root", str(repo)]) == 1


def test_methods_become_coroutines_but_those_returning_an_iterator_or_a_consumer() -> None:
    source = (
        "from collections.abc import Iterator\n"
        "class SubscriptionConsumer(Protocol):\n"
        "    def __enter__(self) -> Self:\n"
        '        """Leaving the ``with`` block closes it."""\n'
        "    @property\n"
        "    def held(self) -> list[bytes]: ...\n"
        "    def __iter__(self) -> Iterator[bytes]: ...\n"
        "class MessagingService(Protocol):\n"
        "    def ping(self) -> None: ...\n"
        "    def fetch(\n"
        "        self, limit: int | None = None\n"
        "    ) -> Iterator[Message]: ...\n"
        "    def consumer(self) -> SubscriptionConsumer: ...\n"
        "    # unasync: async\n"
        "    # async def open(self) -> None: ...\n"
        "    # unasync: end\n"
    )
    assert "".join(unasync.to_async(unasync.select_async(source.splitlines(keepends=True)))) == (
        "from collections.abc import AsyncIterator\n"
        "class AsyncSubscriptionConsumer(Protocol):\n"
        "    async def __aenter__(self) -> Self:\n"
        '        """Leaving the ``async with`` block closes it."""\n'
        "    @property\n"
        "    def held(self) -> list[bytes]: ...\n"
        "    def __aiter__(self) -> AsyncIterator[bytes]: ...\n"
        "class AsyncMessagingService(Protocol):\n"
        "    async def ping(self) -> None: ...\n"
        "    def fetch(\n"
        "        self, limit: int | None = None\n"
        "    ) -> AsyncIterator[Message]: ...\n"
        "    def consumer(self) -> AsyncSubscriptionConsumer: ...\n"
        "    async def open(self) -> None: ...\n"
    )


@pytest.mark.parametrize(
    "block",
    [
        "# unasync: async\nx = 1\n# unasync: end\n",  # an async line not commented out
        "# unasync: sync\nx = 1\n",  # no end
        "# unasync: end\n",  # an end without a block
    ],
)
def test_a_malformed_block_is_an_error(repo: Path, block: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = repo / unasync.SOURCE
    source.write_text(source.read_text() + block)
    assert unasync.main(["--check", "--root", str(repo)]) == 2
    assert "unasync: tms_hbase/api.py" in capsys.readouterr().err
