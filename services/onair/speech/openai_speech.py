"""OpenAI's speech endpoint as a voice (``openai:<model>|<voice>``), through the openai SDK.

The client comes from :class:`kotae.providers.ChatModel`, so the key
(``KOTAE_OPENAI_API_KEY``), the gateway (``KOTAE_OPENAI_BASE_URL``) and the HTTP
transport are the same as every other OpenAI call of kotae's.
"""

from __future__ import annotations

from kotae.contracts.v1 import Lang
from kotae.providers import ChatModel
from kotae.settings import Settings

from .audio import Audio, NotWav
from .voice import VoiceFailed


class OpenAIVoice:
    """One voice of an OpenAI speech model, asked for WAV.

    Example::

        voice = OpenAIVoice(ChatModel.from_spec("openai:gpt-4o-mini-tts", setting="KOTAE_ONAIR_VOICE"), "alloy")
        audio = await voice.synthesize("The polls open at seven.", "en")
    """

    def __init__(self, model: ChatModel, voice: str) -> None:
        self.model = model
        self.voice = voice
        self.name = f"openai:{model.model}|{voice}"

    @classmethod
    def from_settings(cls, settings: Settings, model: str, voice: str, *, timeout_s: float) -> OpenAIVoice:
        chat = ChatModel.from_settings(settings, f"openai:{model}", setting="KOTAE_ONAIR_VOICE")
        chat.timeout_s = timeout_s
        return cls(chat, voice)

    async def synthesize(self, text: str, lang: Lang) -> Audio:
        import openai

        if not text.strip():
            raise VoiceFailed(f"{self.name}: nothing to say", retryable=False)
        try:
            response = await self.model.aclient().audio.speech.create(
                model=self.model.model, voice=self.voice, input=text, response_format="wav"
            )
            wav = await response.aread()
        except openai.APIStatusError as exc:
            retryable = exc.status_code >= 500 or exc.status_code in (408, 409, 429)
            raise VoiceFailed(f"{self.name}: HTTP {exc.status_code}", retryable=retryable) from None
        except openai.APIError as exc:  # connection faults and timeouts
            raise VoiceFailed(f"{self.name}: {type(exc).__name__}: {str(exc)[:200]}") from None
        try:
            return Audio.from_wav(wav, voice=self.name)
        except NotWav as exc:
            raise VoiceFailed(f"{self.name}: the speech endpoint did not return a WAV: {exc}") from None

    async def aclose(self) -> None:
        await self.model.aclose()
