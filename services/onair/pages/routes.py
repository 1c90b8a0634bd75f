"""The pages' routes on the on-air stage's HTTP server (``README.md`` beside this file lists them).

Everything a page loads comes from this server: its HTML, CSS and JavaScript,
the slides, the audio, its state. The Content-Security-Policy says so to the
browser (``'self'`` only; a slide a knowledge base names by URL is the one
exception, for images), so nothing can make the pages reach another host.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog
from aiohttp import web

from kotae.services.onair.commands import OperatorError, check_queued
from kotae.services.onair.pages.console import parse_action
from kotae.services.onair.pages.context import Pages
from kotae.services.onair.waiting import first_of

log = structlog.get_logger("kotae.onair")

STATIC = Path(__file__).parent / "static"
ASSETS = {
    "overlay.css": "text/css",
    "overlay.js": "text/javascript",
    "console.css": "text/css",
    "console.js": "text/javascript",
}
#: The overlay's stream resends the state this often even when nothing changed: the server's clock moves on
#: (the page counts an answer's time left from it).
RESEND_S = 5.0
#: The console's stream looks this often besides each change: the stages' health it shows is read from
#: JetStream (lag, processes), and no event says when that changed.
CONSOLE_REFRESH_S = 1.0
#: A comment line on a quiet stream, so that a proxy between the page and the server keeps it open.
KEEPALIVE_S = 15.0

_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https: http:; "
    "media-src 'self' blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'"
)


def _headers(*, frames: bool) -> dict[str, str]:
    """Security headers: the overlay may be framed (OBS docks do), the console may not."""
    csp = _CSP + ("" if frames else "; frame-ancestors 'none'")
    headers = {
        "Content-Security-Policy": csp,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
    if not frames:
        headers["X-Frame-Options"] = "DENY"
    return headers


def _json(body: Any, status: int = 200, **headers: str) -> web.Response:
    return web.json_response(
        body,
        status=status,
        dumps=lambda o: json.dumps(o, ensure_ascii=False),
        headers={"Cache-Control": "no-store", **headers},
    )


def _remote(request: web.Request) -> str:
    return request.remote or "unknown"


def _same_origin(request: web.Request) -> bool:
    """A browser's request made by one of these pages (its Origin, when sent, is this server)."""
    origin = request.headers.get("Origin")
    if not origin:
        return True  # not a browser's cross-site request (curl, the CLI, tests)
    return urlsplit(origin).netloc == request.host


async def _stream(
    request: web.Request, site: Any, view: Callable[[], Awaitable[dict[str, Any]]], refresh_s: float
) -> web.StreamResponse:
    """Server-Sent Events: the whole state first (a reload or a reconnect resumes from it), then on each change.

    The stream wakes on the state's next change, never missed: the version is read before the
    awaits that build and send a view, so a change made during them ends the next wait at once.
    Its only timers are ``refresh_s`` (what changes with no event: the clock, the stages' health)
    and the keepalive.
    """
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    state = site.state
    sent_version: int | None = None
    last_body = ""
    sent_at = keepalive_at = time.monotonic()
    with contextlib.suppress(ConnectionResetError, asyncio.CancelledError, RuntimeError):
        await response.write(b"retry: 1000\n\n")
        while not site.stopping.is_set():
            seen = state.version
            now = time.monotonic()
            if seen != sent_version or now - sent_at >= refresh_s:
                sent_version = seen
                body = json.dumps(await view(), ensure_ascii=False)
                if body != last_body or now - sent_at >= refresh_s:
                    await response.write(f"id: {site.feed.latest}\nevent: state\ndata: {body}\n\n".encode())
                    last_body, sent_at, keepalive_at = body, now, now
            elif now - keepalive_at >= KEEPALIVE_S:
                await response.write(b": keepalive\n\n")
                keepalive_at = now
            due = min(sent_at + refresh_s, keepalive_at + KEEPALIVE_S) - time.monotonic()
            await _changed_or_stopping(state, seen, max(due, 0.0), site.stopping)
    return response


async def _changed_or_stopping(state: Any, since: int, timeout: float, stopping: asyncio.Event) -> None:
    """Return on the state's first change after version ``since``, on ``stopping``, or after ``timeout``."""
    await first_of(state.wait_changed(timeout, since=since), stopping.wait())


