"""Ingest's small durable state: live sources' page tokens and quota counters.

Kept in a JetStream key-value bucket (``KOTAE_INGEST_KV_BUCKET``), so a poller
restarted on another machine resumes where the last one stopped. Tests without
a bus use :class:`MemoryState`, which has the same two methods.
"""

from __future__ import annotations

from typing import Protocol

from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, KeyDeletedError, KeyNotFoundError
from nats.js.kv import KeyValue


class IngestState(Protocol):
    async def get(self, key: str) -> str | None: ...

    async def put(self, key: str, value: str) -> None: ...


class MemoryState:
    """State in a dict: for tests and one-off runs."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self.values.get(key)

    async def put(self, key: str, value: str) -> None:
        self.values[key] = value


class KvState:
    """State in a JetStream KV bucket, created on first use."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, bucket: str) -> KvState:
        try:
            kv = await js.key_value(bucket)
        except BucketNotFoundError:
            kv = await js.create_key_value(bucket=bucket, history=1, description="kotae ingest: page tokens, quota")
        return cls(kv)

    async def get(self, key: str) -> str | None:
        try:
            entry = await self.kv.get(key)
        except (KeyNotFoundError, KeyDeletedError):
            return None
        return entry.value.decode() if entry.value else None

    async def put(self, key: str, value: str) -> None:
        await self.kv.put(key, value.encode())
