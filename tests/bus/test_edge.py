"""The stage edge and its pull loop against a real nats-server: bounded retry with backoff, then a dead letter;
in-flight limits; hand-back on stop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import nats
import pytest
from faststream.nats import NatsBroker

from kotae.bus.edge import StageEdge
from kotae.bus.topology import ensure_streams_at
from kotae.contracts import AnswerV1, CommentV1, RetrievalV1, subjects
from kotae.faults import TransientError
from kotae.runtime import StageProcess
from kotae.settings import Settings
from kotae.stage import FAILED, Handler, Input, Output, Stage
from tests.factories import read_all

#: A retriever-like stage whose handler each test writes.
TEST_STAGE = Stage(
    name="retriever",
    description="a stage under test",
    consumes=Input(subjects.COMMENT, CommentV1),
    outputs=(Output(subjects.RETRIEVAL, RetrievalV1), FAILED),
)
STREAM, DURABLE = subjects.STREAM_COMMENTS, TEST_STAGE.durable


def make_comment(cid: str, text: str) -> bytes:
    return CommentV1(comment_id=cid, stream_id="s", author="a", text=text, normalized=text).model_dump_json().encode()


def evidence_for(comment: CommentV1) -> RetrievalV1:
    return comment.forward(RetrievalV1, stage="retriever", method="test", gate="answer", top_score=1.0)


class RunningStage:
    """One process of :data:`TEST_STAGE` on its own broker; ``stop()`` stops it as SIGTERM would."""

    def __init__(self, process: StageProcess, broker: NatsBroker) -> None:
        self.process, self.broker = process, broker

    async def stop(self) -> None:
        await self.process.stop()
        await self.broker.stop()


async def run_stage(
    settings: Settings,
    url: str,
    handle: Callable[[CommentV1], Awaitable[RetrievalV1 | None]],
    *,
    give_up: Callable[[CommentV1, str], Awaitable[AnswerV1 | None]] | None = None,
    graceful_timeout: float = 15.0,
) -> RunningStage:
    await ensure_streams_at(url, settings)
    broker = NatsBroker(url, logger=None)
    process = StageProcess(
        TEST_STAGE, settings, broker, handler=Handler(handle, give_up=give_up), graceful_timeout=graceful_timeout
    )
    await broker.start()
    await process.start()
    return RunningStage(process, broker)


async def run_edge(settings: Settings, url: str, behaviour) -> tuple[dict[str, int], RunningStage]:  # noqa: ANN001
    calls: dict[str, int] = {}

    async def handle(comment: CommentV1) -> RetrievalV1:
        calls[comment.comment_id] = calls.get(comment.comment_id, 0) + 1
        behaviour(comment, calls[comment.comment_id])
        return evidence_for(comment)

    return calls, await run_stage(settings, url, handle)


async def test_a_transient_fault_is_retried_and_then_succeeds(nats_url: str, settings: Settings) -> None:
    def flaky(comment: CommentV1, attempt: int) -> None:
        if attempt < 3:
            raise TransientError("model timeout")

    settings = settings.model_copy(update={"max_deliver": 4})
    calls, stage = await run_edge(settings, nats_url, flaky)
    nc = await nats.connect(nats_url)
    await nc.jetstream().publish(subjects.COMMENT, make_comment("f1", "質問"))
    for _ in range(100):
        if calls.get("f1", 0) >= 3:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    await stage.stop()
    await nc.close()
    assert calls["f1"] == 3
    assert len(await read_all(nats_url, subjects.RETRIEVAL, idle=0.2)) == 1
    assert await read_all(nats_url, subjects.DEADLETTER_ALL, idle=0.2) == []


async def test_an_output_stream_that_is_gone_for_a_moment_is_waited_out_without_handling_again(
    nats_url: str, settings: Settings
) -> None:
    """As while a lost node's stream elects a new leader: the publish finds no stream for a second or two.

    With one delivery allowed, a publish error that reached the handler would end the
    comment ``failed`` at once; the edge keeps publishing the same output instead.
    """
    settings = settings.model_copy(update={"max_deliver": 1})
    calls, stage = await run_edge(settings, nats_url, lambda comment, attempt: None)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await js.delete_stream(subjects.STREAM_PIPELINE)  # where the stage's RetrievalV1 goes
    await js.publish(subjects.COMMENT, make_comment("o1", "質問"))
    for _ in range(100):
        if calls.get("o1"):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # the stage's publish keeps meeting no stream
    await ensure_streams_at(nats_url, settings)
    for _ in range(100):
        if await read_all(nats_url, subjects.RETRIEVAL, idle=0.1):
            break
        await asyncio.sleep(0.05)
    await stage.stop()
    await nc.close()
    assert calls == {"o1": 1}  # handled once: no model call is repeated for a bus fault
    assert len(await read_all(nats_url, subjects.RETRIEVAL, idle=0.2)) == 1
    assert await read_all(nats_url, subjects.ANSWER_ALL, idle=0.2) == []  # no 'failed' beside the evidence
    assert await read_all(nats_url, subjects.DEADLETTER_ALL, idle=0.2) == []


async def test_a_fault_that_never_clears_is_dead_lettered_after_max_deliver(nats_url: str, settings: Settings) -> None:
    def broken(comment: CommentV1, attempt: int) -> None:
        raise TransientError("embedding backend down")

    calls, stage = await run_edge(settings, nats_url, broken)
    nc = await nats.connect(nats_url)
    await nc.jetstream().publish(subjects.COMMENT, make_comment("b1", "質問"))
    letters: list[dict] = []
    for _ in range(60):
        letters = await read_all(nats_url, subjects.DEADLETTER_ALL, idle=0.1)
        if letters:
            break
    await stage.stop()
    await nc.close()
    assert calls["b1"] == settings.max_deliver
    assert len(letters) == 1
    letter = letters[0]["data"]
    assert letter["error_type"] == "exhausted"
    assert letter["deliveries"] == settings.max_deliver
    assert "embedding backend down" in letter["error"]
    assert json.loads(letter["payload"])["comment_id"] == "b1"


async def test_publishing_an_undeclared_output_is_a_programming_error(settings: Settings) -> None:
    edge = StageEdge(TEST_STAGE, settings)
    edge.router()
    comment = CommentV1(comment_id="x", stream_id="s", author="a", text="質問", normalized="質問")
    verified = comment.forward(AnswerV1, stage="retriever", outcome="verified")  # declared: failed, not verified
    with pytest.raises(RuntimeError, match="without declaring it"):
        await edge.publish(verified)


async def test_a_give_up_whose_own_publish_fails_is_retried_not_lost(nats_url: str, settings: Settings) -> None:
    """Exhausted retries publish a terminal outcome; when that publish fails too, the input comes back."""
    settings = settings.model_copy(update={"max_deliver": 2, "retry_backoff_s": 0.05})
    give_ups: list[str] = []

    async def flaky_give_up(comment: CommentV1, reason: str) -> AnswerV1:
        give_ups.append(reason)
        if len(give_ups) == 1:
            raise ConnectionError("no leader for the stream")  # like a publish during an election
        return comment.forward(AnswerV1, stage="retriever", outcome="failed", reason=reason)

    async def handle(comment: CommentV1) -> RetrievalV1:
        raise TransientError("backend down")

    stage = await run_stage(settings, nats_url, handle, give_up=flaky_give_up)
    nc = await nats.connect(nats_url)
    await nc.jetstream().publish(subjects.COMMENT, make_comment("g1", "質問"))
    letters: list[dict] = []
    for _ in range(100):
        letters = await read_all(nats_url, subjects.DEADLETTER_ALL, idle=0.1)
        if letters:
            break
    await stage.stop()
    await nc.close()
    assert len(give_ups) == 2  # the failed give-up, then the one that stored the outcome
    assert all(r.startswith("gave up after 2 deliveries") for r in give_ups)
    assert len(letters) == 1 and letters[0]["data"]["deliveries"] == 3


async def slow_stage(
    settings: Settings, url: str, seconds: float, peak: list[int] | None = None
) -> tuple[RunningStage, list[str]]:
    """A retriever-like stage whose handler takes ``seconds``; stops with a 0.2 s graceful timeout.

    ``peak``, if given, ends up holding the most handlers that ran at once.
    """
    started: list[str] = []
    running = [0]

    async def handle(comment: CommentV1) -> RetrievalV1:
        started.append(comment.comment_id)
        running[0] += 1
        if peak is not None:
            peak[0] = max(peak[0], running[0])
        try:
            await asyncio.sleep(seconds)
        finally:
            running[0] -= 1
        return evidence_for(comment)

    return await run_stage(settings, url, handle, graceful_timeout=0.2), started


async def successor_takes(js, wanted: int, attempts: int) -> set[str]:  # noqa: ANN001
    """Comment ids the next process pulling from the stage's consumer gets within ``attempts`` half-second fetches."""
    successor = await js.pull_subscribe_bind(DURABLE, STREAM)
    taken: list = []
    for _ in range(attempts):
        try:
            taken += await successor.fetch(8, timeout=0.5)
        except nats.errors.TimeoutError:
            pass
        if len(taken) >= wanted:
            break
    return {json.loads(m.data)["comment_id"] for m in taken}


