"""The model judge through the real openai and anthropic SDKs against a local fake model server.

Each metric has its own prompt; the fake answers by which prompt it was sent.
What must hold: a usable reply gives a score with every call recorded; a 500,
a body that is not JSON, or a reply that is not the JSON asked for leaves that
metric null with the reason (or, when the model is down for every metric, the
job failed) — never a made-up score.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import pytest

from kotae.contracts import AnswerV1, Citation, CommentV1, Evidence
from kotae.providers import ChatModel, ModelUnavailable
from kotae.services.evaluator.judge import PROMPT_VERSIONS, Embeds, ModelJudge
from tests.fakes.model_server import FakeModelServer

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CHILDCARE = Evidence(
    doc_id="childcare-2027",
    chunk_id="c#1",
    title="子育て支援",
    text="0〜2歳児の保育料は月額1万5千円を上限にします。",
    lang="ja",
)
BUS = Evidence(
    doc_id="bus-fare-2027", chunk_id="b#1", title="バス", text="みなとループの運賃を大人1回150円にします。", lang="ja"
)
OLD = Evidence(
    doc_id="childcare-2025",
    chunk_id="o#1",
    text="2025年の保育料の上限は月額2万円でした。",
    lang="ja",
    valid_from=date(2025, 1, 1),
    valid_to=date(2025, 12, 31),
)


def answer(
    text: str = "0〜2歳児の保育料は月額1万5千円を上限にします[1]。", docs: list[Evidence] | None = None, **kw: Any
) -> AnswerV1:
    q = "保育料の上限はいくら？"
    c = CommentV1(comment_id="c1", stream_id="s1", author="v", text=q, normalized=q, published_at=AT)
    docs = [CHILDCARE, BUS] if docs is None else docs
    fields: dict[str, Any] = dict(
        comment_id="c1",
        stream_id="s1",
        comment=c,
        outcome="verified",
        answer=text,
        citations=[Citation(n=1, doc_id=docs[0].doc_id)] if docs else [],
        docs=docs,
        methods={"generator": "extractive"},
    )
    fields.update(kw)
    return AnswerV1(**fields)


class FixedEmbeds(Embeds):
    """Unit vectors: the viewer's question, then questions alternating identical and orthogonal to it."""

    def __init__(self) -> None:
        super().__init__("fixed")

    def vectors(self, texts: list[str]) -> np.ndarray:
        rows = [[1.0, 0.0]] + [[1.0, 0.0] if "保育料" in t else [0.0, 1.0] for t in texts[1:]]
        return np.array(rows, dtype=np.float32)


GOOD = {
    "faithfulness": json.dumps(
        {"claims": [{"claim": "保育料の上限は月額1万5千円", "supported": True, "evidence": [1], "reason": "[1]に記載"}]}
    ),
    "answer_relevancy": json.dumps(
        {
            "questions": ["保育料の上限は？", "バスの運賃は？"],
            "noncommittal": False,
            "relevant": True,
            "complete": True,
            "reason": "上限額を答えている",
        }
    ),
    "context_precision": json.dumps(
        {"verdicts": [{"n": 1, "useful": True, "reason": "上限額"}, {"n": 2, "useful": False, "reason": "無関係"}]}
    ),
}


def which_prompt(body: dict[str, Any]) -> str:
    system = body.get("system") or body["messages"][0]["content"]
    if "Break the answer into its claims" in system:
        return "faithfulness"
    if "write up to three questions" in system:
        return "answer_relevancy"
    return "context_precision"


