"""The provider layer through the real openai and anthropic SDKs against a local fake server."""

from __future__ import annotations

import asyncio
import time

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from kotae import providers
from kotae.providers import BadReply, ChatModel, ModelSpecError, ModelUnavailable
from kotae.settings import load_settings
from tests.fakes.model_server import FakeModelServer


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(providers, "tracer", provider.get_tracer("test"))
    return exporter


def compatible(fake: FakeModelServer, **kw: object) -> ChatModel:
    return ChatModel.from_spec(
        f"compatible:{fake.url}/v1|local-model", setting="KOTAE_GENERATOR_MODEL", timeout_s=2.0, **kw
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("http", ["aiohttp", "httpx"])
async def test_openai_wire_json_mode_usage_and_gen_ai_span(http: str, spans: InMemorySpanExporter) -> None:
    with FakeModelServer('{"ids": [2]}') as fake:
        reply = await compatible(fake, http=http).acomplete(
            system="rules", user="question", max_tokens=50, json_mode=True
        )
    assert reply.text == '{"ids": [2]}'
    assert (reply.input_tokens, reply.output_tokens) == (11, 7)
    sent = fake.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["response_format"] == {"type": "json_object"}
    assert sent["body"]["max_tokens"] == 50
    assert sent["body"]["messages"] == [{"role": "system", "content": "rules"}, {"role": "user", "content": "question"}]
    (span,) = spans.get_finished_spans()
    assert span.name == "chat local-model"
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == "local-model"
    assert attrs["gen_ai.response.model"] == "local-model"
    assert attrs["gen_ai.usage.input_tokens"] == 11
    assert attrs["gen_ai.usage.output_tokens"] == 7
    call = reply.call("reranker", "rerank.v1")
    assert (call.model, call.prompt_version, call.input_tokens, call.output_tokens) == (
        "compatible:local-model",
        "rerank.v1",
        11,
        7,
    )


@pytest.mark.parametrize("http", ["aiohttp", "httpx"])
async def test_anthropic_wire_takes_the_system_prompt_apart_and_reports_usage(
    http: str, spans: InMemorySpanExporter
) -> None:
    with FakeModelServer("こんにちは") as fake:
        model = ChatModel.from_spec(
            "anthropic:claude-test", setting="KOTAE_GENERATOR_MODEL", base_url=fake.url, api_key="k", http=http
        )
        reply = await model.acomplete(system="rules", user="question", json_mode=True)
    assert reply.text == "こんにちは"
    sent = fake.requests[0]
    assert sent["path"] == "/v1/messages"
    assert sent["body"]["system"] == "rules"
    assert sent["body"]["messages"] == [{"role": "user", "content": "question"}]
    headers = {k.lower(): v for k, v in sent["headers"].items()}
    assert headers.get("x-api-key") == "k" or headers.get("authorization") == "Bearer k"
    assert dict(spans.get_finished_spans()[0].attributes or {})["gen_ai.provider.name"] == "anthropic"


@pytest.mark.parametrize("http", ["aiohttp", "httpx"])
@pytest.mark.parametrize("fault", ["429", "500", "503", "timeout"])
async def test_transient_faults_become_model_unavailable_without_sdk_retries(
    fault: str, http: str, spans: InMemorySpanExporter
) -> None:
    with FakeModelServer(fault, timeout_sleep_s=1.5) as fake:
        model = ChatModel.from_spec(f"compatible:{fake.url}/v1|m", setting="KOTAE_X", timeout_s=0.5, http=http)
        with pytest.raises(ModelUnavailable):
            await model.acomplete(system="s", user="u")
    assert len(fake.requests) == 1  # one attempt: retrying is the bus's job, with backoff
    (span,) = spans.get_finished_spans()
    assert not span.status.is_ok


@pytest.mark.parametrize(
    ("behaviour", "status"),
    [("ok", "ok"), ("429", "429"), ("500", "5xx"), ("503", "5xx"), ("timeout", "timeout"), ("garbage", "bad_reply")],
)
async def test_every_request_is_counted_by_what_came_back_for_the_stage_handling_the_message(
    behaviour: str, status: str
) -> None:
    """Failed requests that a redelivery retries appear in no message; this counter is where their rate shows."""
    with FakeModelServer(behaviour, timeout_sleep_s=1.5) as fake:
        model = ChatModel.from_spec(f"compatible:{fake.url}/v1|counted", setting="KOTAE_X", timeout_s=0.5)
        labels = {"stage": "reranker", "model": "compatible:counted", "status": status}
        before = REGISTRY.get_sample_value("kotae_model_requests_total", labels) or 0.0
        with structlog.contextvars.bound_contextvars(stage="reranker"):  # as the bus edge binds it per message
            try:
                await model.acomplete(system="s", user="u")
            except (ModelUnavailable, BadReply):
                pass
    assert REGISTRY.get_sample_value("kotae_model_requests_total", labels) == before + 1


@pytest.mark.parametrize("fault", ["garbage", "truncated"])
async def test_an_unreadable_body_is_not_a_success(fault: str) -> None:
    with FakeModelServer(fault) as fake:
        with pytest.raises((BadReply, ModelUnavailable)):
            await compatible(fake).acomplete(system="s", user="u")


@pytest.mark.parametrize("spec", ["compatible", "anthropic"])
async def test_a_json_body_without_the_reply_fields_is_a_bad_reply(spec: str) -> None:
    with FakeModelServer("shapeless") as fake:
        if spec == "anthropic":
            model = ChatModel.from_spec("anthropic:claude", setting="KOTAE_X", base_url=fake.url, api_key="k")
        else:
            model = compatible(fake)
        with pytest.raises(BadReply, match="without the expected fields"):
            await model.acomplete(system="s", user="u")


async def test_concurrency_limit_per_provider_queues_calls() -> None:
    with FakeModelServer("ok", delay_s=0.3) as fake:
        model = compatible(fake, concurrency=2)
        started = time.perf_counter()
        await asyncio.gather(*(model.acomplete(system="s", user=str(i)) for i in range(4)))
        limited = time.perf_counter() - started
        wide = compatible(fake, concurrency=4)
        wide.base_url = wide.base_url + "/"  # a different endpoint key: its own slots
        started = time.perf_counter()
        await asyncio.gather(*(wide.acomplete(system="s", user=str(i)) for i in range(4)))
        unlimited = time.perf_counter() - started
    # Two slots → two rounds of 0.3 s; four slots → one round. Compared within this run.
    assert limited > 1.5 * unlimited


@pytest.mark.parametrize("http", ["aiohttp", "httpx"])
async def test_a_burst_of_calls_opening_connections_at_once_all_succeed(http: str) -> None:
    """A stage starting a few dozen model calls at once opens that many connections; none is lost."""
    with FakeModelServer("ok", delay_s=0.2) as fake:
        model = compatible(fake, concurrency=96, http=http)
        replies = await asyncio.gather(
            *(model.acomplete(system="s", user=str(i)) for i in range(96)), return_exceptions=True
        )
    failures = [r for r in replies if isinstance(r, Exception)]
    assert not failures, f"{len(failures)} of 96 calls failed, first: {failures[0]!r}"
    assert len(fake.requests) == 96


async def test_closing_the_models_ends_their_connections_and_a_later_call_opens_new_ones() -> None:
    with FakeModelServer("ok") as fake:
        model = compatible(fake)
        await model.acomplete(system="s", user="1")
        session = model.aclient()._client._transport.client  # SDK client → its HTTP client → the aiohttp session
        assert not session.closed
        await providers.close_models()
        assert session.closed
        assert (await model.acomplete(system="s", user="2")).text == "ok"
        await providers.close_models()
    assert len(fake.requests) == 2


def test_the_blocking_form_speaks_the_same_wire() -> None:
    with FakeModelServer("fine") as fake:
        assert compatible(fake).complete(system="s", user="u").text == "fine"


def test_from_settings_takes_key_gateway_timeout_and_limit() -> None:
    settings = load_settings(
        openai_api_key="sk-test",
        openai_base_url="http://gw/v1",
        model_timeout_s=4,
        model_concurrency=3,
        model_http="httpx",
    )
    model = ChatModel.from_settings(settings, "openai:gpt-test", setting="KOTAE_GENERATOR_MODEL")
    assert (
        model.provider,
        model.model,
        model.api_key,
        model.base_url,
        model.timeout_s,
        model.concurrency,
        model.http,
    ) == (
        "openai",
        "gpt-test",
        "sk-test",
        "http://gw/v1",
        4,
        3,
        "httpx",
    )


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "compatible:http://x/v1", "compatible:|m", "mistral:large"])
def test_a_bad_model_setting_names_the_variable(spec: str) -> None:
    with pytest.raises(ModelSpecError, match="KOTAE_GENERATOR_MODEL"):
        ChatModel.from_spec(spec, setting="KOTAE_GENERATOR_MODEL")
