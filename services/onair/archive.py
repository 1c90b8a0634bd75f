"""The archive of aired speech: each aired answer's audio as a WAV file in ``KOTAE_ONAIR_SPEECH_DIR``.

What the audience heard, kept on disk for the streamer (a clip for a highlight,
a check of what was said). Off unless the setting names a folder; a folder that
cannot be written is logged and never stops the voice.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import structlog

from kotae.services.onair.speech import Audio

log = structlog.get_logger("kotae.onair")


class SpeechArchive:
    """Writes aired audio as ``<time>-<comment>-<attempt>.wav`` under ``folder`` (None: nothing is written).

    Example::

        archive = SpeechArchive(settings.onair_speech_dir)
        archive.write("c-17", 1, audio, started_at)   # 20261204T190102-c-17-1.wav
    """

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    def write(self, comment_id: str, attempt: int, audio: Audio, at: datetime) -> Path | None:
        """Write one airing's audio; the file written, or None (off, or the folder cannot be written)."""
        if self.folder is None:
            return None
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", comment_id)[:80]
        path = self.folder / f"{at.strftime('%Y%m%dT%H%M%S')}-{safe}-{attempt}.wav"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(audio.wav)
        except OSError as exc:
            log.warning("onair.speech_dir_failed", path=str(path), error=str(exc)[:200])
            return None
        return path
