"""Whether publishes are traced follows OpenTelemetry's global tracer provider, though it is not looked up in
the environment on every publish: a provider set after tms_hbase is imported, or named by
OTEL_PYTHON_TRACER_PROVIDER in the environment the process starts with, is used (a fresh process each: the
provider is process-wide and set once)."""

from __future__ import annotations

import os
import subprocess
import sys

from tms_hbase.tracing import OTEL_PYTHON_TRACER_PROVIDER

CHECK = "from tms_hbase import tracing; print(tracing._tracer() is not None, end=' ')"
SET = "from opentelemetry import trace; from opentelemetry.sdk.trace import TracerProvider; " + (
    "trace.set_tracer_provider(TracerProvider())"
)


def traced(code: str, provider: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != OTEL_PYTHON_TRACER_PROVIDER}
    if provider is not None:
        env[OTEL_PYTHON_TRACER_PROVIDER] = provider
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_no_provider_no_tracing_then_a_provider_set_later_is_used() -> None:
    assert traced(f"{CHECK}; {SET}; {CHECK}") == "False True "


def test_a_provider_named_in_the_environment_is_used() -> None:
    assert traced(f"{CHECK}; {CHECK}", provider="sdk_tracer_provider") == "True True "
