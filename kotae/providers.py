"""Chat models behind one small interface, through the official SDKs.

A model is named by a setting: ``openai:<model>``, ``anthropic:<model>`` or
``compatible:<base_url>|<model>`` (vLLM, Ollama, llama.cpp server — anything
that speaks OpenAI's chat completions). Calls have a timeout and no retries
inside the SDK: a transient fault (429, 5xx, timeout, connection) becomes a
:class:`ModelUnavailable`, which the bus edge turns into a delayed, bounded
redelivery of the input message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kotae.bus.edge import TransientError


class ModelUnavailable(TransientError):
    """The model could not answer now (rate limit, server error, timeout)."""


class ModelSpecError(ValueError):
    """A model setting that names no known provider."""


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass
class ChatModel:
    """One configured chat model.

    Example::

        model = ChatModel.from_spec("compatible:http://localhost:8000/v1|qwen2.5", setting="KOTAE_REWRITE_MODEL")
        reply = model.complete(system="…", user="…", max_tokens=100)
    """

    provider: str  # openai | anthropic | compatible
    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 15.0
    _client: Any = field(default=None, repr=False)

    @classmethod
    def from_spec(
        cls, spec: str, *, setting: str, api_key: str | None = None, timeout_s: float = 15.0, base_url: str | None = None
    ) -> "ChatModel":
        provider, sep, rest = spec.partition(":")
        if not sep or not rest:
            raise ModelSpecError(f"{setting}={spec!r}: expected openai:<model>, anthropic:<model> or compatible:<base_url>|<model>")
        if provider in ("openai", "anthropic"):
            return cls(provider, rest, base_url=base_url, api_key=api_key, timeout_s=timeout_s)
        if provider == "compatible" and "|" in rest:
            base, model = rest.rsplit("|", 1)
            return cls(provider, model, base_url=base, api_key=api_key, timeout_s=timeout_s)
        raise ModelSpecError(f"{setting}={spec!r}: expected openai:<model>, anthropic:<model> or compatible:<base_url>|<model>")

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"

    def client(self) -> Any:
        if self._client is None:
            if self.provider == "anthropic":
                from anthropic import Anthropic

                self._client = Anthropic(api_key=self.api_key or "unset", base_url=self.base_url, timeout=self.timeout_s, max_retries=0)
            else:
                from openai import OpenAI

                self._client = OpenAI(api_key=self.api_key or "unset", base_url=self.base_url, timeout=self.timeout_s, max_retries=0)
        return self._client

    def complete(self, *, system: str, user: str, max_tokens: int = 300, temperature: float = 0.0) -> Completion:
        """One chat turn; transient faults raise :class:`ModelUnavailable`."""
        try:
            if self.provider == "anthropic":
                import anthropic

                try:
                    # This SDK's messages API takes no temperature; the model's default applies.
                    msg = self.client().messages.create(
                        model=self.model, system=system, max_tokens=max_tokens,
                        messages=[{"role": "user", "content": user}],
                    )
                except (anthropic.APIConnectionError, anthropic.RateLimitError, anthropic.InternalServerError) as exc:
                    raise ModelUnavailable(f"{self.name}: {type(exc).__name__}: {exc}") from exc
                except anthropic.APIStatusError as exc:
                    if exc.status_code >= 500 or exc.status_code == 529:
                        raise ModelUnavailable(f"{self.name}: HTTP {exc.status_code}") from exc
                    raise
                text = "".join(getattr(block, "text", "") for block in msg.content)
                usage = getattr(msg, "usage", None)
                return Completion(text, msg.model, getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None))
            import openai

            try:
                resp = self.client().chat.completions.create(
                    model=self.model, max_tokens=max_tokens, temperature=temperature,
                    messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                )
            except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
                raise ModelUnavailable(f"{self.name}: {type(exc).__name__}: {exc}") from exc
            text = resp.choices[0].message.content or "" if resp.choices else ""
            usage = getattr(resp, "usage", None)
            return Completion(text, resp.model, getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None))
        except ModelUnavailable:
            raise
        except Exception as exc:
            # Timeouts surface as connection errors in both SDKs; anything else is a bad reply.
            if "timeout" in type(exc).__name__.lower():
                raise ModelUnavailable(f"{self.name}: timeout after {self.timeout_s}s") from exc
            raise
