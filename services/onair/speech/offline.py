"""The offline voice (``KOTAE_ONAIR_VOICE=openjtalk``): Open JTalk for Japanese, eSpeak NG for English.

Both engines ship inside wheels that kotae depends on, so the voice speaks with
no network and no account. Each engine keeps one synthesiser and runs it on one
worker thread of its own: the event loop never waits for synthesis, and two
answers never fight for the same C library.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from kotae.contracts.v1 import Lang

from .audio import Audio
from .espeak import EspeakEngine
from .openjtalk import OpenJTalkEngine


class OfflineVoice:
    """Japanese answers in Open JTalk's "mei", English ones in eSpeak NG's ``en-us``.

    Construction checks that both engines are installed (:class:`VoiceUnavailable`
    names what is missing); the dictionaries load on the first answer.

    Example::

        voice = OfflineVoice()
        audio = await voice.synthesize("投票日は一月二十四日です。", "ja")
        audio.voice  # 'openjtalk:mei'
    """

    name = "openjtalk"

    def __init__(self, *, english_voice: str = "en-us") -> None:
        self.japanese = OpenJTalkEngine()
        self.english = EspeakEngine(english_voice)
        self._threads = {
            "ja": ThreadPoolExecutor(max_workers=1, thread_name_prefix="openjtalk"),
            "en": ThreadPoolExecutor(max_workers=1, thread_name_prefix="espeak-ng"),
        }

    async def synthesize(self, text: str, lang: Lang) -> Audio:
        engine = self.english if lang == "en" else self.japanese
        return await asyncio.get_running_loop().run_in_executor(self._threads[lang], engine.speak, text)

    def close(self) -> None:
        """Stop the worker threads once what they are saying is done."""
        for pool in self._threads.values():
            pool.shutdown(wait=False, cancel_futures=True)

    async def aclose(self) -> None:
        """:meth:`close`, with the same name as the network voices' (``voicevox:``, ``openai:``)."""
        self.close()
