"""OpenTelemetry trace context on messages, where ``opentelemetry-api`` is installed (the ``otel`` extra).

Following OpenTelemetry's messaging semantic conventions:

- a publish runs in a ``send {topic}`` span (kind PRODUCER); a publish that only queues its messages (the
  background publisher, the asyncio client, the gateway's clients) makes a ``create {topic}`` span when it
  queues them. Either span's W3C context (``traceparent``, and ``tracestate`` when there is one) goes into the
  headers of each message that does not carry a ``traceparent`` already, so a message keeps the context of
  the code that made it, and the write that stores it later does not overwrite it;
- a consumer's poll or receive that returns messages makes a ``receive {topic}`` span (kind CONSUMER) with a
  link to each message's context, as the conventions ask of a batch receive.

Nothing changes where the package is missing or no tracer provider is configured (the API's default one
records nothing, and then no header is added: messages are stored byte for byte as without tracing).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol, TypeVar

from tms_hbase.model.record import Record

try:
    import opentelemetry.propagate as propagate
    import opentelemetry.trace as trace
    from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
except ImportError:  # the otel extra is not installed: every function here passes its input through
    trace = None  # type: ignore[assignment]
    OTEL_PYTHON_TRACER_PROVIDER = ""

_UNKNOWN = object()  # an opentelemetry-api that keeps its provider elsewhere: always ask get_tracer_provider()
_PROVIDER_IN_ENVIRONMENT = OTEL_PYTHON_TRACER_PROVIDER in os.environ

SYSTEM = "tms_hbase"
TRACEPARENT = "traceparent"
MAX_LINKS = 128  # the SDK's default span link limit: a larger batch links its first 128 messages

Batch = Sequence[bytes | Record]


class _HasHeaders(Protocol):
    @property
    def headers(self) -> tuple[tuple[str, bytes], ...]: ...


M = TypeVar("M", bound=_HasHeaders)


def _tracer() -> Any:
    """The tracer, or None when tracing records nothing (not installed, or no provider configured)."""
    if trace is None:
        return None
    # The provider set_tracer_provider() set, read where the API keeps it: get_tracer_provider() looks in the
    # environment each time none is set, a large part of what a one-message publish costs. Only a
    # provider named in the environment the process started with needs that call (it loads it once).
    provider = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None and not _PROVIDER_IN_ENVIRONMENT:
        return None
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None
    return trace.get_tracer("tms_hbase")


def _attributes(operation: str, topic: str, count: int) -> dict[str, str | int]:
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.destination.name": topic,
        "messaging.batch.message_count": count,
    }


def _inject(batch: Batch) -> Batch:
    """The batch with the current span's context in the headers of each message that has none (a malformed
    item is left for the batch's checks to refuse)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    if TRACEPARENT not in carrier:
        return batch
    added = tuple((name, value.encode()) for name, value in carrier.items())
    out: list[Any] = []
    for item in batch:
        if isinstance(item, bytes | bytearray | memoryview):
            out.append(Record(bytes(item), headers=added))
        elif isinstance(item, Record) and not any(name == TRACEPARENT for name, _ in item.headers):
            out.append(Record(item.payload, item.key, (*item.headers, *added)))
        else:
            out.append(item)
    return out


def created(topic: str, batch: Batch) -> Batch:
    """``batch`` with a creation context for its messages, made in a ``create {topic}`` span: for a publish
    that queues messages for a write made later."""
    tracer = _tracer()
    if tracer is None:
        return batch
    kind = trace.SpanKind.PRODUCER
    with tracer.start_as_current_span(
        f"create {topic}", kind=kind, attributes=_attributes("create", topic, len(batch))
    ):
        return _inject(batch)


def sending(topic: str, batch: Batch) -> AbstractContextManager[Batch]:
    """A ``send {topic}`` span around a write, giving the batch with a creation context on each message
    that had none."""
    tracer = _tracer()
    if tracer is None:
        return nullcontext(batch)
    return _Sending(tracer, topic, batch)


class _Sending:
    def __init__(self, tracer: Any, topic: str, batch: Batch) -> None:
        attributes = _attributes("send", topic, len(batch))
        self._span = tracer.start_as_current_span(f"send {topic}", kind=trace.SpanKind.PRODUCER, attributes=attributes)
        self._batch = batch

    def __enter__(self) -> Batch:
        self._span.__enter__()
        return _inject(self._batch)

    def __exit__(self, *exc: object) -> bool | None:
        return self._span.__exit__(*exc)


def enabled() -> bool:
    """Whether spans are recorded now (the package installed and a tracer provider configured): for a loop
    that hands out messages one at a time and asks once per batch it read instead of once per message."""
    return _tracer() is not None


def received(topic: object, subscription: str, messages: list[M]) -> list[M]:
    """``messages``, after a ``receive {topic}`` span linked to the context each was published in."""
    if not messages:
        return messages
    tracer = _tracer()
    if tracer is None:
        return messages
    links = []
    for message in messages[:MAX_LINKS]:
        carrier = {name: value.decode("latin-1") for name, value in message.headers}
        if TRACEPARENT not in carrier:
            continue
        context = trace.get_current_span(propagate.extract(carrier)).get_span_context()
        if context.is_valid:
            links.append(trace.Link(context))
    attributes = _attributes("receive", str(topic), len(messages)) | {"messaging.consumer.group.name": subscription}
    span = tracer.start_span(f"receive {topic}", kind=trace.SpanKind.CONSUMER, attributes=attributes, links=links)
    span.end()
    return messages
