"""Models that fail at random: every comment still ends in one outcome, and nothing is verified unchecked.

Reranker, generator and verifier each talk to a fake model server through the
real openai SDK. At a configurable rate each call gets a fault instead of a
reply — 429, 500, a timeout, a body that is not JSON, JSON cut short, or a
reply in the wrong format (prose where JSON was asked for; an uncited claim
from the generator). Retries are few and short, so many comments exhaust them.
The promises: exactly one terminal outcome per comment, no duplicates, and a
``verified`` answer only with verdict 0, citations and a verifier call that
came back usable.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
from typing import Any

import pytest

from kotae.replay import run_replay
from kotae.settings import Settings
from tests.factories import respond as honest
from tests.fakes.model_server import FakeModelServer
from tests.integration.stages import running_stages
from tests.reliability.harness import SLOW, generated_comments, read_ledger, wait_until_settled

pytestmark = pytest.mark.slow

#: Share of model calls that fail (KOTAE_FAULT_RATE overrides it).
FAULT_RATE = float(os.environ.get("KOTAE_FAULT_RATE", "0.35"))
FAULTS = ("429", "500", "timeout", "garbage", "truncated", "wrong_format")
WRONG_FORMAT = {
    "ranker": "The relevant documents are the first and the second.",
    "writer": "I believe the fee will be about 30,000 yen a month, and it starts next spring.",
    "checker": "Looks accurate to me, verdict zero.",
}


class FaultyModels:
    """A responder: the honest fake's reply, or, at ``rate``, one of the faults (thread-safe, seeded)."""

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.injected: dict[str, int] = {}

    def __call__(self, path: str, body: dict[str, Any]) -> str | None:
        model = body.get("model", "")
        with self.lock:
            fault = self.rng.choice(FAULTS) if self.rng.random() < self.rate else None
            if fault:
                self.injected[fault] = self.injected.get(fault, 0) + 1
        if fault == "wrong_format":
            return WRONG_FORMAT.get(model, "?")
        return fault or honest(path, body)


def with_faulty_models(settings: Settings, url: str) -> Settings:
    base = f"compatible:{url}/v1|"
    return settings.model_copy(
        update={
            "reranker_model": base + "ranker",
            "generator_model": base + "writer",
            "verifier_model": base + "checker",
            "model_timeout_s": 1.0,
            "max_deliver": 3,
            "retry_backoff_s": 0.05,
            "ack_wait_s": 10.0,
            "model_reask": 1,
        }
    )


async def test_random_model_faults_never_lose_a_comment_or_verify_an_unchecked_draft(
    nats_url: str, chaos_loaded: Settings
) -> None:
    faults = FaultyModels(FAULT_RATE, seed=5)
    comments = generated_comments(150 if SLOW else 30, prefix="model-")
    with FakeModelServer(responder=faults, timeout_sleep_s=1.5) as fake:
        settings = with_faulty_models(chaos_loaded, fake.url)
        async with running_stages(settings, nats_url):
            result = await run_replay(settings, nats_url, comments, timeout=240 if SLOW else 120)
            await wait_until_settled(nats_url, ("retriever", "reranker", "generator", "verifier"))
            ledger = await read_ledger(nats_url, [c.id for c in comments], faults=sum(faults.injected.values()))
    figures = ledger.figures()
    print(
        "\n"
        + figures.table()
        + f"\nfaults by kind: {json.dumps(faults.injected)}; model requests: {len(fake.requests)}"
    )

    assert set(faults.injected) == set(FAULTS), faults.injected  # every kind of fault happened
    assert result.missing == []
    assert figures.lost == 0, ledger.problems()
    assert figures.duplicates == 0, ledger.problems()
    assert figures.unchecked_verified == 0, ledger.problems()
    assert figures.terminal == len(comments)
    answers = [ledger.final(c.id) for c in comments]
    # Whether any comment used up its retries depends on how the random faults fell (the
    # invariants above hold either way); the honest replies must still get through.
    assert any(a.outcome == "verified" for a in answers)
    for a in answers:
        if a.outcome == "verified":
            assert a.methods["verifier"] == "model"
            assert "30,000" not in (a.answer or "")


async def test_a_slow_verifier_call_outliving_the_ack_wait_publishes_one_outcome(
    nats_url: str, chaos_loaded: Settings
) -> None:
    """The first verifier call answers verdict 0 after longer than the ack wait; a second call would get a 500.

    The stage keeps the draft in progress while it works, so JetStream does not hand it
    out again, and exactly one outcome — from the check that ran — is published.
    """
    calls = {"n": 0}
    lock = threading.Lock()

    def slow_then_down(path: str, body: dict[str, Any]) -> str | None:
        with lock:
            calls["n"] += 1
            first = calls["n"] == 1
        if first:
            time.sleep(2.5)
            return json.dumps({"verdict": 0, "findings": []})
        return "500"

    comment = generated_comments(3, prefix="slow-")[2]  # 保育料っていくらになるの: a verified answer when checked
    with FakeModelServer(responder=slow_then_down) as fake:
        settings = chaos_loaded.model_copy(
            update={
                "verifier_model": f"compatible:{fake.url}/v1|checker",
                "model_timeout_s": 5.0,
                "ack_wait_s": 1.0,
                "max_deliver": 2,
                "retry_backoff_s": 0.05,
            }
        )
        async with running_stages(settings, nats_url):
            await run_replay(settings, nats_url, [comment], timeout=30)
            await asyncio.sleep(3.0)  # the slower handling finishes and publishes too
            ledger = await read_ledger(nats_url, [comment.id])
    assert ledger.figures().duplicates == 0, ledger.problems()
    assert calls["n"] == 1, "the draft was redelivered while its first check still ran"
    assert [a.outcome for a in ledger.answers[comment.id]] == ["verified"]
