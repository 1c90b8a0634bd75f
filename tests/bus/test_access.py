"""NATS users, TLS and credentials (kotae/bus/permissions.py, connection.py, creds.py), enforced by a real nats-server.

The embedded server runs with the generated users: each stage's user stores
its own outputs and is refused everything that belongs to another stage —
publishing its subjects, pulling its consumer, reading its inbox. A server
with mutual TLS (certificates from ``trustme``) serves a stage that has the
right CA and client certificate, and refuses one that lacks either with a
message naming the setting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import trustme
from pydantic import SecretStr

from kotae import nats_users
from kotae.bus import connection, permissions
from kotae.bus.creds import new_seed, write_user_creds
from kotae.bus.embedded import EmbeddedNats
from kotae.bus.topology import differences, ensure_streams_at, stream_config
from kotae.contracts import AnswerV1, subjects
from kotae.runtime import make_broker
from kotae.services import STAGES
from kotae.services.ingest.current_show import CurrentShow, show_key
from kotae.settings import Settings, SettingsError, load_settings
from kotae.stage import by_name
from tests.factories import FAITHFUL, draft
from tests.fakes.nats_config import configured_nats, free_port, server_errors
from tests.fakes.nats_jwt import JwtAccounts
from tests.integration.stages import running_stages

# --- settings and options --------------------------------------------------------------


def test_a_missing_tls_file_stops_start_up_naming_the_variable_and_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "ca.pem"
    with pytest.raises(SettingsError) as err:
        load_settings(nats_tls_ca=missing)
    assert "KOTAE_NATS_TLS_CA" in str(err.value) and str(missing) in str(err.value)
    with pytest.raises(SettingsError) as err:
        load_settings(nats_creds=tmp_path / "kotae.creds")
    assert "KOTAE_NATS_CREDS" in str(err.value) and str(tmp_path / "kotae.creds") in str(err.value)


def test_a_client_certificate_needs_its_key_and_a_creds_file_excludes_a_password(tmp_path: Path) -> None:
    cert = tmp_path / "client.pem"
    cert.write_text("x")
    with pytest.raises(SettingsError, match="KOTAE_NATS_TLS_CERT and KOTAE_NATS_TLS_KEY go together"):
        load_settings(nats_tls_cert=cert)
    creds = tmp_path / "kotae.creds"
    creds.write_text("x")
    with pytest.raises(SettingsError, match="KOTAE_NATS_CREDS"):
        load_settings(nats_creds=creds, nats_user="verifier")


def test_a_creds_file_is_handed_to_the_client_or_refused_without_nkeys(tmp_path: Path) -> None:
    creds = tmp_path / "kotae.creds"
    creds.write_text("-----BEGIN NATS USER JWT-----\n", encoding="utf-8")
    if importlib.util.find_spec("nkeys") is None:
        with pytest.raises(SettingsError, match="KOTAE_NATS_CREDS needs the nkeys package"):
            load_settings(nats_creds=creds)
    else:
        options = connection.connect_options(load_settings(nats_creds=creds))
        assert options["user_credentials"] == str(creds) and "user" not in options


def test_a_service_connects_with_its_user_and_reads_replies_on_its_own_inbox() -> None:
    settings = load_settings(nats_url="nats://a:4222,nats://b:4222", nats_user="verifier", nats_password="pw")
    options = connection.connect_options(settings)
    assert options["servers"] == ["nats://a:4222", "nats://b:4222"]
    assert (options["user"], options["password"], options["inbox_prefix"]) == ("verifier", "pw", "_INBOX_verifier")
    assert "tls" not in options and "user_credentials" not in options
    assert permissions.service_users(STAGES, settings)["verifier"].subscribe == ("_INBOX_verifier.>",)
    assert connection.without_credentials("nats://u:secret@h:4222,nats://h2:4222") == "nats://h:4222,nats://h2:4222"


# --- the embedded server's users -------------------------------------------------------


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[EmbeddedNats]:
    users = permissions.embedded_users(STAGES, load_settings(data_dir=tmp_path / "data"), admin=True)
    server = EmbeddedNats(tmp_path / "js", users=users)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def connect_as(server: EmbeddedNats, user: str, errors: list[Exception] | None = None) -> nats.NATS:
    async def on_error(exc: Exception) -> None:
        if errors is not None:
            errors.append(exc)

    return await nats.connect(
        server.url,
        user=user,
        password=server.passwords[user],
        inbox_prefix=connection.inbox_of(user),
        error_cb=on_error,
    )


async def stored(js: Any) -> dict[str, int]:
    return {name: (await js.stream_info(name)).state.messages for name in subjects.STREAM_SUBJECTS}


async def test_each_stage_stores_its_own_outputs_and_is_refused_every_other_stages(
    secured: EmbeddedNats, settings: Settings
) -> None:
    admin = settings.model_copy(
        update={"nats_user": permissions.ADMIN, "nats_password": SecretStr(secured.passwords[permissions.ADMIN])}
    )
    await ensure_streams_at(secured.url, admin)
    watcher = await connect_as(secured, permissions.ADMIN)
    js = watcher.jetstream()
    outputs = {stage.name: set(stage.published) for stage in STAGES}
    consumers = [stage for stage in STAGES if stage.consumes is not None]
    everyone = set().union(*outputs.values(), {subjects.COMMENT})
    for stage, own in outputs.items():
        errors: list[Exception] = []
        nc = await connect_as(secured, stage, errors)
        for subject in sorted(own):  # its own outputs are stored
            ack = await nc.jetstream().publish(subject, b"{}", headers={"Nats-Msg-Id": f"{stage}:{subject}"})
            assert ack.stream == subjects.stream_of(subject)
        before = await stored(js)
        foreign = sorted(everyone - own)
        for subject in foreign:
            await nc.publish(subject, b"{}")
        others = [other for other in consumers if other.name != stage]
        for other in others:  # nor may it take another stage's input from its consumer
            assert other.consumes is not None
            await nc.publish(
                f"$JS.API.CONSUMER.MSG.NEXT.{other.consumes.stream}.{other.durable}",
                b"1",
                reply=f"{connection.inbox_of(stage)}.x",
            )
        await nc.flush()
        for _ in range(100):
            if len(errors) >= len(foreign) + len(others):
                break
            await asyncio.sleep(0.02)
        await nc.close()
        refused = " ".join(str(e) for e in errors)
        assert len(errors) == len(foreign) + len(others), (stage, errors)
        assert all("permissions violation for publish" in str(e).lower() for e in errors), errors
        assert all(f'"{subject}"' in refused for subject in foreign)
        assert await stored(js) == before, f"{stage} got a message into a stream it may not write"
    await watcher.close()


async def test_a_stage_may_not_read_what_is_delivered_to_another(secured: EmbeddedNats) -> None:
    for subject in ("_INBOX.>", f"{connection.inbox_of('retriever')}.>", subjects.COMMENT, subjects.DRAFT):
        errors: list[Exception] = []
        nc = await connect_as(secured, "verifier", errors)
        await nc.subscribe(subject)
        await nc.flush()
        await server_errors(errors)
        await nc.close()
        assert errors and "permissions violation for subscription" in str(errors[0]).lower(), (subject, errors)


async def test_a_reader_follows_the_answers_but_may_not_touch_the_evaluators_consumer(
    secured: EmbeddedNats, settings: Settings
) -> None:
    admin = settings.model_copy(
        update={"nats_user": permissions.ADMIN, "nats_password": SecretStr(secured.passwords[permissions.ADMIN])}
    )
    await ensure_streams_at(secured.url, admin)
    verifier = await connect_as(secured, "verifier")
    await verifier.jetstream().publish(subjects.answer("verified"), b'{"comment_id": "r-1"}')
    await verifier.close()
    errors: list[Exception] = []
    reader = await connect_as(secured, "reader", errors)
    sub = await reader.jetstream().subscribe(subjects.ANSWER_ALL, ordered_consumer=True)
    assert (await sub.next_msg(timeout=5)).data == b'{"comment_id": "r-1"}'
    evaluator = by_name(STAGES)["evaluator"]
    assert evaluator.consumes is not None
    for verb in ("DELETE", "MSG.NEXT", "INFO"):
        await reader.publish(
            f"$JS.API.CONSUMER.{verb}.{evaluator.consumes.stream}.{evaluator.durable}", b"", reply="_INBOX_reader.x"
        )
    await reader.flush()
    await server_errors(errors, 3)
    await reader.close()
    assert len(errors) == 3 and all("permissions violation for publish" in str(e).lower() for e in errors), errors


async def test_ingest_reads_the_current_show_of_the_on_air_bucket_and_may_write_none_of_it(
    secured: EmbeddedNats, settings: Settings
) -> None:
    onair = await connect_as(secured, "onair")
    kv = await onair.jetstream().create_key_value(bucket=settings.onair_kv_bucket, history=1)
    await kv.put(show_key(settings.stream_id), b'{"id": "show-1", "started_at": "2026-12-04T19:00:00+00:00"}')
    await onair.close()
    errors: list[Exception] = []
    ingest = await connect_as(secured, permissions.INGEST, errors)
    show = await CurrentShow(ingest.jetstream(), settings.onair_kv_bucket, stream_id=settings.stream_id).current()
    assert show is not None and show.id == "show-1"
    await ingest.publish(f"$KV.{settings.onair_kv_bucket}.{show_key(settings.stream_id)}", b"{}")  # a write
    await ingest.flush()
    await server_errors(errors)
    await ingest.close()
    assert errors and all("permissions violation for publish" in str(e).lower() for e in errors), errors


async def test_a_wrong_password_is_refused_and_the_config_on_disk_holds_none(secured: EmbeddedNats) -> None:
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(
            secured.url, user="verifier", password="nope", allow_reconnect=False, max_reconnect_attempts=0
        )
    config = secured.store_dir / "nats-server.conf"
    assert config.stat().st_mode & 0o777 == 0o600
    text = config.read_text()
    assert "$NATS_PASSWORD_VERIFIER" in text
    assert not any(password in text for password in secured.passwords.values())
    assert "passwords" not in repr(secured)


# --- TLS ---------------------------------------------------------------------------------


class Certificates:
    """A CA, the server's certificate for 127.0.0.1, and a client certificate, as PEM files."""

    def __init__(self, folder: Path) -> None:
        ca = trustme.CA()
        server = ca.issue_cert("127.0.0.1", "localhost")
        client = ca.issue_cert("kotae-verifier")
        self.ca = folder / "ca.pem"
        self.server_cert, self.server_key = folder / "server.pem", folder / "server-key.pem"
        self.client_cert, self.client_key = folder / "client.pem", folder / "client-key.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        server.cert_chain_pems[0].write_to_path(str(self.server_cert))
        server.private_key_pem.write_to_path(str(self.server_key))
        client.cert_chain_pems[0].write_to_path(str(self.client_cert))
        client.private_key_pem.write_to_path(str(self.client_key))


