"""A nats-server from the wheel started with a configuration a test writes.

Tests of access rules (users, TLS, the generated deploy configurations) need the
real server with a real configuration, not the embedded one kotae starts.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kotae.bus.embedded import find_nats_server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def configured_nats(
    config: dict[str, Any] | str, folder: Path, *, env: dict[str, str] | None = None, ready: str | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """nats-server running ``config`` (a dict, written as JSON, which nats-server reads, or the text
    of a configuration) until the block ends; started once it accepts connections on its
    ``listen`` port, or once the URL ``ready`` answers 200."""
    path = folder / "nats-test.conf"
    text = config if isinstance(config, str) else json.dumps(config)
    path.write_text(text, encoding="utf-8")
    port = int(_listen(config).rsplit(":", 1)[1])
    proc = subprocess.Popen(
        [str(find_nats_server()), "-c", str(path)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 10
    try:
        while not _up(port, ready):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "nats-server exited"
            assert time.monotonic() < deadline, "nats-server did not start"
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _listen(config: dict[str, Any] | str) -> str:
    if isinstance(config, dict):
        return str(config["listen"])
    for line in config.splitlines():
        if line.strip().startswith("listen:"):
            return line.split(":", 1)[1].split("#", 1)[0].strip()
    raise ValueError("the configuration has no listen line")


def _up(port: int, ready: str | None) -> bool:
    import urllib.request

    try:
        if ready is not None:
            with urllib.request.urlopen(ready, timeout=0.5) as response:
                return response.status == 200
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


async def server_errors(errors: list[Exception], count: int = 1, timeout: float = 2.0) -> list[Exception]:
    """``errors`` (filled by a connection's error callback) once it holds ``count``, or after ``timeout``.

    A permissions violation reaches the client asynchronously, after the publish or
    subscribe call has already returned.
    """
    import asyncio

    deadline = time.monotonic() + timeout
    while len(errors) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return errors
