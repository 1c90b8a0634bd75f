"""Speech made ahead of its turn: retries, a timeout per call, a bounded number of syntheses at once, clean sound.

The on-air stage asks for the next few queued answers (``prepare``) while the
current one is on air, so the next is ready when its turn comes (``get``). A
voice that fails or hangs costs only its own key: after its retries ``get``
raises :class:`VoiceFailed` with the reason and every other key goes on.
Whatever the voice, every clip leaves here broadcast-clean (:mod:`loudness`):
this is the one place all engines' audio passes through.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Hashable
from dataclasses import dataclass, field

import structlog

from kotae.contracts.v1 import Lang
from kotae.settings import Settings

from .audio import Audio
from .loudness import LoudnessTarget, broadcast_clean
from .voice import Voice, VoiceFailed

log = structlog.get_logger("kotae.onair.speech")


@dataclass
class _Job:
    text: str
    lang: Lang
    order: int
    task: asyncio.Task[Audio] | None = None
    wanted: bool = False  # someone is waiting for it now: it goes before pre-synthesis
    started: asyncio.Event = field(default_factory=asyncio.Event)


class Synthesizer:
    """Synthesis by key, started ahead and kept until forgotten.

    Example::

        speech = Synthesizer(voice, retries=2, timeout_s=30, concurrency=1)
        await speech.prepare("c-17", "投票日は一月二十四日です。", "ja")  # returns at once
        ...
        audio = await speech.get("c-17")  # the Audio, or VoiceFailed with the reason
        speech.forget("c-17")

    ``text`` is said as given: pass :func:`speech_text` of the answer. At most
    ``concurrency`` syntheses run ahead at once; a key someone is waiting for
    (``get``: its turn has come) starts before keys prepared ahead, on a lane of
    its own, so a voice stuck on a later answer never holds up the current one.
    Keys otherwise start in the order they were prepared. Each attempt gets ``timeout_s``; a failed or timed-out
    attempt is tried again up to ``retries`` times (not when the voice says
    trying again cannot help). Each clip is brought to ``loudness`` (:func:`broadcast_clean`)
    before anyone gets it.
    """

    def __init__(
        self,
        voice: Voice,
        *,
        retries: int = 2,
        timeout_s: float = 30.0,
        concurrency: int = 1,
        backoff_s: float = 0.25,
        loudness: LoudnessTarget | None = None,
    ) -> None:
        if retries < 0 or timeout_s <= 0 or concurrency < 1 or backoff_s < 0:
            raise ValueError("retries >= 0, timeout_s > 0, concurrency >= 1 and backoff_s >= 0")
        self.voice = voice
        self.retries = retries
        self.timeout_s = timeout_s
        self.concurrency = concurrency
        self.backoff_s = backoff_s
        self.loudness = loudness or LoudnessTarget()
        self._jobs: dict[Hashable, _Job] = {}
        self._running = 0
        self._order = itertools.count()
        self._slot_freed = asyncio.Condition()

    @classmethod
    def from_settings(cls, voice: Voice, settings: Settings) -> Synthesizer:
        """Retries, timeout and concurrency from ``KOTAE_ONAIR_VOICE_*``, loudness from ``KOTAE_ONAIR_LOUDNESS_LUFS``
        and ``KOTAE_ONAIR_PEAK_DBTP``."""
        return cls(
            voice,
            retries=settings.onair_voice_retries,
            timeout_s=settings.onair_voice_timeout_s,
            concurrency=settings.onair_voice_concurrency,
            loudness=LoudnessTarget(lufs=settings.onair_loudness_lufs, ceiling_dbtp=settings.onair_peak_dbtp),
        )

    def __contains__(self, key: Hashable) -> bool:
        return key in self._jobs

    def ready(self, key: Hashable) -> bool:
        """Whether ``key``'s audio (or its failure) is there, so ``get`` returns at once."""
        job = self._jobs.get(key)
        return job is not None and job.task is not None and job.task.done()

    async def prepare(self, key: Hashable, text: str, lang: Lang) -> None:
        """Start synthesising ``text`` for ``key`` in the background; a key already prepared is left as it is."""
        if key in self._jobs:
            return
        job = _Job(text, lang, next(self._order))
        self._jobs[key] = job
        job.task = asyncio.create_task(self._run(key, job), name=f"speech {key}")
        # A failure nobody asked for (forgotten first) is still a retrieved one: no warning at exit.
        job.task.add_done_callback(lambda task: task.cancelled() or task.exception())

    async def get(self, key: Hashable) -> Audio:
        """The audio of ``key``, waiting for it if need be; :class:`VoiceFailed` after its retries.

        Raises KeyError for a key never prepared (or already forgotten).
        """
        job = self._jobs.get(key)
        if job is None or job.task is None:
            raise KeyError(f"no speech prepared for {key!r}")
        if not job.started.is_set():
            job.wanted = True
            async with self._slot_freed:
                self._slot_freed.notify_all()
        return await asyncio.shield(job.task)

    def forget(self, key: Hashable) -> None:
        """Drop ``key``'s audio, or stop making it."""
        job = self._jobs.pop(key, None)
        if job is not None and job.task is not None and not job.task.done():
            job.task.cancel()

    async def aclose(self) -> None:
        """Stop every synthesis still running and drop what was kept (the voice stays open: its maker closes it)."""
        tasks = [job.task for job in self._jobs.values() if job.task is not None]
        self._jobs.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    # --- the work -------------------------------------------------------------

    def _may_start(self, job: _Job) -> bool:
        """First in line, and a lane free: pre-synthesis uses ``concurrency`` lanes, a wanted key one more."""
        waiting = [j for j in self._jobs.values() if not j.started.is_set()]
        first = min(waiting, key=lambda j: (not j.wanted, j.order), default=None)
        lanes = self.concurrency + (1 if job.wanted else 0)
        return first is job and self._running < lanes

    async def _run(self, key: Hashable, job: _Job) -> Audio:
        async with self._slot_freed:
            try:
                await self._slot_freed.wait_for(lambda: self._may_start(job))
            except asyncio.CancelledError:
                self._slot_freed.notify_all()  # it may have been first in line: the next one is now
                raise
            self._running += 1
            job.started.set()
        try:
            return await self._attempts(key, job)
        finally:
            async with self._slot_freed:
                self._running -= 1
                self._slot_freed.notify_all()

    async def _clean_speech(self, job: _Job) -> Audio:
        audio = await self.voice.synthesize(job.text, job.lang)
        return await asyncio.to_thread(broadcast_clean, audio, self.loudness)

    async def _attempts(self, key: Hashable, job: _Job) -> Audio:
        reasons: list[str] = []
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            started = time.perf_counter()
            try:
                audio = await asyncio.wait_for(self._clean_speech(job), self.timeout_s)
            except TimeoutError:
                reasons.append(f"no audio within {self.timeout_s:g}s")
            except VoiceFailed as exc:
                reasons.append(exc.reason)
                if not exc.retryable:
                    break
            except Exception as exc:  # a voice's own bug must not take the stage down
                reasons.append(f"{type(exc).__name__}: {exc}")
            else:
                log.debug(
                    "speech_ready",
                    key=str(key),
                    voice=audio.voice,
                    audio_ms=audio.duration_ms,
                    synthesis_ms=round((time.perf_counter() - started) * 1000),
                    attempts=attempt + 1,
                )
                return audio
            log.warning(
                "speech_attempt_failed", key=str(key), voice=self.voice.name, attempt=attempt + 1, reason=reasons[-1]
            )
        tries = len(reasons)
        raise VoiceFailed(
            f"{self.voice.name}: {reasons[-1]} ({tries} attempt{'s' if tries > 1 else ''})", retryable=False
        )