@pytest.fixture
def certificates(tmp_path: Path) -> Certificates:
    folder = tmp_path / "tls"
    folder.mkdir()
    return Certificates(folder)


@pytest.fixture
def mtls_nats(tmp_path: Path, certificates: Certificates) -> Iterator[str]:
    """A nats-server that accepts only TLS clients whose certificate its CA signed."""
    port = free_port()
    config = {
        "listen": f"127.0.0.1:{port}",
        "jetstream": {"store_dir": str(tmp_path / "js")},
        "tls": {
            "cert_file": str(certificates.server_cert),
            "key_file": str(certificates.server_key),
            "ca_file": str(certificates.ca),
            "verify": True,
            "timeout": 2,
        },
    }
    with configured_nats(config, tmp_path):
        yield f"nats://127.0.0.1:{port}"


def with_tls(settings: Settings, url: str, **files: Path | None) -> Settings:
    return settings.model_copy(update={"nats_url": url, **{f"nats_tls_{name}": path for name, path in files.items()}})


async def test_a_stage_with_the_ca_and_its_client_certificate_handles_a_message_over_mutual_tls(
    mtls_nats: str, settings: Settings, certificates: Certificates
) -> None:
    secure = with_tls(
        settings, mtls_nats, ca=certificates.ca, cert=certificates.client_cert, key=certificates.client_key
    )
    async with running_stages(secure, mtls_nats, stages=("verifier",)):
        nc = await nats.connect(**connection.connect_options(secure))
        js = nc.jetstream()
        sub = await js.subscribe(subjects.answer("verified"), ordered_consumer=True)
        await js.publish(subjects.DRAFT, draft(FAITHFUL, comment_id="tls-1").model_dump_json().encode())
        msg = await sub.next_msg(timeout=30)
        assert AnswerV1.model_validate_json(msg.data).comment_id == "tls-1"
        await nc.close()