async def test_stopping_hands_back_what_was_fetched_but_not_finished(nats_url: str, settings: Settings) -> None:
    """A stage told to stop leaves nothing waiting out the acknowledgement wait.

    Two workers, each comment takes a while: the fetch loop holds more comments
    than the workers can take. After a stop, the next process to pull gets every
    comment that was not answered at once, instead of only those never fetched
    (the rest would come back only after ``ack_wait_s``, a minute here).
    """
    settings = settings.model_copy(update={"inflight": 2, "ack_wait_s": 60.0})
    stage, started = await slow_stage(settings, nats_url, 0.4)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    for i in range(8):
        await js.publish(subjects.COMMENT, make_comment(f"s{i}", "質問"))
    for _ in range(100):  # until the workers are busy and more is fetched than they can take
        info = await js.consumer_info(STREAM, DURABLE)
        if info.num_ack_pending > 2 and len(started) >= 2:
            break
        await asyncio.sleep(0.02)
    assert info.num_ack_pending > 2
    await stage.stop()

    answered = {m["data"]["comment_id"] for m in await read_all(nats_url, subjects.RETRIEVAL, idle=0.2)}
    never_fetched = (await js.consumer_info(STREAM, DURABLE)).num_pending
    comment_ids = await successor_takes(js, 8 - len(answered), attempts=20)
    await nc.close()
    assert never_fetched < 8 - len(answered)  # some unanswered comments had been fetched by the stopped stage
    assert comment_ids == {f"s{i}" for i in range(8)} - answered


