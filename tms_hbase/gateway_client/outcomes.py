"""What a gateway call that did not succeed raises, for both of the gateway's Python clients: the TmsError
an error answer names (:func:`answer_error`), and the error of a link that failed (:func:`link_error`),
which says whether the call may have taken effect (a publish: PublishOutcomeUnknown)."""

from __future__ import annotations

from tms_hbase import errors
from tms_hbase.errors import (
    HBaseUnavailable,
    PublishOutcomeUnknown,
    SubscriptionAlreadyExists,
    SubscriptionNotFound,
    TmsError,
    TopicAlreadyExists,
    TopicNotFound,
)
from tms_hbase.gateway_client.calls import Reply
from tms_hbase.model.topic import TopicId
from tms_hbase.rest import codec as rest

# The outcome of a call the gateway may have carried out before the link failed is unknown for these:
# they are never sent twice.
NOT_IDEMPOTENT = frozenset(
    {"create topic", "delete topic", "publish", "store", "create subscription", "delete subscription", "open consumer"}
    | {"receive", "ack", "nack", "release", "extend"}  # a shared consumer's calls
)


class Broken(Exception):
    """The link failed. ``sent``: the request may have reached the gateway; ``stale``: a pooled connection
    the server had closed; ``timed_out``: the deadline passed."""

    def __init__(self, reason: str, *, sent: bool = True, stale: bool = False, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.sent, self.stale, self.timed_out = reason, sent, stale, timed_out


def link_error(what: str, broken: Broken, url: str, timeout_seconds: float) -> TmsError:
    """HBaseUnavailable (``timed_out`` set as it was), or PublishOutcomeUnknown for a publish that was sent."""
    err: TmsError
    if not broken.sent:
        err = HBaseUnavailable(f"{what}: cannot reach the gateway at {url} ({broken.reason})")
    elif what == "publish":
        reason = "did not answer in time" if broken.timed_out else f"failed ({broken.reason})"
        message = f"publish: the gateway at {url} {reason}; the batch may or may not be stored"
        err = PublishOutcomeUnknown(message, None)
    else:
        reason = f"did not answer within {timeout_seconds}s" if broken.timed_out else f"failed ({broken.reason})"
        maybe = "; the call may have taken effect" if what in NOT_IDEMPOTENT else ""
        err = HBaseUnavailable(f"{what}: the gateway at {url} {reason}{maybe}")
    err.timed_out = broken.timed_out
    return err


_ERRORS: dict[str, type[TmsError]] = {
    name: value
    for name, value in [*vars(errors).items(), ("UnsupportedMediaType", rest.UnsupportedMediaType)]
    if isinstance(value, type) and issubclass(value, TmsError)
}


def answer_error(reply: Reply, topic: TopicId | None, subscription: str | None = None) -> TmsError:
    """The TmsError the gateway reported: its class by the error header, else by the status code."""
    message = reply.body.decode("utf-8", "replace").strip() or f"HTTP {reply.status}"
    kind = _ERRORS.get(reply.error_name or "")
    if kind is None:
        fallback = {404: TmsError if topic is None else TopicNotFound, 503: HBaseUnavailable}
        kind = fallback.get(reply.status) or next((k for k, s in rest.STATUS if s == reply.status), TmsError)
    if issubclass(kind, (TopicNotFound, TopicAlreadyExists)) and topic is not None:
        return kind(topic)
    if issubclass(kind, (SubscriptionNotFound, SubscriptionAlreadyExists)) and subscription is not None:
        return kind(topic, subscription)
    if issubclass(kind, PublishOutcomeUnknown):
        return kind(message, None)
    try:
        return kind(message)
    except TypeError:  # a class whose constructor takes more than a message
        return TmsError(message)
