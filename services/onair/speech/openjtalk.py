"""Open JTalk, the offline Japanese voice: the pyopenjtalk-plus wheel's dictionary and its "mei" HTS voice.

``pyopenjtalk.tts(text)`` analyses the text with the dictionary shipped in the
wheel and synthesises it with ``mei_normal.htsvoice`` (48 kHz). It is CPU-bound
and blocks; :meth:`OpenJTalkEngine.speak` is called off the event loop.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import threading
from typing import Any

from .audio import Audio
from .voice import VoiceFailed, VoiceUnavailable

_import_lock = threading.Lock()


def _pyopenjtalk() -> Any:
    """The module, imported on first use (it loads a 100 MB dictionary; stages that do not speak never pay)."""
    with _import_lock:
        # On import it prints that the optional ONNX model for reading 何 is off; that is
        # not an error of ours and must not land in a JSON log on stdout.
        with contextlib.redirect_stdout(io.StringIO()):
            import pyopenjtalk
    return pyopenjtalk


def reading(text: str) -> str:
    """How Open JTalk reads ``text``, in katakana (``"汐見線"`` → ``"シオミセン"``)."""
    return str(_pyopenjtalk().g2p(text, kana=True))


def check_openjtalk() -> None:
    """Raise :class:`VoiceUnavailable` when pyopenjtalk-plus is not installed (without importing it)."""
    try:
        found = importlib.util.find_spec("pyopenjtalk") is not None
    except (ImportError, ValueError):  # a parent that fails to import, or a module set to None
        found = False
    if not found:
        raise VoiceUnavailable(
            "no Japanese voice: pyopenjtalk-plus is not installed (a dependency of kotae: "
            "pip install 'pyopenjtalk-plus>=0.4.1.post10,<0.5')"
        )


class OpenJTalkEngine:
    """The "mei" voice of Open JTalk.

    Example::

        engine = OpenJTalkEngine()
        audio = engine.speak("投票日は一月二十四日です。")  # blocking; 48 kHz mono WAV
    """

    name = "openjtalk:mei"

    def __init__(self, *, speed: float = 1.0) -> None:
        check_openjtalk()
        self.speed = speed

    def speak(self, text: str) -> Audio:
        """``text`` spoken (blocking); :class:`VoiceFailed` when Open JTalk produces nothing."""
        if not text.strip():
            raise VoiceFailed(f"{self.name}: nothing to say", retryable=False)
        pyopenjtalk = _pyopenjtalk()
        try:
            samples, rate = pyopenjtalk.tts(text, speed=self.speed, predict_nani=False)
        except Exception as exc:  # a C extension's failure, not ours to classify
            raise VoiceFailed(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        if len(samples) == 0:
            raise VoiceFailed(f"{self.name}: no audio for {text[:40]!r}", retryable=False)
        return Audio.from_samples(samples, rate, voice=self.name)
