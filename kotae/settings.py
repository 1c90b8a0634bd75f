"""One settings class for every kotae process, read from ``KOTAE_*`` variables.

Settings are validated when a process starts; a bad value stops it with a
message that names the variable.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "KOTAE_"


class SettingsError(ValueError):
    """A setting is invalid; the message names the environment variable."""


class Settings(BaseSettings):
    """kotae's configuration. Every field is the variable ``KOTAE_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    data_dir: Path = Field(default=Path(".kotae"), description="All state of the embedded default.")
    nats_url: str | None = Field(default=None, description="Use this NATS server instead of starting one.")
    stream_id: str = Field(default="default", min_length=1, description="Stream id stamped on ingested comments.")
    kb: str = Field(default="default", min_length=1, description="Knowledge base the stream is bound to.")

    log_format: Literal["auto", "console", "json"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    otlp_endpoint: str | None = Field(default=None, description="OTLP/HTTP endpoint for traces, e.g. http://localhost:4318.")
    service_name: str | None = None

    # Delivery
    stream_replicas: int = Field(default=1, ge=1, le=5)
    max_deliver: int = Field(default=5, ge=1, le=50, description="Deliveries of one message before it is dead-lettered.")
    ack_wait_s: float = Field(default=30.0, gt=0, description="Seconds before an unacked message is redelivered.")
    retry_backoff_s: float = Field(default=1.0, ge=0, description="First redelivery delay; doubles each attempt.")
    inflight: int = Field(default=16, ge=1, le=1024, description="Messages one stage process handles at once.")
    max_payload_bytes: int = Field(default=64 * 1024, ge=1024, description="Larger inputs are dead-lettered.")
    sync_interval: str = Field(default="2m", description="JetStream fsync interval of the embedded server ('always' for every write).")

    # Retrieval
    top_k: int = Field(default=8, ge=1, le=100)
    top_faq: int = Field(default=3, ge=0, le=20)
    gate_answer: float = Field(default=0.45, ge=0, le=1, description="Best-hit score at or above which the comment is answered.")
    gate_clarify: float = Field(default=0.3, ge=0, le=1, description="Scores between this and gate_answer ask back.")

    # Rerank / generate
    top_n: int = Field(default=3, ge=1, le=20)
    max_answer_sentences: int = Field(default=2, ge=1, le=10)

    @model_validator(mode="after")
    def _gates_ordered(self) -> "Settings":
        if self.gate_clarify > self.gate_answer:
            raise ValueError(
                f"KOTAE_GATE_CLARIFY ({self.gate_clarify}) must not exceed KOTAE_GATE_ANSWER ({self.gate_answer})"
            )
        return self

    @property
    def kb_dir(self) -> Path:
        return self.data_dir / "kb"

    @property
    def jetstream_dir(self) -> Path:
        return self.data_dir / "jetstream"


def load_settings(**overrides: object) -> Settings:
    """Read and validate settings; raise :class:`SettingsError` naming the variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = "_".join(str(part) for part in err["loc"]).upper()
            name = f"{ENV_PREFIX}{loc}" if loc else "settings"
            problems.append(f"{name}: {err['msg']}")
        raise SettingsError("invalid setting: " + "; ".join(problems)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings of this process, read once."""
    return load_settings()
