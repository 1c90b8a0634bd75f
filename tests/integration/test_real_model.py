"""Every model method against a real model: the local llama.cpp server of ``scripts/real-model.sh``.

Marked ``realmodel``: skipped, saying why, when the model is not installed
(``scripts/real-model.sh install``), or when ``KOTAE_REALMODEL=0`` opts out. Each test
module run starts its own server (its own pid, in a folder of its own) and stops it.

What must hold with a real, weak model (Qwen2.5-Coder-1.5B-Instruct): a comment goes
through every model stage to exactly one outcome with every call recorded; a wrong
answer is never verified, whatever the model verifier says; and when the server dies in
the middle of a call, or is not up at all, nothing is verified — the verifier fails closed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kotae.contracts import AnswerV1
from kotae.language.text import search_tokens
from kotae.providers import ChatModel, ModelUnavailable
from kotae.replay import run_replay
from kotae.services.evaluator.judge import Embeds, ModelJudge
from kotae.services.ingest.sources import RawComment
from kotae.services.verifier.decision import VerifierPolicy, decide
from kotae.settings import Settings
from tests.factories import CAP_EVIDENCE, FAITHFUL, HONEST, MODELS_AT, draft, draft_for
from tests.integration.stages import running_stages

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "real-model.sh"
#: A real model on 2 shared cores: one call can take a minute or more.
TIMEOUT_S = 600.0

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(3600)]


def _installed() -> str | None:
    """Why the tier cannot run here, or None when it can."""
    if os.environ.get("KOTAE_REALMODEL", "1") == "0":
        return "KOTAE_REALMODEL=0: the real-model tier is opted out"
    done = subprocess.run(["bash", str(SCRIPT), "check"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return "the real model is not installed: run scripts/real-model.sh install"
    return None


@dataclass
class RealServer:
    """One llama.cpp server this module started: its spec, pid and port."""

    spec: str
    run_dir: Path

    @property
    def pid(self) -> int:
        return int((self.run_dir / "server.pid").read_text())

    @property
    def port(self) -> int:
        return int(self.spec.split("|")[0].rsplit(":", 1)[1].split("/")[0])

    def model(self, setting: str = "KOTAE_VERIFIER_MODEL", timeout_s: float = TIMEOUT_S) -> ChatModel:
        return ChatModel.from_spec(self.spec, setting=setting, timeout_s=timeout_s, concurrency=1)


def _serve(run_dir: Path) -> RealServer:
    env = {**os.environ, "KOTAE_REAL_MODEL_RUN_DIR": str(run_dir)}
    done = subprocess.run(["bash", str(SCRIPT), "serve"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return RealServer(done.stdout.splitlines()[0], run_dir)


def _stop(server: RealServer) -> None:
    env = {**os.environ, "KOTAE_REAL_MODEL_RUN_DIR": str(server.run_dir)}
    subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True, env=env, timeout=60)


@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    why = _installed()
    if why:
        pytest.skip(why)
    server = _serve(tmp_path_factory.mktemp("real-model"))
    try:
        yield server
    finally:
        _stop(server)


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[RealServer]:
    """A server of this test's own, to kill."""
    why = _installed()
    if why:
        pytest.skip(why)
    server = _serve(tmp_path / "own-model")
    try:
        yield server
    finally:
        _stop(server)


def with_real_models(settings: Settings, spec: str, **extra: object) -> Settings:
    update: dict[str, object] = {
        "triage_model": spec,
        "rewrite_model": spec,
        "reranker_model": spec,
        "generator_model": spec,
        "verifier_model": spec,
        "verifier_mode": "model",
        "evaluator_model": spec,
        "model_timeout_s": TIMEOUT_S,
        "model_concurrency": 1,
        "ack_wait_s": 30.0,
    }
    return settings.model_copy(update=update | extra)


