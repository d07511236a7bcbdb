"""Topic identity and metadata: names, properties, TTL and generation rules (docs/design.md, requirement 1)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from types import MappingProxyType

from tms_hbase.errors import CorruptData, InvalidArgument

NAME = re.compile(r"[A-Za-z0-9_-]+")
MAX_NAME_LENGTH = 255
TTL_KEY = "ttl"
GENERATION_KEY = "generation"
DEFAULT_TTL_SECONDS = 7 * 24 * 3600
TX_MODE_KEY = "tx.mode"
TX_ANY, TX_ONLY, TX_NEVER = "any", "transactional", "non-transactional"
TX_MODES = (TX_ANY, TX_ONLY, TX_NEVER)
"""``tx.mode``: which publishes and stores a topic takes (docs/design.md, requirement 6); absent means ``any``."""
ORDERING_KEY = "ordering"
CHAIN, SEQUENCER = "chain", "sequencer"
ORDERINGS = (CHAIN, SEQUENCER)
"""``ordering``: how a generation's positions are handed out (docs/ordering.md), fixed when the generation is
created; absent means ``chain`` (every topic created before the sequencer existed)."""
DEFAULT_ORDERING = SEQUENCER
"""The ``ordering`` a new topic generation gets unless its properties ask for another (stored with it)."""
MAX_TTL_SECONDS = (2**63 - 1) // 1000  # ttl in milliseconds must fit a signed 64-bit long
_DIGITS = re.compile(r"[0-9]+")


def _check_name(kind: str, value: object) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value) or len(value) > MAX_NAME_LENGTH:
        raise InvalidArgument(f"bad {kind} name {value!r}: use 1-{MAX_NAME_LENGTH} of the characters A-Z a-z 0-9 _ -")
    return value


class _OneArgument(str):
    """The type of the default ``topic``: marks a TopicId made from one ``namespace:topic`` string."""


_ONE_ARGUMENT = _OneArgument()


@dataclass(frozen=True, order=True)
class TopicId:
    """A topic: ``namespace`` and ``topic`` name, each ``[A-Za-z0-9_-]+``. ``TopicId("ns:name")`` (one
    argument) parses the ``namespace:topic`` form, as :meth:`parse` does."""

    namespace: str
    topic: str = field(default=_ONE_ARGUMENT, repr=True)

    def __post_init__(self) -> None:
        if self.topic is _ONE_ARGUMENT:
            namespace, sep, topic = str(self.namespace).partition(":")
            if not sep:
                raise InvalidArgument(f"bad topic {self.namespace!r}: expected namespace:topic, or two arguments")
            object.__setattr__(self, "namespace", namespace)
            object.__setattr__(self, "topic", topic)
        _check_name("namespace", self.namespace)
        _check_name("topic", self.topic)

    @classmethod
    def parse(cls, text: str) -> TopicId:
        """``"namespace:topic"`` → TopicId (the form the CLI takes)."""
        namespace, sep, topic = text.partition(":")
        if not sep:
            raise InvalidArgument(f"bad topic {text!r}: expected namespace:topic")
        return cls(namespace, topic)

    @cached_property  # (every publish and read builds keys from it; the topic never changes)
    def key(self) -> bytes:
        """Row key of the topic in the metadata table, and prefix of its rows elsewhere."""
        return f"{self.namespace}:{self.topic}:".encode()

    def __str__(self) -> str:
        return f"{self.namespace}:{self.topic}"


TopicLike = TopicId | str
"""What the API takes where it names a topic: a :class:`TopicId` or its ``"namespace:topic"`` text."""


def as_topic(topic: object) -> TopicId:
    """A :data:`TopicLike` as a TopicId; anything else (or a bad name) is InvalidArgument."""
    if isinstance(topic, TopicId):
        return topic
    if isinstance(topic, str):
        return _parsed(topic)
    raise InvalidArgument(f"expected a TopicId or 'namespace:topic', got {type(topic).__name__}")


@lru_cache(maxsize=4096)
def _parsed(text: str) -> TopicId:
    """:meth:`TopicId.parse`, once per text: a program names its few topics as text in every call (a
    one-message publish would spend a tenth of its time checking the names again). Bad names are not kept."""
    return TopicId.parse(text)


def parse_ttl(value: object) -> int:
    """A TTL in whole seconds, > 0, given as a string (or int); anything else is InvalidArgument."""
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not _DIGITS.fullmatch(text) or not 0 < int(text) <= MAX_TTL_SECONDS:
        raise InvalidArgument(f"bad ttl {value!r}: expected a whole number of seconds between 1 and {MAX_TTL_SECONDS}")
    return int(text)


def parse_tx_mode(value: object) -> str:
    """A ``tx.mode`` value, one of TX_MODES; anything else is InvalidArgument."""
    if value not in TX_MODES:
        raise InvalidArgument(f"bad {TX_MODE_KEY} {value!r}: expected one of {', '.join(TX_MODES)}")
    return value


def parse_ordering(value: object) -> str:
    """An ``ordering`` value, one of ORDERINGS; anything else is InvalidArgument."""
    if value not in ORDERINGS:
        raise InvalidArgument(f"bad {ORDERING_KEY} {value!r}: expected one of {', '.join(ORDERINGS)}")
    return value


def user_properties(properties: Mapping[str, str] | None) -> dict[str, str]:
    """Validate properties a user gives for create/update; fill in the default TTL.

    ``generation`` is managed by the system and may not be set; ``tx.mode`` must be one of TX_MODES and
    ``ordering`` one of ORDERINGS.
    """
    if properties is None:
        properties = {}
    if not isinstance(properties, Mapping):
        raise InvalidArgument(f"topic properties must be a mapping of strings, not {type(properties).__name__}")
    result: dict[str, str] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not key:
            raise InvalidArgument(f"bad property name {key!r}: expected a non-empty string")
        if key == GENERATION_KEY:
            raise InvalidArgument("the 'generation' property is managed by tms-hbase and cannot be set")
        if key == TTL_KEY:
            value = str(parse_ttl(value))
        if key == TX_MODE_KEY:
            parse_tx_mode(value)
        if key == ORDERING_KEY:
            parse_ordering(value)
        if not isinstance(value, str):
            raise InvalidArgument(f"bad value for property {key!r}: expected a string, got {value!r}")
        result[key] = value
    result.setdefault(TTL_KEY, str(DEFAULT_TTL_SECONDS))
    return result


@dataclass(frozen=True)
class TopicMetadata:
    """A topic's stored properties (including ``ttl`` and ``generation``, as strings).

    ``generation`` > 0 while the topic exists; a deleted topic keeps its row with −generation.
    """

    topic: TopicId
    properties: Mapping[str, str] = field(repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", MappingProxyType(dict(sorted(self.properties.items()))))

    @property
    def ttl(self) -> int:
        """The topic's time-to-live in seconds (also :attr:`ttl_seconds`)."""
        return int(self.properties[TTL_KEY])

    @property
    def ttl_seconds(self) -> int:
        return self.ttl

    # (the properties never change: each of these is worked out once, by the first publish that asks)
    @cached_property
    def generation(self) -> int:
        return int(self.properties[GENERATION_KEY])

    @cached_property
    def tx_mode(self) -> str:
        """Which writes the topic takes: ``any`` (default), ``transactional`` or ``non-transactional``."""
        return parse_tx_mode(self.properties.get(TX_MODE_KEY, TX_ANY))

    @cached_property
    def ordering(self) -> str:
        """How the current generation hands out positions: ``chain`` (absent) or ``sequencer``."""
        return parse_ordering(self.properties.get(ORDERING_KEY, CHAIN))

    @cached_property
    def sequencer(self) -> bool:
        return self.ordering == SEQUENCER

    def check_tx_mode(self, transactional: bool) -> None:
        """InvalidArgument if the topic's ``tx.mode`` refuses a (non-)transactional publish or store."""
        mode = self.tx_mode
        if mode == TX_ONLY and not transactional:
            raise InvalidArgument(
                f"topic {self.topic} is transactional-only ({TX_MODE_KEY}={mode}): "
                "publish with a transaction write pointer"
            )
        if mode == TX_NEVER and transactional:
            raise InvalidArgument(
                f"topic {self.topic} is non-transactional-only ({TX_MODE_KEY}={mode}): "
                "publish without a transaction write pointer (and store nothing)"
            )

    @property
    def exists(self) -> bool:
        return self.generation > 0

    def __repr__(self) -> str:
        return (
            f"TopicMetadata({self.topic}, ttl={self.ttl}, generation={self.generation}, "
            f"properties={dict(self.properties)})"
        )

    def encode(self) -> bytes:
        """The stored bytes: the properties as a sorted, compact JSON object (deterministic)."""
        return json.dumps(dict(self.properties), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, topic: TopicId, data: bytes) -> TopicMetadata:
        """Inverse of :meth:`encode`; a corrupt row is an error that names the topic."""
        try:
            properties = json.loads(data)
            meta = cls(topic, properties)
            meta.generation, meta.ttl, meta.tx_mode, meta.ordering  # noqa: B018 - all must parse
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptData(f"corrupt metadata row for topic {topic}: {exc}") from None
        return meta
