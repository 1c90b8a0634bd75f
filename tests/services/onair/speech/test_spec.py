"""KOTAE_ONAIR_VOICE names the voice; a bad name stops start-up, and nothing speech-related loads until it speaks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kotae.services.onair.speech import voice_from_settings
from kotae.services.onair.speech.offline import OfflineVoice
from kotae.services.onair.speech.openai_speech import OpenAIVoice
from kotae.services.onair.speech.voicevox import VoicevoxVoice
from kotae.settings import SettingsError, load_settings


def test_the_default_is_the_offline_voice(tmp_path: Path) -> None:
    voice = voice_from_settings(load_settings(data_dir=tmp_path))
    assert isinstance(voice, OfflineVoice) and voice.english.voice == "en-us"


def test_a_voicevox_engine_and_speaker(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path, onair_voice="voicevox:http://127.0.0.1:50021|3", onair_voice_timeout_s=7
    )
    voice = voice_from_settings(settings)
    assert isinstance(voice, VoicevoxVoice)
    assert (voice.base_url, voice.speaker, voice.timeout_s) == ("http://127.0.0.1:50021", 3, 7)


def test_an_openai_model_and_voice_with_the_settings_of_every_openai_call(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path,
        onair_voice="openai:gpt-4o-mini-tts|alloy",
        openai_api_key="sk-x",
        openai_base_url="http://127.0.0.1:9/v1",
        onair_voice_timeout_s=12,
    )
    voice = voice_from_settings(settings)
    assert isinstance(voice, OpenAIVoice) and (voice.model.model, voice.voice) == ("gpt-4o-mini-tts", "alloy")
    assert (voice.model.api_key, voice.model.base_url, voice.model.timeout_s) == ("sk-x", "http://127.0.0.1:9/v1", 12)


@pytest.mark.parametrize(
    "spec",
    ["espeak", "voicevox:http://127.0.0.1:50021", "voicevox:http://127.0.0.1:50021|zundamon", "voicevox:|3",
     "openai:tts-1", "openai:|alloy", ""],
)  # fmt: skip
def test_a_spec_that_names_no_voice_stops_start_up_naming_the_variable(spec: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="KOTAE_ONAIR_VOICE: .*expected openjtalk"):
        load_settings(data_dir=tmp_path, onair_voice=spec)


def test_a_stage_that_does_not_speak_never_loads_the_engines() -> None:
    """Importing the package, the registry and making the voice load no engine; saying something does."""
    script = (
        "import sys\n"
        "import kotae.services, kotae.services.onair.speech as speech\n"
        "from kotae.settings import load_settings\n"
        "voice = speech.voice_from_settings(load_settings())\n"
        "speech.speech_text('運賃は150円です[1]。', 'ja')\n"
        "def loaded():\n"
        "    espeak = 'libespeak-ng' in open('/proc/self/maps').read()\n"
        "    return sorted(m for m in ('pyopenjtalk', 'e2k', 'openai') if m in sys.modules) + ['espeak'] * espeak\n"
        "print(loaded())\n"
        "voice.english.speak('Hello.')\n"
        "voice.japanese.speak('こんにちは。')\n"
        "print(loaded())\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    before, after = run.stdout.strip().splitlines()[-2:]
    assert before == "[]"
    assert after == "['pyopenjtalk', 'espeak']"
