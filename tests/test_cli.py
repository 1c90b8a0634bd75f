"""The ``kotae`` command line, end to end, as a user runs it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kotae.contracts import subjects
from kotae.knowledge.records import load_records
from tests.factories import kotae

TERMINAL = {"verified", "rejected", "clarify", "unanswered", "dropped", "dead_lettered"}
REPLAY_KEYS = {"comment_id", "outcome", "answer", "citations", "slide", "verdict", "reason", "latency_ms", "trace_id"}


def processes_using(path: Path) -> list[str]:
    """Processes whose command line or environment mentions ``path``."""
    needle = str(path).encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            blob = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
        except OSError:
            continue
        if needle in blob:
            found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
    return found


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n"


def run_batch(
    command: str, batch: Path, text: str, *, data: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Write ``text`` to ``batch`` and run ``kotae <command> --batch <batch>``."""
    batch.write_text(text, encoding="utf-8")
    return kotae(command, "--batch", str(batch), data=data, env=env)


def assert_batch_stopped_at(result: subprocess.CompletedProcess[str], batch: Path, line: int, field: str) -> None:
    """Exit 1 naming ``<batch>:<line>`` and the bad field, with nothing on stdout."""
    assert result.returncode == 1
    assert f"{batch}:{line}" in result.stderr and field in result.stderr
    assert result.stdout == ""


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "state"


def test_kb_load_is_idempotent(data: Path, sample_kb_path: Path) -> None:
    first = kotae("kb", "load", str(sample_kb_path), data=data)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    n = len(load_records(sample_kb_path))
    assert report["added"] == n
    stored = (data / "kb" / "default" / "records.jsonl").read_bytes()
    second = json.loads(kotae("kb", "load", str(sample_kb_path), data=data).stdout)
    assert (second["added"], second["updated"], second["unchanged"]) == (0, 0, n)
    assert (data / "kb" / "default" / "records.jsonl").read_bytes() == stored


def test_a_long_kb_load_shows_progress_and_a_reload_embeds_only_what_changed(data: Path, tmp_path: Path) -> None:
    kb = tmp_path / "kb.jsonl"
    rows = [{"id": f"d{i}", "kind": "doc", "title": f"政策{i}", "text": f"第{i}項の内容です。"} for i in range(220)]
    kb.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    env = {"KOTAE_EMBEDDING_MODEL": "use-multilingual-v3"}  # the fast model: this is about the progress lines
    first = kotae("kb", "load", str(kb), data=data, env=env)
    assert first.returncode == 0, first.stderr
    assert "embedded 220/220 new or changed chunks" in first.stderr
    rows[3]["text"] = "第3項の内容を改めました。"
    kb.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    second = kotae("kb", "load", str(kb), data=data, env=env)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert (report["updated"], report["unchanged"], report["index"]["embedded"]) == (1, 219, 1)
    assert "embedded" not in second.stderr  # one chunk is not a long load


@pytest.mark.parametrize(
    "line,field",
    [
        ('{"kind": "doc", "title": "t", "text": "本文。"}', "id"),
        ('{"id": "a", "kind": "doc", "text": "本文。", "valid_from": "2027-13-01"}', "valid_from"),
        ('{"id": "a", "kind": "faq", "question": "q?"}', "record"),
        ('{"id": "a", "kind": "doc", "text": "x", "colour": "red"}', "colour"),
        ('{"id": "a", "kind": "doc", "text": "x", "slide_image": "slides/missing.png"}', "slide_image"),
    ],
)
def test_kb_load_bad_input_names_file_line_and_field_and_writes_nothing(
    data: Path, tmp_path: Path, line: str, field: str
) -> None:
    path = tmp_path / "kb.jsonl"
    path.write_text('{"id": "ok", "kind": "doc", "text": "正しい行です。"}\n' + line + "\n", encoding="utf-8")
    result = kotae("kb", "load", str(path), data=data)
    assert result.returncode == 1
    assert f"{path}:2" in result.stderr
    assert field in result.stderr
    assert not (data / "kb").exists()


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_kb_load_of_an_empty_file_is_an_error_naming_it_and_writes_nothing(
    data: Path, tmp_path: Path, content: str
) -> None:
    path = tmp_path / "kb.jsonl"
    path.write_text(content, encoding="utf-8")
    result = kotae("kb", "load", str(path), data=data)
    assert result.returncode == 1
    assert f"{path}: no records" in result.stderr and result.stdout == ""
    assert not (data / "kb").exists()


