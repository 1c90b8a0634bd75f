"""A local HTTP server that speaks the VOICEVOX engine API (which AivisSpeech also speaks).

``POST /audio_query?text=…&speaker=N`` returns an audio query (JSON: accent
phrases with moras, speed, pitch …, shaped as the engine's), and
``POST /synthesis?speaker=N`` with that query returns a real WAV as long as the
text would take to say. Speakers 1–3 exist; another id gets the engine's 422.

Each request takes a behaviour, from ``responder(path, text)`` when set, else
the next scripted one, else ``default``: ``ok``, ``500``, ``hang`` (never
answers while the server runs), ``garbage`` (a /synthesis body that is not a
WAV). Every request is recorded.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.wav import spoken_wav

SPEAKERS = (1, 2, 3)
Responder = Callable[[str, str], "str | None"]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64


def audio_query(text: str) -> dict[str, Any]:
    """An audio query shaped as the engine's: one accent phrase, a mora a character."""
    moras = [
        {"text": ch, "consonant": None, "consonant_length": None, "vowel": "a", "vowel_length": 0.09, "pitch": 5.5}
        for ch in text
    ]
    return {
        "accent_phrases": [{"moras": moras, "accent": 1, "pause_mora": None, "is_interrogative": False}],
        "speedScale": 1.0,
        "pitchScale": 0.0,
        "intonationScale": 1.0,
        "volumeScale": 1.0,
        "prePhonemeLength": 0.1,
        "postPhonemeLength": 0.1,
        "outputSamplingRate": 24000,
        "outputStereo": False,
        "kana": text,
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeVoicevox

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        fake = self.fake
        text = query.get("text") or (body or {}).get("kana", "")
        fake.requests.append({"path": url.path, "query": query, "body": body})
        behaviour = fake.responder(url.path, text) if fake.responder else None
        if behaviour is None:
            with fake.lock:
                behaviour = fake.script.popleft() if fake.script else fake.default
        if behaviour == "hang":
            fake.stopping.wait()
            return
        if behaviour == "500":
            return self._send(500, "application/json", b'{"detail": "scripted failure"}')
        speaker = int(query.get("speaker", "-1"))
        if speaker not in SPEAKERS:
            detail = {"detail": [{"loc": ["query", "speaker"], "msg": f"speaker {speaker} not found"}]}
            return self._send(422, "application/json", json.dumps(detail).encode())
        if url.path == "/audio_query" and "text" in query:
            return self._send(200, "application/json", json.dumps(audio_query(query["text"])).encode())
        if url.path == "/synthesis" and isinstance(body, dict) and "accent_phrases" in body:
            if behaviour == "garbage":
                return self._send(200, "audio/wav", b"not a wav at all")
            return self._send(200, "audio/wav", spoken_wav(body.get("kana", "")))
        self._send(404, "application/json", b'{"detail": "Not Found"}')

    def _send(self, status: int, kind: str, data: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


class FakeVoicevox:
    """``with FakeVoicevox() as engine: VoicevoxVoice(engine.url, 1)``."""

    def __init__(self, default: str = "ok", *, responder: Responder | None = None) -> None:
        self.default = default
        self.responder = responder
        self.script: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.httpd = _Server(("127.0.0.1", 0), type("Handler", (_Handler,), {"fake": self}))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakeVoicevox:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()  # releases the requests left hanging
        self.httpd.shutdown()
        self.httpd.server_close()
