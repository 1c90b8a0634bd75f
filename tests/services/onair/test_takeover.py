"""kotae.services.onair.takeover: what a new speaker does with an answer its predecessor left on air."""

from __future__ import annotations

from datetime import timedelta

from kotae.contracts.v1 import SpokenSentence
from kotae.services.onair.events import about
from kotae.services.onair.policy import Policy
from kotae.services.onair.state import OnAirState
from kotae.services.onair.takeover import left_on_air
from tests.factories import ONAIR_AT, verified_answer


def sentence(n: int, of: int, offset_ms: int, audio_ms: int = 2000) -> SpokenSentence:
    return SpokenSentence(
        n=n, of=of, text=f"文{n}。", offset_ms=offset_ms, audio_ms=audio_ms, audio_url=f"/audio/a-{n}.wav"
    )


def airing_of_three(announced: int) -> OnAirState:
    """An answer of three sentences on air, ``announced`` of them announced by the speaker that stopped."""
    s = OnAirState("stream-1", Policy(), clock=lambda: ONAIR_AT)
    entry = s.on_answer(verified_answer("c1"), seq=1)
    assert entry is not None
    first = sentence(1, 3, 0)
    s.on_event(about(entry, "started", started_at=ONAIR_AT, ends_at=ONAIR_AT + timedelta(seconds=2), sentence=first))
    for n in range(2, announced + 1):
        ends = ONAIR_AT + timedelta(seconds=2 * n)
        s.on_event(
            about(
                entry,
                "sentence",
                started_at=ONAIR_AT,
                ends_at=ends,
                audio_ms=2000 * n,
                sentence=sentence(n, 3, 2000 * (n - 1)),
            )
        )
    return s


def test_an_answer_whose_last_sentence_played_out_is_finished_with_what_its_last_sentence_said() -> None:
    s = airing_of_three(3)
    assert s.on_air is not None and s.on_air.complete and s.on_air.ends_at == ONAIR_AT + timedelta(seconds=6)
    decision = left_on_air(s.on_air, ONAIR_AT + timedelta(seconds=7), lambda _: None)
    assert decision.outcome == "finished" and decision.carried["audio_ms"] == 6000
    assert decision.carried["ends_at"] == ONAIR_AT + timedelta(seconds=6)


def test_an_answer_cut_off_before_its_last_sentence_was_announced_airs_again_even_after_its_known_end() -> None:
    s = airing_of_three(2)
    assert s.on_air is not None and not s.on_air.complete
    # Past the end of what was announced, but its third sentence never aired: not finished, aired again.
    decision = left_on_air(s.on_air, ONAIR_AT + timedelta(seconds=5), lambda _: None)
    assert decision.outcome is None and decision.attempt == 2


def test_an_answer_that_must_come_off_air_ends_so_and_one_interrupted_twice_is_skipped() -> None:
    s = airing_of_three(1)
    assert s.on_air is not None
    withdrawn = left_on_air(s.on_air, ONAIR_AT, lambda _: ("withdrawn", "message_deleted (youtube)", None))
    assert (withdrawn.outcome, withdrawn.reason) == ("withdrawn", "message_deleted (youtube)")
    s.on_air.attempt = 2
    assert left_on_air(s.on_air, ONAIR_AT, lambda _: None).outcome == "skipped"
