"""Fault injection and the delivery ledger, shared by the reliability tests and ``bench/chaos.py``.

kotae promises that every comment ends in exactly one terminal outcome, that no
answer is published twice, and that nothing reaches ``verified`` without a
check. The ledger reads those promises back from the streams themselves (an
ordered consumer over ``KOTAE_ANSWERS`` and ``KOTAE_DEADLETTER``), so it sees
what every subscriber — the overlay, the TTS — would have seen, not what a
stage believes it did.

The injectors break things for real: :class:`StageKiller` sends SIGKILL (or
SIGTERM) to a stage's process and starts a replacement with ``Stack.spawn``.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from kotae.contracts import AnswerV1, DeadLetterV1, subjects
from kotae.services.ingest.sources import RawComment, read_comment_file
from kotae.services.verifier.logic import METHOD as OFFLINE_VERIFIER
from kotae.settings import Settings, load_settings
from kotae.stack import Stack
from tests.factories import consumer_of

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "kotae" / "samples"

#: Full-size runs (KOTAE_SLOW=1) instead of the bounded ones CI runs.
SLOW = os.environ.get("KOTAE_SLOW") == "1"

#: Chat time of the generated comments: inside the sample knowledge base's validity.
AT = datetime(2026, 11, 30, 11, 0, tzinfo=UTC)

#: Settings every process of a chaos run shares. Merging near-duplicates and the
#: per-minute admission limit are off, so each generated comment travels the whole
#: pipeline instead of being folded into the first one that asked the same thing.
CHAOS_ENV = {
    "KOTAE_MERGE_WINDOW_S": "0",
    "KOTAE_ADMIT_PER_MINUTE": "0",
    "KOTAE_MAX_DELIVER": "5",
    "KOTAE_ACK_WAIT_S": "4",
    "KOTAE_RETRY_BACKOFF_S": "0.2",
    "KOTAE_INFLIGHT": "4",
    "KOTAE_LOG_LEVEL": "info",
}


def chaos_settings(data_dir: Path, env: dict[str, str] | None = None, **overrides: Any) -> Settings:
    """The settings the test process uses, matching what ``env`` gives the stage processes."""
    values: dict[str, Any] = {}
    for name, value in {**CHAOS_ENV, **(env or {})}.items():
        values[name.removeprefix("KOTAE_").lower()] = value
    values.update(overrides)
    return load_settings(data_dir=data_dir, **values)


def generated_comments(n: int, *, prefix: str = "k", gap_s: float = 0.0) -> list[RawComment]:
    """``n`` comments cycling through the bundled sample chat, each with its own id and viewer.

    The samples mix questions the knowledge base answers, chatter that triage
    drops, an off-topic question and injected instructions, so a run exercises
    every outcome. A distinct viewer per comment keeps one viewer's ask-back from
    joining another's comment. ``gap_s`` spaces them in chat time, which
    ``run_replay(timing="original")`` turns into real pauses.
    """
    samples = list({c.text: c for c in read_comment_file(SAMPLES / "comments.jsonl")}.values())
    out = []
    for i in range(n):
        base = samples[i % len(samples)]
        out.append(
            RawComment(
                id=f"{prefix}{i:05d}",
                author=f"viewer-{i}",
                text=base.text,
                published_at=AT + timedelta(seconds=i * gap_s),
                superchat=base.superchat,
            )
        )
    return out


# --- reading the streams back ---------------------------------------------------------


async def read_stream(url: str, stream: str, subject: str, *, after: int = 0) -> list[Any]:
    """Every message stored in ``stream`` on ``subject`` after sequence ``after``, oldest first (an ordered consumer)."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        last = (await js.stream_info(stream)).state.last_seq
        if last <= after:
            return []
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1)
        sub = await js.subscribe(subject, ordered_consumer=True, config=config)
        out = []
        while True:
            try:
                msg = await sub.next_msg(timeout=5.0)
            except (TimeoutError, nats.errors.TimeoutError):
                break  # the tail was filtered out (another subject of the stream)
            out.append(msg)
            if msg.metadata.sequence.stream >= last:
                break
        await sub.unsubscribe()
        return out
    finally:
        await nc.close()


