"""The background publisher retries what can succeed later and gives up at once on what cannot (its
end-to-end behaviour against a real HBase is in tests/integration/test_background_publisher.py)."""

from __future__ import annotations

from tms_hbase import BackgroundPublisher, HBaseError, HBaseUnavailable, PublishOutcomeUnknown, TopicId, TopicNotFound
from tms_hbase.model.published import PublishResult
from tms_hbase.model.retry import Retry


class Client:
    """Stands in for MessagingClient.publish: raises the given errors in turn, then succeeds."""

    max_batch_bytes = 1024

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls: list[object] = []

    def publish(self, topic, payloads, *, ttl_seconds=None, resume=None) -> PublishResult:
        self.calls.append(resume)
        if self.errors:
            raise self.errors.pop(0)
        return PublishResult(TopicId.parse(topic) if isinstance(topic, str) else topic, 1, 7, len(payloads))


def send(client: Client, attempts: int, **options) -> tuple[BackgroundPublisher, object]:
    retry = Retry(attempts=attempts, backoff_seconds=0)
    with BackgroundPublisher(client, linger_seconds=0, retry=retry, **options) as publisher:
        future = publisher.publish("ns:t", [b"x"])
        outcome = future.exception(timeout=30) or future.result()
    return publisher, outcome


def test_a_refusal_from_hbase_is_not_retried() -> None:
    client = Client(HBaseError("HBase refused the request: too large"))
    publisher, outcome = send(client, attempts=6)
    assert isinstance(outcome, HBaseError) and len(client.calls) == 1
    assert publisher.stats.retries == 0 and publisher.stats.failed == 1


def test_an_unreachable_hbase_is_retried_and_a_lost_answer_resumed() -> None:
    lost = PublishOutcomeUnknown("answer lost", resume="where it may have landed")
    client = Client(HBaseUnavailable("down"), lost)
    publisher, outcome = send(client, attempts=6)
    assert outcome == PublishResult(TopicId("ns", "t"), 1, 7, 1) and publisher.stats.retries == 2
    assert client.calls == [None, None, lost]  # the retry after a lost answer resumes it


def test_retries_run_out_and_bad_input_fails_at_once() -> None:
    client = Client(*(HBaseUnavailable(f"down {i}") for i in range(10)))
    publisher, outcome = send(client, attempts=3, on_give_up="drop")
    assert outcome is None and len(client.calls) == 3 and publisher.stats.dropped_failed == 1
    client = Client(TopicNotFound("ns:t"))
    _, outcome = send(client, attempts=6)
    assert isinstance(outcome, TopicNotFound) and len(client.calls) == 1
