"""Chat models behind one small interface, through the official SDKs.

A model is named by a setting: ``openai:<model>``, ``anthropic:<model>`` or
``compatible:<base_url>|<model>`` (vLLM, Ollama, llama.cpp server — anything
that speaks OpenAI's chat completions). Every call:

* has a timeout and no retries inside the SDK: a transient fault (429, 5xx,
  timeout, connection) becomes a :class:`ModelUnavailable`, which the bus edge
  turns into a delayed, bounded redelivery of the input message;
* waits for a slot of its provider's concurrency limit (per process), so a burst
  of comments queues here instead of tripping the provider's rate limit, and, with
  ``KOTAE_MODEL_ENDPOINT_CONCURRENCY``, for one of the endpoint's slots shared by every
  stage process on the bus (:mod:`kotae.endpoint_slots`), so a one-slot local server
  never queues a call behind another stage's; the timeout starts once the call is sent,
  so the time spent waiting for a slot never fails a call;
* is a client span with the OpenTelemetry ``gen_ai.*`` attributes (model,
  tokens in and out) and comes back as a :class:`Completion` that stages copy
  into their messages as a :class:`~kotae.contracts.ModelCall`;
* is counted in ``kotae_model_requests_total`` by what came back (``ok``,
  ``429``, ``5xx``, ``timeout``, ...), so the failures a redelivery later hides
  from the messages still show as a rate.

A reply that arrives but cannot be used (not the JSON asked for) raises
:class:`BadReply`; stages decide whether to ask again, degrade or fail closed.
How a reply is read (JSON in a fence, numbers as strings, citation variants) is
:mod:`kotae.model_reply`, shared by every stage.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import structlog
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from kotae import metrics
from kotae.contracts import ModelCall
from kotae.endpoint_slots import EndpointSlots
from kotae.faults import TransientError
from kotae.settings import Settings
from kotae.stage import Bus

tracer = trace.get_tracer("kotae.providers")


class ModelUnavailable(TransientError):
    """The model could not answer now (rate limit, server error, timeout)."""


class ModelSpecError(ValueError):
    """A model setting that names no known provider."""


class BadReply(ValueError):
    """The model answered, but not in the shape the stage asked for."""


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float = 0.0
    provider: str = ""
    #: Why the model stopped: "stop", or "length" when ``max_tokens`` cut the reply short.
    finish_reason: str | None = None

    def call(self, stage: str, prompt_version: str | None = None, *, outcome: str = "ok") -> ModelCall:
        """This completion as the record a message carries."""
        return ModelCall(
            stage=stage,
            model=f"{self.provider}:{self.model}" if self.provider else self.model,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            latency_ms=round(self.latency_ms, 1),
            prompt_version=prompt_version,
            outcome=outcome,
        )


@dataclass
class _Call:
    """What one model call has produced so far (for its span)."""

    started: float
    result: Completion | None = None
    error: Exception | None = None


# Models whose async client is open, closed together when a stage stops (close_models).
_open_models: weakref.WeakValueDictionary[int, ChatModel] = weakref.WeakValueDictionary()


async def close_models() -> None:
    """Close every model's async client opened on the running event loop."""
    for key, model in list(_open_models.items()):
        if model._aclient_loop is asyncio.get_running_loop():
            _open_models.pop(key, None)
            await model.aclose()


_SPEC_HELP = "expected openai:<model>, anthropic:<model> or compatible:<base_url>|<model>"

# One semaphore per (event loop, provider endpoint): the limit is per process.
_slots: dict[tuple[int, str], asyncio.Semaphore] = {}


def _slot(key: str, limit: int) -> asyncio.Semaphore:
    loop_key = (id(asyncio.get_running_loop()), key)
    sem = _slots.get(loop_key)
    if sem is None:
        sem = _slots[loop_key] = asyncio.Semaphore(limit)
    return sem


