"""One settings class for every kotae process, read from ``KOTAE_*`` variables.

Settings are validated when a process starts; a bad value stops it with a
message that names the variable.
"""

from __future__ import annotations

import importlib.util
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError as _SourceError

ENV_PREFIX = "KOTAE_"

#: Yen per unit, roughly: enough to rank Super Chats in different currencies (KOTAE_ONAIR_CURRENCY_RATES).
SUPERCHAT_RATES: dict[str, float] = {
    "JPY": 1.0, "USD": 150.0, "EUR": 160.0, "GBP": 190.0, "KRW": 0.11, "TWD": 4.7, "HKD": 19.0,
    "AUD": 100.0, "CAD": 110.0, "PHP": 2.6, "INR": 1.8, "BRL": 28.0, "MXN": 8.5,
}  # fmt: skip


class SettingsError(ValueError):
    """A setting is invalid; the message names the environment variable."""


class Settings(BaseSettings):
    """kotae's configuration. Every field is the variable ``KOTAE_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    data_dir: Path = Field(default=Path(".kotae"), description="All state of the embedded default.")
    nats_url: str | None = Field(default=None, description="Use this NATS server instead of starting one.")
    nats_user: str | None = Field(
        default=None, description="NATS user of this process (each service has its own, with its own permissions)."
    )
    nats_password: SecretStr | None = Field(default=None, description="Password of KOTAE_NATS_USER.")
    nats_creds: Path | None = Field(
        default=None, description="NATS credentials file (user JWT and NKey seed), instead of KOTAE_NATS_USER/PASSWORD."
    )
    nats_tls_ca: Path | None = Field(
        default=None, description="CA bundle that signed the NATS server's certificate (TLS)."
    )
    nats_tls_cert: Path | None = Field(
        default=None, description="Client certificate for mutual TLS (with KOTAE_NATS_TLS_KEY)."
    )
    nats_tls_key: Path | None = Field(default=None, description="Private key of KOTAE_NATS_TLS_CERT.")
    nats_inbox_prefix: str | None = Field(
        default=None,
        description="Prefix of this process's reply subjects; unset: _INBOX_<KOTAE_NATS_USER> with a user "
        "(what kotae's generated NATS users may read), the one inbox the JWT of KOTAE_NATS_CREDS may read, else _INBOX.",
    )
    stream_id: str = Field(default="default", min_length=1, description="Stream id stamped on ingested comments.")
    kb: str = Field(default="default", min_length=1, description="Knowledge base the stream is bound to.")

    log_format: Literal["auto", "console", "json"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    otlp_endpoint: str | None = Field(
        default=None, description="OTLP/HTTP endpoint for traces, e.g. http://localhost:4318."
    )
    metrics_port: int | None = Field(
        default=None, ge=0, le=65535, description="Serve Prometheus /metrics on this port; unset: off."
    )
    model_prices: Annotated[dict[str, tuple[float, float]], NoDecode] = Field(
        default_factory=dict,
        description="USD per million input/output tokens, as 'openai:gpt-4.1-mini=0.4/1.6,anthropic:claude-x=3/15'.",
    )
    model_budget_usd_per_hour: float | None = Field(
        default=None,
        ge=0,
        description="What every stage's model calls together may cost in an hour (USD, priced by KOTAE_MODEL_PRICES); "
        "exported as kotae_model_budget_usd_per_hour for the cost alert; unset: no budget, no alert.",
    )
    service_name: str | None = None

    # Delivery
    stream_replicas: int = Field(default=1, ge=1, le=5)
    max_deliver: int = Field(
        default=5, ge=1, le=50, description="Deliveries of one message before it is dead-lettered."
    )
    ack_wait_s: float = Field(default=30.0, gt=0, description="Seconds before an unacked message is redelivered.")
    retry_backoff_s: float = Field(default=1.0, ge=0, description="First redelivery delay; doubles each attempt.")
    inflight: int = Field(default=16, ge=1, le=1024, description="Messages one stage process handles at once.")
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        default="auto",
        description="Event loop of a stage process: uvloop where installed (auto), or Python's own asyncio loop.",
    )
    max_payload_bytes: int = Field(default=64 * 1024, ge=1024, description="Larger inputs are dead-lettered.")
    sync_interval: str = Field(
        default="2m", description="JetStream fsync interval of the embedded server ('always' for every write)."
    )

    # Knowledge bases and the index
    kb_bindings: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="Stream id → knowledge base, as 'streamA=kbA,streamB=kbB'; other streams use KOTAE_KB.",
    )
    embedding_model: str = Field(
        default="use-multilingual-v3",
        description="use-multilingual-v3, e5-small-q4, openai:<model> or compatible:<base_url>|<model>.",
    )
    openai_api_key: SecretStr | None = Field(default=None, description="Key for openai:/compatible: models.")
    qdrant_url: str | None = Field(default=None, description="Qdrant server (http://…); unset: embedded qdrant-edge.")
    qdrant_api_key: SecretStr | None = None
    qdrant_collection: str = "kotae_chunks"
    fusion_words: float = Field(default=0.75, ge=0, description="Weight of BM25 over words in hybrid fusion.")
    fusion_chars: float = Field(default=1.0, ge=0, description="Weight of BM25 over character n-grams.")
    fusion_dense: float = Field(default=0.1, ge=0, description="Weight of the embedding similarity.")
    rescore_pool: int = Field(
        default=30,
        ge=0,
        le=100,
        description="Fused candidates that the second stage reorders (kotae.knowledge.rescore); 0 keeps the fused order.",
    )
    clarify_ttl_s: float = Field(default=180.0, gt=0, description="How long an ask-back waits for the viewer's reply.")
    rewrite_model: str | None = Field(
        default=None,
        description="Chat model that also rewrites each comment into a standalone search query "
        "(openai:<model>, anthropic:<model>, compatible:<base_url>|<model>); unset: normalisation only.",
    )
    anthropic_api_key: SecretStr | None = None
    openai_base_url: str | None = Field(
        default=None, description="Gateway/proxy in front of OpenAI for openai: models."
    )
    anthropic_base_url: str | None = Field(
        default=None, description="Gateway/proxy in front of Anthropic for anthropic: models."
    )
    model_timeout_s: float = Field(default=15.0, gt=0, description="Timeout of one model call.")
    model_concurrency: int = Field(
        default=8, ge=1, le=256, description="Model calls in flight per provider endpoint, per process."
    )
    model_endpoint_concurrency: int = Field(
        default=0,
        ge=0,
        le=256,
        description="Model calls in flight per provider endpoint across every stage process on the bus "
        "(a JetStream key-value semaphore): the slots of a local server shared by the stages; 0: off.",
    )
    model_http: Literal["aiohttp", "httpx"] = Field(
        default="aiohttp",
        description="HTTP client of a stage's model calls: aiohttp, or the SDK's default httpx (more CPU a call with dozens in flight).",
    )
    model_reask: int = Field(default=1, ge=0, le=5, description="Extra calls when a reply is not the JSON asked for.")

    # Retrieval
    top_k: int = Field(default=8, ge=1, le=100)
    top_faq: int = Field(default=3, ge=0, le=20)
    gate_answer: float = Field(
        default=0.35, ge=0, le=1, description="Best-hit score at or above which the comment is answered."
    )
    gate_clarify: float = Field(
        default=0.20,
        ge=0,
        le=1,
        description="Between this and gate_answer: ask back between topics that match, or answer one that stands out.",
    )
    gate_strong: float = Field(
        default=0.60,
        ge=0,
        le=1,
        description="A comment naming a term that no record has is answered only at or above this score.",
    )
    gate_ask_back: bool = Field(
        default=True,
        description="Ask the viewer back when topics match the comment about as well; false: send them all on "
        "and let the reranker choose (for a reranker model: KOTAE_RERANKER_MODEL).",
    )
    gate_weights: str | None = Field(
        default=None,
        description="The fitted gate: a weights file of bench/fit_gate.py, 'fitted' for the committed one, "
        "'open' to answer every comment (measuring the answer side); unset: the threshold rules above.",
    )

    # Rerank / generate / verify
    top_n: int = Field(default=3, ge=1, le=20)
    max_answer_sentences: int = Field(default=2, ge=1, le=10)
    reranker_model: str | None = Field(
        default=None, description="Chat model that picks the relevant candidates; unset: the offline method."
    )
    reranker_offline: Literal["embedding_rescore", "keep_top_n"] = Field(
        default="keep_top_n",
        description="Offline reranking: retrieval order, or rescoring with the embedding model (bench/rerank.py compares them).",
    )
    reranker_embedding_model: str | None = Field(
        default=None,
        description="Embedding model of embedding_rescore (e.g. e5-small-q4); unset: KOTAE_EMBEDDING_MODEL.",
    )
    generator_model: str | None = Field(default=None, description="Chat model that drafts answers; unset: extractive.")
    verifier_model: str | None = Field(
        default=None, description="Chat model that checks drafts; unset: the offline method."
    )
    verifier_mode: Literal["auto", "offline", "model", "cascade"] = Field(
        default="auto",
        description="offline: the offline method decides; model: the model decides every draft; cascade: the "
        "offline method decides what it is sure of and asks the model about the rest; auto: model when "
        "KOTAE_VERIFIER_MODEL is set, else offline.",
    )
    verifier_sure: float = Field(
        default=0.55,
        ge=0.5,
        le=1.0,
        description="Offline mode: the offline method's support score at or above which a draft is supported, at or "
        "below one minus which it is hallucinated; in between it is unsure (bench/verifier.py shows the trade-off).",
    )
    verifier_cascade_sure: float = Field(
        default=0.9,
        ge=0.5,
        le=1.0,
        description="Cascade mode: the same, for deciding without a model call; the unsure band in between goes to "
        "the model.",
    )
    verifier_unsure: Literal["reject", "accept"] = Field(
        default="reject", description="What an unsure offline verdict becomes without a model: fail closed by default."
    )
    verifier_prompt: Literal["verify.v1", "verify.v2"] = Field(
        default="verify.v2",
        description="Prompt of the model verifier: v2 also asks whether the draft answers the question; v1 as before.",
    )
    verifier_relevance: Literal["veto", "model"] = Field(
        default="veto",
        description="veto: a draft the offline relevance check finds not to address the question ends unanswered "
        "whatever the model says; model: with a verify.v2 model, that check's doubt goes to the model, which decides "
        "(for a model that judges relevance well: bench/oracle.py; a weak one verifies answers to other questions).",
    )
    generator_prompt: Literal["generate.v1", "generate.v2"] = Field(
        default="generate.v2",
        description="Prompt of the model generator: v2 numbers its steps and shows one cited answer, which a "
        "small local model follows (v1 left most of its replies uncited); v1 as before.",
    )
    persona_file: Path | None = Field(
        default=None, description="Persona YAML (name, first person, tone, spoken length)."
    )

    # Evaluator
    evaluator_model: str | None = Field(
        default=None,
        description="Chat model that judges answers (faithfulness, relevancy, context precision); unset: the offline method.",
    )
    evaluator_metrics_port: int = Field(
        default=0, ge=0, le=65535, description="Port of the evaluator's Prometheus /metrics (rolling rates); 0: off."
    )
    evaluator_window: int = Field(
        default=200, ge=1, le=100_000, description="Evaluations per group behind each rolling rate."
    )
    evaluator_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="Niceness the evaluator process adds to itself: it scores off the hot path, so on a shared machine the answering stages get the CPU first.",
    )

    # On air: speech (the voice, synthesis ahead of its turn, and what happens when the voice fails)
    onair_voice: str = Field(
        default="openjtalk",
        description="The stage's one voice: openjtalk (offline: Open JTalk for Japanese, eSpeak NG for English), "
        "voicevox:<base_url>|<speaker id> (VOICEVOX or AivisSpeech engine) or openai:<model>|<voice>.",
    )
    onair_english_voice: str = Field(
        default="en-us",
        pattern=r"^[A-Za-z0-9_+-]+$",
        description="eSpeak NG voice of the openjtalk voice's English answers (en-us, en-gb, en-gb-x-rp …).",
    )
    onair_voice_retries: int = Field(
        default=2, ge=0, le=10, description="Further attempts after a synthesis fails or times out."
    )
    onair_voice_timeout_s: float = Field(
        default=30.0, gt=0, le=600, description="Seconds one synthesis attempt may take before it counts as failed."
    )
    onair_voice_concurrency: int = Field(
        default=1, ge=1, le=16, description="Syntheses at once (an offline voice uses a core each)."
    )
    onair_presynth: int = Field(default=3, ge=0, le=50, description="Queued answers synthesised ahead of their turn.")
    onair_loudness_lufs: float = Field(
        default=-16.0,
        ge=-40,
        le=-5,
        description="Integrated loudness (ITU-R BS.1770-4, LUFS) every clip is brought to, whatever the voice.",
    )
    onair_peak_dbtp: float = Field(
        default=-1.0, ge=-12, le=0, description="True-peak ceiling (dBTP) no clip goes above: nothing ever clips."
    )

    @field_validator("onair_voice")
    @classmethod
    def _voice_spec(cls, value: str) -> str:
        kind, _, rest = value.partition(":")
        head, bar, tail = rest.rpartition("|")
        if value == "openjtalk":
            return value
        if kind == "voicevox" and bar and re.fullmatch(r"https?://[^\s|]+", head) and tail.isdigit():
            return value
        if kind == "openai" and bar and head.strip() and tail.strip():
            return value
        raise ValueError(
            f"{value!r}: expected openjtalk, voicevox:<base_url>|<speaker id> (e.g. voicevox:http://127.0.0.1:50021|3) "
            "or openai:<model>|<voice> (e.g. openai:gpt-4o-mini-tts|alloy)"
        )

    # On air: the scheduler's policy, withdrawals, quiet chat, the speaker's lease, the stage's HTTP server
    onair_max_age_s: float = Field(
        default=120.0,
        gt=0,
        description="An answer whose comment reached ingest longer ago than this when its turn comes is expired, not aired.",
    )
    onair_viewer_cooldown_s: float = Field(
        default=60.0, ge=0, description="A viewer answered this recently waits behind others (Super Chats do not)."
    )
    onair_max_queue: int = Field(
        default=20, ge=1, le=10_000, description="Answers waiting beyond this many are shed, the lowest ranked first."
    )
    onair_repeat_s: float = Field(
        default=600.0,
        ge=0,
        description="A question near-identical to one aired this recently is not aired again (already_aired).",
    )
    onair_repeat_similarity: float = Field(
        default=0.6,
        gt=0,
        le=1,
        description="Content-word overlap (Jaccard) at or above which two questions are the same question.",
    )
    onair_gap_s: float = Field(
        default=0.5,
        ge=0,
        le=10,
        description="Silence between two answers; pre-synthesis keeps the next one ready to start after it.",
    )
    onair_idle_s: float = Field(
        default=30.0,
        ge=0,
        description="When nothing has been waiting this long, an FAQ answer of the stream's knowledge base airs; 0: never.",
    )
    onair_read_question: bool = Field(
        default=False,
        description="Read the viewer's question before the answer (only a question that passed the injection filter).",
    )
    onair_show: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The show the on-air stage airs: continued when it is the stream's current show, else started "
        "now (kotae up/replay/demo --onair name a new one, --show ID continues one); unset: continue the current one. "
        "What was verified before a show began never airs in it.",
    )
    onair_hold_max_age_s: float = Field(
        default=0.0,
        ge=0,
        description="While hold is on, an answer waiting for approval expires after this many seconds; 0: never.",
    )
    onair_superchat_repeat: Literal["thank", "again"] = Field(
        default="thank",
        description="A Super Chat whose question already aired: thank (a short thanks naming the viewer, "
        "pointing to the answer) or again (air the answer again).",
    )
    onair_lease_s: float = Field(
        default=5.0,
        ge=2,
        le=120,
        description="A standby on-air process takes over within this many seconds after the speaking one dies.",
    )
    onair_kv_bucket: str = Field(
        default="kotae_onair",
        min_length=1,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="JetStream KV bucket of the on-air stage: the speaker's lease, its progress, the status it shows.",
    )
    onair_http_host: str = Field(default="127.0.0.1", description="Address the on-air stage's HTTP server binds.")
    onair_http_port: int = Field(
        default=8770,
        ge=0,
        le=65535,
        description="Port of the on-air stage's HTTP server (audio, status, events); 0: any free one.",
    )
    onair_console_token: SecretStr | None = Field(
        default=None,
        min_length=16,
        description="Token the on-air console's actions must send (Authorization: Bearer); unset: a random one is "
        "made at start and kept in KOTAE_DATA_DIR/onair/console.token (0600). Required when the HTTP host is not loopback.",
    )
    onair_overlay_css: Path | None = Field(
        default=None,
        description="A CSS file served as /overlay/custom.css after the overlay's own styles: the streamer's overrides.",
    )
    onair_speech_dir: Path | None = Field(
        default=None, description="Also write the audio of every aired answer here, one WAV file each."
    )
    onair_audio_kept: int = Field(
        default=50, ge=1, le=10_000, description="Aired answers whose audio the HTTP server keeps serving."
    )
    onair_currency_rates: Annotated[dict[str, float], NoDecode] = Field(
        default_factory=lambda: dict(SUPERCHAT_RATES),
        description="Yen per unit of each currency, to rank Super Chats by amount ('USD=150,EUR=160'); others rank last.",
    )

    @field_validator("onair_currency_rates", mode="before")
    @classmethod
    def _parse_rates(cls, value: object) -> object:
        if isinstance(value, str):
            rates = dict(SUPERCHAT_RATES)
            for item in filter(None, (p.strip() for p in value.split(","))):
                code, sep, rate = item.partition("=")
                try:
                    if not sep or not re.fullmatch(r"[A-Z]{3}", code.strip()):
                        raise ValueError
                    rates[code.strip()] = float(rate)
                except ValueError:
                    raise ValueError(f"expected 'CUR=yen' pairs such as 'USD=150,EUR=160', got {item!r}") from None
            return rates
        return value

    # Ingest
    youtube_api_key: SecretStr | None = Field(
        default=None, description="YouTube Data API v3 key (read-only live chat)."
    )
    youtube_oauth_token: SecretStr | None = Field(default=None, description="OAuth 2.0 access token, instead of a key.")
    youtube_base_url: str = Field(
        default="https://www.googleapis.com/youtube/v3",
        description="YouTube Data API base URL (a local server in tests).",
    )
    youtube_quota_per_day: int = Field(default=10_000, ge=1, description="Daily quota units this poller may spend.")
    youtube_list_cost: int = Field(default=5, ge=0, description="Quota units of one liveChatMessages.list call.")
    youtube_video_cost: int = Field(default=1, ge=0, description="Quota units of one videos.list call.")
    youtube_min_poll_s: float = Field(
        default=1.0, ge=0, description="Never poll faster than this, whatever the API says."
    )
    youtube_spread_hours: float | None = Field(
        default=None,
        gt=0,
        description="Spread the quota over this many hours from start; unset: the rest of the quota day.",
    )
    youtube_backoff_s: float = Field(
        default=30.0, gt=0, description="First wait after quotaExceeded/rateLimitExceeded/5xx."
    )
    youtube_max_backoff_s: float = Field(default=900.0, gt=0, description="Longest wait between retries.")
    youtube_transport: Literal["stream", "poll"] = Field(
        default="stream",
        description="stream: liveChatMessages.streamList over gRPC (polling when refused); poll: liveChatMessages.list.",
    )
    youtube_stream_target: str = Field(
        default="youtube.googleapis.com:443",
        min_length=1,
        description="gRPC endpoint of streamList (TLS; plain text only to a loopback address, a local server in tests).",
    )
    onecomme_url: str = Field(default="ws://127.0.0.1:11180/sub", description="OneComme's local WebSocket feed.")
    ingest_kv_bucket: str = Field(
        default="kotae_ingest", min_length=1, description="JetStream KV bucket of ingest's state."
    )
    author_salt: SecretStr | None = Field(
        default=None, description="Salt of hashed author channel ids; unset: a random salt kept in KOTAE_DATA_DIR."
    )
    ingest_blocklist: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Blocked words or link patterns, comma-separated; matched on normalised text."
    )
    ingest_blocklist_file: Path | None = Field(
        default=None, description="File of blocked terms, one a line ('#' comments)."
    )
    triage_model: str | None = Field(
        default=None, description="Chat model that classifies comments in batches; unset: the offline rules."
    )
    triage_batch_size: int = Field(default=16, ge=1, le=200, description="Comments per triage model call.")
    merge_window_s: float = Field(
        default=180.0, ge=0, description="Near-duplicate questions within this many seconds merge."
    )
    merge_similarity: float = Field(
        default=0.5, gt=0, le=1, description="Similarity at or above which two questions merge."
    )
    admit_per_minute: int = Field(default=120, ge=0, description="Comments admitted per minute of chat; 0: no limit.")
    answer_cache: bool = Field(
        default=True,
        description="A question already verified in this show and knowledge base is answered from ingest's cache.",
    )
    stale_after_s: float = Field(
        default=120.0, gt=0, description="A question older than this (chat time) loses priority."
    )

    @field_validator("kb_bindings", mode="before")
    @classmethod
    def _parse_bindings(cls, value: object) -> object:
        if isinstance(value, str):
            pairs = {}
            for item in filter(None, (p.strip() for p in value.split(","))):
                stream, sep, kb = item.partition("=")
                if not sep or not stream.strip() or not kb.strip():
                    raise ValueError(f"expected 'stream=kb' pairs separated by commas, got {item!r}")
                pairs[stream.strip()] = kb.strip()
            return pairs
        return value

    @field_validator("model_prices", mode="before")
    @classmethod
    def _parse_prices(cls, value: object) -> object:
        if isinstance(value, str):
            prices = {}
            for item in filter(None, (p.strip() for p in value.split(","))):
                model, sep, pair = item.rpartition("=")
                inp, slash, out = pair.partition("/")
                try:
                    if not sep or not slash or not model:
                        raise ValueError
                    prices[model.strip()] = (float(inp), float(out))
                except ValueError:
                    raise ValueError(
                        f"expected 'provider:model=input/output' (USD per 1M tokens), got {item!r}"
                    ) from None
            return prices
        return value

    @field_validator("ingest_blocklist", mode="before")
    @classmethod
    def _parse_blocklist(cls, value: object) -> object:
        if isinstance(value, str):
            return [term.strip() for term in value.split(",") if term.strip()]
        return value

    @property
    def nats_servers(self) -> list[str]:
        """KOTAE_NATS_URL as a list: one URL, or several separated by commas (a cluster's seed nodes)."""
        return servers_of(self.nats_url or "")

    def kb_for(self, stream_id: str) -> str:
        """The knowledge base a stream is bound to."""
        return self.kb_bindings.get(stream_id, self.kb)

    @field_validator("nats_creds", "nats_tls_ca", "nats_tls_cert", "nats_tls_key")
    @classmethod
    def _readable_file(cls, value: Path | None) -> Path | None:
        if value is not None and not (value.is_file() and os.access(value, os.R_OK)):
            raise ValueError(f"no readable file at {value}")
        return value

    @model_validator(mode="after")
    def _nats_credentials_consistent(self) -> Settings:
        if (self.nats_tls_cert is None) != (self.nats_tls_key is None):
            raise ValueError("KOTAE_NATS_TLS_CERT and KOTAE_NATS_TLS_KEY go together (mutual TLS needs both)")
        if self.nats_creds is not None and self.nats_user:
            raise ValueError("KOTAE_NATS_CREDS and KOTAE_NATS_USER are alternatives: set one")
        if self.nats_creds is not None and importlib.util.find_spec("nkeys") is None:
            raise ValueError(
                "KOTAE_NATS_CREDS needs the nkeys package to sign the server's challenge (pip install 'kotae[creds]')"
            )
        return self

    @model_validator(mode="after")
    def _verifier_mode_has_its_model(self) -> Settings:
        if self.verifier_mode in ("model", "cascade") and not self.verifier_model:
            raise ValueError(f"KOTAE_VERIFIER_MODE={self.verifier_mode} needs KOTAE_VERIFIER_MODEL")
        return self

    @model_validator(mode="after")
    def _gates_ordered(self) -> Settings:
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


def servers_of(url: str) -> list[str]:
    """``nats://a:4222,nats://b:4222`` → ``['nats://a:4222', 'nats://b:4222']``."""
    return [part.strip() for part in url.split(",") if part.strip()]


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
    except _SourceError as exc:  # a value that could not even be read, e.g. malformed JSON
        field = str(exc).split('"')[1] if '"' in str(exc) else "settings"
        raise SettingsError(f"invalid setting: {ENV_PREFIX}{field.upper()}: {exc}") from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings of this process, read once."""
    return load_settings()
