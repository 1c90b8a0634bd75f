"""What a voice is: something that turns speakable text into audio, or fails with a reason."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kotae.contracts.v1 import Lang

from .audio import Audio


class VoiceFailed(Exception):
    """A voice could not say the text: the reason, for the ``voice_failed`` outcome.

    ``retryable`` is False when saying it again cannot help (nothing to say, a
    speaker the engine does not have, a refused request).
    """

    def __init__(self, reason: str, *, retryable: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


class VoiceUnavailable(RuntimeError):
    """The configured voice cannot run on this machine (a missing package or library): a start-up error."""


@runtime_checkable
class Voice(Protocol):
    """A voice: ``await voice.synthesize("こんにちは。", "ja")`` → :class:`Audio`, or :class:`VoiceFailed`.

    ``text`` is already speakable (:func:`speech_text`); a voice says it as given.
    ``aclose`` releases its threads or connections when the stage stops.
    """

    name: str

    async def synthesize(self, text: str, lang: Lang) -> Audio: ...

    async def aclose(self) -> None: ...
