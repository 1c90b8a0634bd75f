"""OpenAI's speech endpoint through the openai SDK, against the local fake model server."""

from __future__ import annotations

import pytest

from kotae.services.onair.speech import VoiceFailed
from kotae.services.onair.speech.openai_speech import OpenAIVoice
from kotae.settings import Settings, load_settings
from tests.fakes.model_server import FakeModelServer
from tests.fakes.wav import MS_PER_CHARACTER


def _voice(settings: Settings, fake: FakeModelServer, *, timeout_s: float = 5.0) -> OpenAIVoice:
    configured = load_settings(data_dir=settings.data_dir, openai_base_url=fake.url, openai_api_key="sk-test-speech")
    return OpenAIVoice.from_settings(configured, "gpt-4o-mini-tts", "alloy", timeout_s=timeout_s)


async def test_the_sdk_asks_for_a_wav_with_the_key_and_gateway_of_every_openai_call(settings: Settings) -> None:
    text = "The polls open at seven A M."
    with FakeModelServer() as fake:
        voice = _voice(settings, fake)
        audio = await voice.synthesize(text, "en")
        await voice.aclose()
    (request,) = fake.requests
    assert request["path"] == "/audio/speech"
    assert request["body"] == {"model": "gpt-4o-mini-tts", "voice": "alloy", "input": text, "response_format": "wav"}
    assert {k.lower(): v for k, v in request["headers"].items()}["authorization"] == "Bearer sk-test-speech"
    # The fake streams its WAV with unknown sizes, as the hosted endpoint does: the duration is still right.
    assert audio.duration_ms == len(text) * MS_PER_CHARACTER and audio.voice == "openai:gpt-4o-mini-tts|alloy"


@pytest.mark.parametrize(("behaviour", "retryable"), [("429", True), ("500", True)])
async def test_a_refusal_says_its_status(settings: Settings, behaviour: str, retryable: bool) -> None:
    with FakeModelServer(default=behaviour) as fake:
        with pytest.raises(VoiceFailed) as failed:
            await _voice(settings, fake).synthesize("Hello.", "en")
    assert failed.value.retryable is retryable and f"HTTP {behaviour}" in failed.value.reason


async def test_a_body_that_is_not_a_wav_is_a_failure(settings: Settings) -> None:
    with FakeModelServer(default="garbage") as fake:
        with pytest.raises(VoiceFailed, match="did not return a WAV"):
            await _voice(settings, fake).synthesize("Hello.", "en")


async def test_an_endpoint_slower_than_the_timeout_is_a_failure(settings: Settings) -> None:
    with FakeModelServer(default="timeout", timeout_sleep_s=2.0) as fake:
        with pytest.raises(VoiceFailed, match="Timeout"):
            await _voice(settings, fake, timeout_s=0.3).synthesize("Hello.", "en")
