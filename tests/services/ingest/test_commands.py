"""``kotae ingest youtube|onecomme|replay``, run as a user runs them, against a real nats-server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tests.factories import kotae
from tests.fakes.onecomme_server import FakeOneComme, comments_frame, onecomme_comment
from tests.fakes.youtube_server import FakeYouTubeServer, superchat_message, text_message


def env_for(nats_url: str, **extra: str) -> dict[str, str]:
    return {"KOTAE_NATS_URL": nats_url, "KOTAE_AUTHOR_SALT": "test-salt", **extra}


def test_ingest_youtube_publishes_until_the_chat_ends(nats_server: str, tmp_path: Path) -> None:
    pages = [
        {"items": [text_message("m1", "保育料っていくら？"), text_message("m2", "草")], "pollingIntervalMillis": 10},
        {
            "items": [superchat_message("m3", "港は？", micros=1_000_000_000, currency="JPY", display="¥1,000")],
            "offlineAt": "2026-11-30T12:00:00Z",
        },
    ]
    with FakeYouTubeServer(pages) as server:
        env = env_for(
            nats_server,
            KOTAE_YOUTUBE_BASE_URL=server.url,
            KOTAE_YOUTUBE_API_KEY="AIza-secret",
            KOTAE_YOUTUBE_MIN_POLL_S="0",
            KOTAE_YOUTUBE_QUOTA_PER_DAY="10000000",
            KOTAE_YOUTUBE_TRANSPORT="poll",  # this fake speaks only the REST API
            KOTAE_LOG_LEVEL="debug",
        )
        result = kotae("ingest", "youtube", "--video", server.video_id, data=tmp_path / "state", env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["comment_id"], line["status"]) for line in lines] == [
        ("m1", "admitted"),
        ("m2", "dropped"),
        ("m3", "admitted"),
    ]
    assert "ended (offline)" in result.stderr
    assert "AIza-secret" not in result.stderr + result.stdout  # the key never shows, even in debug logs


def test_ingest_youtube_without_a_key_names_the_variable(nats_server: str, tmp_path: Path) -> None:
    result = kotae("ingest", "youtube", "--video", "v", data=tmp_path / "state", env=env_for(nats_server))
    assert result.returncode == 1 and "KOTAE_YOUTUBE_API_KEY" in result.stderr and result.stdout == ""


def test_ingest_youtube_with_a_rejected_key_names_the_variable(nats_server: str, tmp_path: Path) -> None:
    with FakeYouTubeServer([]) as server:
        server.errors.append("keyInvalid")
        env = env_for(
            nats_server,
            KOTAE_YOUTUBE_BASE_URL=server.url,
            KOTAE_YOUTUBE_API_KEY="bad",
            KOTAE_YOUTUBE_QUOTA_PER_DAY="10000000",
            KOTAE_YOUTUBE_TRANSPORT="poll",
        )
        result = kotae("ingest", "youtube", "--video", server.video_id, data=tmp_path / "state", env=env)
    assert result.returncode == 1 and "KOTAE_YOUTUBE_API_KEY" in result.stderr


async def test_ingest_onecomme_publishes_the_feed(nats_server: str, tmp_path: Path) -> None:
    frames = [comments_frame(onecomme_comment("c1", "期日前投票はいつから？"), onecomme_comment("c2", "８８８８"))]
    async with FakeOneComme(frames) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KOTAE_")}
        env.update(env_for(nats_server), KOTAE_DATA_DIR=str(tmp_path / "state"))
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kotae",
            "ingest",
            "onecomme",
            "--url",
            server.url,
            "--once",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    lines = [json.loads(line) for line in out.decode().splitlines()]
    assert [(line["comment_id"], line["status"]) for line in lines] == [("c1", "admitted"), ("c2", "dropped")]


def test_ingest_onecomme_with_a_bad_url_names_the_setting(nats_server: str, tmp_path: Path) -> None:
    result = kotae(
        "ingest", "onecomme", "--url", "http://127.0.0.1:11180/sub", data=tmp_path / "state", env=env_for(nats_server)
    )
    assert result.returncode == 1 and "KOTAE_ONECOMME_URL" in result.stderr


def test_ingest_replay_with_original_timing(nats_server: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    rows = [
        {"id": "r1", "text": "こんばんは", "published_at": "2026-11-30T20:00:00+09:00"},
        {"id": "r2", "text": "草", "published_at": "2026-11-30T20:00:01+09:00"},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    result = kotae(
        "ingest",
        "replay",
        str(path),
        "--timing",
        "original",
        "--speed",
        "10",
        "--timeout",
        "30",
        data=tmp_path / "state",
        env=env_for(nats_server),
    )
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["outcome"] for line in result.stdout.splitlines()] == ["dropped", "dropped"]
    bad = kotae("ingest", "replay", str(path), "--timing", "slow", data=tmp_path / "state", env=env_for(nats_server))
    assert bad.returncode == 2 and "--timing" in bad.stderr
    zero = kotae(
        "ingest",
        "replay",
        str(path),
        "--timing",
        "original",
        "--speed",
        "0",
        data=tmp_path / "state",
        env=env_for(nats_server),
    )
    assert zero.returncode == 1 and "--speed" in zero.stderr


def test_ingest_replay_that_reaches_its_timeout_prints_what_arrived_and_names_the_rest(
    nats_server: str, tmp_path: Path
) -> None:
    path = tmp_path / "c.jsonl"
    # No stage serves this bus: the chatter ends at ingest (dropped), the question never ends.
    path.write_text('{"id": "t1", "text": "草"}\n{"id": "t2", "text": "保育料はいくら？"}\n', encoding="utf-8")
    run = kotae("ingest", "replay", str(path), "--timeout", "1", data=tmp_path / "state", env=env_for(nats_server))
    assert run.returncode == 1
    assert [(json.loads(x)["comment_id"], json.loads(x)["outcome"]) for x in run.stdout.splitlines()] == [
        ("t1", "dropped")
    ]
    assert "1 of 2 comment(s) had no outcome within 1s (--timeout): t2" in run.stderr
    shown = " ".join(kotae("ingest", "replay", "--help", data=tmp_path / "state").stdout.split())
    assert "--timeout TIMEOUT seconds to wait, once every comment is published" in shown


def test_ingest_stdin_follow_publishes_each_line_and_skips_a_bad_one_naming_it(
    nats_server: str, tmp_path: Path
) -> None:
    lines = '{"id": "s1", "text": "保育料はいくら？"}\n{"id": "s2", "text": "草"}\n'
    result = kotae("ingest", "stdin", "--follow", data=tmp_path / "state", env=env_for(nats_server), stdin=lines)
    assert result.returncode == 0, result.stderr
    assert [(json.loads(x)["comment_id"], json.loads(x)["status"]) for x in result.stdout.splitlines()] == [
        ("s1", "admitted"),
        ("s2", "dropped"),
    ]
    # A live feed goes on past a bad line: the lines after it are published, the bad one is named.
    feed = '{"id": "s3"}\n{"id": "s4", "text": "8888"}\nnot json\n{"id": "s5", "text": "保育料の上限は？"}\n'
    bad = kotae("ingest", "stdin", "--follow", data=tmp_path / "state", env=env_for(nats_server), stdin=feed)
    assert [json.loads(x)["comment_id"] for x in bad.stdout.splitlines()] == ["s4", "s5"]
    assert (
        "kotae: skipped <stdin>:1: field 'text'" in bad.stderr
        and "kotae: skipped <stdin>:3: invalid JSON" in bad.stderr
    )
    assert bad.returncode == 1 and "2 bad line(s) skipped" in bad.stderr
