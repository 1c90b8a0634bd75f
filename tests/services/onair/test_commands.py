"""kotae.services.onair.commands: what the operator may send, and how the status reads."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from kotae.services.onair.commands import OperatorError, check, operator_settings, render_status
from kotae.services.onair.policy import Policy
from kotae.services.onair.state import OnAirState
from kotae.settings import load_settings
from tests.factories import ONAIR_AT, verified_answer


@pytest.mark.parametrize(
    ("command", "target", "says"),
    [
        ("hold", None, "hold takes on or off"),
        ("hold", "maybe", "hold takes on or off"),
        ("approve", None, "comment id"),
        ("block", None, "the author"),
        ("pause", "c1", "takes no argument"),
        ("shout", None, "unknown command"),
    ],
)
def test_a_command_without_its_target_is_refused_before_connecting(command: str, target: str | None, says: str) -> None:
    with pytest.raises(OperatorError, match=says):
        check(command, target)


def test_commands_log_in_as_the_operator_of_a_running_stack(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    with pytest.raises(OperatorError, match="kotae up --onair"):
        operator_settings(settings)
    (tmp_path / "nats").mkdir()
    (tmp_path / "nats" / "operator.env").write_text(
        "KOTAE_NATS_URL=nats://127.0.0.1:4222\nKOTAE_NATS_USER=operator\nKOTAE_NATS_PASSWORD=kabc\n", encoding="utf-8"
    )
    logged_in = operator_settings(settings)
    assert logged_in.nats_user == "operator" and logged_in.nats_password is not None
    assert logged_in.nats_password.get_secret_value() == "kabc"


def test_the_status_shows_the_mode_the_queue_with_why_and_who_speaks() -> None:
    state = OnAirState("s", Policy(), clock=lambda: ONAIR_AT)
    state.on_answer(verified_answer("c1", author="a", stream_id="s", superchat=(1000, "JPY")), seq=1)
    state.on_answer(verified_answer("c2", "バス代は？", author="b", stream_id="s"), seq=2)
    state.session.hold = True
    text = render_status({**state.snapshot(), "replica": "host:1", "speaking": True}, now=datetime.now(UTC))
    assert "hold" in text.splitlines()[0] and "speaking: host:1" in text
    assert "on air   (nothing)" in text and "queue    2 waiting" in text
    first = next(line for line in text.splitlines() if " 1. c1" in line)
    assert "superchat 1000 JPY" in first and "hold: waiting for approval" in first
