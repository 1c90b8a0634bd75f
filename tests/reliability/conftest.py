"""A whole kotae stack per test — nats-server and one process per stage — ready for faults."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import load_records
from kotae.settings import Settings
from kotae.stack import Stack
from tests.reliability.harness import CHAOS_ENV, SAMPLES, chaos_settings


@pytest.fixture
def chaos_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment every stage process inherits (Stack passes os.environ on)."""
    for name, value in CHAOS_ENV.items():
        monkeypatch.setenv(name, value)
    return dict(CHAOS_ENV)


@pytest.fixture
def chaos_loaded(tmp_path: Path, chaos_env: dict[str, str]) -> Settings:
    settings = chaos_settings(tmp_path / "data", chaos_env)
    load_knowledge_base(load_records(SAMPLES / "kb"), "default", settings)
    return settings


@pytest.fixture
async def chaos_stack(chaos_loaded: Settings) -> AsyncIterator[tuple[Stack, Settings]]:
    """Embedded nats-server plus every stage as its own process, stopped afterwards."""
    stack = Stack(chaos_loaded)
    await stack.start()
    try:
        yield stack, chaos_loaded
    finally:
        stack.stop()