@pytest.mark.parametrize(
    ("missing", "named"),
    [("ca", "KOTAE_NATS_TLS_CA"), ("client certificate", "KOTAE_NATS_TLS_CERT")],
)
async def test_without_the_ca_or_the_client_certificate_a_stage_is_refused_with_the_setting_to_fix(
    mtls_nats: str, settings: Settings, certificates: Certificates, missing: str, named: str
) -> None:
    if missing == "ca":
        files = {"cert": certificates.client_cert, "key": certificates.client_key}
    else:
        files = {"ca": certificates.ca}
    insecure = with_tls(settings, mtls_nats, **files)
    started = time.monotonic()
    with pytest.raises(connection.NatsConnectError, match=named):
        await make_broker(insecure).connect()  # how a stage connects: it retries other faults for ever
    with pytest.raises(connection.NatsConnectError, match=named):
        await nats.connect(**connection.connect_options(insecure))
    assert time.monotonic() - started < 10, "a refused certificate is not worth retrying"


# --- JWT accounts: a .creds file per service user ------------------------------------------


@dataclasses.dataclass
class JwtServer:
    url: str
    accounts: JwtAccounts
    creds: dict[str, Path]

    def as_user(self, settings: Settings, user: str) -> Settings:
        # No KOTAE_NATS_INBOX_PREFIX: the stage reads its reply prefix from the JWT.
        return settings.model_copy(update={"nats_url": self.url, "nats_creds": self.creds[user]})


