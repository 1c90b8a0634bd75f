"""kotae.services.onair.pages.access: the console's token, and where the pages may be served."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from pydantic import SecretStr

from kotae.services.onair.pages.access import (
    ConsoleAccessError,
    check_binding,
    console_token,
    is_loopback,
    new_token,
    token_file,
)
from kotae.settings import Settings


def test_only_loopback_addresses_count_as_this_machine() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.3.4.5", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "", "192.168.1.20", "::", "stream-pc.local"))


def test_binding_beyond_this_machine_without_a_token_is_refused(settings: Settings) -> None:
    wide = settings.model_copy(update={"onair_http_host": "0.0.0.0"})
    with pytest.raises(ConsoleAccessError, match="KOTAE_ONAIR_CONSOLE_TOKEN"):
        check_binding(wide)
    with pytest.raises(ConsoleAccessError):
        console_token(wide)
    assert not token_file(settings).exists()  # refused before anything was written
    given = wide.model_copy(update={"onair_console_token": SecretStr("a-token-the-operator-chose")})
    token = console_token(given)
    assert token.value == "a-token-the-operator-chose" and token.source == "KOTAE_ONAIR_CONSOLE_TOKEN"


def test_a_random_token_is_made_once_kept_private_and_shared_by_every_replica(settings: Settings) -> None:
    first = console_token(settings)
    path = Path(first.source)
    assert path == token_file(settings) and len(first.value) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert console_token(settings).value == first.value  # a second replica reads the same
    renewed = new_token(settings)  # `kotae up --onair` at start
    assert renewed == path and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert console_token(settings).value != first.value
    assert list(path.parent.iterdir()) == [path]  # no drafts left beside it


def test_the_token_is_accepted_only_as_a_bearer_authorization_header(settings: Settings) -> None:
    token = console_token(settings)
    assert token.accepts(f"Bearer {token.value}")
    for header in (None, "", token.value, f"Basic {token.value}", f"Bearer {token.value}x", "Bearer "):
        assert not token.accepts(header), header
