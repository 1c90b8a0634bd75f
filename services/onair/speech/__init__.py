"""The on-air stage's speech: voices, the speakable text of an answer, and synthesis ahead of its turn.

Example::

    from kotae.services.onair.speech import Synthesizer, speech_text, voice_from_settings

    voice = voice_from_settings(settings)  # VoiceUnavailable when it cannot run here
    speech = Synthesizer.from_settings(voice, settings)
    await speech.prepare(comment_id, speech_text(answer.text, answer.lang), answer.lang)
    audio = await speech.get(comment_id)  # Audio(wav, duration_ms, voice), or VoiceFailed
    speech.forget(comment_id)
    await speech.aclose(); await voice.aclose()

The engines (pyopenjtalk, libespeak-ng, the SDKs) are imported when a voice
first speaks, not when this package is imported.
"""

from .audio import Audio, NotWav
from .speakable import speech_text
from .spec import voice_from_settings
from .synthesizer import Synthesizer
from .voice import Voice, VoiceFailed, VoiceUnavailable

__all__ = [
    "Audio",
    "NotWav",
    "Synthesizer",
    "Voice",
    "VoiceFailed",
    "VoiceUnavailable",
    "speech_text",
    "voice_from_settings",
]
