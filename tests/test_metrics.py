"""What the bus edge counts for each published message, and the price table."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from kotae.contracts import AnswerV1, ModelCall, RerankV1
from kotae.metrics import observe_published, price_of
from kotae.settings import SettingsError, load_settings
from tests.factories import draft, retrieval


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_gate_decisions_outcomes_and_verdicts_are_counted() -> None:
    before = value("kotae_gate_decisions_total", decision="answer")
    found = retrieval([], [])
    observe_published("retriever", found, found.comment, {})  # evidence for a comment: the gate said answer
    assert value("kotae_gate_decisions_total", decision="answer") == before + 1

    d = draft("x[1]。", comment_id="m-2")
    rejected = AnswerV1(
        comment_id="m-2",
        stream_id="s",
        comment=d.comment,
        outcome="rejected",
        verdict=2,
        methods={"verifier": "citation_and_support"},
    )
    before_v = value("kotae_verifier_verdicts_total", verdict="2", method="citation_and_support")
    before_o = value("kotae_outcomes_total", stage="verifier", outcome="rejected")
    observe_published("verifier", rejected, d, {})  # an outcome for a draft: a verdict
    assert value("kotae_verifier_verdicts_total", verdict="2", method="citation_and_support") == before_v + 1
    assert value("kotae_outcomes_total", stage="verifier", outcome="rejected") == before_o + 1


def test_verifier_outcomes_are_counted_by_the_path_that_decided_them() -> None:
    d = draft("x[1]。", comment_id="m-3")
    before = {
        by: value("kotae_verifier_decisions_total", decided_by=by, outcome="verified") for by in ("offline", "model")
    }
    for by in ("offline", "offline", "model"):
        verified = AnswerV1(
            comment_id="m-3", stream_id="s", comment=d.comment, outcome="verified", verdict=0, decided_by=by,
            methods={"verifier": "cascade(citation_and_support+model)"},
        )  # fmt: skip
        observe_published("verifier", verified, d, {})
    assert value("kotae_verifier_decisions_total", decided_by="offline", outcome="verified") == before["offline"] + 2
    assert value("kotae_verifier_decisions_total", decided_by="model", outcome="verified") == before["model"] + 1


def test_only_the_calls_a_stage_made_are_counted_with_tokens_and_cost() -> None:
    calls = [
        ModelCall(stage="reranker", model="openai:gpt-test-2026", input_tokens=1000, output_tokens=10, latency_ms=20),
        ModelCall(
            stage="generator",
            model="openai:gpt-test-2026",
            input_tokens=2_000_000,
            output_tokens=500_000,
            latency_ms=900,
        ),
    ]
    d = draft("x[1]。", comment_id="m-3").model_copy(update={"model_calls": calls})
    prices = {"openai:gpt-test": (0.5, 2.0), "openai:": (100.0, 100.0)}
    before = value("kotae_model_cost_usd_total", stage="generator", model="openai:gpt-test-2026")
    before_r = value("kotae_model_calls_total", stage="reranker", model="openai:gpt-test-2026", outcome="ok")
    observe_published("generator", d, d, prices)
    # 2M input tokens at 0.5 + 0.5M output at 2.0 per million = 2.0 USD; the longest prefix wins.
    assert value("kotae_model_cost_usd_total", stage="generator", model="openai:gpt-test-2026") == pytest.approx(
        before + 2.0
    )
    assert (
        value("kotae_model_tokens_total", stage="generator", model="openai:gpt-test-2026", direction="output")
        >= 500_000
    )
    # The reranker's call travels in the message but was counted by the reranker, not here.
    assert value("kotae_model_calls_total", stage="reranker", model="openai:gpt-test-2026", outcome="ok") == before_r


def test_price_of_matches_dated_variants_and_unknown_models() -> None:
    prices = {"anthropic:claude-x": (3.0, 15.0)}
    assert price_of("anthropic:claude-x-20260101", prices) == (3.0, 15.0)
    assert price_of("openai:other", prices) is None


def test_a_bad_price_setting_names_the_variable() -> None:
    assert load_settings(model_prices="openai:a=1/2, compatible:http://h/v1|m=0/0").model_prices == {
        "openai:a": (1.0, 2.0),
        "compatible:http://h/v1|m": (0.0, 0.0),
    }
    with pytest.raises(SettingsError, match="KOTAE_MODEL_PRICES"):
        load_settings(model_prices="openai:a=cheap")


def test_a_fall_back_is_counted_by_the_stage_that_made_it_not_by_those_that_carry_it() -> None:
    found = retrieval([], [])
    degraded = found.forward(
        RerankV1, stage="reranker", method="keep_top_n", degraded="reply not JSON", docs=[], top_score=0.0
    )
    before_r = value("kotae_degraded_total", stage="reranker")
    before_g = value("kotae_degraded_total", stage="generator")
    observe_published("reranker", degraded, found, {})
    draft_after = degraded.forward(
        AnswerV1, stage="generator", method="extractive", outcome="unanswered", reason="not_found"
    )
    observe_published("generator", draft_after, degraded, {})
    assert value("kotae_degraded_total", stage="reranker") == before_r + 1
    assert value("kotae_degraded_total", stage="generator") == before_g
    assert draft_after.degraded and draft_after.degraded_reason == "reply not JSON"


def test_without_a_budget_no_budget_sample_is_exported() -> None:
    """An unset budget must not read as 0 USD, which every priced call would exceed."""
    assert REGISTRY.get_sample_value("kotae_model_budget_usd_per_hour") is None


def test_a_stage_process_exports_its_models_cost_at_zero_before_any_call(tmp_path) -> None:  # noqa: ANN001
    """A cost series born with its first call reads as no increase to ``increase()``: the budget alert would
    miss everything a process spent before Prometheus first saw the series."""
    from faststream.nats import NatsBroker

    from kotae.metrics import prime
    from kotae.runtime import StageProcess
    from services.reranker import STAGE

    settings = load_settings(data_dir=tmp_path, reranker_model="compatible:http://127.0.0.1:9/v1|primed-ranker")
    process = StageProcess(STAGE, settings, NatsBroker("nats://127.0.0.1:9", logger=None))
    assert process.model_name == "compatible:primed-ranker"
    labels = {"stage": "reranker", "model": process.model_name}
    assert REGISTRY.get_sample_value("kotae_model_cost_usd_total", labels) is None
    prime(STAGE.name, process.model_name)  # what start() does first
    assert REGISTRY.get_sample_value("kotae_model_cost_usd_total", labels) == 0.0
    assert REGISTRY.get_sample_value("kotae_model_tokens_total", {**labels, "direction": "input"}) == 0.0
