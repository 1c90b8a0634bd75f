"""OpenTelemetry tracing for kotae processes.

FastStream's NATS telemetry middleware carries W3C ``traceparent`` in message
headers, so the spans of one comment in every stage share one trace id.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

from kotae.settings import Settings


def build_tracer_provider(
    service: str, settings: Settings, *, processors: list[SpanProcessor] | None = None
) -> TracerProvider:
    """A tracer provider for one service; exports over OTLP/HTTP when configured.

    A process with somewhere to send spans records every one, whatever the
    upstream process decided. A process with nowhere to send them records none:
    its spans still carry the comment's trace id from stage to stage (logs and
    messages keep it), but building and timing spans nobody will read would cost
    every message CPU for nothing.
    """
    exporting = bool(processors) or bool(settings.otlp_endpoint)
    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: settings.service_name or f"kotae-{service}"}),
        sampler=ALWAYS_ON if exporting else ALWAYS_OFF,
    )
    for processor in processors or []:
        provider.add_span_processor(processor)
    if settings.otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = settings.otlp_endpoint.rstrip("/") + "/v1/traces"
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


def current_trace_id() -> str | None:
    """Hex trace id of the current span, or None outside a trace."""
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None
