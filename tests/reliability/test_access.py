"""The embedded stack's NATS users, end to end: every stage process works as its own user,
none can write another stage's subject, and no password reaches a file under the data folder.

The stack starts as ``kotae demo`` starts it: its own process connects as the
``replay`` user, each stage process gets only its own user and password, in
its environment. A question and a greeting go through every stage (the
evaluator scores the answer), then the verifier's user tries to publish a
retrieval and a comment: the server refuses both and nothing lands in the
streams.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest

from kotae.bus import connection, permissions
from kotae.contracts import subjects
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import load_records
from kotae.replay import run_replay
from kotae.services.ingest.sources import RawComment
from kotae.stack import STAGES, Stack
from tests.reliability.harness import AT, SAMPLES, chaos_settings

QUESTION = RawComment(id="acc-1", author="viewer-1", text="保育料っていくらになるの", published_at=AT)
GREETING = RawComment(id="acc-2", author="viewer-2", text="こんばんは〜", published_at=AT)


@pytest.fixture
async def replay_stack(
    tmp_path: Path, chaos_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    env = {**chaos_env, "KOTAE_LOG_LEVEL": "debug"}  # every line a stage can write
    monkeypatch.setenv("KOTAE_LOG_LEVEL", "debug")
    settings = chaos_settings(tmp_path / "data", env)
    load_knowledge_base(load_records(SAMPLES / "kb"), "default", settings)
    stack = Stack(settings, client=permissions.REPLAY)
    await stack.start()
    try:
        yield stack
    finally:
        stack.stop()


def own_user_only(stack: Stack, stage: str) -> bool:
    env = stack._env(stage)
    assert stack.server is not None
    others = [p for user, p in stack.server.passwords.items() if user != stage]
    return env["KOTAE_NATS_USER"] == stage and not any(p in env.values() for p in others)


async def test_every_stage_works_as_its_own_user_and_none_may_write_another_stages_subject(replay_stack: Stack) -> None:
    stack = replay_stack
    assert all(own_user_only(stack, stage) for stage in STAGES)

    result = await run_replay(
        stack.settings_for(), stack.address, [QUESTION, GREETING], timeout=60, wait_for_evaluations=30
    )
    assert result.missing == []
    assert result.records["acc-1"]["outcome"] == "verified"  # retriever, reranker, generator, verifier
    assert result.records["acc-2"]["outcome"] == "dropped"
    assert "acc-1" in result.evaluations  # the evaluator

    verifier = stack.settings_for("verifier")
    replayer = await nats.connect(**connection.connect_options(stack.settings_for()))
    js = replayer.jetstream()
    before = {
        name: (await js.stream_info(name)).state.messages
        for name in (subjects.STREAM_COMMENTS, subjects.STREAM_PIPELINE)
    }
    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)

    nc = await nats.connect(**{**connection.connect_options(verifier), "error_cb": on_error})
    await nc.publish(subjects.RETRIEVAL, b"{}")  # the retriever's output
    await nc.publish(subjects.COMMENT, b"{}")  # ingest's
    await nc.flush()
    for _ in range(100):
        if len(errors) >= 2:
            break
        await asyncio.sleep(0.02)
    await nc.close()
    assert len(errors) == 2 and all("permissions violation for publish" in str(e).lower() for e in errors), errors
    await asyncio.sleep(0.2)
    after = {name: (await js.stream_info(name)).state.messages for name in before}
    await replayer.close()
    assert after == before

    assert stack.server is not None
    passwords = dict(stack.server.passwords)
    env_dir = stack.write_env_files()  # what `kotae up` leaves for processes started beside it
    assert env_dir is not None and env_dir.stat().st_mode & 0o777 == 0o700
    ingest = env_dir / "ingest.env"
    assert ingest.stat().st_mode & 0o777 == 0o600
    assert f"KOTAE_NATS_USER=ingest\nKOTAE_NATS_PASSWORD={passwords['ingest']}\n" in ingest.read_text()
    stack.stop()  # every process has written its last line; the env files go
    assert not list(env_dir.glob("*.env"))
    files = [p for p in Path(stack.settings.data_dir).rglob("*") if p.is_file()]
    logs = [p for p in files if p.suffix == ".log"]
    assert {p.name for p in logs} >= {f"{stage}-0.log" for stage in STAGES} | {"nats-server.log"}
    for path in files:
        data = path.read_bytes()
        leaked = [user for user, password in passwords.items() if password.encode() in data]
        assert not leaked, f"{path} holds the password of {leaked}"
