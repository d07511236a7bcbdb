"""tms-admin metrics serve: a Prometheus exporter of topic depth and subscription lag."""

from __future__ import annotations

import logging

import click

from tms_hbase.errors import InvalidArgument
from tms_hbase.ops.cli_options import with_options
from tms_hbase.ops.log_options import configure_logging, log_options
from tms_hbase.ops.signals import stop_event

from .context import Settings, pass_settings
from .errors import handle_errors


@click.group()
def metrics() -> None:
    """Prometheus metrics of topics and subscriptions."""


@metrics.command()
@click.option("--port", type=click.IntRange(1, 65535), default=9465, show_default=True, help="HTTP port.")
@click.option("--bind", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--namespace", help="Only the topics of this namespace [default: all].")
@click.option(
    "--max-age",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds a reading from HBase is served before a scrape reads again.",
)
@with_options(log_options())
@pass_settings
@handle_errors
def serve(
    settings: Settings, port: int, bind: str, namespace: str | None, max_age: float, log_format: str, log_level: str
) -> None:
    """Serve /metrics until SIGTERM/SIGINT: per topic tms_topic_messages, tms_topic_bytes,
    tms_topic_published_messages_total, tms_topic_{first,last}_publish_timestamp_seconds,
    tms_topic_generation; per subscription tms_subscription_lag_messages and
    tms_subscription_lag_seconds. Each reading costs a few HBase reads per topic, never a scan."""
    from prometheus_client import (
        CollectorRegistry,
        PlatformCollector,
        ProcessCollector,
        disable_created_metrics,
        start_http_server,
    )

    from tms_hbase.ops.exporter import TopicCollector

    configure_logging(log_format, log_level)
    stop = stop_event()
    with settings.client() as client:  # exit code 7 on a prefix without an installation: nothing is created
        disable_created_metrics()  # no <counter>_created series
        registry = CollectorRegistry()
        ProcessCollector(registry=registry)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
        PlatformCollector(registry=registry)  # python_info
        registry.register(TopicCollector(client, namespace, max_age))
        try:
            server, thread = start_http_server(port, addr=bind, registry=registry)
        except OSError as exc:
            raise InvalidArgument(f"cannot serve metrics on {bind}:{port}: {exc}") from None
        logging.getLogger(__name__).info("serving metrics on http://%s:%d/metrics", bind, port)
        stop.wait()
        server.shutdown()
        thread.join()
