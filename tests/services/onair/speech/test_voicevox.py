"""The VOICEVOX engine API (AivisSpeech speaks it too), against a local engine on the same wire format."""

from __future__ import annotations

import pytest

from kotae.services.onair.speech import VoiceFailed
from kotae.services.onair.speech.voicevox import VoicevoxVoice
from tests.fakes.voicevox_server import FakeVoicevox
from tests.fakes.wav import MS_PER_CHARACTER


async def test_an_answer_is_an_audio_query_then_its_synthesis(voicevox: FakeVoicevox) -> None:
    voice = VoicevoxVoice(voicevox.url, 3)
    text = "投票日は四月二十五日です。"
    audio = await voice.synthesize(text, "ja")
    await voice.aclose()
    query, synthesis = voicevox.requests
    assert (query["path"], query["query"]) == ("/audio_query", {"text": text, "speaker": "3"})
    # The engine's own reading goes back to it unchanged, as its clients do.
    assert synthesis["path"] == "/synthesis" and synthesis["query"] == {"speaker": "3"}
    assert synthesis["body"]["accent_phrases"][0]["moras"][0]["text"] == "投"
    assert audio.voice == "voicevox:3" and audio.duration_ms == len(text) * MS_PER_CHARACTER
    assert audio.wav.startswith(b"RIFF")


async def test_a_speaker_the_engine_does_not_have_is_not_worth_retrying(voicevox: FakeVoicevox) -> None:
    with pytest.raises(VoiceFailed) as failed:
        await VoicevoxVoice(voicevox.url, 99).synthesize("こんにちは。", "ja")
    assert not failed.value.retryable and "HTTP 422" in failed.value.reason and "speaker 99" in failed.value.reason


async def test_an_engine_error_is_worth_retrying(voicevox: FakeVoicevox) -> None:
    voicevox.default = "500"
    with pytest.raises(VoiceFailed) as failed:
        await VoicevoxVoice(voicevox.url, 1).synthesize("こんにちは。", "ja")
    assert failed.value.retryable and "/audio_query answered HTTP 500" in failed.value.reason


async def test_a_synthesis_that_is_not_a_wav_is_a_failure(voicevox: FakeVoicevox) -> None:
    voicevox.script.extend(["ok", "garbage"])
    with pytest.raises(VoiceFailed, match="did not return a WAV"):
        await VoicevoxVoice(voicevox.url, 1).synthesize("こんにちは。", "ja")


async def test_an_engine_that_is_not_running_is_a_reason() -> None:
    with FakeVoicevox() as engine:
        url = engine.url
    with pytest.raises(VoiceFailed, match="ConnectError"):
        await VoicevoxVoice(url, 1).synthesize("こんにちは。", "ja")


async def test_an_engine_that_never_answers_times_out(voicevox: FakeVoicevox) -> None:
    voicevox.default = "hang"
    with pytest.raises(VoiceFailed, match="timed out after 0.3s"):
        await VoicevoxVoice(voicevox.url, 1, timeout_s=0.3).synthesize("こんにちは。", "ja")
