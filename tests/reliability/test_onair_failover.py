"""The speaking on-air process SIGKILLed mid-answer: the standby airs within the lease, nothing twice, nothing lost.

Two ``kotae serve onair`` processes (``Stack``, each as the stage's own NATS user)
follow the same streams; one holds the lease and speaks. While an answer is on
air its process is killed with SIGKILL — no drain, no release of the lease. The
promises are read back from the on-air events, as the overlay would see them.
The bounded run kills once; ``KOTAE_SLOW=1`` kills whoever speaks three times,
each killed process started again by the stack's supervisor, so the process that
takes over last rebuilt everything from the streams after a restart.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
import pytest
from nats.js.api import ConsumerConfig, DeliverPolicy

from kotae.contracts import OnAirEventV1, subjects
from kotae.settings import Settings, load_settings
from kotae.stack import Stack
from tests.factories import verified_answer
from tests.reliability.harness import SLOW

LEASE_S = 5.0
ENV = {
    "KOTAE_ONAIR_HTTP_PORT": "0",
    "KOTAE_ONAIR_LEASE_S": str(LEASE_S),
    "KOTAE_ONAIR_GAP_S": "0.3",
    "KOTAE_ONAIR_IDLE_S": "0",
    "KOTAE_ONAIR_VIEWER_COOLDOWN_S": "0",
    "KOTAE_STREAM_ID": "stream-1",
    "KOTAE_LOG_FORMAT": "json",
}


@pytest.fixture
async def two_speakers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Stack, Settings]]:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(data_dir=tmp_path / "data")
    stack = Stack(settings, stages=("onair",), stage_replicas={"onair": 2})
    await stack.start()
    try:
        yield stack, settings
    finally:
        stack.stop()


#: Questions on different topics: none is a repeat of another.
QUESTIONS = [
    "保育料はいくら？", "バスの運賃は？", "給食費は無料？", "避難所は何か所？", "家賃補助は？",
    "介護の手当は？", "防災アプリの名前は？", "太陽光パネルはどこに？", "港の再開発の費用は？",
]  # fmt: skip


def _sentences(n: int) -> str:
    return "".join(f"これは{k}番目の文で、少し長めに話します。" for k in range(1, n + 1))


Kill = tuple[datetime, str, str]  # (when, the comment on air, the replica killed)


def _first_airing_on_air(events: list[OnAirEventV1], kills: list[Kill]) -> OnAirEventV1 | None:
    """A first airing that started after the last kill and is still on air."""
    done = {e.answer_message_id for e in events if e.event in subjects.AIR_OUTCOMES}
    since = kills[-1][0] if kills else datetime.min.replace(tzinfo=UTC)
    live = [
        e
        for e in events
        if e.event == "started" and e.attempt == 1 and e.answer_message_id not in done and e.created_at > since
    ]
    return live[-1] if live else None


def _aired_again(events: list[OnAirEventV1], comment_id: str) -> OnAirEventV1 | None:
    return next((e for e in events if e.event == "started" and e.comment_id == comment_id and e.attempt == 2), None)


def _assert_each_ended_once_and_aired_in_full_at_most_once(
    events: list[OnAirEventV1], ids: list[str], kills: list[Kill]
) -> None:
    for cid in ids:
        finals = [e for e in events if e.comment_id == cid and e.event in subjects.AIR_OUTCOMES]
        assert len(finals) == 1, (cid, finals)  # none lost, none ended twice
        starts = [e for e in events if e.comment_id == cid and e.event == "started"]
        assert len(starts) <= 2
        if len(starts) == 2:  # the first airing was the one cut off
            cut = next(k for k in kills if k[1] == cid)
            assert starts[0].ends_at is not None and cut[0] < starts[0].ends_at
            assert starts[1].resumed and finals[0].event == "finished"


def _assert_never_two_on_air(events: list[OnAirEventV1], kills: list[Kill]) -> None:
    """Each airing ends (its outcome, or the kill) before the next starts."""
    kill_of = {cid: at for at, cid, _ in kills}
    spans = []
    for start in (e for e in events if e.event == "started"):
        assert start.started_at is not None
        if start.attempt == 1 and start.comment_id in kill_of:
            end = kill_of[start.comment_id]
        else:
            end = next(
                e for e in events if e.comment_id == start.comment_id and e.event in subjects.AIR_OUTCOMES
            ).created_at
        spans.append((start.started_at, end))
    spans.sort()
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end - timedelta(milliseconds=1)


@pytest.mark.slow
async def test_sigkill_of_the_speaker_mid_answer_the_standby_airs_within_the_lease_nothing_twice_nothing_lost(
    two_speakers: tuple[Stack, Settings],
) -> None:
    stack, _ = two_speakers
    rounds = 3 if SLOW else 1
    events: list[OnAirEventV1] = []
    nc = await nats.connect(stack.url)
    js = nc.jetstream()

    async def collect(msg: nats.aio.msg.Msg) -> None:
        events.append(OnAirEventV1.model_validate_json(msg.data))

    await js.subscribe(
        subjects.ONAIR_ALL, cb=collect, ordered_consumer=True, config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
    )
    now = datetime.now(UTC)
    ids = [f"a{i}" for i in range(2 + 2 * rounds)]
    for i, cid in enumerate(ids):  # each about 8 s of speech, each its own question
        answer = verified_answer(cid, QUESTIONS[i], _sentences(3) + f"{i}番です[1]。", author=f"v{i}", received_at=now)
        await js.publish(subjects.answer("verified"), answer.model_dump_json().encode())

    async def until(check, timeout: float, what: str):  # noqa: ANN001, ANN202
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            stack.supervise()  # a killed process is started again, as `kotae up` does
            await asyncio.sleep(0.05)
        raise AssertionError(
            f"not within {timeout:.0f}s: {what}: {[(e.comment_id, e.event, e.replica) for e in events]}"
        )

    kills: list[Kill] = []
    for _ in range(rounds):
        started = await until(lambda: _first_airing_on_air(events, kills), 90, "an answer on air")
        await asyncio.sleep(1.5)  # well inside its audio
        pid = int((started.replica or ":0").rsplit(":", 1)[1])
        (victim,) = [p for p in stack.processes["onair"] if p.pid == pid]
        killed_at = datetime.now(UTC)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        kills.append((killed_at, started.comment_id, started.replica or ""))
        assert started.ends_at is not None and killed_at < started.ends_at  # it was cut off mid-answer
        cid = started.comment_id
        again = await until(lambda cid=cid: _aired_again(events, cid), LEASE_S * 3, f"{cid} aired again")
        assert again.resumed and again.replica != started.replica and again.started_at is not None
        took = (again.started_at - killed_at).total_seconds()
        print(f"\n{cid}: killed {started.replica} mid-answer; {again.replica} aired it again {took:.2f}s later")
        assert took <= LEASE_S, f"the standby aired {took:.1f}s after the speaker died (lease {LEASE_S}s)"

    def everything_final() -> bool:
        return all(any(e.comment_id == c and e.event in subjects.AIR_OUTCOMES for e in events) for c in ids)

    await until(everything_final, 180, "every answer's final outcome")
    await nc.close()
    _assert_each_ended_once_and_aired_in_full_at_most_once(events, ids, kills)
    _assert_never_two_on_air(events, kills)
