"""Which processes record spans: those with somewhere to send them; the trace id travels regardless."""

from __future__ import annotations

from pathlib import Path

from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kotae.settings import load_settings
from kotae.tracing import build_tracer_provider


def test_a_process_without_an_exporter_records_nothing_but_passes_the_trace_id_on(tmp_path: Path) -> None:
    quiet = build_tracer_provider("ingest", load_settings(data_dir=tmp_path))
    exported = InMemorySpanExporter()
    loud = build_tracer_provider(
        "retriever", load_settings(data_dir=tmp_path), processors=[SimpleSpanProcessor(exported)]
    )

    with quiet.get_tracer("t").start_as_current_span("comment") as root:
        assert not root.is_recording()
        assert root.get_span_context().is_valid
        headers: dict[str, str] = {}
        inject(headers)  # what a message to the next stage carries
    trace_id = root.get_span_context().trace_id

    # A stage that exports records its span under the same trace, although the upstream span was not recorded.
    with loud.get_tracer("t").start_as_current_span("retrieve", context=extract(headers)) as span:
        assert span.is_recording()
    (finished,) = exported.get_finished_spans()
    assert finished.context.trace_id == trace_id

    # And a second quiet stage keeps the id too.
    with quiet.get_tracer("t").start_as_current_span("rerank", context=extract(headers)) as child:
        assert not child.is_recording()
        assert child.get_span_context().trace_id == trace_id
    assert trace.get_current_span().get_span_context().trace_id != trace_id  # nothing leaked into this context


def test_a_configured_otlp_endpoint_means_recording(tmp_path: Path) -> None:
    provider = build_tracer_provider("verifier", load_settings(data_dir=tmp_path, otlp_endpoint="http://127.0.0.1:9/"))
    try:
        with provider.get_tracer("t").start_as_current_span("verify") as span:
            assert span.is_recording()
    finally:
        provider.shutdown()


def test_each_process_runs_the_trace_middleware_its_provider_calls_for(tmp_path: Path) -> None:
    from faststream.nats.opentelemetry import NatsTelemetryMiddleware

    from kotae.runtime import make_broker
    from kotae.tracing import TraceContextMiddleware

    settings = load_settings(data_dir=tmp_path)
    quiet = make_broker(settings, tracer_provider=build_tracer_provider("reranker", settings))
    exported = InMemorySpanExporter()
    loud = make_broker(
        settings,
        tracer_provider=build_tracer_provider("reranker", settings, processors=[SimpleSpanProcessor(exported)]),
    )
    assert list(quiet.middlewares) == [TraceContextMiddleware]
    assert [type(m) for m in loud.middlewares] == [NatsTelemetryMiddleware]
