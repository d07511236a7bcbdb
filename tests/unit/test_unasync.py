"""tools/unasync.py: tms_hbase/aio/api.py is generated from tms_hbase/api.py, the asyncio gateway client's
operations from the blocking one's, the asyncio direct client's forwarding operations from the interface
(tools/forwarding.py), and ``--check`` (run by ``make lint``) fails as soon as a pair drifts apart."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tools import forwarding, unasync

ROOT = Path(__file__).resolve().parents[2]
API, GATEWAY, FORWARDING = unasync.TWINS


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of the sources and their twins, as a repository of its own."""
    for twin in unasync.TWINS:
        for path in (twin.source, twin.target):
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / path, tmp_path / path)
    return tmp_path


def test_the_asyncio_twins_are_generated_from_the_blocking_sources() -> None:
    assert unasync.main(["--check"]) == 0


def test_a_keyword_added_to_the_source_only_fails_the_check_until_regenerated(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = repo / API.source
    text = source.read_text()
    keyword = "        ttl_seconds: float | None = None,\n"
    assert text.count(keyword) == 1
    source.write_text(text.replace(keyword, keyword + "        priority: int = 0,\n"))

    assert unasync.main(["--check", "--root", str(repo)]) == 1
    assert "tms_hbase/aio/api.py is not generated from tms_hbase/api.py" in capsys.readouterr().err

    assert unasync.main(["--root", str(repo)]) == 0
    twin = (repo / API.target).read_text()
    publish = twin[twin.index("    async def publish(") :]
    assert "priority: int = 0," in publish[: publish.index("-> PublishResult")]
    assert unasync.main(["--check", "--root", str(repo)]) == 0


def test_an_operation_added_to_the_interface_is_forwarded_by_the_asyncio_client(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = repo / API.source
    text = source.read_text()
    anchor = "    def lag(self, topic: TopicLike, name: str) -> Lag:\n"
    assert text.count(anchor) == 1
    added = '    def compact(self, topic: TopicLike, *, keep: int = 1) -> int:\n        """Compact."""\n        ...\n\n'
    source.write_text(text.replace(anchor, added + anchor))

    assert unasync.main(["--check", "--root", str(repo)]) == 1
    assert f"{FORWARDING.target} is not generated from {FORWARDING.source}" in capsys.readouterr().err
    assert unasync.main(["--root", str(repo)]) == 0
    assert (
        "    async def compact(self, topic: TopicLike, *, keep: int = 1) -> int:\n"
        '        """Compact."""\n'
        "        return await self._run(lambda c: c.compact(topic, keep=keep))\n"
    ) in (repo / FORWARDING.target).read_text()


def test_a_keyword_added_to_a_gateway_operation_reaches_the_asyncio_client(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = repo / GATEWAY.source
    text = source.read_text()
    signature = "    def lag(self, topic: TopicLike, name: str) -> Lag:\n"
    assert text.count(signature) == 1
    source.write_text(text.replace(signature, signature.replace("name: str", "name: str, *, exact: bool = False")))

    assert unasync.main(["--check", "--root", str(repo)]) == 1
    assert f"{GATEWAY.target} is not generated from {GATEWAY.source}" in capsys.readouterr().err
    assert unasync.main(["--root", str(repo)]) == 0
    assert "    async def lag(self, topic: TopicLike, name: str, *, exact: bool = False) -> Lag:\n" in (
        (repo / GATEWAY.target).read_text()
    )


def test_a_hand_edit_of_the_twin_fails_the_check(repo: Path) -> None:
    twin = repo / API.target
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


INTERFACE = (
    "from collections.abc import Iterator\n"
    "from typing import TYPE_CHECKING, Protocol\n"
    "if TYPE_CHECKING:\n"
    "    from tms_hbase.model.topic import TopicLike as Topic, TopicMetadata\n"
    "class AsyncMessagingService(Protocol):\n"
    "    async def close(self) -> None: ...\n"
    "    async def tag(self, topic: Topic, /, *labels: str, force: bool = False, **extra: str) -> None: ...\n"
    '    async def get(self, topic: Topic) -> TopicMetadata:\n        """The topic."""\n'
    "    def fetch(self) -> Iterator[bytes]: ...\n"
)


def test_forwarding_passes_positional_arguments_in_place_and_keywords_by_name() -> None:
    hand_written = {name: "" for name in ("close", "fetch")}
    module = forwarding.forwarding_module(INTERFACE, hand_written)
    methods = module[module.index("    async def tag(") :]
    assert methods == (
        "    async def tag(self, topic: Topic, /, *labels: str, force: bool=False, **extra: str) -> None:\n"
        "        await self._run(lambda c: c.tag(topic, *labels, force=force, **extra))\n"
        "\n"
        "    async def get(self, topic: Topic) -> TopicMetadata:\n"
        '        """The topic."""\n'
        "        return await self._run(lambda c: c.get(topic))\n"
    )
    assert "    from tms_hbase.model.topic import TopicLike as Topic, TopicMetadata\n" in module
    assert "Iterator" not in module  # only what the forwarded signatures name is imported


@pytest.mark.parametrize(
    ("hand_written", "error"),
    [
        ({"close": ""}, "AsyncMessagingService.fetch is not a coroutine, so it cannot be forwarded"),
        ({"close": "", "fetch": "", "gone": ""}, "HAND_WRITTEN names what AsyncMessagingService does not have: gone"),
    ],
)
def test_an_operation_that_cannot_be_forwarded_must_be_listed_as_hand_written(
    hand_written: dict[str, str], error: str
) -> None:
    with pytest.raises(forwarding.ForwardingError, match=error):
        forwarding.forwarding_module(INTERFACE, hand_written)


def test_calls_of_the_coroutines_on_self_are_awaited() -> None:
    source = (
        "class GatewayOperations(MessagingService):\n"
        "    def run(self, request: Request[T]) -> T: ...\n"
        "    def get_topic(self, topic: TopicLike) -> TopicMetadata:\n"
        "        return self.run(self.calls.get_topic(topic))\n"
        "    def fetch(self) -> Iterator[Message]:\n"
        "        return self._pages(self.calls.fetch(topic))\n"
    )
    assert "".join(unasync.to_async(unasync.select_async(source.splitlines(keepends=True)))) == (
        "class AsyncGatewayOperations(AsyncMessagingService):\n"
        "    async def run(self, request: Request[T]) -> T: ...\n"
        "    async def get_topic(self, topic: TopicLike) -> TopicMetadata:\n"
        "        return await self.run(self.calls.get_topic(topic))\n"
        "    def fetch(self) -> AsyncIterator[Message]:\n"
        "        return self._pages(self.calls.fetch(topic))\n"
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
    source = repo / API.source
    source.write_text(source.read_text() + block)
    assert unasync.main(["--check", "--root", str(repo)]) == 2
    assert "unasync: tms_hbase/api.py" in capsys.readouterr().err