@dataclass
class ChatModel:
    """One configured chat model.

    Example::

        model = ChatModel.from_spec("compatible:http://localhost:8000/v1|qwen2.5", setting="KOTAE_GENERATOR_MODEL")
        reply = await model.acomplete(system="…", user="…", max_tokens=300)
        reply.text, reply.input_tokens
    """

    provider: str  # openai | anthropic | compatible
    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 15.0
    concurrency: int = 8
    http: str = "aiohttp"  # the async client's transport: aiohttp | httpx (see _make_client)
    #: The endpoint's slots shared with the other stage processes on the bus (see :meth:`share_slots`).
    shared_slots: EndpointSlots | None = field(default=None, repr=False)
    _client: Any = field(default=None, repr=False)
    _aclient: Any = field(default=None, repr=False)
    _aclient_loop: Any = field(default=None, repr=False)

    @classmethod
    def from_spec(
        cls,
        spec: str,
        *,
        setting: str,
        api_key: str | None = None,
        timeout_s: float = 15.0,
        base_url: str | None = None,
        concurrency: int = 8,
        http: str = "aiohttp",
    ) -> ChatModel:
        provider, sep, rest = spec.partition(":")
        if not sep or not rest:
            raise ModelSpecError(f"{setting}={spec!r}: {_SPEC_HELP}")
        if provider in ("openai", "anthropic"):
            return cls(
                provider,
                rest,
                base_url=base_url,
                api_key=api_key,
                timeout_s=timeout_s,
                concurrency=concurrency,
                http=http,
            )
        if provider == "compatible" and "|" in rest:
            base, model = rest.rsplit("|", 1)
            if base and model:
                return cls(
                    provider,
                    model,
                    base_url=base,
                    api_key=api_key,
                    timeout_s=timeout_s,
                    concurrency=concurrency,
                    http=http,
                )
        raise ModelSpecError(f"{setting}={spec!r}: {_SPEC_HELP}")

    @classmethod
    def configured(cls, settings: Settings, field: str, bus: Bus | None = None) -> ChatModel | None:
        """The chat model the setting ``field`` names (e.g. ``reranker_model``), or None when it is unset.

        With ``bus``, its calls take the endpoint's shared slots when
        ``KOTAE_MODEL_ENDPOINT_CONCURRENCY`` is set (see :meth:`share_slots`).
        """
        spec = getattr(settings, field)
        model = cls.from_settings(settings, spec, setting=f"KOTAE_{field.upper()}") if spec else None
        if model is not None and bus is not None:
            model.share_slots(settings, bus)
        return model

    def share_slots(self, settings: Settings, bus: Bus) -> None:
        """Take one of ``KOTAE_MODEL_ENDPOINT_CONCURRENCY`` slots of the endpoint, shared on ``bus``, for each call.

        Nothing changes when the setting is 0. Otherwise the process's own limit is no
        higher than the shared one: more calls of this process in flight could only wait.
        """
        limit = settings.model_endpoint_concurrency
        if limit > 0:
            self.shared_slots = EndpointSlots(bus.jetstream, limit, replicas=settings.stream_replicas)
            self.concurrency = min(self.concurrency, limit)

    @classmethod
    def from_settings(cls, settings: Settings, spec: str, *, setting: str) -> ChatModel:
        """The model ``spec`` with the key, gateway, timeout and concurrency limit from settings."""
        anthropic = spec.startswith("anthropic:")
        key = settings.anthropic_api_key if anthropic else settings.openai_api_key
        return cls.from_spec(
            spec,
            setting=setting,
            api_key=key.get_secret_value() if key else None,
            timeout_s=settings.model_timeout_s,
            base_url=settings.anthropic_base_url if anthropic else settings.openai_base_url,
            concurrency=settings.model_concurrency,
            http=settings.model_http,
        )

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def _endpoint(self) -> str:
        return f"{self.provider}|{self.base_url or ''}"

    # --- clients ----------------------------------------------------------------

    def client(self) -> Any:
        if self._client is None:
            self._client = self._make_client(sync=True)
        return self._client

    def aclient(self) -> Any:
        """The async client of the running event loop (its connections belong to that loop)."""
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aclient_loop is not loop:
            self._aclient, self._aclient_loop = self._make_client(sync=False), loop
            _open_models[id(self)] = self
        return self._aclient

    async def aclose(self) -> None:
        """Close the async client's connections (an aiohttp session warns if left open)."""
        client, self._aclient = self._aclient, None
        if client is not None and self._aclient_loop is asyncio.get_running_loop():
            await client.close()

    def _make_client(self, *, sync: bool) -> Any:
        """The SDK's client; the async one on aiohttp unless ``http`` is "httpx".

        With a few dozen calls in flight, the SDK's default httpx pool probes every
        idle connection's socket each time a request is added or removed: 3.7 ms of
        client CPU a call at 60 calls/s after a burst of 128, against 2.5 ms on the
        SDK's aiohttp transport (docs/benchmarks.md, Capacity). The SDK still builds
        the request, applies the timeout and raises its own errors on either.
        """
        options: dict[str, Any] = {
            "api_key": self.api_key or "unset",
            "base_url": self.base_url,
            "timeout": self.timeout_s,
            "max_retries": 0,
        }
        if self.provider == "anthropic":
            import anthropic as sdk
        else:
            import openai as sdk  # type: ignore[no-redef]
        if sync:
            return sdk.Anthropic(**options) if self.provider == "anthropic" else sdk.OpenAI(**options)
        if self.http == "aiohttp":
            options["http_client"] = sdk.DefaultAioHttpClient(timeout=self.timeout_s)
        return sdk.AsyncAnthropic(**options) if self.provider == "anthropic" else sdk.AsyncOpenAI(**options)

    # --- calls ------------------------------------------------------------------

    def _request(self, system: str, user: str, max_tokens: int, temperature: float, json_mode: bool) -> dict[str, Any]:
        if self.provider == "anthropic":
            # This SDK's messages API takes no temperature; the model's default applies.
            # Anthropic has no JSON switch: the prompt asks for JSON and the stage parses it.
            return {
                "model": self.model,
                "system": system,
                "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": user}],
            }
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        if json_mode:
            request["response_format"] = {"type": "json_object"}
        return request

    @property
    def _path(self) -> str:
        """The chat endpoint, relative to the client's base URL."""
        return "/v1/messages" if self.provider == "anthropic" else "/chat/completions"

    def _completion(self, body: str, started: float) -> Completion:
        """The reply's text, model and token counts, read from the JSON body.

        The SDK sends the request (authentication, headers, timeouts, its error
        types for HTTP faults) and hands back the body as text; reading the few
        fields kotae uses straight from the JSON costs a fraction of building the
        SDK's typed response object, and a body that lacks them is a bad reply.
        """
        latency = (time.perf_counter() - started) * 1000
        data = json.loads(body)  # not JSON: a BadReply, through _translate
        try:
            if self.provider == "anthropic":
                text = "".join(
                    block.get("text") or "" for block in data["content"] if block.get("type", "text") == "text"
                )
                usage = data.get("usage") or {}
                stop = data.get("stop_reason")
                return Completion(
                    text,
                    str(data.get("model") or self.model),
                    usage.get("input_tokens"),
                    usage.get("output_tokens"),
                    latency,
                    self.provider,
                    "length" if stop == "max_tokens" else stop,
                )
            choices = data["choices"]
            text = (choices[0]["message"].get("content") or "") if choices else ""
            usage = data.get("usage") or {}
            return Completion(
                text,
                str(data.get("model") or self.model),
                usage.get("prompt_tokens"),
                usage.get("completion_tokens"),
                latency,
                self.provider,
                choices[0].get("finish_reason") if choices else None,
            )
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise BadReply(
                f"{self.name}: response body without the expected fields ({type(exc).__name__}: {exc})"
            ) from None

    def _translate(self, exc: Exception) -> Exception:
        """SDK exceptions → ModelUnavailable (worth retrying later) or BadReply; others unchanged."""
        import anthropic
        import openai

        transient = (
            openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError,
            anthropic.APIConnectionError, anthropic.RateLimitError, anthropic.InternalServerError,
        )  # fmt: skip
        if isinstance(exc, transient):
            if "timeout" in type(exc).__name__.lower():
                return ModelUnavailable(f"{self.name}: timeout after {self.timeout_s}s")
            return ModelUnavailable(f"{self.name}: {type(exc).__name__}: {str(exc)[:200]}")
        if isinstance(exc, (openai.APIStatusError, anthropic.APIStatusError)):
            if exc.status_code >= 500 or exc.status_code in (408, 409, 429, 529):
                return ModelUnavailable(f"{self.name}: HTTP {exc.status_code}")
            return exc
        if isinstance(
            exc, (json.JSONDecodeError, openai.APIResponseValidationError, anthropic.APIResponseValidationError)
        ):
            return BadReply(f"{self.name}: unreadable response body: {type(exc).__name__}")
        if "timeout" in type(exc).__name__.lower():
            return ModelUnavailable(f"{self.name}: timeout after {self.timeout_s}s")
        return exc

    def _span_start(self, max_tokens: int, temperature: float) -> Any:
        span = tracer.start_span(f"chat {self.model}", kind=SpanKind.CLIENT)
        span.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic" if self.provider == "anthropic" else "openai",
                "gen_ai.request.model": self.model,
                "gen_ai.request.max_tokens": max_tokens,
                "gen_ai.request.temperature": temperature,
                "kotae.model": self.name,
            }
        )
        if self.base_url:
            span.set_attribute("server.address", self.base_url)
        return span

    @staticmethod
    def _span_end(span: Any, result: Completion | None, error: Exception | None) -> None:
        if result is not None:
            span.set_attribute("gen_ai.response.model", result.model)
            if result.input_tokens is not None:
                span.set_attribute("gen_ai.usage.input_tokens", result.input_tokens)
            if result.output_tokens is not None:
                span.set_attribute("gen_ai.usage.output_tokens", result.output_tokens)
        if error is not None:
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
        span.end()

    @contextmanager
    def _observed(self, max_tokens: int, temperature: float) -> Iterator[_Call]:
        """One call as a span and a counted request; SDK faults come out as ModelUnavailable or BadReply."""
        span = self._span_start(max_tokens, temperature)
        call = _Call(started=time.perf_counter())
        status = "ok"
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                yield call
        except Exception as exc:
            status = request_status(exc)
            call.error = self._translate(exc)
            if call.error is exc:
                raise
            raise call.error from exc
        finally:
            self._span_end(span, call.result, call.error)
            metrics.MODEL_REQUESTS.labels(_calling_stage(), self.name, status).inc()

    async def acomplete(
        self, *, system: str, user: str, max_tokens: int = 300, temperature: float = 0.0, json_mode: bool = False
    ) -> Completion:
        """One chat turn, without blocking the event loop; faults as :class:`ModelUnavailable`/:class:`BadReply`."""
        async with _slot(self._endpoint, self.concurrency), self._shared_slot():
            # The call (its span, its latency, the SDK's timeout) starts only now, with a slot held.
            with self._observed(max_tokens, temperature) as call:
                request = self._request(system, user, max_tokens, temperature, json_mode)
                body = await self.aclient().post(self._path, body=request, cast_to=str)
                call.result = self._completion(body, call.started)
            return call.result

    @asynccontextmanager
    async def _shared_slot(self) -> AsyncIterator[None]:
        if self.shared_slots is None:
            yield
            return
        async with self.shared_slots.held(self._endpoint):
            yield

    def complete(
        self, *, system: str, user: str, max_tokens: int = 300, temperature: float = 0.0, json_mode: bool = False
    ) -> Completion:
        """The blocking form of :meth:`acomplete`, for command-line tools and worker threads."""
        with self._observed(max_tokens, temperature) as call:
            request = self._request(system, user, max_tokens, temperature, json_mode)
            body = self.client().post(self._path, body=request, cast_to=str)
            call.result = self._completion(body, call.started)
        return call.result


def request_status(exc: Exception) -> str:
    """What a failed model request came back with, as ``kotae_model_requests_total`` labels it.

    ``429`` and ``5xx`` (529 included: Anthropic's "overloaded") are the provider
    refusing or failing, ``timeout`` and ``connection`` the provider not answering,
    ``4xx`` a request it will never accept (a revoked key, a wrong model name),
    ``bad_reply`` a body that is not a usable reply.
    """
    import anthropic
    import openai

    if isinstance(exc, (BadReply, json.JSONDecodeError, openai.APIResponseValidationError)):
        return "bad_reply"
    if isinstance(exc, anthropic.APIResponseValidationError):
        return "bad_reply"
    if isinstance(exc, (openai.APIStatusError, anthropic.APIStatusError)):
        code = exc.status_code
        return "429" if code == 429 else "5xx" if code >= 500 else "4xx"
    if "timeout" in type(exc).__name__.lower():
        return "timeout"
    if isinstance(exc, (openai.APIConnectionError, anthropic.APIConnectionError)):
        return "connection"
    return "error"


def _calling_stage() -> str:
    """The stage whose message is being handled: the bus edge binds it for that message's log lines."""
    return str(structlog.contextvars.get_contextvars().get("stage", ""))
