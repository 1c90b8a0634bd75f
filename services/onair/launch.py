"""What ``kotae up --onair`` does for the on-air stage around starting it (its :class:`~kotae.stage.OnRequest`).

Before anything starts, :func:`prepare` refuses pages that would be served beyond
this machine without a token, and writes a new console token unless one is
configured; once the stage runs, :func:`announce` gives the lines that say where
the overlay and the console are, which show this is, and the token. Kept apart
from the service so the CLI reads it without importing what the stage runs.
"""

from __future__ import annotations

from pathlib import Path

from kotae.settings import Settings
from kotae.stage import StartRefused


def prepare(settings: Settings) -> Path | None:
    """Refuse a public address without a token; else a new console token's file (None: the configured token)."""
    from kotae.services.onair.pages.access import ConsoleAccessError, check_binding, new_token

    try:
        check_binding(settings)
    except ConsoleAccessError as exc:
        raise StartRefused(str(exc)) from None
    return None if settings.onair_console_token is not None else new_token(settings)


def announce(settings: Settings, env: dict[str, str], processes: int, token_path: Path | None) -> list[str]:
    """Where the on-air stage's overlay and console are, the show, and the console's token."""
    port = int(env.get("KOTAE_ONAIR_HTTP_PORT") or settings.onair_http_port)
    where = f"http://{settings.onair_http_host}:{port}" if port else "a free port (see `kotae onair status`)"
    lines = [
        f"On air: {processes} onair processes, one speaking at a time; its HTTP server "
        f"(audio, /status, /events) at {where}. Commands: kotae onair status|skip|pause|resume|hold on|off|…"
    ]
    base = where if port else "http://<that address>"
    show = env.get("KOTAE_ONAIR_SHOW")
    if show:
        lines.append(
            f"  Show: {show} (nothing verified before it began airs in it; "
            f"`kotae up --onair --show {show}` continues it)"
        )
    lines.append(f"  Overlay (OBS browser source, 1920x1080): {base}/overlay  (subtitles only: ?layout=subtitles)")
    lines.append(f"  Console: {base}/console")
    if token_path is not None:
        token = token_path.read_text(encoding="utf-8").strip()
        lines.append(f"  Console token (kept in {token_path}, 0600; paste it into the console): {token}")
    else:
        lines.append("  Console token: the value of KOTAE_ONAIR_CONSOLE_TOKEN")
    return lines