async def wait_until_settled(url: str, stages: tuple[str, ...], timeout: float = 60.0) -> bool:
    """Wait until no stage's durable consumer holds pending or unacknowledged messages.

    After a crash, unacknowledged messages come back once their ack wait runs
    out; a duplicate would be published then, so the ledger is read only when
    every consumer is empty.
    """
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = False
            for stage in stages:
                try:
                    info = await js.consumer_info(*consumer_of(stage))
                except NotFoundError:
                    continue
                if info.num_pending or info.num_ack_pending:
                    busy = True
            if not busy:
                return True
            await asyncio.sleep(0.25)
        return False
    finally:
        await nc.close()


async def consumer_backlog(url: str, stages: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """Per stage: messages its durable consumer has not delivered yet, and delivered but unacknowledged."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        out = {}
        for stage in stages:
            try:
                info = await js.consumer_info(*consumer_of(stage))
            except NotFoundError:
                continue
            out[stage] = (info.num_pending or 0, info.num_ack_pending or 0)
        return out
    finally:
        await nc.close()


def checked(answer: AnswerV1) -> bool:
    """A verified answer stands on a check that ran: verdict 0, citations, and the verifier's method.

    With a model verifier the answer must carry a verifier call that came back
    usable; otherwise the offline method must be named.
    """
    if answer.verdict != 0 or not answer.citations:
        return False
    method = answer.methods.get("verifier")
    if method == OFFLINE_VERIFIER:
        return True
    return method == "model" and any(c.stage == "verifier" and c.outcome == "ok" for c in answer.model_calls)


@dataclass
class Figures:
    """What a chaos run shows, one number per promise."""

    sent: int
    terminal: int
    duplicates: int
    lost: int
    dead_lettered: int
    unchecked_verified: int
    faults: int
    outcomes: dict[str, int] = field(default_factory=dict)

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("comments sent", str(self.sent)),
            ("exactly one terminal outcome", str(self.terminal)),
            ("duplicates (more than one outcome)", str(self.duplicates)),
            ("lost (no outcome; dead letter only counts as lost)", str(self.lost)),
            ("dead-lettered (with an outcome too)", str(self.dead_lettered)),
            ("verified without a check", str(self.unchecked_verified)),
            ("faults injected", str(self.faults)),
            ("outcomes", ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))),
        ]

    def table(self) -> str:
        lines = ["| figure | value |", "|---|---:|"]
        lines += [f"| {name} | {value} |" for name, value in self.rows()]
        return "\n".join(lines)


@dataclass
class Ledger:
    """Outcomes and dead letters per comment id, as stored on the bus."""

    sent: list[str]
    answers: dict[str, list[AnswerV1]] = field(default_factory=lambda: defaultdict(list))
    letters: dict[str, list[DeadLetterV1]] = field(default_factory=lambda: defaultdict(list))
    faults: int = 0

    @property
    def duplicates(self) -> dict[str, list[str]]:
        return {cid: [a.outcome for a in self.answers[cid]] for cid in self.sent if len(self.answers.get(cid, [])) > 1}

    @property
    def lost(self) -> list[str]:
        return [cid for cid in self.sent if not self.answers.get(cid)]

    @property
    def unchecked(self) -> list[str]:
        return [
            a.comment_id
            for cid in self.sent
            for a in self.answers.get(cid, [])
            if a.outcome == "verified" and not checked(a)
        ]

    def final(self, cid: str) -> AnswerV1:
        (answer,) = self.answers[cid]
        return answer

    def figures(self) -> Figures:
        outcomes = Counter(a.outcome for cid in self.sent for a in self.answers.get(cid, []))
        return Figures(
            sent=len(self.sent),
            terminal=sum(1 for cid in self.sent if len(self.answers.get(cid, [])) == 1),
            duplicates=len(self.duplicates),
            lost=len(self.lost),
            dead_lettered=sum(1 for cid in self.sent if self.letters.get(cid) and self.answers.get(cid)),
            unchecked_verified=len(self.unchecked),
            faults=self.faults,
            outcomes=dict(outcomes),
        )

    def problems(self) -> str:
        """A readable account of every broken promise, for assertion messages."""
        parts = []
        for cid in self.lost[:10]:
            letters = [f"{x.stage}/{x.error_type}: {x.error[:120]}" for x in self.letters.get(cid, [])]
            parts.append(f"lost {cid}: dead letters {letters or 'none'}")
        for cid, outcomes in list(self.duplicates.items())[:10]:
            parts.append(f"duplicate {cid}: {outcomes}")
        for cid in self.unchecked[:10]:
            parts.append(f"verified without a check {cid}")
        return "\n".join(parts) or "(none)"


async def read_ledger(url: str, sent: list[str], *, faults: int = 0) -> Ledger:
    """The ledger of the comments ``sent``, read from the answers and dead-letter streams."""
    ledger = Ledger(sent=list(sent), faults=faults)
    wanted = set(sent)
    # Anyone may publish on an answer subject (a fuzzer does): what is not an answer is not one.
    for msg in await read_stream(url, subjects.STREAM_ANSWERS, subjects.ANSWER_ALL):
        try:
            answer = AnswerV1.model_validate_json(msg.data)
        except ValidationError:
            continue
        if answer.comment_id in wanted:
            ledger.answers[answer.comment_id].append(answer)
    for msg in await read_stream(url, subjects.STREAM_DEADLETTER, subjects.DEADLETTER_ALL):
        try:
            letter = DeadLetterV1.model_validate_json(msg.data)
        except ValidationError:
            continue
        if letter.comment_id in wanted:
            ledger.letters[letter.comment_id].append(letter)
    return ledger


# --- breaking processes -----------------------------------------------------------------


@dataclass
class Fault:
    stage: str
    pid: int
    signal: str
    exit_code: int | None
    at: float


class StageKiller:
    """Signals each stage's process in turn at random moments and starts a replacement.

    With ``SIGKILL`` the process dies mid-work (nothing acknowledged, nothing
    drained); with ``SIGTERM`` it is asked to drain. ``overlap`` starts the
    replacement before the old process is signalled, as a rolling update with
    no unavailability does. ``rounds`` bounds the schedule; ``min_rounds`` keeps
    it going, even once asked to stop, until every stage was hit that often. A killed process's replacement is started with
    ``Stack.spawn``, exactly as an operator or an orchestrator would.
    """

    def __init__(
        self,
        stack: Stack,
        rng: random.Random,
        *,
        sig: signal.Signals = signal.SIGKILL,
        interval: tuple[float, float] = (0.3, 1.5),
        overlap: bool = False,
        stages: tuple[str, ...] | None = None,
        rounds: int | None = None,
        min_rounds: int = 0,
    ) -> None:
        self.stack = stack
        self.rng = rng
        self.sig = sig
        self.interval = interval
        self.overlap = overlap
        self.stages = stages or stack.stages
        self.rounds = rounds
        self.min_rounds = min_rounds
        self.done_rounds = 0
        self.faults: list[Fault] = []
        self._stop = asyncio.Event()

    def live(self, stage: str) -> subprocess.Popen[bytes] | None:
        for proc in reversed(self.stack.processes.get(stage, [])):
            if proc.poll() is None:
                return proc
        return None

    def stop(self) -> None:
        self._stop.set()

    async def _pause(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless stopped; True when stopped (never before ``min_rounds`` rounds)."""
        if self.done_rounds < self.min_rounds:
            await asyncio.sleep(seconds)
            return False
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
            return True
        except TimeoutError:
            return False

    async def hit(self, stage: str) -> Fault | None:
        """Signal the live process of ``stage`` and make sure a replacement runs."""
        proc = self.live(stage)
        if proc is None:
            self.stack.spawn(stage)
            return None
        # Hit a process that serves: one killed again before it ever started would only
        # measure start-up time.
        await wait_for_log(self.stack, stage, proc, "stage.started")
        if self.overlap:
            replacement = self.stack.spawn(stage)
            await wait_for_log(self.stack, stage, replacement, "stage.started")
        proc.send_signal(self.sig)
        code = await asyncio.to_thread(_wait_exit, proc, 40.0)
        fault = Fault(stage, proc.pid, self.sig.name, code, time.monotonic())
        self.faults.append(fault)
        if not self.overlap:
            self.stack.spawn(stage)
        return fault

    async def run(self) -> None:
        while not self._stop.is_set() or self.done_rounds < self.min_rounds:
            for stage in self.stages:
                if await self._pause(self.rng.uniform(*self.interval)):
                    return
                await self.hit(stage)
            self.done_rounds += 1
            if self.rounds is not None and self.done_rounds >= self.rounds:
                return


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def log_path(stack: Stack, stage: str, proc: subprocess.Popen[bytes]) -> Path:
    index = stack.processes[stage].index(proc)
    return stack.log_dir / f"{stage}-{index}.log"


async def wait_for_log(
    stack: Stack, stage: str, proc: subprocess.Popen[bytes], event: str, timeout: float = 60.0
) -> bool:
    """Wait until the process's log shows ``event`` (e.g. ``stage.started``, logged at info level)."""
    path = log_path(stack, stage, proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if event in path.read_text(errors="replace"):
                return True
        except OSError:
            pass
        if proc.poll() is not None:
            return False
        await asyncio.sleep(0.1)
    return False


@dataclass
class ChaosRun:
    """A replay under fault injection, and what the streams say afterwards."""

    ledger: Ledger
    faults: list[Fault]
    settled: bool
    running: dict[str, bool]
    seconds: float
    late: list[str] = field(default_factory=list)
    backlog: dict[str, tuple[int, int]] = field(default_factory=dict)


async def replay_under_faults(
    stack: Stack,
    settings: Settings,
    comments: list[RawComment],
    injector: StageKiller,
    *,
    timeout: float = 120.0,
    settle_timeout: float | None = None,
) -> ChaosRun:
    """Replay ``comments`` through ``stack`` while ``injector`` breaks its processes.

    Comments are published at the pace of their chat time, so faults land while
    work is in flight. The injector stops when every comment has an outcome (or
    the timeout passes), or, given a number of rounds, once they are done; the
    ledger is read once every consumer has settled (by default allowing for
    redeliveries after the acknowledgement wait; ``settle_timeout`` bounds it
    for runs where nothing may wait for one).
    """
    from kotae.replay import run_replay

    started = time.monotonic()
    task = asyncio.create_task(injector.run())
    try:
        result = await run_replay(settings, stack.url, comments, timeout=timeout, timing="original")
        if injector.rounds is not None:
            await task  # a bounded schedule (a rolling restart) runs to its end
    finally:
        injector.stop()
        await task
    running = {}
    for stage in stack.stages:
        proc = injector.live(stage)
        running[stage] = proc is not None and await wait_for_log(stack, stage, proc, "stage.started")
    backlog = await consumer_backlog(stack.url, stack.stages)
    if settle_timeout is None:
        settle_timeout = max(30.0, settings.ack_wait_s * 4)
    settled = await wait_until_settled(stack.url, stack.stages, timeout=settle_timeout)
    ledger = await read_ledger(stack.url, [c.id for c in comments], faults=len(injector.faults))
    return ChaosRun(
        ledger, list(injector.faults), settled, running, time.monotonic() - started, result.missing, backlog
    )


async def last_sequence(url: str, stream: str) -> int:
    nc = await nats.connect(url)
    try:
        return (await nc.jetstream().stream_info(stream)).state.last_seq
    finally:
        await nc.close()


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the processes started inside the block, then restore them."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def kill_group(procs: list[subprocess.Popen[Any]]) -> None:
    """Stop processes this harness started (SIGKILL), never anything else."""
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