class PageRoutes:
    """The handlers, reading one process's :class:`Pages` and :class:`~kotae.services.onair.web.Site`."""

    def __init__(self, pages: Pages, site: Any) -> None:
        self.pages = pages
        self.site = site

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/", self.index)
        router.add_get("/overlay", self.page("overlay.html", frames=True))
        router.add_get("/console", self.page("console.html", frames=False))
        router.add_get("/pages/{name}", self.asset)
        router.add_get("/overlay/custom.css", self.custom_css)
        router.add_get("/overlay/state", self.overlay_state)
        router.add_get("/overlay/stream", self.overlay_stream)
        router.add_get("/console/state", self.console_state)
        router.add_get("/console/stream", self.console_stream)
        router.add_post("/console/command", self.command)
        router.add_get("/slides/{kb}/{record}", self.slide)

    async def index(self, _: web.Request) -> web.Response:
        raise web.HTTPFound("/console")

    def page(self, name: str, *, frames: bool) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_: web.Request) -> web.Response:
            body = (STATIC / name).read_bytes()
            return web.Response(body=body, content_type="text/html", charset="utf-8", headers=_headers(frames=frames))

        return handler

    async def asset(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in ASSETS:
            raise web.HTTPNotFound()
        return web.Response(
            body=(STATIC / name).read_bytes(),
            content_type=ASSETS[name],
            charset="utf-8",
            headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"},
        )

    async def custom_css(self, _: web.Request) -> web.Response:
        """The streamer's overrides (KOTAE_ONAIR_OVERLAY_CSS), loaded after the overlay's own styles."""
        path = self.pages.overlay_css
        text = "/* no overrides: set KOTAE_ONAIR_OVERLAY_CSS to a CSS file */\n"
        if path is not None:
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                log.warning("onair.overlay_css_unreadable", path=str(path), error=str(exc)[:200])
                text = f"/* {path} could not be read */\n"
        return web.Response(text=text, content_type="text/css", headers={"Cache-Control": "no-cache"})

    async def overlay_view(self) -> dict[str, Any]:
        return self.pages.views.overlay()

    async def console_view(self) -> dict[str, Any]:
        return self.pages.views.console(await self.pages.health.read(self.pages.js()), self.site.replica)

    async def overlay_state(self, _: web.Request) -> web.Response:
        return _json(await self.overlay_view())

    async def console_state(self, _: web.Request) -> web.Response:
        return _json(await self.console_view())

    async def overlay_stream(self, request: web.Request) -> web.StreamResponse:
        return await _stream(request, self.site, self.overlay_view, RESEND_S)

    async def console_stream(self, request: web.Request) -> web.StreamResponse:
        return await _stream(request, self.site, self.console_view, CONSOLE_REFRESH_S)

    async def command(self, request: web.Request) -> web.Response:
        """A console action: the token in the Authorization header, the command as JSON; sent over the bus."""
        if not _same_origin(request):
            log.warning("onair.console_refused", remote=_remote(request), why="another origin")
            return _json({"error": "a request from another site"}, 403)
        if not self.pages.token.accepts(request.headers.get("Authorization")):
            log.warning("onair.console_refused", remote=_remote(request), why="no token or a wrong one")
            return _json(
                {"error": "the console's token is missing or wrong (Authorization: Bearer <token>)"},
                401,
                **{"WWW-Authenticate": 'Bearer realm="kotae console"'},
            )
        try:
            name, target = parse_action(await request.json())
            self._check_queued(name, target)
            seq = await self.pages.commands().send(name, target, remote=_remote(request))
        except (ValueError, OperatorError) as exc:
            return _json({"error": str(exc)}, 400)
        return _json({"ok": True, "command": name, "target": target, "seq": seq, "sent_as": self.pages.user})

    def _check_queued(self, name: str, target: str | None) -> None:
        """Refuse air-next, approve or reject of a comment that is not in this process's queue."""
        state = self.site.state
        on_air = state.on_air.event.comment_id if state.on_air is not None else None
        status = {
            "queue": [{"comment_id": entry.comment_id} for entry in state.entries.values()],
            "on_air": {"comment_id": on_air} if on_air else None,
        }
        check_queued(name, target, status, state.stream_id)

    async def slide(self, request: web.Request) -> web.StreamResponse:
        found = self.pages.slides.image_file(request.match_info["kb"], request.match_info["record"])
        if found is None:
            raise web.HTTPNotFound(text="no slide image for that record")
        path, kind = found
        return web.FileResponse(path, headers={"Content-Type": kind, "Cache-Control": "max-age=300"})


def add_pages(app: web.Application, site: Any) -> None:
    """Register the overlay's and the console's routes (a ``web.ROUTES`` adder); nothing without ``site.pages``."""
    pages: Pages | None = getattr(site, "pages", None)
    if pages is not None:
        PageRoutes(pages, site).register(app.router)