@pytest.fixture
def jwt_nats(tmp_path: Path) -> Iterator[JwtServer]:
    """A nats-server on JWT accounts, and a .creds file per service user signed by kotae's account."""
    accounts = JwtAccounts()
    users: dict[str, permissions.Permissions | None] = {
        **permissions.service_users(STAGES, load_settings(data_dir=tmp_path / "data")),
        permissions.ADMIN: None,
    }
    creds = write_user_creds(users, accounts.account_seed, tmp_path / "creds")
    port = free_port()
    with configured_nats(accounts.server_config(port, tmp_path / "js"), tmp_path):
        yield JwtServer(f"nats://127.0.0.1:{port}", accounts, creds)


async def test_with_its_creds_file_a_stage_handles_a_message_on_a_server_with_jwt_accounts(
    jwt_nats: JwtServer, settings: Settings
) -> None:
    verifier = jwt_nats.as_user(settings, "verifier")
    async with running_stages(verifier, jwt_nats.url, stages=("verifier",)):  # declares the streams as the verifier
        nc = await nats.connect(**connection.connect_options(jwt_nats.as_user(settings, permissions.ADMIN)))
        js = nc.jetstream()
        sub = await js.subscribe(subjects.answer("verified"), ordered_consumer=True)
        await js.publish(subjects.DRAFT, draft(FAITHFUL, comment_id="jwt-1").model_dump_json().encode())
        msg = await sub.next_msg(timeout=30)
        await nc.close()
    assert AnswerV1.model_validate_json(msg.data).comment_id == "jwt-1"


async def test_a_stages_jwt_carries_its_permissions(jwt_nats: JwtServer, settings: Settings) -> None:
    await ensure_streams_at(jwt_nats.url, jwt_nats.as_user(settings, permissions.ADMIN))
    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)

    nc = await nats.connect(
        **{**connection.connect_options(jwt_nats.as_user(settings, "reranker")), "error_cb": on_error}
    )
    ack = await nc.jetstream().publish(subjects.RERANK, b"{}", headers={"Nats-Msg-Id": "jwt-own"})
    assert ack.stream == subjects.STREAM_PIPELINE  # its own output is stored
    await nc.publish(subjects.DRAFT, b"{}")  # the generator's
    await nc.subscribe("_INBOX.>")  # replies meant for anyone
    await nc.flush()
    await server_errors(errors, count=2)
    await nc.close()
    refused = " ".join(str(e).lower() for e in errors)
    assert f'permissions violation for publish to "{subjects.DRAFT}"' in refused, errors
    assert 'permissions violation for subscription to "_inbox.>"' in refused, errors


async def test_a_user_signed_by_an_account_the_server_does_not_know_is_refused(
    jwt_nats: JwtServer, settings: Settings, tmp_path: Path
) -> None:
    stranger = write_user_creds({"verifier": None}, new_seed("account"), tmp_path / "other")
    with pytest.raises(Exception, match="(?i)authorization violation"):
        await nats.connect(
            **{
                **connection.connect_options(jwt_nats.as_user(settings, "verifier")),
                "user_credentials": str(stranger["verifier"]),
                "max_reconnect_attempts": 0,
                "allow_reconnect": False,
            }
        )


async def test_users_signed_by_a_signing_key_of_the_account_name_the_account(
    jwt_nats: JwtServer, settings: Settings, tmp_path: Path
) -> None:
    signed = write_user_creds(
        {"verifier": None}, jwt_nats.accounts.signing_seed, tmp_path / "signed", account=jwt_nats.accounts.account
    )
    nc = await nats.connect(
        **{
            **connection.connect_options(jwt_nats.as_user(settings, "verifier")),
            "user_credentials": str(signed["verifier"]),
        }
    )
    await nc.close()
    unnamed = write_user_creds({"verifier": None}, jwt_nats.accounts.signing_seed, tmp_path / "unnamed")
    with pytest.raises(Exception, match="(?i)authorization violation"):  # the key alone is no account
        await nats.connect(
            **{
                **connection.connect_options(jwt_nats.as_user(settings, "verifier")),
                "user_credentials": str(unnamed["verifier"]),
                "allow_reconnect": False,
            }
        )


