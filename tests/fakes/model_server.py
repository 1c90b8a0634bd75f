"""A local HTTP server that speaks the OpenAI and Anthropic wire formats.

Besides chat, messages and embeddings it answers OpenAI's ``/audio/speech``
with a real WAV (a tone as long as the input would take to say, with the
unknown sizes of a streamed header, as the hosted endpoint sends it).

Tests point the real openai and anthropic SDKs at it (``base_url``). Each
request takes a behaviour: a reply text, or a fault — ``429``, ``500``,
``timeout`` (answers after the client gave up), ``garbage`` (a body that is not
JSON), ``truncated`` (JSON cut short), ``shapeless`` (JSON without the reply's fields). The behaviour comes from ``responder``
(a function of the path and request body, for servers shared by several
stages: answer by model name), else the next scripted one, else the default.
``delay_s`` holds every reply back, like a real model's latency; ``slots`` serves
at most that many requests at once and queues the rest, as a llama.cpp server with
``--parallel 1`` does (``busiest`` records the most ever waiting or served at once).
Every request is recorded.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.wav import spoken_wav, streamed

Responder = Callable[[str, dict[str, Any]], "str | None"]


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: a stage opening a few dozen connections
    # at once (a burst of model calls) would have some reset, which no hosted API does.
    request_queue_size = 512
    daemon_threads = True


def _reply(path: str, body: dict[str, Any], text: str) -> dict[str, Any]:
    """A successful reply in the wire format of the endpoint ``path`` names."""
    if path.endswith("/messages"):
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 11, "output_tokens": 7},
        }
    if path.endswith("/embeddings"):
        inputs = body.get("input") or []
        inputs = [inputs] if isinstance(inputs, str) else inputs
        return {
            "object": "list",
            "model": body.get("model", "fake"),
            "data": [
                {"object": "embedding", "index": i, "embedding": [1.0, 0.0, float(len(t) % 7)]}
                for i, t in enumerate(inputs)
            ],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


class _Handler(BaseHTTPRequestHandler):
    # Keep-alive, like the hosted APIs: a client reuses its connections instead of
    # paying a TCP connect per call (which would bill a benchmark's stages for it).
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without this, Nagle's algorithm holds the
    # body back until the client's delayed ACK (~40 ms a call on loopback).
    disable_nagle_algorithm = True
    fake: FakeModelServer  # set on the subclass each server makes

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        fake = self.fake
        fake.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
        behaviour = fake.responder(self.path, body) if fake.responder else None
        if behaviour is None:
            with fake._lock:
                behaviour = fake.script.popleft() if fake.script else fake.default
        with fake._serving():
            if fake.delay_s:
                time.sleep(fake.delay_s)
            self._behave(behaviour, body)

    def _behave(self, behaviour: str, body: dict[str, Any]) -> None:
        if behaviour in ("429", "500", "503"):
            self._send(int(behaviour), {"error": {"message": f"scripted {behaviour}", "type": "scripted"}})
        elif behaviour == "timeout":
            time.sleep(self.fake.timeout_sleep_s)
            self._send(200, _reply(self.path, body, "late"))
        elif behaviour == "garbage":
            self._raw(200, b"<html>not json</html>")
        elif behaviour == "truncated":
            self._raw(200, json.dumps(_reply(self.path, body, "cut"))[:40].encode())
        elif behaviour == "shapeless":
            self._send(200, {"id": "x", "object": "unknown"})
        elif self.path.endswith("/audio/speech"):
            self._raw(200, streamed(spoken_wav(str(body.get("input", "")))), kind="audio/wav")
        else:
            self._send(200, _reply(self.path, body, behaviour))

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        self._raw(status, json.dumps(payload, ensure_ascii=False).encode())

    def _raw(self, status: int, data: bytes, *, kind: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


class FakeModelServer:
    def __init__(
        self,
        default: str = "ok",
        *,
        timeout_sleep_s: float = 3.0,
        responder: Responder | None = None,
        delay_s: float = 0.0,
        slots: int | None = None,
    ) -> None:
        self.script: deque[str] = deque()
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.timeout_sleep_s = timeout_sleep_s
        self.responder = responder
        self.delay_s = delay_s
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(slots) if slots else None
        self._present = 0
        self.busiest = 0
        handler = type("Handler", (_Handler,), {"fake": self})
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @contextmanager
    def _serving(self) -> Iterator[None]:
        """One request at the server: queued for a slot (when slots are limited), then served."""
        with self._lock:
            self._present += 1
            self.busiest = max(self.busiest, self._present)
        try:
            if self._slots is None:
                yield
            else:
                with self._slots:
                    yield
        finally:
            with self._lock:
                self._present -= 1

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakeModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _first_block_sentence(user: str) -> str:
    block = user.split("[1] ", 1)[1].split("\n[2] ", 1)[0]
    body = [line for line in block.splitlines()[1:] if line.strip()]
    sentence = re.split(r"(?<=[。.!?])", " ".join(body))[0].strip()
    return re.sub(r"([。.!?])$", r"[1]\1", sentence)


def stage_responder(path: str, body: dict[str, Any]) -> str | None:
    """Faithful fake models for the hot path, by model name.

    ``ranker`` keeps candidates 1 and 2; ``writer`` quotes the first sentence of
    block [1] with its citation; ``checker`` finds nothing wrong. Other model
    names fall through to the script or the default.
    """
    model = body.get("model")
    if model == "ranker":
        return json.dumps({"ids": [1, 2]})
    if model == "checker":
        return json.dumps({"verdict": 0, "findings": []})
    if model == "writer":
        return _first_block_sentence(body["messages"][-1]["content"])
    return None
