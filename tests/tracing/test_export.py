"""``setup_from_env``: the standard variables decide, in a fresh process each (a process has
one global provider): no exporter asked for means untraced; an endpoint means OTLP over
HTTP, or gRPC when the protocol says so; ``none`` and ``OTEL_SDK_DISABLED`` mean off."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """
from opentelemetry import trace
from toolhub.tracing import setup_from_env, shutdown, tracer
on = setup_from_env("probe")
provider = trace.get_tracer_provider()
processors = getattr(getattr(provider, "_active_span_processor", None), "_span_processors", ())
exporters = [type(p.span_exporter).__module__ for p in processors]
print(on, tracer() is not None, exporters)
shutdown()
"""


def probe(env: dict[str, str]) -> str:
    plain = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={**plain, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "False False []"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},
            "True True ['opentelemetry.exporter.otlp.proto.http.trace_exporter']",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            },
            "True True ['opentelemetry.exporter.otlp.proto.grpc.trace_exporter']",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                "OTEL_TRACES_EXPORTER": "none",
                "OTEL_METRICS_EXPORTER": "none",
            },
            "False False []",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"},
            "False False []",
        ),
    ],
)
def test_the_standard_variables_decide(env: dict[str, str], expected: str) -> None:
    assert probe(env) == expected


def test_the_resource_hashes_as_the_sdk_s_computed_once() -> None:
    """The providers' resource is the SDK's, its hash made once (the OTLP encoder looks it up
    per span): equal to, and hashed as, the same attributes in a plain ``Resource``."""
    from opentelemetry.sdk.resources import Resource

    from toolhub.tracing.export import hashed_resource

    plain = Resource.create({"service.name": "probe", "k": "v"})
    hashed = hashed_resource(plain)
    assert isinstance(hashed, Resource)
    assert hashed == plain and plain == hashed
    assert hash(hashed) == hash(plain)
    assert {hashed: 1}[plain] == 1
    assert dict(hashed.attributes) == dict(plain.attributes)
    assert hashed.schema_url == plain.schema_url
