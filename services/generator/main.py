"""The generator as its own process: ``kotae serve generator`` or
``faststream run kotae.services.generator.main:app`` (with KOTAE_NATS_URL set)."""

from __future__ import annotations

from typing import Any

from faststream import FastStream

from kotae.runtime import build_stage_app
from kotae.settings import Settings, get_settings
from kotae.services.generator.handlers import build_router


def build_app(settings: Settings | None = None) -> FastStream:
    settings = settings or get_settings()
    return build_stage_app("generator", [build_router(settings)], settings, description=__doc__ or "")


def __getattr__(name: str) -> Any:
    # `app` is built on first access, so importing this module has no side effects.
    if name == "app":
        return build_app()
    raise AttributeError(name)
