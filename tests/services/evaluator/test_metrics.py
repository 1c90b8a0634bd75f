"""kotae.services.evaluator.metrics: rolling rates for Prometheus, labelled by the report's group keys."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from kotae.contracts import EvaluationV1, MetricScore
from kotae.contracts.v1 import AnswerJudgement, Judged
from kotae.services.evaluator.metrics import RollingRates


def ev(
    faith: MetricScore,
    *,
    supported: bool | None = True,
    status: str = "ok",
    stream: str = "s1",
    model: str | None = None,
) -> EvaluationV1:
    return EvaluationV1(
        comment_id="c", stream_id=stream, answer_message_id="m", outcome="verified", question="q",
        faithfulness=faith, answer_relevancy=MetricScore(reason="n/a"), method="model" if model else "lexical",
        model=model, mode="model" if model else "offline", kb="default", status=status,
        judgement=AnswerJudgement(supported=Judged(value=supported, reason="r")),
    )  # fmt: skip


def samples(rates: RollingRates) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in rates.registry.collect():
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def key(
    name: str, metric: str | None = None, stream: str = "s1", model: str = "-", mode: str = "offline", **extra: str
):  # type: ignore[no-untyped-def]
    labels = {"version": "kb:default", "stream": stream, "mode": mode, "model": model, "prompt_version": "-", **extra}
    if metric:
        labels["metric"] = metric
    return (name, tuple(sorted(labels.items())))


def test_rates_roll_over_the_last_window_of_each_group() -> None:
    rates = RollingRates(window=2)
    rates.add(ev(MetricScore(value=0.0, numerator=0, denominator=4), supported=False))  # falls out of the window
    rates.add(ev(MetricScore(value=1.0, numerator=2, denominator=2)))
    rates.add(ev(MetricScore(value=0.5, numerator=1, denominator=2)))
    rates.add(ev(MetricScore(value=1.0, numerator=1, denominator=1), stream="s2"))
    got = samples(rates)
    assert got[key("kotae_evaluation_rate", "faithfulness")] == 0.75
    assert got[key("kotae_evaluation_numerator", "faithfulness")] == 3
    assert got[key("kotae_evaluation_denominator", "faithfulness")] == 4
    assert got[key("kotae_evaluation_rate", "supported")] == 1.0
    assert got[key("kotae_evaluation_window_attempts")] == 2
    assert got[key("kotae_evaluations_total", status="ok")] == 3  # since start, not windowed
    assert got[key("kotae_evaluation_rate", "faithfulness", stream="s2")] == 1.0  # never pooled with s1


def test_a_zero_denominator_exports_no_rate_but_its_counts() -> None:
    rates = RollingRates()
    rates.add(ev(MetricScore(reason="evaluation failed"), supported=None, status="failed", model="openai:judge"))
    got = samples(rates)
    labels = {"model": "judge=openai:judge", "mode": "model"}
    assert key("kotae_evaluation_rate", "faithfulness", **labels) not in got
    assert got[key("kotae_evaluation_denominator", "faithfulness", **labels)] == 0
    assert got[key("kotae_evaluation_window_failed", **labels)] == 1
    assert got[key("kotae_evaluations_total", status="failed", **labels)] == 1


def test_served_over_http() -> None:
    rates = RollingRates()
    rates.add(ev(MetricScore(value=1.0, numerator=2, denominator=2)))
    server = rates.serve(0, addr="127.0.0.1")
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5).read().decode()
    finally:
        server.shutdown()
        server.server_close()
    families = {f.name: f for f in text_string_to_metric_families(body)}
    assert {"kotae_evaluation_rate", "kotae_evaluations"} <= set(families)
    [faith] = [s for s in families["kotae_evaluation_rate"].samples if s.labels["metric"] == "faithfulness"]
    assert faith.value == 1.0
    assert faith.labels == {
        "version": "kb:default",
        "stream": "s1",
        "mode": "offline",
        "model": "-",
        "prompt_version": "-",
        "metric": "faithfulness",
    }
