"""Compose's NATS server runs with the generated users, and every stage connects as its own.

deploy/compose.yaml must give the NATS service every password that
deploy/nats/compose.conf names, refuse to start without them, and give each
stage only its own user. The nats-server from the wheel accepts compose.conf
as written and, started with it, answers compose's healthcheck, lets the
verifier store its own outcome, refuses it the retriever's subject, and shows
the account's streams to the exporter.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
import yaml
from nats.errors import NoServersError
from pydantic import SecretStr

from kotae import nats_users
from kotae.bus import connection, permissions, server_conf
from kotae.bus.embedded import find_nats_server
from kotae.bus.topology import ensure_streams_at
from kotae.contracts import subjects
from kotae.services import STAGES as DECLARED
from kotae.settings import Settings
from kotae.stack import PROCESSES as STAGES  # the on-request ones are deployed too
from tests.fakes.nats_config import configured_nats, free_port, server_errors

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CONF = DEPLOY / "nats/compose.conf"
PASSWORDS_COMMAND = "kotae nats passwords --out deploy/.env"


def _services() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))["services"]


def _service_users() -> list[str]:
    return list(permissions.service_users(DECLARED, Settings.model_construct()))


def _required(variable: str) -> re.Pattern[str]:
    """``${VAR:?message}``: compose stops, printing the message, when VAR is unset or empty."""
    return re.compile(rf"^\$\{{{variable}:\?(?P<message>[^}}]+)\}}$")


# --- compose.yaml ----------------------------------------------------------------------


def test_every_stage_connects_as_its_own_user_with_its_own_password() -> None:
    services = _services()
    for name in (*STAGES, "ingest"):
        env = services[name]["environment"]
        assert env["KOTAE_NATS_USER"] == name
        match = _required(server_conf.password_variable(name)).match(env["KOTAE_NATS_PASSWORD"])
        assert match, f"{name}: KOTAE_NATS_PASSWORD is {env['KOTAE_NATS_PASSWORD']!r}"
        assert PASSWORDS_COMMAND in match["message"]
        assert env["KOTAE_NATS_URL"] == "nats://nats:4222"  # the shared stage settings still apply
    assert "KOTAE_NATS_USER" not in services["kb-load"]["environment"]  # Qdrant only


def test_nats_runs_the_generated_config_and_requires_every_password_it_names() -> None:
    nats_service = _services()["nats"]
    assert nats_service["command"] == ["-c", "/etc/nats/compose.conf"]
    assert "./nats/compose.conf:/etc/nats/compose.conf:ro" in nats_service["volumes"]
    named = set(re.findall(r"\$(NATS_PASSWORD_\w+)", CONF.read_text(encoding="utf-8")))
    assert named == {server_conf.password_variable(user) for user in _service_users()}
    env = nats_service["environment"]
    assert set(env) == named
    for variable, value in env.items():
        match = _required(variable).match(value)
        assert match and PASSWORDS_COMMAND in match["message"], f"{variable}: {value!r}"
    # Without TLS, the published ports must not reach beyond this host.
    assert all(port.startswith("127.0.0.1:") for port in nats_service["ports"])


# --- the passwords ---------------------------------------------------------------------


def test_the_passwords_file_is_private_complete_and_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / ".env"
    assert nats_users.write_passwords(out) == 0
    assert out.stat().st_mode & 0o777 == 0o600
    text = out.read_text(encoding="utf-8")
    values = dict(line.split("=", 1) for line in text.splitlines() if not line.startswith("#"))
    assert set(values) == {server_conf.password_variable(user) for user in _service_users()}
    assert len(set(values.values())) == len(values)
    assert nats_users.write_passwords(out) == 1
    assert out.read_text(encoding="utf-8") == text


def test_the_documented_command_prints_a_password_for_every_user() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "kotae", "nats", "passwords"], capture_output=True, text=True, timeout=60, check=True
    )
    names = {line.split("=", 1)[0] for line in run.stdout.splitlines() if not line.startswith("#")}
    assert names == {server_conf.password_variable(user) for user in _service_users()}


# --- a real nats-server with compose.conf ---------------------------------------------


def _passwords() -> dict[str, str]:
    return dict(line.split("=", 1) for line in nats_users.password_lines())


def test_nats_server_accepts_compose_conf_and_refuses_it_without_a_password() -> None:
    binary = str(find_nats_server())
    env = {**os.environ, **_passwords()}
    run = subprocess.run([binary, "-c", str(CONF), "-t"], env=env, capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr
    del env["NATS_PASSWORD_READER"]
    run = subprocess.run([binary, "-c", str(CONF), "-t"], env=env, capture_output=True, text=True, timeout=30)
    assert run.returncode != 0 and "NATS_PASSWORD_READER" in run.stdout + run.stderr


def _replace_once(text: str, line: str, replacement: str) -> str:
    assert text.count(line) == 1, f"compose.conf should have {line!r} once (compose.yaml relies on it)"
    return text.replace(line, replacement)


@pytest.fixture
def compose_nats(tmp_path: Path) -> Iterator[tuple[str, str, dict[str, str]]]:
    """nats-server with compose.conf, moved to free local ports and a temporary store: (url, monitor, passwords)."""
    port, http = free_port(), free_port()
    text = CONF.read_text(encoding="utf-8")
    text = _replace_once(text, "listen: 0.0.0.0:4222", f"listen: 127.0.0.1:{port}")
    text = _replace_once(text, "http: 0.0.0.0:8222", f"http: 127.0.0.1:{http}")
    text = _replace_once(text, "store_dir: /data", f'store_dir: "{tmp_path / "data"}"')
    passwords = _passwords()
    monitor = f"http://127.0.0.1:{http}"
    by_user = {name.removeprefix("NATS_PASSWORD_").lower(): password for name, password in passwords.items()}
    # Ready when compose's healthcheck URL answers.
    with configured_nats(text, tmp_path, env=passwords, ready=f"{monitor}/healthz?js-enabled-only=true"):
        yield f"nats://127.0.0.1:{port}", monitor, by_user


async def test_on_compose_conf_the_verifier_stores_its_outcome_and_may_not_publish_a_retrieval(
    compose_nats: tuple[str, str, dict[str, str]], settings: Settings
) -> None:
    url, monitor, passwords = compose_nats
    verifier = settings.model_copy(update={"nats_user": "verifier", "nats_password": SecretStr(passwords["verifier"])})
    await ensure_streams_at(url, verifier)  # as a stage does on start-up
    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)

    nc = await nats.connect(**{**connection.connect_options(verifier, url), "error_cb": on_error})
    ack = await nc.jetstream().publish(subjects.answer("verified"), b"{}")
    assert ack.stream == subjects.STREAM_ANSWERS
    await nc.publish(subjects.RETRIEVAL, b"{}")
    await nc.flush()
    await server_errors(errors)
    await nc.close()
    assert errors and "permissions violation for publish" in str(errors[0]).lower(), errors
    assert f'"{subjects.RETRIEVAL}"' in str(errors[0])

    with pytest.raises((NoServersError, nats.errors.Error, OSError)):
        await nats.connect(
            url, user="verifier", password=passwords["reader"], allow_reconnect=False, max_reconnect_attempts=0
        )

    # The exporter (-jsz=all) reads the account's streams from the monitoring port, which needs no user.
    with urllib.request.urlopen(f"{monitor}/jsz?accounts=true&streams=true", timeout=5) as response:
        jsz = json.load(response)
    (account,) = [a for a in jsz["account_details"] if a["name"] == "KOTAE"]
    assert subjects.STREAM_ANSWERS in {stream["name"] for stream in account["stream_detail"]}
