"""VOICEVOX engine voices (``voicevox:<base_url>|<speaker>``), and AivisSpeech, which speaks the same API.

One answer is two requests: ``POST /audio_query?text=…&speaker=N`` returns the
engine's reading of the text (moras, accents, speed) as JSON, and
``POST /synthesis?speaker=N`` with that JSON returns the WAV.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from kotae.contracts.v1 import Lang

from .audio import Audio, NotWav
from .voice import VoiceFailed


class VoicevoxVoice:
    """A speaker of a VOICEVOX-compatible engine.

    Example::

        voice = VoicevoxVoice("http://127.0.0.1:50021", speaker=3)
        audio = await voice.synthesize("こんにちは。", "ja")
        audio.voice  # 'voicevox:3'

    The engine reads Japanese; an English answer is read with its Japanese rules.
    """

    def __init__(self, base_url: str, speaker: int, *, timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.speaker = speaker
        self.timeout_s = timeout_s
        self.name = f"voicevox:{self.base_url}|{speaker}"
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> httpx.AsyncClient:
        # An httpx client's connections belong to the event loop that opened them.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout_s)
            self._client_loop = loop
        return self._client

    async def synthesize(self, text: str, lang: Lang) -> Audio:
        if not text.strip():
            raise VoiceFailed(f"{self.name}: nothing to say", retryable=False)
        query = await self._post("/audio_query", params={"text": text, "speaker": self.speaker})
        try:
            plan = query.json()
        except ValueError:
            raise VoiceFailed(f"{self.name}: /audio_query answered with something that is not JSON") from None
        wav = await self._post("/synthesis", params={"speaker": self.speaker}, json=plan)
        try:
            return Audio.from_wav(wav.content, voice=f"voicevox:{self.speaker}")
        except NotWav as exc:
            raise VoiceFailed(f"{self.name}: /synthesis did not return a WAV: {exc}") from None

    async def _post(self, path: str, **request: Any) -> httpx.Response:
        try:
            response = await self._http().post(path, **request)
        except httpx.TimeoutException:
            raise VoiceFailed(f"{self.name}: {path} timed out after {self.timeout_s}s") from None
        except httpx.HTTPError as exc:
            raise VoiceFailed(f"{self.name}: {path}: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            # 422: a speaker the engine does not have, or text it cannot read; asking again will not help.
            retryable = response.status_code >= 500 or response.status_code in (408, 429)
            raise VoiceFailed(
                f"{self.name}: {path} answered HTTP {response.status_code}: {response.text[:200]}",
                retryable=retryable,
            )
        return response

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.aclose()
