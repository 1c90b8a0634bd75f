"""The sentences of a speech text, in the order the voice says them: each is synthesised as a clip of its own.

The voice starts on the first sentence while the rest is made, so an answer is
cut where a listener hears a sentence end: after 。！？!? (and a run of them),
or after an English full stop followed by a space. Sentences are cut the way the
overlay's subtitles cut the displayed answer (``pages/subtitles.split_sentences``),
so the n-th clip is the n-th subtitle. Nothing is added or dropped: the
sentences joined are the text again (up to the spaces between them).

Example::

    sentences("運賃は百五十円です。子どもは無料です。")  # ['運賃は百五十円です。', '子どもは無料です。']
"""

from __future__ import annotations

import re

_END = re.compile(r"(?<=[。！？!?])(?![。！？!?])|(?<=[.])(?=\s)")


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, empty ones left out (one sentence for text with no sentence end)."""
    return [piece.strip() for piece in _END.split(text or "") if piece.strip()]
