"""What the pages read and do, gathered once per on-air process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nats.js import JetStreamContext

from kotae.services.onair.knowledge import KnowledgeView
from kotae.services.onair.pages.access import ConsoleToken, console_token
from kotae.services.onair.pages.console import ConsoleCommands
from kotae.services.onair.pages.health import StageHealth
from kotae.services.onair.pages.slides import SlideFinder
from kotae.services.onair.pages.view import PageViews
from kotae.services.onair.state import OnAirState
from kotae.services.onair.web import AudioShelf
from kotae.settings import Settings

#: The NATS user the stage runs as when the server asks for none (tests, a local server without users).
DEFAULT_USER = "onair"


@dataclass
class Pages:
    """The overlay's and the console's views, the console's token and commands, the stages' health.

    Example::

        pages = Pages.build(settings, state, audio, KnowledgeView(settings.kb_dir), jetstream=ctx.jetstream)
        Site(state, audio, feed, replica, pages=pages)   # the server then serves /overlay and /console
    """

    views: PageViews
    slides: SlideFinder
    token: ConsoleToken
    health: StageHealth
    jetstream: Callable[[], JetStreamContext]  # the connection may be made after the pages
    stream_id: str
    user: str
    overlay_css: Path | None

    @classmethod
    def build(
        cls,
        settings: Settings,
        state: OnAirState,
        audio: AudioShelf,
        kb: KnowledgeView,
        *,
        jetstream: Callable[[], JetStreamContext],
    ) -> Pages:
        """Everything the pages need; raises :class:`~.access.ConsoleAccessError` when they may not be served."""
        from kotae.services import STAGES

        slides = SlideFinder(kb)
        return cls(
            views=PageViews(
                state,
                audio,
                slides,
                faq_kb=settings.kb_for(state.stream_id),
                read_question=settings.onair_read_question,
            ),
            slides=slides,
            token=console_token(settings),
            health=StageHealth(STAGES, settings.data_dir / "run"),
            jetstream=jetstream,
            stream_id=state.stream_id,
            user=settings.nats_user or DEFAULT_USER,
            overlay_css=settings.onair_overlay_css,
        )

    def js(self) -> JetStreamContext:
        return self.jetstream()

    def commands(self) -> ConsoleCommands:
        return ConsoleCommands(self.js(), stream_id=self.stream_id, user=self.user)
