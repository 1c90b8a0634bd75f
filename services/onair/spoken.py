"""What the voice will say for a queue entry: one function for the speaker and for the approval view.

In hold mode the operator approves what will be said, so the console and
``kotae onair status`` show exactly the text the speaker synthesises: the
answer's speech text (no ``[N]`` markers; numbers, dates and units as read), the
question first when ``KOTAE_ONAIR_READ_QUESTION`` reads it, or the thanks line of
a Super Chat that airs as a thanks.
"""

from __future__ import annotations

from collections import OrderedDict

from kotae.citations import strip_markers
from kotae.contracts.v1 import Lang
from kotae.knowledge.records import detect_lang
from kotae.services.onair.policy import Entry
from kotae.services.onair.question import shown_question
from kotae.services.onair.speech import speech_text
from kotae.services.onair.thanks import ThanksWords

_QUESTION_JOIN: dict[str, str] = {"ja": "。", "en": ". "}
#: Texts kept computed (the queue is at most a few dozen entries; reading numbers aloud is not free).
_KEPT = 512


class SpokenText:
    """``spoken(entry)`` → (what the voice says, its language).

    Example::

        spoken = SpokenText(read_question=False, thanks=ThanksWords.from_settings(settings))
        spoken(entry)      # ('保育料は月額二万円です。', 'ja')
    """

    def __init__(self, *, read_question: bool, thanks: ThanksWords) -> None:
        self.read_question = read_question
        self.thanks = thanks
        self._known: OrderedDict[tuple[str, bool], tuple[str, Lang]] = OrderedDict()

    def __call__(self, entry: Entry) -> tuple[str, Lang]:
        key = (entry.key, entry.thanks is not None)
        known = self._known.get(key)
        if known is None:
            known = self._make(entry)
            self._known[key] = known
            while len(self._known) > _KEPT:
                self._known.popitem(last=False)
        return known

    def shown(self, entry: Entry) -> str | None:
        """What the overlay shows for a thanks: its line as written (the name as the viewer spells it)."""
        if entry.thanks is None:
            return None
        return self.thanks.line(entry.answer.comment, entry.thanks)[0]

    def _make(self, entry: Entry) -> tuple[str, Lang]:
        comment = entry.answer.comment
        if entry.thanks is not None:
            line, lang = self.thanks.line(comment, entry.thanks)
            return speech_text(line, lang), lang
        said = entry.answer.answer or entry.answer.speech or ""
        # An English question answered offline by quoting Japanese evidence is spoken by the Japanese
        # voice; the question is then not read out (one voice, one language per answer).
        lang: Lang = detect_lang(strip_markers(said)) if said else comment.lang
        text = speech_text(said, lang)
        if self.read_question and lang == comment.lang:
            question, _ = shown_question(comment)
            if question:
                text = speech_text(question, lang).rstrip("。.?？ ") + _QUESTION_JOIN[lang] + text
        return text, lang
