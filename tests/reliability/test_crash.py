"""Stage processes SIGKILLed mid-replay: no comment lost, none answered twice, nothing unverified passes.

Every stage runs as its own process (``Stack``). While comments flow, each
stage's process in turn is killed with SIGKILL — no drain, no ack, work half
done — and a replacement is started. The promises are read back from the
answers and dead-letter streams, as any subscriber would see them.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import Callable
from contextlib import suppress

import nats
import pytest

from kotae.contracts import AnswerV1, CommentV1, subjects
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import load_records
from kotae.replay import run_replay
from kotae.services.ingest.sources import RawComment
from kotae.settings import Settings
from kotae.stack import Stack
from tests.fakes.model_server import FakeModelServer
from tests.integration.stages import running_stages
from tests.reliability.harness import (
    AT,
    SAMPLES,
    SLOW,
    StageKiller,
    chaos_settings,
    generated_comments,
    read_ledger,
    replay_under_faults,
    wait_until_settled,
)


@pytest.mark.slow
async def test_every_stage_sigkilled_in_turn_mid_replay_keeps_every_promise(
    chaos_stack: tuple[Stack, Settings],
) -> None:
    stack, settings = chaos_stack
    n = 1000 if SLOW else 100
    comments = generated_comments(n, prefix="crash-", gap_s=0.1)
    killer = StageKiller(stack, random.Random(20261130), sig=signal.SIGKILL, interval=(1.0, 2.5), min_rounds=1)

    run = await replay_under_faults(stack, settings, comments, killer, timeout=240 if SLOW else 120)
    figures = run.ledger.figures()
    print("\n" + figures.table())

    # The faults were real: every stage was killed at least once, by SIGKILL.
    assert {f.stage for f in run.faults} == set(stack.stages)
    assert all(f.exit_code == -signal.SIGKILL for f in run.faults), run.faults
    # Every stage came back and is serving.
    assert run.running == {stage: True for stage in stack.stages}
    assert run.settled, "a consumer still held messages long after the replay"
    # The promises.
    assert figures.lost == 0, run.ledger.problems()
    assert figures.duplicates == 0, run.ledger.problems()
    assert figures.unchecked_verified == 0, run.ledger.problems()
    assert figures.terminal == n
    assert figures.outcomes.get("verified", 0) > 0 and figures.outcomes.get("dropped", 0) > 0


async def test_a_comment_redelivered_after_its_ask_back_gets_one_outcome(
    nats_url: str, loaded_settings: Settings
) -> None:
    """The retriever stores an ask-back, then dies before its ack; the redelivery must not answer it again.

    Two stored copies of one comment message stand for the delivery and its
    redelivery (the same message id, as JetStream presents it after a crash).
    """
    comment = CommentV1(
        comment_id="ask-1",
        stream_id="default",
        author="viewer-ask",
        text="無料になるの？",
        normalized="無料になるの?",
        published_at=AT,
    )
    payload = comment.model_dump_json().encode()
    async with running_stages(loaded_settings, nats_url):
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        await js.publish(subjects.COMMENT, payload)
        first = await wait_for_answers(nats_url, "ask-1", 1)
        await js.publish(subjects.COMMENT, payload)  # the redelivery of the same stored comment
        await nc.close()
        await wait_until_settled(nats_url, ("retriever", "reranker", "generator", "verifier"))
        ledger = await read_ledger(nats_url, ["ask-1"])
    assert [a.outcome for a in first] == ["clarify"]  # three policies make something free: the gate asks back
    assert [a.outcome for a in ledger.answers["ask-1"]] == ["clarify"], ledger.problems()


async def wait_for_answers(url: str, comment_id: str, count: int, timeout: float = 30.0) -> list[AnswerV1]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ledger = await read_ledger(url, [comment_id])
        if len(ledger.answers.get(comment_id, [])) >= count:
            return ledger.answers[comment_id]
        await asyncio.sleep(0.2)
    return []


@pytest.mark.slow
async def test_a_comment_whose_last_allowed_delivery_dies_with_its_process_still_gets_an_outcome(
    tmp_path, monkeypatch: pytest.MonkeyPatch, chaos_env: dict[str, str]
) -> None:
    """The generator is SIGKILLed while its model call is in flight, on the only delivery the edge allows
    (``KOTAE_MAX_DELIVER=1``; with more, the same holds for whichever is the last).

    A crash is not the handler giving up: nothing publishes the terminal outcome
    on that delivery, so the bus must deliver the message again. Nothing in the
    comment is poison and the model answers once the crash is over, so the
    promise is an outcome — answered, or ``failed`` with the reason — never
    silence.
    """
    with FakeModelServer(responder=lambda path, body: "保育料は月額1万5千円が上限です[1]。", delay_s=30.0) as fake:
        env = {
            "KOTAE_MAX_DELIVER": "1",
            "KOTAE_ACK_WAIT_S": "2",
            "KOTAE_MODEL_TIMEOUT_S": "60",
            "KOTAE_GENERATOR_MODEL": f"compatible:{fake.url}/v1|writer",
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        settings = chaos_settings(tmp_path / "data", env)
        load_knowledge_base(load_records(SAMPLES / "kb"), "default", settings)
        stack = Stack(settings)
        await stack.start()
        try:
            killer = StageKiller(stack, random.Random(1))
            question = [
                RawComment(
                    id="last-delivery",
                    author="viewer",
                    text="0歳の子を預けたら保育料の上限は月いくらですか",
                    published_at=AT,
                )
            ]
            replay = asyncio.create_task(run_replay(settings, stack.url, question, timeout=120))
            assert await until(lambda: len(fake.requests) >= 1, 30), "the comment never reached the model"
            await killer.hit("generator")
            fake.delay_s = 0.0  # the model is healthy from now on
            # Several acknowledgement waits: time for a redelivery, or for a failed outcome.
            done, _ = await asyncio.wait({replay}, timeout=5 * settings.ack_wait_s)
            if not done:
                replay.cancel()
                with suppress(asyncio.CancelledError):
                    await replay
            missing = replay.result().missing if done else [question[0].id]
        finally:
            stack.stop()
    assert [f.exit_code for f in killer.faults] == [-signal.SIGKILL]
    assert missing == [], "the comment never got an outcome"


async def until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.05)
    return False