def responder(overrides: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    replies = {**GOOD, **(overrides or {})}

    def respond(path: str, body: dict[str, Any]) -> str:
        return replies[which_prompt(body)]

    return respond


def judge_for(fake: FakeModelServer, provider: str = "compatible") -> ModelJudge:
    if provider == "anthropic":
        model = ChatModel.from_spec(
            "anthropic:judge", setting="KOTAE_EVALUATOR_MODEL", base_url=fake.url, api_key="k", timeout_s=5
        )
    else:
        model = ChatModel.from_spec(f"compatible:{fake.url}/v1|judge", setting="KOTAE_EVALUATOR_MODEL", timeout_s=5)
    return ModelJudge(model, FixedEmbeds(), reask=1)


@pytest.mark.parametrize("provider", ["compatible", "anthropic"])
async def test_a_usable_reply_scores_every_metric_and_records_every_call(provider: str) -> None:
    with FakeModelServer(responder=responder()) as fake:
        ev = await judge_for(fake, provider).evaluate(answer(), final=False)
    assert ev.status == "ok" and ev.mode == "model" and ev.method == "model"
    assert ev.model in ("compatible:judge", "anthropic:judge")
    assert ev.faithfulness.value == 1.0 and (ev.faithfulness.numerator, ev.faithfulness.denominator) == (1, 1)
    assert ev.answer_relevancy.value == pytest.approx(0.5)  # one generated question matches, one does not
    assert ev.answer_relevancy.method == "model+embedding"
    assert ev.context_precision is not None and ev.context_precision.value == 1.0
    assert ev.prompt_versions == PROMPT_VERSIONS
    assert sorted(c.prompt_version for c in ev.model_calls) == sorted(PROMPT_VERSIONS.values())
    assert all(c.stage == "evaluator" and c.input_tokens == 11 for c in ev.model_calls)
    j = ev.judgement
    assert j is not None
    assert (j.cited.value, j.supported.value, j.timely.value, j.relevant.value, j.complete.value) == (
        True,
        True,
        True,
        True,
        True,
    )
    assert ev.claims[0].evidence_ids == ["childcare-2027"]


async def test_one_unsupported_claim_makes_the_answer_unsupported() -> None:
    claims = {"claims": [
        {"claim": "上限は月額1万5千円", "supported": True, "evidence": [1], "reason": "記載あり"},
        {"claim": "第3子は無料", "supported": False, "evidence": [], "reason": "資料にない"},
    ]}  # fmt: skip
    with FakeModelServer(responder=responder({"faithfulness": json.dumps(claims)})) as fake:
        ev = await judge_for(fake).evaluate(answer(), final=True)
    assert ev.faithfulness.value == 0.5
    assert ev.judgement is not None and ev.judgement.supported.value is False
    assert "第3子" in (ev.judgement.supported.reason or "")


async def test_a_past_fact_is_not_timely_or_relevant_whatever_the_model_says() -> None:
    text = "2025年の保育料の上限は月額2万円でした[1]。"
    with FakeModelServer(responder=responder()) as fake:
        ev = await judge_for(fake).evaluate(answer(text, docs=[OLD]), final=True)
    j = ev.judgement
    assert j is not None
    assert j.supported.value is True
    assert j.timely.value is False and j.relevant.value is False and j.complete.value is False


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param("garbage", id="body-not-json"),
        pytest.param("I think the answer is fine.", id="reply-not-json"),
        pytest.param(json.dumps({"claims": [{"claim": "x", "supported": "mostly"}]}), id="wrong-shape"),
    ],
)
async def test_an_unusable_reply_leaves_the_metric_null_with_its_reason(fault: str) -> None:
    with FakeModelServer(responder=responder({"faithfulness": fault})) as fake:
        ev = await judge_for(fake).evaluate(answer(), final=False)
        asked = [r for r in fake.requests if which_prompt(r["body"]) == "faithfulness"]
    assert ev.status == "ok"
    assert ev.faithfulness.value is None and ev.faithfulness.numerator is None
    assert "judge reply unusable" in (ev.faithfulness.reason or "")
    assert ev.judgement is not None and ev.judgement.supported.value is None
    assert ev.claims == []
    assert len(asked) == 2  # asked once more (KOTAE_MODEL_REASK=1), then given up
    assert ev.answer_relevancy.value is not None  # the other metrics still count


async def test_a_500_is_retried_through_the_bus_then_the_job_is_recorded_failed() -> None:
    with FakeModelServer(default="500") as fake:
        judge = judge_for(fake)
        with pytest.raises(ModelUnavailable):
            await judge.evaluate(answer(), final=False)  # not the last delivery: redelivered later
        ev = await judge.evaluate(answer(), final=True)
    assert ev.status == "failed" and ev.error and "500" in ev.error and "judge unavailable" in ev.error
    assert ev.faithfulness.value is None and ev.answer_relevancy.value is None
    assert ev.context_precision is not None and ev.context_precision.value is None
    assert ev.model == "compatible:judge" and ev.prompt_versions == PROMPT_VERSIONS


async def test_a_500_on_one_metric_leaves_only_that_metric_null_on_the_last_delivery() -> None:
    with FakeModelServer(responder=responder({"context_precision": "500"})) as fake:
        ev = await judge_for(fake).evaluate(answer(), final=True)
    assert ev.status == "ok"
    assert ev.context_precision is not None and ev.context_precision.value is None
    assert "judge unavailable" in (ev.context_precision.reason or "")
    assert ev.faithfulness.value == 1.0


async def test_no_context_gives_no_context_precision_and_no_call_for_it() -> None:
    with FakeModelServer(responder=responder()) as fake:
        ev = await judge_for(fake).evaluate(answer("保育料は月額1万5千円です。", docs=[]), final=True)
        prompts = {which_prompt(r["body"]) for r in fake.requests}
    assert ev.context_precision is None
    assert ev.faithfulness.value is None and ev.faithfulness.reason == "no retrieved context"
    assert ev.judgement is not None and ev.judgement.supported.value is None and ev.claims == []
    assert prompts == {"answer_relevancy"}


async def test_an_answer_that_was_not_verified_costs_no_call() -> None:
    with FakeModelServer(responder=responder()) as fake:
        ev = await judge_for(fake).evaluate(answer(outcome="unanswered", answer=None, docs=[]), final=True)
        assert fake.requests == []
    assert ev.status == "ok" and ev.faithfulness.value is None and ev.faithfulness.reason
    assert ev.judgement is not None and ev.judgement.supported.value is None


async def test_a_verdict_for_the_first_block_only_is_asked_again_naming_the_blocks_then_left_null() -> None:
    # What Qwen2.5-1.5B on llama.cpp replied to context_precision.v1, 4 times out of 5.
    first_only = json.dumps({"verdicts": [{"n": 1, "useful": True, "reason": "The answer uses block [1]."}]})
    with FakeModelServer(responder=responder({"context_precision": first_only})) as fake:
        ev = await judge_for(fake).evaluate(answer(), final=False)
        asked = [r for r in fake.requests if which_prompt(r["body"]) == "context_precision"]
    assert ev.context_precision is not None and ev.context_precision.value is None
    assert "expected a verdict for each of the 2 blocks, got [1]" in (ev.context_precision.reason or "")
    assert len(asked) == 2 and "each of the 2 blocks" in asked[1]["body"]["messages"][-1]["content"]
    assert "For EVERY numbered context block" in asked[0]["body"]["messages"][0]["content"]  # context_precision.v2
    assert ev.model_calls and {c.prompt_version for c in ev.model_calls} >= {"context_precision.v2"}
