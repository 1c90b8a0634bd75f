"""The voice ``KOTAE_ONAIR_VOICE`` names: ``openjtalk``, ``voicevox:<base_url>|<speaker>`` or ``openai:<model>|<voice>``."""

from __future__ import annotations

from kotae.settings import Settings

from .voice import Voice

SPEC_HELP = "expected openjtalk, voicevox:<base_url>|<speaker id> or openai:<model>|<voice>"


def voice_from_settings(settings: Settings) -> Voice:
    """The configured voice, ready to speak.

    Raises :class:`VoiceUnavailable` when its engine is not installed (the offline
    voice checks both of its engines here, at start-up, not on the first answer),
    and ValueError for a spec that names no voice (the settings check it first).
    """
    spec = settings.onair_voice
    kind, _, rest = spec.partition(":")
    if spec == "openjtalk":
        from .offline import OfflineVoice

        return OfflineVoice(english_voice=settings.onair_english_voice)
    if kind == "voicevox" and "|" in rest:
        from .voicevox import VoicevoxVoice

        base_url, speaker = rest.rsplit("|", 1)
        return VoicevoxVoice(base_url, int(speaker), timeout_s=settings.onair_voice_timeout_s)
    if kind == "openai" and "|" in rest:
        from .openai_speech import OpenAIVoice

        model, voice = rest.split("|", 1)
        return OpenAIVoice.from_settings(settings, model, voice, timeout_s=settings.onair_voice_timeout_s)
    raise ValueError(f"KOTAE_ONAIR_VOICE={spec!r}: {SPEC_HELP}")