def test_the_creds_command_writes_a_private_file_per_user_and_never_replaces_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = JwtAccounts().write_account_seed(tmp_path / "account.nk")
    out = tmp_path / "creds"
    assert nats_users.write_creds(seed, out, None) == 0
    printed = capsys.readouterr().out
    users = permissions.service_users(STAGES, load_settings(data_dir=tmp_path / "data"))
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{user}.creds" for user in users)
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in out.iterdir())
    assert f"verifier: KOTAE_NATS_CREDS={out / 'verifier.creds'}" in printed
    assert connection.creds_inbox(out / "verifier.creds") == "_INBOX_verifier"
    assert connection.connect_options(load_settings(nats_creds=out / "reader.creds"))["inbox_prefix"] == "_INBOX_reader"
    before = (out / "verifier.creds").read_text()
    assert nats_users.write_creds(seed, out, None) == 1
    assert "exist" in capsys.readouterr().err and (out / "verifier.creds").read_text() == before
    (tmp_path / "not-a-seed.nk").write_text("hello\n")
    assert nats_users.write_creds(tmp_path / "not-a-seed.nk", tmp_path / "x", None) == 1
    err = capsys.readouterr().err
    assert "not-a-seed.nk" in err and "no account seed" in err and not (tmp_path / "x").exists()


# --- streams: stages create what is missing, never change what exists -----------------------


async def test_a_stage_may_create_a_missing_stream_but_not_change_one(
    secured: EmbeddedNats, settings: Settings
) -> None:
    retriever = settings.model_copy(
        update={"nats_user": "retriever", "nats_password": SecretStr(secured.passwords["retriever"])}
    )
    await ensure_streams_at(secured.url, retriever, update=False)  # an empty server: the first stage creates them
    nc = await connect_as(secured, "retriever")
    js = nc.jetstream()
    wanted = stream_config(subjects.STREAM_PIPELINE, settings)
    shorter = dataclasses.replace(wanted, max_age=60.0, subjects=[subjects.RETRIEVAL])
    with pytest.raises((nats.errors.TimeoutError, nats.js.errors.APIError)):
        await js.update_stream(shorter)  # the server refuses the request: no reply comes
    held = (await js.stream_info(subjects.STREAM_PIPELINE)).config
    await nc.close()
    assert differences(wanted, held) == []


async def test_start_up_leaves_a_differing_stream_alone_and_kotae_streams_updates_it(
    secured: EmbeddedNats, settings: Settings
) -> None:
    admin = settings.model_copy(
        update={"nats_user": permissions.ADMIN, "nats_password": SecretStr(secured.passwords[permissions.ADMIN])}
    )
    older = settings.model_copy(update={"max_payload_bytes": settings.max_payload_bytes // 2})
    await ensure_streams_at(secured.url, admin.model_copy(update={"max_payload_bytes": older.max_payload_bytes}))
    verifier = settings.model_copy(
        update={"nats_user": "verifier", "nats_password": SecretStr(secured.passwords["verifier"])}
    )
    await ensure_streams_at(secured.url, verifier, update=False)  # as a stage starting: a warning, no change, no error
    nc = await connect_as(secured, permissions.ADMIN)
    js = nc.jetstream()
    held = (await js.stream_info(subjects.STREAM_PIPELINE)).config
    assert differences(stream_config(subjects.STREAM_PIPELINE, settings), held) == [
        f"max_msg_size {older.max_payload_bytes * 4!r} -> {settings.max_payload_bytes * 4!r}"
    ]
    # What `kotae streams` does, as the deployed login for it (the Job in deploy/k8s runs it so).
    streams = settings.model_copy(
        update={"nats_user": permissions.STREAMS, "nats_password": SecretStr(secured.passwords[permissions.STREAMS])}
    )
    await ensure_streams_at(secured.url, streams)
    held = (await js.stream_info(subjects.STREAM_PIPELINE)).config
    await nc.close()
    assert differences(stream_config(subjects.STREAM_PIPELINE, settings), held) == []
    # That login manages streams and nothing else: it cannot put a comment on the bus.
    nc = await connect_as(secured, permissions.STREAMS)
    js = nc.jetstream()
    before = await stored(js)
    with pytest.raises((nats.errors.TimeoutError, nats.js.errors.APIError, nats.errors.NoRespondersError)):
        await js.publish(subjects.COMMENT, b"{}", timeout=1)
    after = await stored(js)
    await nc.close()
    assert after == before
