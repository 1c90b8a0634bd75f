"""Prometheus metrics every stage exports on ``/metrics`` (``KOTAE_METRICS_PORT``).

The bus edge records them, so a stage's own code stays free of bookkeeping:
every handled message (by result), handling time, every published outcome,
gate decisions, verifier verdicts, degraded results, dead letters, and each
model call a stage made (calls, tokens, estimated cost from
``KOTAE_MODEL_PRICES``). JetStream consumer lag comes from the server itself
(prometheus-nats-exporter), beside these.

Names are ``kotae_*``; the Grafana dashboards in ``deploy/grafana`` query exactly
these (a test checks every query names a metric defined here).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server

from kotae.contracts import AnswerV1, RetrievalV1

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

MESSAGES = Counter(
    "kotae_messages_total",
    "Input messages a stage finished with, by result: ok, retry (redelivery asked), poison, exhausted.",
    ["stage", "result"],
)
HANDLE_SECONDS = Histogram(
    "kotae_handle_seconds", "Time a stage spent on one input message.", ["stage"], buckets=_LATENCY_BUCKETS
)
OUTCOMES = Counter("kotae_outcomes_total", "Terminal answer outcomes published, by the stage that ended the comment.", ["stage", "outcome"])
GATE = Counter("kotae_gate_decisions_total", "Retrieval gate decisions: answer, clarify, no_match.", ["decision"])
VERDICTS = Counter("kotae_verifier_verdicts_total", "Verifier verdict classes (0 none … 3 invented; 'unavailable').", ["verdict", "method"])
DEGRADED = Counter("kotae_degraded_total", "Results a stage degraded (e.g. reranker fell back to retrieval order).", ["stage"])
DEAD_LETTERS = Counter("kotae_dead_letters_total", "Inputs dead-lettered, by error type.", ["stage", "error_type"])
MODEL_CALLS = Counter("kotae_model_calls_total", "Model calls a stage made, by model and outcome.", ["stage", "model", "outcome"])
MODEL_TOKENS = Counter("kotae_model_tokens_total", "Tokens of model calls, by direction (input, output).", ["stage", "model", "direction"])
MODEL_COST = Counter("kotae_model_cost_usd_total", "Estimated model cost in USD, from KOTAE_MODEL_PRICES.", ["stage", "model"])
MODEL_SECONDS = Histogram(
    "kotae_model_call_seconds", "Latency of one model call.", ["stage", "model"], buckets=_LATENCY_BUCKETS
)

#: Every metric name this module defines (counters as exposed, with ``_total``).
METRIC_NAMES = {
    "kotae_messages_total", "kotae_handle_seconds", "kotae_outcomes_total", "kotae_gate_decisions_total",
    "kotae_verifier_verdicts_total", "kotae_degraded_total", "kotae_dead_letters_total", "kotae_model_calls_total",
    "kotae_model_tokens_total", "kotae_model_cost_usd_total", "kotae_model_call_seconds",
}  # fmt: skip


def price_of(model: str, prices: dict[str, tuple[float, float]]) -> tuple[float, float] | None:
    """USD per million (input, output) tokens of ``model``: the longest configured prefix wins.

    A response model is often a dated variant of the configured one
    (``openai:gpt-4.1-mini-2025-04-14`` for ``openai:gpt-4.1-mini``).
    """
    best = None
    for name, price in prices.items():
        if model.startswith(name) and (best is None or len(name) > len(best[0])):
            best = (name, price)
    return best[1] if best else None


def observe_published(stage: str, message: Any, prices: dict[str, tuple[float, float]]) -> None:
    """Count what a stage just published: outcomes, gate, verdicts, degradation, its model calls."""
    if isinstance(message, AnswerV1):
        OUTCOMES.labels(stage, message.outcome).inc()
        if stage == "retriever":
            GATE.labels("clarify" if message.outcome == "clarify" else "no_match").inc()
        if stage == "verifier":
            verdict = "unavailable" if message.verdict is None else str(message.verdict)
            VERDICTS.labels(verdict, message.methods.get("verifier", "")).inc()
    elif isinstance(message, RetrievalV1) and stage == "retriever":
        GATE.labels(message.gate).inc()
    if getattr(message, "degraded", False) and stage == "reranker":
        DEGRADED.labels(stage).inc()
    for call in getattr(message, "model_calls", None) or []:
        if call.stage != stage:
            continue  # made upstream; counted by the stage that made it
        MODEL_CALLS.labels(stage, call.model, call.outcome).inc()
        if call.input_tokens:
            MODEL_TOKENS.labels(stage, call.model, "input").inc(call.input_tokens)
        if call.output_tokens:
            MODEL_TOKENS.labels(stage, call.model, "output").inc(call.output_tokens)
        if call.latency_ms is not None:
            MODEL_SECONDS.labels(stage, call.model).observe(call.latency_ms / 1000)
        price = price_of(call.model, prices)
        if price is not None:
            cost = ((call.input_tokens or 0) * price[0] + (call.output_tokens or 0) * price[1]) / 1_000_000
            MODEL_COST.labels(stage, call.model).inc(cost)


_served: set[int] = set()


def serve_metrics(port: int, registry: CollectorRegistry = REGISTRY) -> int:
    """Expose ``/metrics`` on ``port`` (once per process); returns the port."""
    if port not in _served:
        start_http_server(port, registry=registry)
        _served.add(port)
    return port