@pytest.mark.parametrize("inflight", [1, 4])
async def test_stopping_while_a_pull_waits_leaves_no_request_behind(
    nats_url: str, settings: Settings, inflight: int
) -> None:
    """A stop lets the pull request under way end instead of cancelling it.

    A cancelled fetch leaves its request on the server for up to a second; a
    comment published then is sent to a process that is going away and would sit
    out ``ack_wait_s`` (a minute here). Comments are published while the stage
    stops; afterwards no request of the stopped stage is left on the server and
    every comment it did not answer goes to the next process at once, whether
    the stage takes one message at a time or several.
    """
    settings = settings.model_copy(update={"inflight": inflight, "ack_wait_s": 60.0})
    stage, _ = await slow_stage(settings, nats_url, 0.0)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    for _ in range(100):  # until the stage's pull request waits on the server
        if (await js.consumer_info(STREAM, DURABLE)).num_waiting:
            break
        await asyncio.sleep(0.02)
    stopping = asyncio.create_task(stage.stop())
    for i in range(6):
        await js.publish(subjects.COMMENT, make_comment(f"w{i}", "質問"))
        await asyncio.sleep(0.03)
    await stopping
    waiting = (await js.consumer_info(STREAM, DURABLE)).num_waiting
    answered = {m["data"]["comment_id"] for m in await read_all(nats_url, subjects.RETRIEVAL, idle=0.2)}
    taken = await successor_takes(js, 6 - len(answered), attempts=4)  # two seconds: far less than the ack wait
    await nc.close()
    assert waiting == 0
    assert taken == {f"w{i}" for i in range(6)} - answered


async def test_handlers_run_concurrently_up_to_inflight_and_never_more(nats_url: str, settings: Settings) -> None:
    """KOTAE_INFLIGHT handlers run at once: a slow call holds up no other comment, and a burst cannot overload.

    Ten comments, each handler waits 0.3 s; with three workers the stage runs three
    at a time (never four), and all ten are answered.
    """
    settings = settings.model_copy(update={"inflight": 3})
    peak = [0]
    stage, _ = await slow_stage(settings, nats_url, 0.3, peak)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    for i in range(10):
        await js.publish(subjects.COMMENT, make_comment(f"c{i}", "質問"))
    answered: set[str] = set()
    for _ in range(100):
        answered = {m["data"]["comment_id"] for m in await read_all(nats_url, subjects.RETRIEVAL, idle=0.1)}
        if len(answered) == 10:
            break
    await stage.stop()
    await nc.close()
    assert answered == {f"c{i}" for i in range(10)}
    assert peak[0] == 3


async def test_a_message_waiting_for_a_busy_worker_is_kept_in_progress_and_handled_once(
    nats_url: str, settings: Settings
) -> None:
    """One worker, each message slower than the ack wait: the ones fetched meanwhile wait, and are not redelivered."""
    handled: list[tuple[str, int]] = []

    async def slow(comment: CommentV1) -> RetrievalV1:
        handled.append((comment.comment_id, len(handled)))
        await asyncio.sleep(1.5)  # a long model call: longer than the ack wait
        return evidence_for(comment)

    settings = settings.model_copy(update={"inflight": 1, "ack_wait_s": 1.0, "max_deliver": 3})
    nc = await nats.connect(nats_url)
    stage = await run_stage(settings, nats_url, slow)
    try:
        for cid in ("w1", "w2", "w3"):
            await nc.jetstream().publish(subjects.COMMENT, make_comment(cid, "質問"))
        for _ in range(200):
            if len(await read_all(nats_url, subjects.RETRIEVAL, idle=0.1)) == 3:
                break
            await asyncio.sleep(0.1)
    finally:
        await stage.stop()
        await nc.close()
    # Each comment handled once, in order, though w2 and w3 waited well past the ack wait.
    assert [cid for cid, _ in handled] == ["w1", "w2", "w3"]
    assert len(await read_all(nats_url, subjects.RETRIEVAL, idle=0.2)) == 3
