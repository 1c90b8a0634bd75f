"""A real stack with the on-air stage, and a real Chromium to look at its pages.

``stack_on_air`` starts every stage as ``kotae up --onair`` does (each process
as its own NATS user, the sample knowledge base with its slides loaded) and
feeds it comments through ingest, as a live chat would. ``chromium`` is
Debian's browser, driven by Playwright; without it (or Playwright) the browser
tests skip and say how to get it: ``scripts/test.sh`` installs it when it runs
as root.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import nats
import nats.js.errors
import pytest
import pytest_asyncio

from kotae.bus import permissions
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import load_records
from kotae.replay import run_replay
from kotae.services.ingest.sources import RawComment
from kotae.services.onair.lease import key_for
from kotae.services.onair.pages.access import token_file
from kotae.settings import Settings, load_settings
from kotae.stack import Stack
from tests.integration.stages import PROCESS_STAGES

ROOT = Path(__file__).resolve().parents[4]
CHROMIUM = Path(os.environ.get("KOTAE_TEST_CHROMIUM", "/usr/bin/chromium"))
#: Flags for a headless browser on a closed network: no first-run, sync, update or background traffic.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
    "--mute-audio",
]
ENV = {
    "KOTAE_ONAIR_HTTP_PORT": "0",
    "KOTAE_ONAIR_GAP_S": "0.3",
    "KOTAE_ONAIR_READ_QUESTION": "1",  # the question, then the answer: subtitles that advance
    "KOTAE_ONAIR_IDLE_S": "0",
    "KOTAE_ONAIR_VIEWER_COOLDOWN_S": "0",
    "KOTAE_LOG_FORMAT": "json",
}


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -e '.[test]')"
    if not (CHROMIUM.is_file() or shutil.which(str(CHROMIUM))):
        return (
            f"no Chromium at {CHROMIUM}: scripts/test.sh installs Debian's chromium and chromium-driver when it "
            "runs as root (apt-get install chromium chromium-driver), or set KOTAE_TEST_CHROMIUM"
        )
    return None


@dataclass
class OnAirStack:
    """The running stack: where its pages are, the console's token, and a way to ask questions in its chat."""

    stack: Stack
    settings: Settings
    url: str
    token: str
    admin: Any
    asked: list[asyncio.Task[Any]] = field(default_factory=list)

    async def ask(self, *comments: tuple[str, str, str]) -> None:
        """Viewers' comments ``(id, text, author)``, in one chat session, through ingest's triage and every
        stage (returns at once; the answers follow)."""
        raw = [RawComment(id=i, author=a, text=t, published_at="2026-11-30T20:00:00+09:00") for i, t, a in comments]
        task = asyncio.create_task(
            run_replay(self.stack.settings_for(permissions.REPLAY), self.stack.address, raw, timeout=60)
        )
        self.asked.append(task)

    async def events(self, comment_id: str) -> list[dict[str, Any]]:
        """The on-air events about one comment, as the stream stored them."""
        js = self.admin.jetstream()
        sub = await js.subscribe("kotae.onair.v1.>", ordered_consumer=True)
        found: list[dict[str, Any]] = []
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=0.5)
                except nats.errors.TimeoutError:
                    break
                event = json.loads(msg.data)
                if event["comment_id"] == comment_id:
                    found.append(event)
        finally:
            await sub.unsubscribe()
        return found

    def is_this_server(self, url: str) -> bool:
        parts = urlsplit(url)
        return parts.scheme in ("data", "blob") or parts.netloc == urlsplit(self.url).netloc


async def _http_of(admin: Any, settings: Settings, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kv = await admin.jetstream().key_value(settings.onair_kv_bucket)
            entry = await kv.get(key_for("status", settings.stream_id))
            url = json.loads(entry.value or b"{}").get("http")
            if url:
                return url
        except (nats.js.errors.NotFoundError, nats.js.errors.BucketNotFoundError, nats.js.errors.KeyNotFoundError):
            pass
        await asyncio.sleep(0.2)
    raise AssertionError("the on-air stage never said where it serves its pages")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack_on_air(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[OnAirStack]:
    missing = browser_missing()
    if missing:
        pytest.skip(missing)
    saved = {name: os.environ.get(name) for name in ENV}
    os.environ.update(ENV)
    settings = load_settings(data_dir=tmp_path_factory.mktemp("onair-pages") / "data")
    load_knowledge_base(load_records(ROOT / "kotae" / "samples" / "kb"), settings.kb, settings)
    stack = Stack(settings, stages=(*PROCESS_STAGES, "onair"))
    try:
        await stack.start()
        admin = await nats.connect(stack.url)
        url = await _http_of(admin, settings)
        token = token_file(settings).read_text(encoding="utf-8").strip()
        running = OnAirStack(stack, settings, url, token, admin)
        yield running
        for task in running.asked:
            task.cancel()
        await asyncio.gather(*running.asked, return_exceptions=True)
        await admin.close()
    finally:
        stack.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class Watched:
    """What a page did that a viewer would not see: console errors, and the hosts it asked."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def chromium(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    missing = browser_missing()
    if missing:
        pytest.skip(missing)
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        context = await driver.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),  # a fresh --user-data-dir
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1920, "height": 1080},
        )
        try:
            yield context
        finally:
            await context.close()


@pytest.fixture(scope="module")
def open_page(chromium: Any) -> Any:
    """``await open_page(url)``: a new tab whose console errors, page errors and requests are recorded."""

    async def open_(url: str) -> tuple[Any, Watched]:
        page = await chromium.new_page()
        seen = Watched()
        page.on("console", lambda m: seen.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: seen.errors.append(f"page error: {e}"))
        page.on("request", lambda r: seen.requests.append(r.url))
        await page.goto(url)
        return page, seen

    return open_


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the pages' screenshots go: KOTAE_SCREENSHOTS (docs/images refreshes the README's), else a temp folder."""
    where = os.environ.get("KOTAE_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path
