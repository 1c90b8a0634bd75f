"""SIGTERM drains: a rolling restart of every stage during a replay loses nothing.

Each stage in turn gets a replacement process, then the old one gets SIGTERM,
as a rolling update with no unavailability does. Every terminated process must
exit cleanly (code 0, within its drain time) and every comment must still end
in exactly one outcome. A stopping process hands back (nak) what it fetched and
did not finish, so no comment waits out the acknowledgement wait: that wait is
set far beyond the run's time limit here, and a comment that needed it would
be lost.
"""

from __future__ import annotations

import random
import signal

import pytest

from kotae.settings import Settings
from kotae.stack import Stack
from tests.reliability.harness import StageKiller, consumer_backlog, generated_comments, replay_under_faults

pytestmark = pytest.mark.slow

ACK_WAIT_S = "300"


@pytest.fixture
def chaos_env(chaos_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("KOTAE_ACK_WAIT_S", ACK_WAIT_S)
    return {**chaos_env, "KOTAE_ACK_WAIT_S": ACK_WAIT_S}


async def test_a_rolling_restart_of_every_stage_mid_replay_drains_and_loses_nothing(
    chaos_stack: tuple[Stack, Settings],
) -> None:
    stack, settings = chaos_stack
    assert settings.ack_wait_s == float(ACK_WAIT_S)
    comments = generated_comments(60, prefix="roll-", gap_s=0.25)
    rolling = StageKiller(stack, random.Random(3), sig=signal.SIGTERM, interval=(0.2, 0.8), overlap=True, rounds=1)

    # Both limits are well under one acknowledgement wait.
    run = await replay_under_faults(stack, settings, comments, rolling, timeout=90, settle_timeout=60)
    figures = run.ledger.figures()
    print("\n" + figures.table())

    assert run.settled, (
        f"messages still unacknowledged after the run: {await consumer_backlog(stack.url, stack.stages)}"
    )
    assert [f.stage for f in run.faults] == list(stack.stages)
    assert all(f.exit_code == 0 for f in run.faults), [(f.stage, f.exit_code) for f in run.faults]
    assert run.running == {stage: True for stage in stack.stages}
    assert figures.lost == 0, run.ledger.problems()
    assert figures.duplicates == 0, run.ledger.problems()
    assert figures.unchecked_verified == 0, run.ledger.problems()
    assert figures.terminal == len(comments)
