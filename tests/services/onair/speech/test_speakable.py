"""speech_text: an answer as its voice says it, on the sentences of real knowledge bases.

The bundled sample knowledge base always runs; the chat-dev knowledge bases
(shared data beside the repository, never copied into it) run when present.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kotae.knowledge.records import detect_lang, load_records
from kotae.services.onair.speech import speech_text
from kotae.services.onair.speech.openjtalk import reading

ROOT = Path(__file__).resolve().parents[4]
SAMPLE_KB = ROOT / "kotae" / "samples" / "kb"
CHAT_DEV = ROOT.parent / "shared" / "data" / "chat-dev"


def _sentences(path: Path) -> list[tuple[str, str]]:
    """(lang, sentence) for every sentence of a knowledge base's documents and FAQ answers."""
    found = []
    for record in load_records(path):
        for text in (record.text, record.answer):
            for sentence in re.split(r"(?<=[。!?])|(?<=[.!?])\s+(?=[A-Z])|\n+", text or ""):
                if sentence.strip():
                    found.append((record.lang or detect_lang(sentence), sentence.strip()))
    return found


def _knowledge_bases() -> list[Path]:
    return [SAMPLE_KB, *sorted(p.parent for p in CHAT_DEV.glob("*/kb.jsonl"))]


@pytest.fixture(params=_knowledge_bases(), ids=lambda p: p.parent.name if p.name == "kb.jsonl" else p.name)
def sentences(request: pytest.FixtureRequest) -> list[tuple[str, str]]:
    path: Path = request.param
    kb = path / "kb.jsonl" if (path / "kb.jsonl").exists() else path
    found = _sentences(kb)
    assert len(found) > 20, f"{kb}: too few sentences to be the knowledge base"
    return found


def test_the_chat_dev_knowledge_bases_are_read_when_they_are_there() -> None:
    if not CHAT_DEV.is_dir():
        pytest.skip(f"no chat-dev data at {CHAT_DEV}")
    assert len(_knowledge_bases()) >= 3


@pytest.mark.parametrize(
    ("answer", "lang", "said"),
    [
        ("投票は1/24(日)、7:00〜20:00です[1]。", "ja", "投票は1月24日日曜日、7時から20時です。"),
        ("運賃は150円です[1][2]。", "ja", "運賃は150円です。"),
        ("運賃は150円です［１］。", "ja", "運賃は150円です。"),
        ("詳しくは https://example.org/fare をご覧ください[3]。", "ja", "詳しくはリンクをご覧ください。"),
        ("**無料**です🌰", "ja", "無料です"),
        ("- 小学生以下は無料\n- 70歳以上も無料", "ja", "小学生以下は無料 70歳以上も無料"),
        ("The fare is ¥150 [2].", "en", "The fare is one hundred fifty yen."),
        ("Polls open at 7:00 [1, 2].", "en", "Polls open at seven o'clock."),
        ("See https://example.org for more.", "en", "See the link for more."),
        ("Ｆａｒｅｓ ｒｉｓｅ ３０％.", "en", "Fares rise thirty percent."),
    ],
)
def test_an_answer_is_said_without_markers_links_markup_or_emoji(answer: str, lang: str, said: str) -> None:
    assert speech_text(answer, lang) == said  # type: ignore[arg-type]


def test_no_japanese_sentence_makes_open_jtalk_spell_latin_letters_or_read_a_symbol(
    sentences: list[tuple[str, str]],
) -> None:
    """What Open JTalk does with the speech text: letters it would spell, or ':' '/' '〜' it would skip."""
    wrong = []
    for lang, sentence in sentences:
        if lang != "ja":
            continue
        said = speech_text(sentence, "ja")
        heard = reading(said)
        if re.search(r"[A-Za-zＡ-Ｚａ-ｚ]|\d\s*[:/〜～~]\s*\d|\[\d", said + heard):
            wrong.append(f"{sentence} → {said} → {heard}")
    assert wrong == []


def test_no_english_sentence_leaves_a_figure_or_japanese_script_to_the_voice(
    sentences: list[tuple[str, str]],
) -> None:
    wrong = [
        f"{sentence} → {said}"
        for lang, sentence in sentences
        if lang == "en" and re.search(r"\d|[\u3040-\u30ff\u4e00-\u9fff]|\[", said := speech_text(sentence, "en"))
    ]
    assert wrong == []


def test_speech_text_of_a_speech_text_is_itself(sentences: list[tuple[str, str]]) -> None:
    """The on-air stage may pass an answer through twice; a second pass must not change what is said."""
    changed = [
        sentence
        for lang, sentence in sentences
        if speech_text(once := speech_text(sentence, lang), lang) != once  # type: ignore[arg-type]
    ]
    assert changed == []


def test_every_sentence_keeps_something_to_say(sentences: list[tuple[str, str]]) -> None:
    assert all(speech_text(sentence, lang).strip() for lang, sentence in sentences)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spoken", "lang", "said"),
    [
        # The FAQ filler as the stage joins it: intro, question, a stop, answer.
        (
            "よくいただく質問です。なぜ市長選に立候補したのですか？。市民の声を市政に届けるためです[1]。",
            "ja",
            "よくいただく質問です。なぜ市長選に立候補したのですか?市民の声を市政に届けるためです。",
        ),
        (
            "A question we are often asked. Why are you running for mayor?. To bring residents' voices to city hall [1].",
            "en",
            "A question we are often asked. Why are you running for mayor? To bring residents' voices to city hall.",
        ),
        ("運賃は150円です。[2]。", "ja", "運賃は150円です。"),  # a citation between two stops
        ("無料です🌰！。", "ja", "無料です!"),  # an emoji between two marks
        ("詳しくは、。窓口へ。。", "ja", "詳しくは。窓口へ。"),
        ("[1]。運賃は150円です。", "ja", "運賃は150円です。"),  # nothing before the first word
        ("It is free , .", "en", "It is free."),
        ("Wait... it is free?!", "en", "Wait, it is free?"),
        ("手数料は3.5%、1,000円以上です。", "ja", "手数料は3.5パーセント、1,000円以上です。"),  # one mark stays
    ],
)
def test_doubled_or_odd_sentence_marks_are_said_as_one(spoken: str, lang: str, said: str) -> None:
    assert speech_text(spoken, lang) == said  # type: ignore[arg-type]
    assert speech_text(said, lang) == said  # type: ignore[arg-type]


def test_no_sentence_of_a_knowledge_base_leaves_two_marks_in_a_row(sentences: list[tuple[str, str]]) -> None:
    doubled = [
        f"{sentence} → {said}"
        for lang, sentence in sentences
        if re.search(r"[。.!?、,]\s*[。.!?、,]", said := speech_text(sentence, lang))  # type: ignore[arg-type]
    ]
    assert doubled == []
