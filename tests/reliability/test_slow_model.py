"""A slow model slows answers down; it never fails them.

One local model server with one slot serves the reranker, the generator and the verifier,
each a process of its own (as ``kotae up`` runs them). Calls share the endpoint's slot
through the bus (``KOTAE_MODEL_ENDPOINT_CONCURRENCY=1``), so none waits at the server
behind another stage's, and the per-call timeout — shorter than a few calls queued at the
server would take — measures only the call. And a model that is down for good ends each
stage as its fallback says: retrieval order and the extractive answer (``degraded``), the
verifier ``rejected`` with ``verifier_unavailable``; never ``failed``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kotae.contracts import RerankV1, subjects
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import load_records
from kotae.replay import run_replay
from kotae.settings import Settings
from kotae.stack import Stack
from tests.factories import respond as honest
from tests.fakes.model_server import FakeModelServer
from tests.integration.stages import running_stages
from tests.reliability.harness import SAMPLES, chaos_settings, generated_comments, read_ledger, read_stream

#: Time the one-slot server takes per call, and the client's timeout: five calls queued at the
#: server would time out the last of them.
CALL_S = 0.3
TIMEOUT_S = 1.5


@pytest.fixture
async def one_slot_stack(
    tmp_path: Path, chaos_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Stack, Settings, FakeModelServer]]:
    with FakeModelServer(responder=honest, delay_s=CALL_S, slots=1) as fake:
        base = f"compatible:{fake.url}/v1|"
        env = {
            "KOTAE_RERANKER_MODEL": base + "ranker",
            "KOTAE_GENERATOR_MODEL": base + "writer",
            "KOTAE_VERIFIER_MODEL": base + "checker",
            "KOTAE_MODEL_TIMEOUT_S": str(TIMEOUT_S),
            "KOTAE_MODEL_ENDPOINT_CONCURRENCY": "1",
            "KOTAE_MAX_DELIVER": "2",  # a call that timed out would soon show as degraded
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)  # the stage processes inherit the environment
        settings = chaos_settings(tmp_path / "data", {**chaos_env, **env})
        load_knowledge_base(load_records(SAMPLES / "kb"), "default", settings)
        stack = Stack(settings, stages=("retriever", "reranker", "generator", "verifier"))
        await stack.start()
        try:
            yield stack, settings, fake
        finally:
            stack.stop()


async def test_three_stage_processes_on_one_slot_end_every_comment_in_one_outcome_none_failed(
    one_slot_stack: tuple[Stack, Settings, FakeModelServer],
) -> None:
    stack, settings, fake = one_slot_stack
    comments = generated_comments(8, prefix="slot-")
    result = await run_replay(settings, stack.url, comments, timeout=90)
    ledger = await read_ledger(stack.url, [c.id for c in comments])
    answers = [ledger.final(c.id) for c in comments]
    outcomes = Counter(a.outcome for a in answers)

    assert result.missing == []
    assert ledger.figures().terminal == len(comments), ledger.problems()
    assert "failed" not in outcomes, outcomes
    assert outcomes["verified"] > 0, outcomes
    # Every stage called the model, one call at a time at the server, and none gave up on it.
    assert {r["body"]["model"] for r in fake.requests} == {"ranker", "writer", "checker"}
    assert fake.busiest == 1
    assert [a.degraded_reason for a in answers if a.degraded] == []


async def test_a_model_down_for_good_degrades_the_reranker_and_generator_and_the_verifier_rejects(
    nats_url: str, chaos_loaded: Settings
) -> None:
    comment = generated_comments(3, prefix="down-")[2]  # 保育料っていくらになるの: answered from the records
    with FakeModelServer("500") as fake:
        base = f"compatible:{fake.url}/v1|"
        settings = chaos_loaded.model_copy(
            update={
                "reranker_model": base + "ranker",
                "generator_model": base + "writer",
                "verifier_model": base + "checker",
                "max_deliver": 2,
                "retry_backoff_s": 0.05,
            }
        )
        async with running_stages(settings, nats_url):
            result = await run_replay(settings, nats_url, [comment], timeout=60)
            ledger = await read_ledger(nats_url, [comment.id])
            (reranked,) = [
                RerankV1.model_validate_json(m.data)
                for m in await read_stream(nats_url, subjects.STREAM_PIPELINE, subjects.RERANK)
            ]
    answer = ledger.final(comment.id)

    assert result.missing == []
    assert reranked.degraded and reranked.degraded_reason.startswith("reranker model unavailable: ")
    assert reranked.methods["reranker"] == "model" and reranked.docs  # retrieval order kept
    assert answer.methods["generator"] == "extractive"
    assert answer.degraded_reason.startswith("generator model unavailable: ")
    assert answer.outcome == "rejected"
    assert answer.reason.startswith("verifier_unavailable: ")
    assert answer.verdict is None  # nothing was judged: the fixed safe reply, not a verdict
    assert {r["body"]["model"] for r in fake.requests} == {"ranker", "writer", "checker"}
