"""eSpeak NG, the offline English voice: libespeak-ng through ctypes, from the espeakng-loader wheel.

The wheel ships ``libespeak-ng.so`` (1.52) with its ``espeak-ng-data``, so
nothing outside pip is needed. Without the wheel, Debian's ``libespeak-ng1``
(with ``espeak-ng-data``) is used when present; with neither, the voice
cannot start and says so (:class:`VoiceUnavailable`).

The library keeps one global synthesiser, so every call goes through one
lock; :meth:`EspeakEngine.speak` blocks (run it off the event loop).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path

from .audio import Audio
from .voice import VoiceFailed, VoiceUnavailable

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000
_CHARS_UTF8 = 1
_RATE = 1  # espeakRATE: words per minute
_EE_OK = 0

# int callback(short *wav, int numsamples, espeak_EVENT *events): 0 to go on.
_SYNTH_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


@dataclass(frozen=True)
class EspeakLibrary:
    """Where libespeak-ng and its data were found, and which package brought them."""

    library: str
    data: str | None  # None: the library's compiled-in data path (Debian's)
    source: str


def find_espeak() -> EspeakLibrary:
    """libespeak-ng from the espeakng-loader wheel, else the system's; raise :class:`VoiceUnavailable`.

    The wheel is found without importing it, and the library is loaded only when the voice first speaks.
    """
    try:
        spec = importlib.util.find_spec("espeakng_loader")
    except (ImportError, ValueError):  # a module set to None, a broken parent
        spec = None
    if spec is not None and spec.submodule_search_locations:
        package = Path(next(iter(spec.submodule_search_locations)))
        library, data = package / "libespeak-ng.so", package / "espeak-ng-data"
        if library.is_file() and (data / "en_dict").is_file():
            return EspeakLibrary(str(library), str(data), "espeakng-loader wheel")
    system = ctypes.util.find_library("espeak-ng")
    if system:
        return EspeakLibrary(system, None, "system libespeak-ng")
    raise VoiceUnavailable(
        "no English voice: libespeak-ng was not found (the espeakng-loader wheel, a dependency of kotae, "
        "ships it: pip install 'espeakng-loader>=0.2.4,<0.3'; or apt-get install libespeak-ng1 espeak-ng-data)"
    )


class EspeakEngine:
    """One eSpeak NG voice (``en-us`` by default), loaded on first use.

    Example::

        engine = EspeakEngine()
        audio = engine.speak("The library opens at nine.")  # blocking; 22,050 Hz mono WAV
    """

    _lock = threading.Lock()  # one synthesiser per process, whatever the number of engines
    _loaded: tuple[ctypes.CDLL, int] | None = None

    def __init__(self, voice: str = "en-us", *, words_per_minute: int = 165) -> None:
        self.voice = voice
        self.words_per_minute = words_per_minute
        self.found = find_espeak()

    @property
    def name(self) -> str:
        return f"espeak-ng:{self.voice}"

    def _library(self) -> tuple[ctypes.CDLL, int]:
        if EspeakEngine._loaded is None:
            lib = ctypes.CDLL(self.found.library)
            lib.espeak_Initialize.restype = ctypes.c_int
            lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
            lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
            lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
            lib.espeak_SetSynthCallback.argtypes = [_SYNTH_CALLBACK]
            lib.espeak_Synth.argtypes = [
                ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
            ]  # fmt: skip
            data = self.found.data.encode() if self.found.data else None
            rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data, _INITIALIZE_DONT_EXIT)
            if rate <= 0:
                raise VoiceUnavailable(f"libespeak-ng ({self.found.source}, {self.found.library}) did not start")
            EspeakEngine._loaded = (lib, rate)
        return EspeakEngine._loaded

    def speak(self, text: str) -> Audio:
        """``text`` spoken (blocking); :class:`VoiceFailed` when the library refuses it."""
        if not text.strip():
            raise VoiceFailed(f"{self.name}: nothing to say", retryable=False)
        with EspeakEngine._lock:
            lib, rate = self._library()
            chunks: list[bytes] = []

            def collect(wav: ctypes.POINTER(ctypes.c_short), count: int, _events: int) -> int:
                if count > 0 and wav:
                    chunks.append(ctypes.string_at(wav, count * 2))
                return 0

            callback = _SYNTH_CALLBACK(collect)  # kept alive until espeak_Synth returns
            lib.espeak_SetSynthCallback(callback)
            if lib.espeak_SetVoiceByName(self.voice.encode()) != _EE_OK:
                raise VoiceFailed(f"{self.name}: eSpeak NG has no voice {self.voice!r}", retryable=False)
            lib.espeak_SetParameter(_RATE, self.words_per_minute, 0)
            data = text.encode("utf-8") + b"\0"
            status = lib.espeak_Synth(data, len(data), 0, 0, 0, _CHARS_UTF8, None, None)
            if status != _EE_OK:
                raise VoiceFailed(f"{self.name}: espeak_Synth returned {status}")
        pcm = b"".join(chunks)
        if not pcm:
            raise VoiceFailed(f"{self.name}: no audio for {text[:40]!r}", retryable=False)
        import numpy as np

        return Audio.from_samples(np.frombuffer(pcm, dtype="<i2"), rate, voice=self.name)
