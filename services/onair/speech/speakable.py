"""An answer made speakable: what a voice should say, not what the overlay shows.

The overlay shows the answer with its citations; the voice must not say "[1]",
a URL, Markdown, or an emoji, and must say numbers, dates, times, amounts,
units and acronyms as a person would in the answer's language
(:mod:`reading_ja`, :mod:`reading_en`).
"""

from __future__ import annotations

import re
import unicodedata

from kotae.contracts.v1 import Lang

from .reading_en import read_english
from .reading_ja import read_japanese

# Full-width ASCII (digits, Latin letters, ％, ～ …) as ASCII, so one set of rules reads both widths.
_HALF_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
_CITATION = re.compile(r"\s*\[\s*\d+(?:\s*[-,、]\s*\d+)*\s*\]")
_URL = re.compile(r"[ \t]*https?://[^\s<>()（）「」、。]+[ \t]*")
_MARKDOWN = re.compile(r"\*\*|__|`|^\s{0,3}#{1,6}\s+|^\s*(?:[-*+]\s+|・\s*|\d+\.\s+)", re.M)
_JAPANESE_SPACE = re.compile(r"(?<=[\u3040-\u30ff\u3400-\u9fff々])[ \t]+(?=[\u3040-\u30ff\u3400-\u9fff々])")
_LINK_WORD: dict[str, str] = {"ja": "リンク", "en": "the link"}
# Two or more marks in a row: "ですか?。" where an FAQ's question meets the sentence after it, "。。",
# "、。", or what a removed citation, URL or emoji left between two marks.
_MARK_RUN = re.compile(r"[ \t]*[。.!?、,](?:[ \t]*[。.!?、,])+")
_LEADING_MARKS = re.compile(r"^[\s。.!?、,]+")
_STOP: dict[str, str] = {"ja": "。", "en": "."}
_PAUSE: dict[str, str] = {"ja": "、", "en": ","}


def _spoken_symbol(char: str) -> bool:
    """Whether a voice can say the character: emoji, pictographs and dingbats it cannot."""
    category = unicodedata.category(char)
    if category == "So" or char in "\ufe0e\ufe0f\u200d":
        return False
    return category != "Cs"


def _one_mark(run: str, lang: Lang) -> str:
    """The mark a run of marks is said as: a question stays a question, then an exclamation, a stop, a pause."""
    for mark in "?!":
        if mark in run:
            return mark
    if lang == "en" and set(run) == {"."} and len(run) >= 3:
        return _PAUSE[lang]  # an ellipsis is a pause, not the end of a sentence
    if "。" in run or "." in run:
        return _STOP[lang]
    return _PAUSE[lang]


def collapse_marks(text: str, lang: Lang) -> str:
    """``text`` with every run of sentence marks said as one, and none before the first word.

    Example::

        >>> collapse_marks("保育料はいくらですか?。0歳児は無料です。。", "ja")
        '保育料はいくらですか?0歳児は無料です。'
        >>> collapse_marks("Is it free?. Yes, .", "en")
        'Is it free? Yes.'
    """
    text = _MARK_RUN.sub(lambda m: _one_mark(m.group(), lang), text)
    return _LEADING_MARKS.sub("", text)


def speech_text(text: str, lang: Lang) -> str:
    """The answer as its voice should say it.

    Example::

        >>> speech_text("投票は1/24(日)、7:00〜20:00です[1]。", "ja")
        '投票は1月24日日曜日、7時から20時です。'
        >>> speech_text("The fare is ¥150 [2].", "en")
        'The fare is one hundred fifty yen.'

    Idempotent: the speech text of a speech text is itself.
    """
    text = text.translate(_HALF_WIDTH)
    text = _CITATION.sub("", text)
    text = _URL.sub(lambda m: _LINK_WORD[lang] if lang == "ja" else f" {_LINK_WORD[lang]} ", text)
    text = _MARKDOWN.sub("", text)
    if lang == "ja":
        # Open JTalk runs "グミ 白桃味" together; between two Japanese words a space is a pause.
        text = _JAPANESE_SPACE.sub("、", text)
    text = read_english(text) if lang == "en" else read_japanese(text)
    text = "".join(char for char in text if _spoken_symbol(char))
    text = collapse_marks(text, lang)  # after every removal: what was between two marks is gone by now
    text = re.sub(r"\s+", " ", text).strip()
    if lang == "ja":
        # Spaces the rewriting left between Japanese words ("ミナト ループ") are no pause: Open JTalk ignores them.
        text = _JAPANESE_SPACE.sub("", text)
    return text
