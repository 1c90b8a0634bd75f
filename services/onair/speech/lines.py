"""An airing's speech, sentence by sentence: one clip per sentence, so the voice starts on the first.

Synthesising a whole answer before its first word plays costs the listener the
whole synthesis; the first sentence alone takes a fraction of it. Each sentence
is a key of its own in the :class:`Synthesizer` (``(key, n)``), so it gets the
synthesizer's retries, timeout, lanes and loudness: every clip is brought to the
same loudness on its own, so the sentences of one answer are equally loud.

Example::

    lines = SpokenLines(synthesizer)
    await lines.prepare("c-17", "運賃は百五十円です。子どもは無料です。", "ja")   # 2 sentences, started in order
    first = await lines.get("c-17", 1)    # plays while the second is made
    whole = joined([first, await lines.get("c-17", 2)])    # the answer's audio in one WAV
    lines.forget("c-17")
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from kotae.contracts.v1 import Lang

from .audio import Audio
from .sentences import sentences
from .synthesizer import Synthesizer


class SpokenLines:
    """The sentences of each prepared key, synthesised in order on one :class:`Synthesizer`."""

    def __init__(self, synthesizer: Synthesizer) -> None:
        self.synthesizer = synthesizer
        self._lines: dict[Hashable, list[str]] = {}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._lines

    async def prepare(self, key: Hashable, text: str, lang: Lang) -> list[str]:
        """Start synthesising each sentence of ``text`` for ``key`` (first first); its sentences.

        A key already prepared is left as it is.
        """
        if key not in self._lines:
            lines = sentences(text) or [text]
            self._lines[key] = lines
            for n, line in enumerate(lines, 1):
                await self.synthesizer.prepare((key, n), line, lang)
        return self._lines[key]

    def lines(self, key: Hashable) -> list[str]:
        """The sentences prepared for ``key`` (KeyError when it is not prepared)."""
        return self._lines[key]

    async def get(self, key: Hashable, n: int) -> Audio:
        """Sentence ``n``'s clip (1 first), waiting for it if need be; :class:`VoiceFailed` after its retries."""
        if key not in self._lines:
            raise KeyError(f"no speech prepared for {key!r}")
        return await self.synthesizer.get((key, n))

    def forget(self, key: Hashable) -> None:
        """Drop every clip of ``key``, or stop making them."""
        for n in range(1, len(self._lines.pop(key, [])) + 1):
            self.synthesizer.forget((key, n))


def joined(clips: Sequence[Audio]) -> Audio | None:
    """The clips one after another as one WAV (what aired, for a file or a later download); None when they
    cannot be joined (no clip, or clips of different sample rates or voices)."""
    if not clips or len({clip.voice for clip in clips}) != 1:
        return None
    if len(clips) == 1:
        return clips[0]
    import numpy as np

    parts = [clip.samples() for clip in clips]
    rates = {rate for _, rate in parts}
    channels = {samples.shape[1] for samples, _ in parts}
    if len(rates) != 1 or len(channels) != 1:
        return None
    whole = np.concatenate([samples for samples, _ in parts])
    return Audio.from_float(whole, rates.pop(), voice=clips[0].voice)
