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
