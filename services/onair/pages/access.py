"""Who may act from the console: a token sent in a header, and where the pages may be served at all.

The overlay is read-only, so anyone who can reach it may see it; the console's
actions (skip, pause, hold, approve …) need the console's token, sent as
``Authorization: Bearer <token>``. Never in a URL (it would land in OBS's and
the browser's history, in logs and in screenshots) and never in a cookie (a page
on another site could make the browser send it).

* ``KOTAE_ONAIR_CONSOLE_TOKEN`` set: that is the token;
* otherwise a random one, kept in ``KOTAE_DATA_DIR/onair/console.token`` (0600):
  ``kotae up --onair`` makes a new one each time it starts and prints it; a stage
  process started on its own makes one when the file is missing, and every
  replica sharing the data folder reads the same;
* a server bound to an address other than loopback needs the token set: it
  stops at start otherwise (a token in a file on one host is no use to the
  operator of a server bound for others).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from kotae.settings import Settings

SCHEME = "Bearer"


class ConsoleAccessError(RuntimeError):
    """The pages may not be served as configured; the message says what to set."""


def token_file(settings: Settings) -> Path:
    return settings.data_dir / "onair" / "console.token"


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name, or an empty host (every address)


def check_binding(settings: Settings) -> None:
    """Refuse a server bound beyond this machine without a token of the operator's choosing."""
    host = settings.onair_http_host
    if not is_loopback(host) and settings.onair_console_token is None:
        raise ConsoleAccessError(
            f"KOTAE_ONAIR_HTTP_HOST={host!r} serves the overlay and the console beyond this machine: "
            "set KOTAE_ONAIR_CONSOLE_TOKEN (16 characters or more) so that only the operator can act from the "
            "console, or bind 127.0.0.1"
        )


def _write_private(path: Path, token: str, *, replace: bool) -> bool:
    """Write ``token`` readable by this user only; False when it exists and ``replace`` is not asked.

    The file appears whole or not at all (written beside it, then linked or renamed into place), so a
    replica starting at the same moment reads either nothing or the complete token.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        path.parent.chmod(0o700)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(token + "\n")
        if replace:
            os.replace(draft, path)
            return True
        try:
            os.link(draft, path)
        except FileExistsError:
            return False
        return True
    finally:
        draft.unlink(missing_ok=True)


def new_token(settings: Settings) -> Path:
    """A new random token in the token file (``kotae up --onair`` at start); returns the file."""
    path = token_file(settings)
    _write_private(path, secrets.token_urlsafe(32), replace=True)
    return path


@dataclass(frozen=True)
class ConsoleToken:
    """The token the console's actions must carry, and where it came from (for the log, never the value)."""

    value: str
    source: str

    def accepts(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header carries this token (compared in constant time)."""
        if not authorization:
            return False
        scheme, _, given = authorization.partition(" ")
        if scheme != SCHEME:
            return False
        return hmac.compare_digest(given.strip().encode(), self.value.encode())


def console_token(settings: Settings) -> ConsoleToken:
    """The console's token (see the module docstring); raises :class:`ConsoleAccessError` when the
    server may not start as configured."""
    check_binding(settings)
    if settings.onair_console_token is not None:
        return ConsoleToken(settings.onair_console_token.get_secret_value(), "KOTAE_ONAIR_CONSOLE_TOKEN")
    path = token_file(settings)
    _write_private(path, secrets.token_urlsafe(32), replace=False)  # only when missing
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)  # a copy someone made readable: it is the operator's alone again
    value = path.read_text(encoding="utf-8").strip()
    if len(value) < 16:
        raise ConsoleAccessError(f"{path}: the console token is shorter than 16 characters; delete the file")
    return ConsoleToken(value, str(path))
