"""Model keys never reach the logs, even at debug level and through every error path.

A whole stack runs as separate processes with fake OpenAI and Anthropic keys;
the reranker and generator use the key through the openai SDK, the verifier
through the anthropic SDK, all against a fake model server that fails half the
calls (429, 500, timeouts, bodies that are not JSON), so retries, exhausted
deliveries and fail-closed rejections are all logged. The keys must reach the
model server — they were really in use — and must appear in no log file.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import load_records
from kotae.replay import run_replay
from kotae.settings import Settings
from kotae.stack import Stack
from tests.factories import respond as honest
from tests.fakes.model_server import FakeModelServer
from tests.reliability.harness import SAMPLES, chaos_settings, generated_comments, read_ledger

pytestmark = pytest.mark.slow

OPENAI_KEY = "sk-test-SECRET123"
ANTHROPIC_KEY = "sk-ant-test-SECRET456"


def half_broken(seed: int):  # noqa: ANN201
    rng, lock = random.Random(seed), threading.Lock()

    def respond(path: str, body: dict[str, Any]) -> str | None:
        with lock:
            fault = rng.choice(["429", "500", "timeout", "garbage"]) if rng.random() < 0.5 else None
        return fault or honest(path, body)

    return respond


async def test_model_keys_never_appear_in_any_stage_log(
    tmp_path, monkeypatch: pytest.MonkeyPatch, chaos_env: dict[str, str]
) -> None:
    with FakeModelServer(responder=half_broken(11), timeout_sleep_s=1.5) as fake:
        env = {
            **chaos_env,
            "KOTAE_LOG_LEVEL": "debug",
            "KOTAE_OPENAI_API_KEY": OPENAI_KEY,
            "KOTAE_ANTHROPIC_API_KEY": ANTHROPIC_KEY,
            "KOTAE_ANTHROPIC_BASE_URL": fake.url,
            "KOTAE_RERANKER_MODEL": f"compatible:{fake.url}/v1|ranker",
            "KOTAE_GENERATOR_MODEL": f"compatible:{fake.url}/v1|writer",
            "KOTAE_VERIFIER_MODEL": "anthropic:checker",
            "KOTAE_MODEL_TIMEOUT_S": "1",
            "KOTAE_MAX_DELIVER": "2",
            "KOTAE_RETRY_BACKOFF_S": "0.05",
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        settings: Settings = chaos_settings(tmp_path / "data", env)
        load_knowledge_base(load_records(SAMPLES / "kb"), "default", settings)
        comments = generated_comments(8, prefix="secret-")
        stack = Stack(settings, stages=("retriever", "reranker", "generator", "verifier"))  # every model user
        await stack.start()
        try:
            result = await run_replay(settings, stack.url, comments, timeout=90)
            ledger = await read_ledger(stack.url, [c.id for c in comments])
        finally:
            stack.stop()
        sent = " ".join(str(v) for r in fake.requests for v in r["headers"].values())
        paths = {r["path"] for r in fake.requests}

    # The keys were in use, through both SDKs...
    assert OPENAI_KEY in sent and ANTHROPIC_KEY in sent
    assert "/v1/chat/completions" in paths and "/v1/messages" in paths
    assert result.missing == [] and ledger.figures().lost == 0
    assert any("message.retry" in p.read_text() for p in stack.log_dir.glob("*.log")), "no error path was logged"
    # ...and no log holds them, whole or in part.
    logs = sorted(stack.log_dir.glob("*.log"))
    assert {p.name.split("-")[0] for p in logs} == set(stack.stages)
    assert sum(p.stat().st_size for p in logs) > 0
    for path in logs:
        text = path.read_text(errors="replace")
        for secret in (OPENAI_KEY, ANTHROPIC_KEY, "SECRET123", "SECRET456"):
            assert secret not in text, f"{secret} in {path.name}"