def test_kb_load_of_a_folder_without_records_is_an_error_naming_it(data: Path, tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "faq.yaml").write_text("# no entries yet\n", encoding="utf-8")
    result = kotae("kb", "load", str(folder), data=data)
    assert result.returncode == 1
    assert f"{folder}: no .md, .yaml or .jsonl records" in result.stderr
    assert not (data / "kb").exists()


def test_search_batch_prints_the_contract_and_respects_dates(data: Path, tmp_path: Path, sample_kb_path: Path) -> None:
    kotae("kb", "load", str(sample_kb_path), data=data)
    queries = [
        {"id": "now", "text": "コミュニティバスの運賃はいくら？", "at": "2026-11-30"},
        {"id": "then", "text": "コミュニティバスの運賃はいくら？", "at": "2026-06-01"},
        {"id": 3, "text": "今日の天気は？"},
    ]
    result = run_batch("search", tmp_path / "q.jsonl", jsonl(queries), data=data)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in rows] == ["now", "then", 3]
    for r in rows:
        assert set(r) == {"id", "gate", "top_score", "docs", "faq"}
        assert all(set(d) == {"doc_id", "chunk_id", "score"} for d in r["docs"])
        assert all(set(f) == {"faq_id", "score"} for f in r["faq"])
        scores = [d["score"] for d in r["docs"]]
        assert scores == sorted(scores, reverse=True)
    now, then, weather = rows
    assert now["docs"][0]["doc_id"] == "bus-fare-2027"
    assert "bus-fare-2026" not in {d["doc_id"] for d in now["docs"]}
    assert then["docs"][0]["doc_id"] == "bus-fare-2026"
    assert weather["gate"] == "no_match"


def test_search_batch_bad_line_stops_before_any_output(data: Path, tmp_path: Path, sample_kb_path: Path) -> None:
    kotae("kb", "load", str(sample_kb_path), data=data)
    batch = tmp_path / "q.jsonl"
    result = run_batch("search", batch, '{"id": "a", "text": "保育料は？"}\n{"id": "b"}\n', data=data)
    assert_batch_stopped_at(result, batch, 2, "text")


def test_search_without_a_knowledge_base_is_an_error_not_no_evidence(data: Path, tmp_path: Path) -> None:
    result = run_batch("search", tmp_path / "q.jsonl", '{"id": "a", "text": "保育料は？"}\n', data=data)
    assert result.returncode != 0
    assert "not loaded" in result.stderr


def test_verify_batch(data: Path, tmp_path: Path) -> None:
    ctx = [{"id": "d1", "text": "0〜2歳児の保育料は月額1万5千円を上限にします。"}]
    cases = [
        {"id": "good", "question": "保育料は？", "contexts": ctx, "answer": "保育料は月額1万5千円を上限にします[1]。"},
        {
            "id": "number",
            "question": "保育料は？",
            "contexts": ctx,
            "answer": "保育料は月額2万5千円を上限にします[1]。",
        },
        {"id": "uncited", "question": "保育料は？", "contexts": ctx, "answer": "保育料は無料です。"},
    ]
    result = run_batch("verify", tmp_path / "v.jsonl", jsonl(cases), data=data)
    assert result.returncode == 0, result.stderr
    rows = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert rows["good"]["verdict"] == 0 and rows["good"]["reasons"] == []
    assert rows["number"]["verdict"] == 2 and any("25000" in r for r in rows["number"]["reasons"])
    assert rows["uncited"]["verdict"] == 2
    assert {r["method"] for r in rows.values()} == {"citation_and_support"}
    assert {r["decided_by"] for r in rows.values()} == {"offline"}
    assert rows["good"]["decision"] == "supported" and rows["number"]["decision"] == "hallucinated"
    assert rows["good"]["support"] == 1.0 and rows["number"]["support"] == 0.0
    assert rows["good"]["relevant"] is True


def test_verify_batch_reports_an_answer_that_misses_the_question(data: Path, tmp_path: Path) -> None:
    ctx = [{"id": "d1", "text": "新しい路線バスは2027年10月に開業します。路線バスは駅から港まで走ります。"}]
    case = {
        "id": "route",
        "question": "路線バスはいつ開業するの？",
        "contexts": ctx,
        "answer": "路線バスは駅から港まで走ります[1]。",
    }
    result = run_batch("verify", tmp_path / "v.jsonl", jsonl([case]), data=data)
    row = json.loads(result.stdout)
    assert row["verdict"] == 0 and row["relevant"] is False
    assert any("a date or time" in r for r in row["relevance_reasons"])


