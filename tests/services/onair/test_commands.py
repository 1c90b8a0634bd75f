"""kotae.services.onair.commands: what the operator may send, and how the status reads."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from kotae.services.onair.commands import OperatorError, check, check_queued, operator_settings, render_status
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


def test_approve_reject_or_next_of_a_comment_that_is_not_queued_is_refused() -> None:
    state = OnAirState("s", Policy(), clock=lambda: ONAIR_AT)
    state.on_answer(verified_answer("c1", author="a", stream_id="s"), seq=1)
    status = state.snapshot()
    for command in ("approve", "reject", "next"):
        with pytest.raises(OperatorError, match=r"no answer to comment 'c9' is queued on stream 's' \(queued: c1\)"):
            check_queued(command, "c9", status, "s")
        check_queued(command, "c1", status, "s")  # queued: sent
    with pytest.raises(OperatorError, match="is `kotae up --onair` running"):
        check_queued("approve", "c1", None, "s")


def test_the_status_shows_what_will_be_said_what_it_cites_the_verdict_and_why_it_is_there() -> None:
    state = OnAirState("s", Policy(), clock=lambda: ONAIR_AT)
    state.on_answer(verified_answer("c1", author="a", stream_id="s", superchat=(1000, "JPY")), seq=1)
    state.on_answer(verified_answer("c2", "バス代は？", author="b", stream_id="s"), seq=2)
    text = render_status({**state.snapshot(), "replica": "host:1", "speaking": True}, now=datetime.now(UTC))
    says = [line for line in text.splitlines() if line.strip().startswith("says")]
    assert len(says) == 2 and all("[1]" not in line and "上限" in line for line in says)
    assert "cites    [1] 子育て支援：保育料と待機児童ゼロ (slide 4)" in text
    assert "verdict  supported: the check found nothing against the documents" in text
    assert "why      first: a Super Chat of 1000 JPY" in text
    assert "why      after c1: a viewer ranks below a Super Chat of 1000 JPY" in text