def _connected(port: int) -> bool:
    """Whether a client holds an established TCP connection to local ``port`` (a call is in flight)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = [line.split() for line in Path(table).read_text().splitlines()[1:]]
        except OSError:
            continue
        if any(row[3] == "01" and row[2].endswith(f":{port:04X}") for row in rows):
            return True
    return False


async def _kill_once_in_flight(server: RealServer, seconds: float = 1.0) -> None:
    """SIGKILL the server a moment after a call to it started (the prompt is still being read)."""
    while not _connected(server.port):
        await asyncio.sleep(0.05)
    await asyncio.sleep(seconds)
    os.kill(server.pid, signal.SIGKILL)


# --- one comment through every model stage --------------------------------------------------


async def test_one_comment_through_every_model_stage(
    real_server: RealServer, nats_url: str, loaded_settings: Settings
) -> None:
    settings = with_real_models(loaded_settings, real_server.spec)
    async with running_stages(settings, nats_url):
        result = await run_replay(settings, nats_url, [HONEST], timeout=TIMEOUT_S * 6, wait_for_evaluations=TIMEOUT_S)
    record = result.records["q-1"]
    answer = result.answers["q-1"]
    assert record["outcome"] in ("verified", "rejected", "unanswered", "clarify"), record
    # Triage asked the model (or says why the rules decided instead).
    assert answer.comment.triage == "model:triage.v2" or "triage model failed" in (answer.degraded_reason or "")
    stages = [c.stage for c in answer.model_calls]
    assert stages[:1] == ["retriever"] and "reranker" in stages and "generator" in stages, stages
    for call in answer.model_calls:
        assert call.prompt_version and call.latency_ms and call.input_tokens and call.output_tokens, call
        assert call.model == f"compatible:{real_server.spec.rsplit('|', 1)[1]}"
    if "verifier" in stages:
        assert answer.decided_by in ("model", "floor", "offline")
    if record["outcome"] == "verified":
        # A verified answer to this question must carry its fact (the cap, however the model
        # writes the amount: 1万5千円 or 15,000円) and cite its document.
        assert "15000" in search_tokens(record["answer"]), record
        assert record["citations"][0]["doc_id"] == "childcare-2027", record
    evaluation = result.evaluations.get("q-1")
    if record["outcome"] == "verified":
        assert evaluation is not None and evaluation.method == "model"
        assert {c.stage for c in evaluation.model_calls} == {"evaluator"}


async def test_the_judge_scores_or_says_why_not(real_server: RealServer) -> None:
    d = draft(FAITHFUL)
    answer = d.forward(
        AnswerV1, stage="verifier", method="model", outcome="verified", answer=d.answer, docs=d.docs, verdict=0
    )
    judge = ModelJudge(real_server.model("KOTAE_EVALUATOR_MODEL"), Embeds("use-multilingual-v3"), reask=1)
    try:
        evaluation = await judge.evaluate(answer, final=True)
    finally:
        await judge.model.aclose()
    assert evaluation.model_calls and {c.stage for c in evaluation.model_calls} == {"evaluator"}
    for metric in (evaluation.faithfulness, evaluation.answer_relevancy, evaluation.context_precision):
        assert metric is not None
        assert metric.value is not None or metric.reason, metric  # a score, or the reason there is none


# --- a weak model never gets a wrong answer verified ------------------------------------------

#: A true sentence of the evidence that answers another question: asked the sick-child care fee,
#: it gives the nursery fee cap (same kind, a shared word).
NOT_THE_QUESTION = (
    "病児保育の利用料はいくら？",
    "0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします[1]。",
)

WRONG = {
    "number changed": "0〜2歳児の保育料は、世帯の所得にかかわらず月額2万5千円を上限にします[1]。",
    "relation turned": "0〜2歳児の保育料は、世帯の所得に応じて月額1万5千円から上がります[1]。",
    "invented person": "北原健一によれば、0〜2歳児の保育料は月額1万5千円を上限にします[1]。",
    # Asked 保育料っていくらになるの: true and about the fee, but without the cap it asks for.
    "answers in part": "第2子以降の保育料は無料にします[1]。",
    "uncited": "保育料は月額1万5千円が上限です。",
}


@pytest.mark.parametrize("mode", ["model", "cascade"])
async def test_no_wrong_answer_is_verified_whatever_the_model_says(real_server: RealServer, mode: str) -> None:
    model = real_server.model()
    # sure=0.9999 sends every draft the offline method is not certain of to the model in cascade mode.
    policy = VerifierPolicy(mode=mode, model=model, reask=1, sure=0.9999)  # type: ignore[arg-type]
    try:
        drafts = {name: draft(text) for name, text in WRONG.items()}
        drafts["not the question"] = draft_for(*NOT_THE_QUESTION, [CAP_EVIDENCE])
        decisions = {name: await decide(d, policy) for name, d in drafts.items()}
    finally:
        await model.aclose()
    verified = {name: d.reasons for name, d in decisions.items() if d.outcome == "verified"}
    assert verified == {}, verified
    asked = [c for d in decisions.values() for c in d.calls]
    assert all(c.stage == "verifier" and c.prompt_version == "verify.v2" for c in asked)
    # A partial answer is the model's call in cascade mode too: the offline method cannot tell it.
    assert asked and decisions["answers in part"].decided_by in ("model", "floor")


# --- fail closed --------------------------------------------------------------------------------


async def test_a_server_killed_mid_call_is_unavailable_not_a_verdict(own_server: RealServer) -> None:
    model = own_server.model()
    policy = VerifierPolicy(mode="model", model=model, reask=1)
    try:
        call = asyncio.create_task(decide(draft(FAITHFUL), policy))
        await _kill_once_in_flight(own_server)
        with pytest.raises(ModelUnavailable):
            await call
    finally:
        await model.aclose()


async def test_the_pipeline_rejects_when_the_verifier_model_dies_mid_call(
    own_server: RealServer, nats_url: str, loaded_settings: Settings
) -> None:
    settings = loaded_settings.model_copy(
        update={
            "verifier_model": own_server.spec,
            "verifier_mode": "model",
            "model_timeout_s": TIMEOUT_S,
            "max_deliver": 2,
            "retry_backoff_s": 0.2,
        }
    )
    async with running_stages(settings, nats_url):
        replay = asyncio.create_task(run_replay(settings, nats_url, [HONEST], timeout=TIMEOUT_S))
        await _kill_once_in_flight(own_server)
        result = await replay
    record = result.records["q-1"]
    assert record["outcome"] == "rejected", record
    assert "verifier_unavailable" in record["reason"]


async def test_with_the_server_not_up_nothing_is_verified_and_nothing_fails(
    own_server: RealServer, nats_url: str, loaded_settings: Settings
) -> None:
    _stop(own_server)  # the port it had is closed now
    settings = loaded_settings.model_copy(
        update={"model_timeout_s": 30.0, "max_deliver": 2, "retry_backoff_s": 0.2, "verifier_mode": "model"}
    )
    for who in ("verifier", "generator"):
        models = {"verifier_model": own_server.spec} | (
            {"generator_model": own_server.spec} if who == "generator" else {}
        )
        s = settings.model_copy(update=models)
        comment = RawComment(id=f"not-up-{who}", author="viewer", text=HONEST.text, published_at=MODELS_AT)
        async with running_stages(s, nats_url):
            result = await run_replay(s, nats_url, [comment], timeout=120)
        record, answer = result.records[comment.id], result.answers[comment.id]
        # A model that is not up never fails a comment: the generator falls back to its extractive
        # answer (degraded, saying why), and the verifier, unable to check it, fails closed.
        assert record["outcome"] == "rejected" and "verifier_unavailable" in record["reason"], record
        if who == "generator":
            assert answer.methods["generator"] == "extractive", answer
            assert (answer.degraded_reason or "").startswith("generator model unavailable: "), answer