def test_verify_batch_bad_input(data: Path, tmp_path: Path) -> None:
    batch = tmp_path / "v.jsonl"
    result = run_batch("verify", batch, '{"id": 1, "question": "q", "contexts": "nope", "answer": "a"}\n', data=data)
    assert_batch_stopped_at(result, batch, 1, "contexts")


def test_a_bad_setting_stops_the_command_naming_the_variable(data: Path, tmp_path: Path) -> None:
    result = run_batch(
        "search", tmp_path / "q.jsonl", '{"id": "a", "text": "x"}\n', data=data, env={"KOTAE_GATE_ANSWER": "high"}
    )
    assert result.returncode == 2
    assert "KOTAE_GATE_ANSWER" in result.stderr


def test_replay_writes_one_terminal_record_per_comment(
    data: Path, tmp_path: Path, sample_kb_path: Path, sample_comments_path: Path
) -> None:
    out = tmp_path / "out" / "outcomes.jsonl"
    result = kotae("replay", str(sample_comments_path), "--kb", str(sample_kb_path), "--out", str(out), data=data)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    ids = list(
        dict.fromkeys(
            row["id"]
            for row in map(json.loads, filter(str.strip, sample_comments_path.read_text(encoding="utf-8").splitlines()))
            if "moderation" not in row  # a moderator's deletion or ban is no comment
        )
    )
    assert [r["comment_id"] for r in records] == ids
    kb_ids = {r.id for r in load_records(sample_kb_path)}
    for r in records:
        assert set(r) == REPLAY_KEYS
        assert r["outcome"] in TERMINAL
        assert r["trace_id"] and len(r["trace_id"]) == 32
        assert {c["doc_id"] for c in r["citations"]} <= kb_ids
        if r["outcome"] == "verified":
            assert r["citations"] and r["answer"] and r["verdict"] == 0
    assert sum(r["outcome"] == "verified" for r in records) >= 8
    assert processes_using(data) == []


def test_replay_bad_comment_line_stops_before_starting_anything(data: Path, tmp_path: Path) -> None:
    comments = tmp_path / "c.jsonl"
    comments.write_text(
        '{"id": "a", "author": "x", "text": "保育料は？"}\n{"id": "b", "author": "x"}\n', encoding="utf-8"
    )
    out = tmp_path / "out.jsonl"
    result = kotae("replay", str(comments), "--out", str(out), data=data)
    assert result.returncode == 1
    assert f"{comments}:2" in result.stderr and "text" in result.stderr
    assert not out.exists()
    assert not (data / "jetstream").exists()


