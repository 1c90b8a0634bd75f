"""What an operator sees: one trace per comment with model-call spans, and /metrics that move.

The trace test runs the hot path with hosted-model methods against the local
fake model server and an in-memory span exporter. The metrics test starts a real
stage process (``kotae serve verifier``) with ``KOTAE_METRICS_PORT``, sends it a
draft over a real nats-server and scrapes its ``/metrics`` before and after.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import nats
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from kotae import providers
from kotae.bus.topology import ensure_streams_at
from kotae.contracts import AnswerV1, subjects
from kotae.replay import run_replay
from kotae.settings import Settings
from tests.factories import FAITHFUL, HONEST, draft, respond, with_models
from tests.fakes.model_server import FakeModelServer
from tests.integration.stages import running_stages


async def test_one_trace_holds_every_stage_and_each_model_call_with_tokens(
    nats_url: str, loaded_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(providers, "tracer", provider.get_tracer("kotae.providers"))
    with FakeModelServer(responder=respond) as fake:
        settings = with_models(loaded_settings, fake)
        async with running_stages(settings, nats_url, tracer_provider=provider):
            result = await run_replay(settings, nats_url, [HONEST], timeout=60, tracer_provider=provider)
    record = result.records[HONEST.id]
    assert record["outcome"] == "verified"
    spans = [s for s in exporter.get_finished_spans() if format(s.context.trace_id, "032x") == record["trace_id"]]
    by_id = {s.context.span_id: s for s in spans}
    roots = [s for s in spans if s.parent is None]
    assert [s.name for s in roots] == ["ingest"]  # one tree, rooted where the comment entered
    for s in spans:
        if s.parent is not None:
            assert s.parent.span_id in by_id, f"{s.name} hangs off a span outside the trace"
    calls = [s for s in spans if s.name.startswith("chat ")]
    assert sorted(s.name for s in calls) == ["chat checker", "chat ranker", "chat writer"]
    for call in calls:
        attrs = dict(call.attributes or {})
        assert attrs["gen_ai.usage.input_tokens"] == 11 and attrs["gen_ai.usage.output_tokens"] == 7
        # Each model call is a child of the span of the stage that made it.
        parent = by_id[call.parent.span_id]
        assert parent.name.endswith("process")
    stage_of = {by_id[c.parent.span_id].attributes.get("messaging.destination_publish.name") for c in calls}
    assert stage_of == {subjects.RETRIEVAL, subjects.RERANK, subjects.DRAFT}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


async def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        assert proc.poll() is None, "the stage process exited"
        try:
            _scrape(port)
            return
        except OSError:
            await asyncio.sleep(0.2)
    raise AssertionError(f"/metrics on port {port} never answered")


async def test_a_running_stage_exports_metrics_that_move(nats_url: str, settings: Settings, tmp_path: Path) -> None:
    await ensure_streams_at(nats_url, settings)
    port = _free_port()
    env = {
        **os.environ,
        "KOTAE_NATS_URL": nats_url,
        "KOTAE_DATA_DIR": str(tmp_path / "d"),
        "KOTAE_METRICS_PORT": str(port),
        "KOTAE_MODEL_BUDGET_USD_PER_HOUR": "2.5",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "kotae", "serve", "verifier"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await _wait_for_port(port, proc)
        ok = ("kotae_messages_total", (("result", "ok"), ("stage", "verifier")))
        verified = ("kotae_outcomes_total", (("outcome", "verified"), ("stage", "verifier")))
        before = _scrape(port)
        assert before.get(ok, 0) == 0 and before.get(verified, 0) == 0
        # Exported at 0 before the first one, so the first dead letter is an increase an alert sees.
        assert before[("kotae_dead_letters_total", (("error_type", "poison"), ("stage", "verifier")))] == 0
        assert before[("kotae_messages_total", (("result", "exhausted"), ("stage", "verifier")))] == 0
        assert before[("kotae_model_budget_usd_per_hour", ())] == 2.5
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        sub = await js.subscribe(subjects.answer("verified"), ordered_consumer=True)
        await js.publish(subjects.DRAFT, draft(FAITHFUL, comment_id="m-1").model_dump_json().encode())
        msg = await sub.next_msg(timeout=60)
        assert AnswerV1.model_validate_json(msg.data).comment_id == "m-1"
        await nc.close()
        after = {}
        for _ in range(50):  # the counter moves right after the publish ack
            after = _scrape(port)
            if after.get(ok, 0) >= 1:
                break
            await asyncio.sleep(0.1)
        assert after.get(ok) == 1
        assert after[verified] == 1
        assert after[("kotae_verifier_verdicts_total", (("method", "citation_and_support"), ("verdict", "0")))] == 1
        assert after[("kotae_handle_seconds_count", (("stage", "verifier"),))] == 1
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
