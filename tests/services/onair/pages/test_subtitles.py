"""kotae.services.onair.pages.subtitles: each sentence on screen while the voice says it."""

from __future__ import annotations

import io
import wave

import numpy as np

from kotae.services.onair.pages.subtitles import cues, pauses, split_sentences

RATE = 16_000


def wav(*parts: tuple[str, int]) -> bytes:
    """A WAV of tones and silences: ("tone"|"quiet", milliseconds) in order."""
    chunks = []
    for kind, ms in parts:
        n = RATE * ms // 1000
        t = np.arange(n) / RATE
        chunks.append(np.sin(2 * np.pi * 220 * t) * 8000 if kind == "tone" else np.zeros(n))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(np.concatenate(chunks).astype("<i2").tobytes())
    return buffer.getvalue()


def test_sentences_keep_the_citation_markers_that_follow_them() -> None:
    assert split_sentences("運賃は150円です[1]。子どもは無料です。[2]最後です") == [
        "運賃は150円です[1]。",
        "子どもは無料です。[2]",
        "最後です",
    ]
    assert split_sentences("The fare is 150 yen [1]. Children ride free [1].") == [
        "The fare is 150 yen [1].",
        "Children ride free [1].",
    ]


def test_pauses_inside_the_speech_are_found_and_the_edges_are_not() -> None:
    audio = wav(("quiet", 300), ("tone", 1000), ("quiet", 400), ("tone", 500), ("quiet", 60), ("tone", 500))
    found, length = pauses(audio)
    assert length == 2760
    assert len(found) == 1 and abs(found[0][0] - 1300) <= 10 and abs(found[0][1] - 1700) <= 10  # 60 ms is a breath


def test_each_boundary_moves_to_the_pause_the_voice_made_there() -> None:
    # Two sentences of equal length; the voice said the first faster, so its pause is early.
    audio = wav(("tone", 1200), ("quiet", 500), ("tone", 2300))
    made = cues(answer="一つ目の文です[1]。二つ目の文です[1]。", speech=None, lang="ja", wav=audio, duration_ms=4000)
    assert [c.text for c in made] == ["一つ目の文です[1]。", "二つ目の文です[1]。"]
    assert made[0].start_ms == 0 and made[-1].end_ms == 4000
    assert abs(made[0].end_ms - 1450) <= 20 and made[1].start_ms == made[0].end_ms  # the pause, not 2000


def test_text_only_answers_are_timed_by_their_length_and_a_read_question_comes_first() -> None:
    made = cues(answer="短い文。これはもっと長い二つ目の文です。", speech=None, lang="ja", wav=None, duration_ms=6000)
    assert [c.start_ms for c in made] == [0, 1200] and made[1].end_ms == 6000
    asked = cues(
        answer="運賃は150円です[1]。",
        speech="バスの運賃は。運賃は百五十円です。",
        lang="ja",
        wav=wav(("tone", 800), ("quiet", 400), ("tone", 1800)),
        duration_ms=3000,
        question_read=True,
    )
    assert [(c.part, c.text) for c in asked] == [("question", "バスの運賃は。"), ("answer", "運賃は150円です[1]。")]
    assert abs(asked[0].end_ms - 1000) <= 20
