"""Fixtures of the speech tests: the real offline voice, a VOICEVOX engine and the fake model server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kotae.services.onair.speech.offline import OfflineVoice
from tests.fakes.voicevox_server import FakeVoicevox


@pytest.fixture(scope="session")
def offline_voice() -> Iterator[OfflineVoice]:
    """Open JTalk and eSpeak NG, loaded once for the session (the dictionary takes a second)."""
    voice = OfflineVoice()
    yield voice
    voice.close()


@pytest.fixture
def voicevox() -> Iterator[FakeVoicevox]:
    with FakeVoicevox() as engine:
        yield engine