def test_demo_prints_every_sample_outcome_and_leaves_no_process(data: Path, sample_comments_path: Path) -> None:
    result = kotae("demo", data=data)
    assert result.returncode == 0, result.stderr + result.stdout
    rows = [json.loads(line) for line in sample_comments_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids = {row["id"] for row in rows if "moderation" not in row}
    lines = result.stdout.splitlines()
    for cid in ids:
        row = next(line for line in lines if line.startswith(cid + " "))
        assert any(outcome in row for outcome in TERMINAL), row
    assert "verified" in result.stdout and "dropped" in result.stdout
    assert "[1] childcare-2027" in result.stdout
    assert processes_using(data) == []


def test_streams_declares_them_on_the_given_server_and_needs_one(data: Path, nats_server: str) -> None:
    run = kotae("streams", data=data, env={"KOTAE_NATS_URL": ""})
    assert run.returncode != 0 and "KOTAE_NATS_URL" in run.stderr
    run = kotae("streams", data=data, env={"KOTAE_NATS_URL": nats_server})
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == list(subjects.STREAM_SUBJECTS)
    assert all(line.endswith("as declared") for line in lines), lines


def _stage_pids(data: Path, stage: str) -> list[int]:
    """Pids of ``kotae serve <stage>`` processes running on the data dir ``data``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if cmdline[-3:-1] == [b"serve", stage.encode()] and f"KOTAE_DATA_DIR={data}".encode() in environ:
            pids.append(int(proc.name))
    return pids


def _wait_for(predicate: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    return predicate()


def test_up_restarts_a_stage_killed_under_it_and_keeps_answering(
    data: Path, tmp_path: Path, sample_kb_path: Path
) -> None:
    assert kotae("kb", "load", str(sample_kb_path), data=data).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOTAE_")}
    env["KOTAE_DATA_DIR"] = str(data)
    up = subprocess.Popen(
        [sys.executable, "-m", "kotae", "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert up.stdout is not None and "kotae is up" in up.stdout.readline()
        (killed,) = _wait_for(lambda: _stage_pids(data, "reranker"), 30)
        os.kill(killed, signal.SIGKILL)
        replacement = _wait_for(lambda: [p for p in _stage_pids(data, "reranker") if p != killed], 30)
        assert replacement, "no new reranker process"
        assert up.poll() is None, "kotae up stopped when a stage died"
        comments = tmp_path / "after.jsonl"
        comments.write_text(jsonl([{"id": "after-kill", "author": "viewer", "text": "保育料っていくらになるの"}]))
        joined = dict(line.split("=", 1) for line in (data / "nats" / "replay.env").read_text().split())
        answered = kotae("ingest", "replay", str(comments), "--timeout", "120", data=data, env=joined)
        assert answered.returncode == 0, answered.stderr
        (record,) = [json.loads(line) for line in answered.stdout.splitlines() if line.startswith("{")]
        assert record["comment_id"] == "after-kill" and record["outcome"] == "verified", record
    finally:
        up.send_signal(signal.SIGINT)
        _, err = up.communicate(timeout=60)
    assert up.returncode == 0, err
    assert "restarted reranker" in err
    assert _stage_pids(data, "reranker") == []


def test_up_refuses_a_stack_without_a_knowledge_base_and_names_the_command_that_loads_one(data: Path) -> None:
    result = kotae("up", data=data, timeout=60)
    assert result.returncode == 1
    assert "knowledge base 'default' is not loaded" in result.stderr and "kotae kb load PATH" in result.stderr
    assert "--allow-empty-kb" in result.stderr and result.stdout == ""
    assert not (data / "jetstream").exists()  # nothing started
    named = kotae("up", data=data, env={"KOTAE_KB": "shop"}, timeout=60)
    assert named.returncode == 1 and "'shop' is not loaded" in named.stderr and "--name shop" in named.stderr
    gone = kotae("up", data=data, env={"KOTAE_QDRANT_URL": "http://127.0.0.1:9"}, timeout=60)
    assert gone.returncode == 1 and "Qdrant server at http://127.0.0.1:9 cannot be read" in gone.stderr


def test_up_refuses_to_serve_the_console_beyond_this_machine_without_a_token(data: Path) -> None:
    env = {"KOTAE_ONAIR_HTTP_HOST": "0.0.0.0"}
    result = kotae("up", "--onair", "--allow-empty-kb", data=data, env=env, timeout=60)
    assert result.returncode != 0
    assert "KOTAE_ONAIR_CONSOLE_TOKEN" in result.stderr and "0.0.0.0" in result.stderr
    assert not (data / "jetstream").exists() and not (data / "onair" / "console.token").exists()  # nothing started


def test_up_onair_prints_the_overlay_and_the_console_and_a_new_private_token(data: Path) -> None:
    import socket
    import stat
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOTAE_")}
    env.update(KOTAE_DATA_DIR=str(data), KOTAE_ONAIR_HTTP_PORT=str(port), KOTAE_ONAIR_IDLE_S="0")
    (data / "onair").mkdir(parents=True)
    (data / "onair" / "console.token").write_text("an-old-token-of-a-previous-run\n")
    up = subprocess.Popen(
        [sys.executable, "-m", "kotae", "up", "--onair", "--allow-empty-kb"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert up.stdout is not None
        lines = [up.stdout.readline()]
        while "Console token" not in lines[-1] and len(lines) < 12:  # the lines up to the token's
            lines.append(up.stdout.readline())
        said = "".join(lines)
        assert f"http://127.0.0.1:{port}/overlay" in said and f"http://127.0.0.1:{port}/console" in said, said
        token_line = next(line for line in lines if "Console token" in line)
        token_path = data.resolve() / "onair" / "console.token"
        token = token_path.read_text().strip()
        assert str(token_path) in token_line and token_line.rstrip().endswith(token)
        assert token != "an-old-token-of-a-previous-run" and stat.S_IMODE(token_path.stat().st_mode) == 0o600
        page = _wait_for(lambda: _get(f"http://127.0.0.1:{port}/overlay", urllib.request), 60)
        assert page is not None and 'data-testid="question"' in page
    finally:
        up.send_signal(signal.SIGINT)
        _, err = up.communicate(timeout=60)
    assert up.returncode == 0, err


def _get(url: str, request: Any) -> str | None:
    try:
        with request.urlopen(url, timeout=2) as reply:
            return reply.read().decode()
    except OSError:
        return None


# --- on air -------------------------------------------------------------------------------


def test_demo_onair_shows_what_aired_in_order_and_why_the_rest_did_not(data: Path) -> None:
    env = {"KOTAE_ONAIR_MAX_AGE_S": "60", "KOTAE_ONAIR_IDLE_S": "0"}
    result = kotae("demo", "--onair", data=data, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    air = result.stdout.split("On air, in order", 1)[1]
    aired, rest = air.split("Not aired:", 1)
    rows = [line for line in aired.splitlines() if line[:1] == " " and line.strip()[:1].isdigit()]
    order = [row.split()[1] for row in rows]
    assert "c028" in order[:2] and "superchat" in next(r for r in rows if " c028 " in r)  # Super Chat first
    assert "+1 asked the same" in next(r for r in rows if " c029 " in r)  # c032 was merged into c029
    rest_rows = {line.split()[0]: line for line in rest.splitlines() if line.startswith("  c")}
    assert "already_aired" in rest_rows["c031"] and "c003" in rest_rows["c031"]  # a repeat of c003
    assert "withdrawn" in rest_rows["c033"] and "message_deleted" in rest_rows["c033"]
    assert "withdrawn" in rest_rows["c034"] and "user_banned" in rest_rows["c034"]
    assert any("expired" in row for row in rest_rows.values())  # one voice: the rest expired
    assert processes_using(data) == []


def test_onair_commands_need_a_running_stack_and_a_valid_target(data: Path) -> None:
    result = kotae("onair", "status", data=data)
    assert result.returncode == 1 and "kotae up --onair" in result.stderr
    result = kotae("onair", "hold", "maybe", data=data)
    assert result.returncode == 1 and "hold takes on or off" in result.stderr
    result = kotae("onair", "approve", data=data)
    assert result.returncode == 1 and "comment id" in result.stderr
    assert kotae("onair", "dance", data=data).returncode == 2


async def test_operator_commands_reach_the_speaker_as_the_operator_user_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nats as nats_client

    from kotae.bus import connection
    from kotae.settings import load_settings
    from kotae.stack import Stack

    monkeypatch.setenv("KOTAE_ONAIR_HTTP_PORT", "0")
    settings = load_settings(data_dir=tmp_path / "data")
    stack = Stack(settings, stages=("onair",))
    await stack.start()
    try:
        stack.write_env_files()  # as `kotae up` does: the operator's credentials for this shell

        def status() -> str:
            run = kotae("onair", "status", data=settings.data_dir, timeout=60)
            assert run.returncode == 0, run.stderr
            return run.stdout

        deadline = time.monotonic() + 30
        while "speaking: " + "nobody" in (text := status()) or "airing" not in text:
            assert time.monotonic() < deadline, text
            time.sleep(0.3)
        sent = kotae("onair", "pause", data=settings.data_dir)
        assert sent.returncode == 0 and "pause sent as operator" in sent.stdout, sent.stderr
        assert kotae("onair", "block", "ch_spam", data=settings.data_dir).returncode == 0
        deadline = time.monotonic() + 30
        while "paused" not in (text := status()) or "ch_spam (by operator)" not in text:
            assert time.monotonic() < deadline, text
            time.sleep(0.3)
        # The operator may speak only as itself: a command in another user's name is refused by the server.
        errors: list[Exception] = []

        async def on_error(exc: Exception) -> None:
            errors.append(exc)

        operator = stack.settings_for("operator")
        nc = await nats_client.connect(**{**connection.connect_options(operator), "error_cb": on_error})
        await nc.publish(subjects.control("skip", "desk"), b"{}")
        await nc.flush()
        for _ in range(100):
            if errors:
                break
            await asyncio.sleep(0.02)
        await nc.close()
        assert errors and "permissions violation" in str(errors[0]).lower()
    finally:
        stack.stop()


# --- failures that speak ------------------------------------------------------------------


def test_a_setting_name_with_a_typo_is_reported_with_the_closest_one(data: Path) -> None:
    env = {"KOTAE_TOPN": "3", "KOTAE_TEST_NATS_URL": "nats://127.0.0.1:1", "KOTAE_VENV": "/tmp/venv"}
    result = kotae("nats", "passwords", data=data, env=env)
    assert result.returncode == 0, result.stderr  # a warning: other tools may set KOTAE_ variables
    assert "KOTAE_TOPN is not a kotae setting" in result.stderr and "did you mean KOTAE_TOP_N?" in result.stderr
    assert result.stderr.count("is not a kotae setting") == 1  # the suite's and the scripts' own are known


def test_output_to_a_reader_that_went_away_ends_quietly(data: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOTAE_")}
    env["KOTAE_DATA_DIR"] = str(data)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kotae", "nats", "passwords"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as `| head -0` does, before the command has written anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 128 + signal.SIGPIPE
    assert err == "", err  # no "Broken pipe", no traceback


def test_replay_that_reaches_its_timeout_writes_what_arrived_and_says_how_many_are_missing(
    data: Path, tmp_path: Path, sample_kb_path: Path
) -> None:
    import socket

    comments = tmp_path / "c.jsonl"
    rows = [
        {"id": "laugh", "author": "a", "text": "草"},
        {"id": "clap", "author": "b", "text": "8888888"},
        {"id": "fee", "author": "c", "text": "0歳の子を預けたら保育料の上限は月いくらですか"},
    ]
    comments.write_text(jsonl(rows), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    # A generator endpoint that takes the request and never answers: the question cannot end in time.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        env = {
            "KOTAE_GENERATOR_MODEL": f"compatible:http://127.0.0.1:{silent.getsockname()[1]}/v1|m",
            "KOTAE_MODEL_TIMEOUT_S": "120",
        }
        args = ("replay", str(comments), "--kb", str(sample_kb_path), "--out", str(out), "--timeout", "3")
        result = kotae(*args, data=data, env=env)
    assert result.returncode == 1
    assert "1 of 3 comment(s) had no outcome within 3s (--timeout)" in result.stderr and "fee" in result.stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["comment_id"], r["outcome"]) for r in records] == [("laugh", "dropped"), ("clap", "dropped")]
    assert processes_using(data) == []


def test_replay_timeout_says_what_it_waits_for(data: Path) -> None:
    shown = " ".join(kotae("replay", "--help", data=data).stdout.split())
    assert "--timeout TIMEOUT seconds to wait, once every comment is published, for the outcomes" in shown


async def test_a_command_run_as_another_stages_user_says_which_user_and_which_env_to_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kotae.settings import load_settings
    from kotae.stack import Stack

    monkeypatch.setenv("KOTAE_ONAIR_HTTP_PORT", "0")
    settings = load_settings(data_dir=tmp_path / "data")
    stack = Stack(settings, stages=("onair",))
    await stack.start()
    try:
        env_dir = stack.write_env_files()
        assert env_dir is not None
        # The replay user's env loaded in this shell, as the README shows for `kotae ingest replay`.
        replay_env = dict(line.split("=", 1) for line in (env_dir / "replay.env").read_text().split())
        started = time.monotonic()
        # The replay user may read what ingest reads (the current show), never send the operator's commands.
        run = await asyncio.to_thread(kotae, "onair", "pause", data=settings.data_dir, env=replay_env, timeout=60)
        took = time.monotonic() - started
        deadline = time.monotonic() + 30
        while True:  # as the operator, found by itself, the same command works once the speaker wrote its status
            started = time.monotonic()
            worked = await asyncio.to_thread(kotae, "onair", "pause", data=settings.data_dir, timeout=60)
            worked_took = time.monotonic() - started
            if worked.returncode == 0 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.3)
    finally:
        stack.stop()
    assert run.returncode == 1 and run.stdout == ""
    assert "ran as NATS user 'replay'" in run.stderr and "needs the 'operator' user" in run.stderr
    assert f"set -a; . {env_dir}/operator.env; set +a" in run.stderr
    assert "timeout" not in run.stderr.splitlines()[-1]
    assert worked.returncode == 0, worked.stderr
    # Refused, it stops at once rather than waiting out the request's timeout (5 s; the whole
    # command took 7 s): about as long as the same command that works.
    assert took < 2.5 * worked_took, (took, worked_took)
