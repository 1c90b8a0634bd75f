"""Prometheus metrics every stage exports on ``/metrics`` (``KOTAE_METRICS_PORT``).

The bus edge records them, so a stage's own code stays free of bookkeeping:
every handled message (by result), handling time, every published outcome,
gate decisions, verifier verdicts, degraded results, dead letters, and each
model call a stage made (calls, tokens, estimated cost from
``KOTAE_MODEL_PRICES``). The provider layer counts every request to a model
endpoint by what came back (``ok``, ``429``, ``5xx``, ...), including the ones
that failed and were retried, which no published message records. JetStream
consumer lag comes from the server itself (prometheus-nats-exporter), beside these.

Names are ``kotae_*``; the Grafana dashboards in ``deploy/grafana`` and the alert
rules in ``deploy/prometheus`` query exactly these (tests check every query names a
metric defined here, and a live test that a real Prometheus scraping a running
stack finds them).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from kotae.contracts import AnswerV1, CommentV1, DraftV1, EvaluationV1, PipelineMessage, RetrievalV1
from kotae.contracts.subjects import ANSWER_OUTCOMES

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

MESSAGES = Counter(
    "kotae_messages_total",
    "Input messages a stage finished with, by result: ok, retry (redelivery asked), poison, exhausted.",
    ["stage", "result"],
)
HANDLE_SECONDS = Histogram(
    "kotae_handle_seconds", "Time a stage spent on one input message.", ["stage"], buckets=_LATENCY_BUCKETS
)
OUTCOMES = Counter(
    "kotae_outcomes_total",
    "Terminal answer outcomes published, by the stage that ended the comment.",
    ["stage", "outcome"],
)
GATE = Counter("kotae_gate_decisions_total", "Retrieval gate decisions: answer, clarify, no_match.", ["decision"])
VERDICTS = Counter(
    "kotae_verifier_verdicts_total",
    "Verifier verdict classes (0 none … 3 invented; 'unavailable').",
    ["verdict", "method"],
)
VERIFIER_DECISIONS = Counter(
    "kotae_verifier_decisions_total",
    "Verifier outcomes by the path that decided them: offline, model, or floor (the programmatic floor "
    "overruled the model); a cascade's share of offline decisions is how many model calls it saved.",
    ["decided_by", "outcome"],
)
DEGRADED = Counter(
    "kotae_degraded_total", "Results a stage degraded (e.g. reranker fell back to retrieval order).", ["stage"]
)
DEAD_LETTERS = Counter("kotae_dead_letters_total", "Inputs dead-lettered, by error type.", ["stage", "error_type"])
MODEL_CALLS = Counter(
    "kotae_model_calls_total", "Model calls a stage made, by model and outcome.", ["stage", "model", "outcome"]
)
MODEL_TOKENS = Counter(
    "kotae_model_tokens_total", "Tokens of model calls, by direction (input, output).", ["stage", "model", "direction"]
)
MODEL_COST = Counter(
    "kotae_model_cost_usd_total", "Estimated model cost in USD, from KOTAE_MODEL_PRICES.", ["stage", "model"]
)
MODEL_SECONDS = Histogram(
    "kotae_model_call_seconds", "Latency of one model call.", ["stage", "model"], buckets=_LATENCY_BUCKETS
)
MODEL_REQUESTS = Counter(
    "kotae_model_requests_total",
    "Requests to a model endpoint, by what came back: ok, bad_reply, 429, 5xx, 4xx, timeout, connection, error.",
    ["stage", "model", "status"],
)
# Registered only once a budget is set: an unlabelled gauge would otherwise read 0, a budget every call exceeds.
MODEL_BUDGET = Gauge(
    "kotae_model_budget_usd_per_hour",
    "KOTAE_MODEL_BUDGET_USD_PER_HOUR: what all stages' model calls together may cost in an hour (USD).",
    registry=None,
)

#: Results and dead-letter types exported at 0 from the start, so the first one is an increase.
_RESULTS = ("ok", "retry", "poison", "exhausted")
_DEAD_LETTER_TYPES = ("poison", "exhausted")

STAGE_RESTARTS = Counter(
    "kotae_stage_restarts_total", "Stage processes kotae up started again after they exited.", ["stage"]
)

AIR_OUTCOMES = Counter(
    "kotae_air_outcomes_total",
    "Final on-air outcomes of verified answers (finished, expired, withdrawn, skipped, shed, already_aired).",
    ["outcome"],
)
ONAIR_SPEAKING = Gauge("kotae_onair_speaking", "1 while this on-air process holds the speaker's lease.")
ONAIR_QUEUE = Gauge("kotae_onair_queue", "Verified answers waiting for their turn, as the speaker sees them.")
ONAIR_HELD = Gauge(
    "kotae_onair_held",
    "1 while the operator holds the voice on purpose (paused, hold mode, or the stream ended), as the speaker sees it.",
)
ONAIR_GAP_SECONDS = Histogram(
    "kotae_onair_gap_seconds",
    "Silence between the end of one answer and the start of the next, while answers were waiting.",
    buckets=(0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10),
)

#: Every metric name this module defines (counters as exposed, with ``_total``).
METRIC_NAMES = {
    "kotae_messages_total", "kotae_handle_seconds", "kotae_outcomes_total", "kotae_gate_decisions_total",
    "kotae_verifier_verdicts_total", "kotae_verifier_decisions_total", "kotae_degraded_total", "kotae_dead_letters_total", "kotae_model_calls_total",
    "kotae_model_tokens_total", "kotae_model_cost_usd_total", "kotae_model_call_seconds",
    "kotae_stage_restarts_total", "kotae_model_requests_total", "kotae_model_budget_usd_per_hour",
    "kotae_air_outcomes_total", "kotae_onair_speaking", "kotae_onair_queue", "kotae_onair_gap_seconds",
    "kotae_onair_held",
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


def _observe_answer(stage: str, message: AnswerV1, source: Any) -> None:
    OUTCOMES.labels(stage, message.outcome).inc()
    if isinstance(source, CommentV1) and message.outcome in ("clarify", "unanswered"):
        GATE.labels("clarify" if message.outcome == "clarify" else "no_match").inc()
    if isinstance(source, DraftV1):
        if message.outcome in ("verified", "rejected"):
            verdict = "unavailable" if message.verdict is None else str(message.verdict)
            VERDICTS.labels(verdict, message.methods.get(stage, "")).inc()
        if message.decided_by:
            VERIFIER_DECISIONS.labels(message.decided_by, message.outcome).inc()


def observe_published(stage: str, message: Any, source: Any, prices: dict[str, tuple[float, float]]) -> None:
    """Count what ``stage`` just published in reply to ``source``: outcomes, gate, verdicts, degradation, model calls.

    What is counted follows from the message types, not from the stage's name: the
    stage that turns a comment into evidence or an outcome is the retrieval gate; the
    one that turns a draft into an outcome is the verifier.
    """
    if isinstance(message, AnswerV1):
        _observe_answer(stage, message, source)
    elif isinstance(message, RetrievalV1) and isinstance(source, CommentV1):
        GATE.labels(message.gate).inc()
    if isinstance(message, PipelineMessage) and message.degraded and not getattr(source, "degraded", False):
        DEGRADED.labels(stage).inc()  # this stage fell back; later stages only carry the flag
    for call in message.model_calls if isinstance(message, PipelineMessage | EvaluationV1) else ():
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


def prime(stage: str, model: str | None = None) -> None:
    """Export a stage's results, outcomes, dead letters and degraded count at 0 before anything happened.

    A counter that appears with its first increment looks unchanged to ``increase()``,
    so the first dead letter of a process would raise no alert, and the outcomes
    counted against the comments that came in would fall short by every series'
    first value. ``model`` (``provider:name``, the stage's configured model) gets its
    tokens and cost at 0 too: otherwise a process whose calls all land between two
    scrapes spends money the cost alert never sees.
    """
    if model is not None:
        MODEL_COST.labels(stage, model)
        for direction in ("input", "output"):
            MODEL_TOKENS.labels(stage, model, direction)
    for result in _RESULTS:
        MESSAGES.labels(stage, result)
    HANDLE_SECONDS.labels(stage)
    for outcome in ANSWER_OUTCOMES:
        OUTCOMES.labels(stage, outcome)
    for error_type in _DEAD_LETTER_TYPES:
        DEAD_LETTERS.labels(stage, error_type)
    DEGRADED.labels(stage)


_served: set[int] = set()
_budget_in: list[CollectorRegistry] = []


def serve_metrics(
    port: int, registry: CollectorRegistry = REGISTRY, *, budget_usd_per_hour: float | None = None
) -> int:
    """Expose ``/metrics`` on ``port`` (once per process); returns the port.

    ``budget_usd_per_hour`` is exported for the cost alert to compare with (no
    budget: no sample, no alert). A stage's own series are made by :func:`prime`.
    """
    if budget_usd_per_hour is not None:
        MODEL_BUDGET.set(budget_usd_per_hour)
        if registry not in _budget_in:
            registry.register(MODEL_BUDGET)
            _budget_in.append(registry)
    if port not in _served:
        start_http_server(port, registry=registry)
        _served.add(port)
    return port
