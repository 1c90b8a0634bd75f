"""The ``kotae`` command line, end to end, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kotae.contracts import subjects
from kotae.knowledge.records import load_records

TERMINAL = {"verified", "rejected", "clarify", "unanswered", "dropped", "dead_lettered"}
REPLAY_KEYS = {"comment_id", "outcome", "answer", "citations", "slide", "verdict", "reason", "latency_ms", "trace_id"}


def kotae(*args: str, data: Path, env: dict[str, str] | None = None, timeout: float = 240, stdin: str | None = None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KOTAE_")}
    full_env["KOTAE_DATA_DIR"] = str(data)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "kotae", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        input=stdin,
    )


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


@pytest.mark.parametrize(
    "line,field",
    [
        ('{"kind": "doc", "title": "t", "text": "本文。"}', "id"),
        ('{"id": "a", "kind": "doc", "text": "本文。", "valid_from": "2027-13-01"}', "valid_from"),
        ('{"id": "a", "kind": "faq", "question": "q?"}', "record"),
        ('{"id": "a", "kind": "doc", "text": "x", "colour": "red"}', "colour"),
    ],
)
def test_kb_load_bad_input_names_file_line_and_field_and_writes_nothing(data: Path, tmp_path: Path, line: str, field: str) -> None:
    path = tmp_path / "kb.jsonl"
    path.write_text('{"id": "ok", "kind": "doc", "text": "正しい行です。"}\n' + line + "\n", encoding="utf-8")
    result = kotae("kb", "load", str(path), data=data)
    assert result.returncode == 1
    assert f"{path}:2" in result.stderr
    assert field in result.stderr
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
        {"id": "number", "question": "保育料は？", "contexts": ctx, "answer": "保育料は月額2万5千円を上限にします[1]。"},
        {"id": "uncited", "question": "保育料は？", "contexts": ctx, "answer": "保育料は無料です。"},
    ]
    result = run_batch("verify", tmp_path / "v.jsonl", jsonl(cases), data=data)
    assert result.returncode == 0, result.stderr
    rows = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert rows["good"]["verdict"] == 0 and rows["good"]["reasons"] == []
    assert rows["number"]["verdict"] == 2 and any("25000" in r for r in rows["number"]["reasons"])
    assert rows["uncited"]["verdict"] == 2
    assert {r["method"] for r in rows.values()} == {"citation_and_support"}


def test_verify_batch_bad_input(data: Path, tmp_path: Path) -> None:
    batch = tmp_path / "v.jsonl"
    result = run_batch("verify", batch, '{"id": 1, "question": "q", "contexts": "nope", "answer": "a"}\n', data=data)
    assert_batch_stopped_at(result, batch, 1, "contexts")


def test_a_bad_setting_stops_the_command_naming_the_variable(data: Path, tmp_path: Path) -> None:
    result = run_batch("search", tmp_path / "q.jsonl", '{"id": "a", "text": "x"}\n', data=data, env={"KOTAE_GATE_ANSWER": "high"})
    assert result.returncode == 2
    assert "KOTAE_GATE_ANSWER" in result.stderr


def test_replay_writes_one_terminal_record_per_comment(data: Path, tmp_path: Path, sample_kb_path: Path, sample_comments_path: Path) -> None:
    out = tmp_path / "out" / "outcomes.jsonl"
    result = kotae("replay", str(sample_comments_path), "--kb", str(sample_kb_path), "--out", str(out), data=data)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    ids = list(dict.fromkeys(json.loads(line)["id"] for line in sample_comments_path.read_text(encoding="utf-8").splitlines() if line.strip()))
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
    comments.write_text('{"id": "a", "author": "x", "text": "保育料は？"}\n{"id": "b", "author": "x"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = kotae("replay", str(comments), "--out", str(out), data=data)
    assert result.returncode == 1
    assert f"{comments}:2" in result.stderr and "text" in result.stderr
    assert not out.exists()
    assert not (data / "jetstream").exists()


def test_demo_prints_every_sample_outcome_and_leaves_no_process(data: Path, sample_comments_path: Path) -> None:
    result = kotae("demo", data=data)
    assert result.returncode == 0, result.stderr + result.stdout
    ids = {json.loads(line)["id"] for line in sample_comments_path.read_text(encoding="utf-8").splitlines() if line.strip()}
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
