"""The per-service NATS users of deploy/k8s/nats-values.yaml, enforced by a real nats-server.

A nats-server from the wheel runs with exactly the generated ``KOTAE`` account
(passwords made literal). The verifier, connected as its own user, does its job
end to end — consume its durable consumer, publish its outcome — and is refused
when it publishes what is not its output.
"""

from __future__ import annotations

from pathlib import Path

import nats
import pytest
import yaml
from nats.errors import NoServersError

from kotae.bus.topology import ensure_streams_at
from kotae.contracts import AnswerV1, subjects
from kotae.settings import Settings, load_settings
from tests.factories import FAITHFUL, draft
from tests.fakes.nats_config import configured_nats, free_port, server_errors
from tests.integration.stages import running_stages

VALUES = Path(__file__).resolve().parents[2] / "deploy/k8s/nats-values.yaml"


@pytest.fixture
def secured_nats(tmp_path: Path):  # noqa: ANN201
    account = yaml.safe_load(VALUES.read_text(encoding="utf-8"))["config"]["merge"]["accounts"]["KOTAE"]
    users = []
    for user in account["users"]:
        users.append({**user, "password": f"pw-{user['user']}"})
    # An admin user of the same account sets the streams up, as the platform team would.
    users.append({"user": "admin", "password": "pw-admin"})
    port = free_port()
    config = {
        "listen": f"127.0.0.1:{port}",
        "jetstream": {"store_dir": str(tmp_path / "js")},
        "accounts": {"KOTAE": {"jetstream": "enabled", "users": users}},
    }
    with configured_nats(config, tmp_path):
        yield f"nats://127.0.0.1:{port}"


def as_user(settings: Settings, user: str) -> Settings:
    return settings.model_copy(
        update={"nats_user": user, "nats_password": load_settings(nats_password=f"pw-{user}").nats_password}
    )


async def test_a_stage_works_as_its_own_user_and_may_not_publish_anything_else(
    secured_nats: str, settings: Settings
) -> None:
    await ensure_streams_at(secured_nats, as_user(settings, "admin"))
    verifier = as_user(settings, "verifier")
    async with running_stages(verifier, secured_nats, stages=("verifier",)):
        admin = await nats.connect(secured_nats, user="admin", password="pw-admin")
        js = admin.jetstream()
        sub = await js.subscribe(subjects.answer("verified"), ordered_consumer=True)
        await js.publish(subjects.DRAFT, draft(FAITHFUL, comment_id="p-1").model_dump_json().encode())
        msg = await sub.next_msg(timeout=30)
        assert AnswerV1.model_validate_json(msg.data).comment_id == "p-1"
        await admin.close()

    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)

    nc = await nats.connect(secured_nats, user="verifier", password="pw-verifier", error_cb=on_error)
    await nc.publish(subjects.COMMENT, b"{}")  # not the verifier's output
    await nc.publish(subjects.answer("dropped"), b"{}")
    await nc.flush()
    await server_errors(errors, 2, timeout=2.5)
    await nc.close()
    assert len(errors) >= 2 and all("permissions violation" in str(e).lower() for e in errors), errors


async def test_a_wrong_password_is_refused(secured_nats: str) -> None:
    with pytest.raises((NoServersError, nats.errors.Error, OSError)):
        await nats.connect(
            secured_nats, user="verifier", password="nope", max_reconnect_attempts=0, allow_reconnect=False
        )
