"""Ingest's answer cache: a question verified once in a show is answered again without the pipeline.

Every verified answer to a comment this ingest published is kept in the
JetStream key-value bucket ``kotae_answer_cache``, under its scope: the stream,
the show (the on-air stage's current show, read at each question by
:class:`~kotae.services.ingest.current_show.CurrentShow`; None without an on-air
stage), the ingest session (``live`` for live
sources, so a restart keeps them; each ``kotae replay`` run its own, so a replay
is answered afresh) and the knowledge base. A later admitted comment of the same
scope that triage's merge rule (:class:`~kotae.services.ingest.triage.MergeKey`)
counts as the same question gets that answer as a new ``answer.v1.verified``:
no retrieval, no model call. It carries the original's answer, citations,
evidence and verdict, ``methods["cache"] == "cached"``, no model calls of its
own, and :class:`~kotae.contracts.v1.CachedFrom` (the original's comment, message
and trace) as the link.

An answer stands only while its evidence does: each time the knowledge base's
version changes (``kotae kb load``), every entry whose cited records changed,
went out of force or disappeared is deleted; at a hit, the evidence must also be
in force on the new comment's day. A knowledge base not loaded in this process's
``KOTAE_DATA_DIR`` is one the cache cannot check, so it answers nothing from it.
Degraded answers (a stage fell back) and replies to an ask-back are not kept.

A new show is a new scope: from the first question after it began, nothing
verified in the previous show is answered from the cache, and an answer to a
comment received before the show began is not kept in it. While the current show
cannot be read (the bus slow for a moment), nothing is answered from the cache.

Example::

    cache = await AnswerCache.open(js, settings, stream_id="s1", kb="default", session="live", threshold=0.5)
    cache.expect(comment)                    # published into the pipeline: keep its verified answer
    await cache.answer_for(later, trace_id)  # AnswerV1 (verified, cached) or None
    await cache.close()                      # after the answers seen so far are kept
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nats.errors import Error as NatsError
from nats.js.api import ConsumerConfig, DeliverPolicy, KeyValueConfig

from kotae.contracts import AnswerV1, CommentV1, subjects
from kotae.contracts.v1 import CachedFrom
from kotae.knowledge.standing import KnowledgeStanding
from kotae.logs import get_logger
from kotae.services.ingest import ANSWER_CACHE_BUCKET
from kotae.services.ingest.current_show import CurrentShow, ShowUnknown
from kotae.services.ingest.triage import METHOD as TRIAGE_METHOD, MergeKey
from kotae.settings import Settings

log = get_logger("kotae.ingest")

BUCKET = ANSWER_CACHE_BUCKET
METHOD = "cached"
#: How long the bucket keeps an answer: longer than a show, so a stream's evening is one cache,
#: and short enough that yesterday's show does not answer today's.
TTL_S = 12 * 3600.0
#: Comments published into the pipeline whose verified answer is awaited, at most (oldest forgotten first).
_EXPECTED = 10_000
#: Answers kept per scope, at most (the oldest forgotten first): a show asks a few hundred questions.
_MAX_ENTRIES = 2_000
_INDEX_TRIES = 5


def scope_of(stream_id: str, show_id: str | None, session: str, kb: str) -> str:
    """The key prefix of one scope; hashed, as KV keys allow only a few characters."""
    return hashlib.sha256(f"{stream_id}\x00{show_id or ''}\x00{session}\x00{kb}".encode()).hexdigest()[:24]


def _trace_id_from(headers: dict[str, str] | None) -> str | None:
    parts = (headers or {}).get("traceparent", "").split("-")
    return parts[1] if len(parts) == 4 else None


@dataclass(frozen=True)
class _Entry:
    key: str
    answer: AnswerV1
    merge: MergeKey


def repeated(original: AnswerV1, comment: CommentV1, trace_id: str | None) -> AnswerV1:
    """``original`` as the verified answer to ``comment``, with the link back to it."""
    link = CachedFrom(
        comment_id=original.comment_id,
        message_id=original.message_id,
        trace_id=original.trace_id,
        verified_at=original.created_at,
        model_calls=original.model_calls,
    )
    return AnswerV1(
        comment_id=comment.comment_id,
        stream_id=comment.stream_id,
        comment=comment,
        methods={**original.methods, "ingest": comment.triage or TRIAGE_METHOD, "cache": METHOD},
        outcome="verified",
        answer=original.answer,
        speech=original.speech,
        citations=original.citations,
        slide=original.slide,
        verdict=original.verdict,
        reason=original.reason,
        reasons=original.reasons,
        decided_by=original.decided_by,
        docs=original.docs,
        trace_id=trace_id,
        cached_from=link,
    )


class AnswerCache:
    """Verified answers of one scope, in memory and in the bucket (see the module docstring)."""

    def __init__(
        self,
        kv: Any,
        standing: KnowledgeStanding,
        *,
        stream_id: str,
        kb: str,
        session: str,
        threshold: float,
        show_id: str | None = None,
        show: CurrentShow | None = None,
    ) -> None:
        self.kv = kv
        self.standing = standing
        self.stream_id = stream_id
        self.kb = kb
        self.session = session
        self.threshold = threshold
        self.show_id = show_id
        self.show = show  # when given, it decides show_id from now on
        self._show_started: datetime | None = None
        self.scope = scope_of(stream_id, show_id, session, kb)
        self._entries: dict[str, _Entry] = {}
        self._expected: dict[str, None] = {}  # message ids of comments we published
        self._checked_version: str | None = None
        self._sub: Any = None
        self._seen_seq = 0
        self._absent_said = False

    @classmethod
    async def open(
        cls,
        js: Any,
        settings: Settings,
        *,
        stream_id: str,
        kb: str,
        session: str,
        threshold: float,
        show_id: str | None = None,
        show: CurrentShow | None = None,
    ) -> AnswerCache:
        """The scope's cache: its bucket opened (created when missing), its entries read, the answers followed."""
        from nats.js.errors import BucketNotFoundError

        try:
            kv = await js.key_value(BUCKET)
        except BucketNotFoundError:
            kv = await js.create_key_value(
                KeyValueConfig(bucket=BUCKET, ttl=TTL_S, history=1, replicas=settings.stream_replicas)
            )
        cache = cls(
            kv,
            KnowledgeStanding(settings.kb_dir),
            stream_id=stream_id,
            kb=kb,
            session=session,
            threshold=threshold,
            show_id=show_id,
            show=show,
        )
        await cache._read_entries()
        await cache._follow_show()
        await cache._follow(js)
        return cache

    async def _follow_show(self) -> bool:
        """Move to the current show's scope when it changed; False while the show cannot be read."""
        if self.show is None:
            return True
        try:
            show = await self.show.current()
        except ShowUnknown:
            return False
        show_id = show.id if show is not None else None
        self._show_started = show.started_at if show is not None else None
        if show_id != self.show_id:
            log.info("answer_cache.show", show_id=show_id, previous=self.show_id, stream_id=self.stream_id)
            self.show_id = show_id
            self.scope = scope_of(self.stream_id, show_id, self.session, self.kb)
            self._entries = {}
            await self._read_entries()
        return True

    # --- reading and keeping ----------------------------------------------------------------

    async def _read_entries(self) -> None:
        from nats.js.errors import KeyDeletedError, KeyNotFoundError

        for key in await self._index():
            try:
                entry = await self.kv.get(key)
                answer = AnswerV1.model_validate_json(entry.value or b"")
            except (KeyNotFoundError, KeyDeletedError):
                continue  # forgotten by the bucket's TTL
            except ValueError:
                await self._forget(key, "unreadable")  # an older format, or damaged: it cannot be repeated
                continue
            self._entries[key] = _Entry(key, answer, MergeKey.of(answer.comment.normalized))

    # The scope's keys are listed under one key of their own: listing a bucket's keys takes a consumer on
    # it, which a stage's NATS user may not create; reading and writing keys is all the cache needs.

    @property
    def _index_key(self) -> str:
        return f"{self.scope}.index"

    async def _index(self) -> list[str]:
        from nats.js.errors import KeyDeletedError, KeyNotFoundError

        try:
            entry = await self.kv.get(self._index_key)
        except (KeyNotFoundError, KeyDeletedError):
            return []
        try:
            keys = json.loads(entry.value or b"[]")
        except ValueError:
            return []
        return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []

    async def _write_index(self, add: str | None = None, remove: str | None = None) -> None:
        """Add or remove one key, as a compare-and-set on the index (another process may write it too)."""
        from nats.js.errors import KeyDeletedError, KeyNotFoundError, KeyWrongLastSequenceError

        for _ in range(_INDEX_TRIES):
            try:
                entry = await self.kv.get(self._index_key)
                revision: int | None = entry.revision
                keys = json.loads(entry.value or b"[]")
            except (KeyNotFoundError, KeyDeletedError):
                revision, keys = None, []
            keys = [k for k in keys if k != add and k != remove] + ([add] if add else [])
            value = json.dumps(keys[-_MAX_ENTRIES:]).encode()
            try:
                if revision is None:
                    await self.kv.create(self._index_key, value)
                else:
                    await self.kv.update(self._index_key, value, last=revision)
                return
            except KeyWrongLastSequenceError:
                continue  # written meanwhile: read it again
        log.warning("answer_cache.index_contended", key=add or remove)

    async def _follow(self, js: Any) -> None:
        last = (await js.stream_info(subjects.STREAM_ANSWERS)).state.last_seq
        self._seen_seq = last
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=last + 1)
        self._sub = await js.subscribe(
            subjects.answer("verified"), cb=self._on_verified, ordered_consumer=True, config=config
        )

    def expect(self, comment: CommentV1) -> None:
        """``comment`` went into the pipeline: its verified answer, when it comes, is kept."""
        self._expected[comment.message_id] = None
        if len(self._expected) > _EXPECTED:
            del self._expected[next(iter(self._expected))]

    async def _on_verified(self, msg: Any) -> None:
        try:
            await self._keep(msg)
        except Exception as exc:  # the bucket unreachable for a moment: that answer is not kept, nothing else fails
            log.warning("answer_cache.keep_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            metadata = getattr(msg, "metadata", None)
            if metadata is not None:
                self._seen_seq = max(self._seen_seq, metadata.sequence.stream)

    async def _keep(self, msg: Any) -> None:
        try:
            answer = AnswerV1.model_validate_json(msg.data)
        except ValueError:
            return
        if answer.comment.message_id not in self._expected:
            return
        try:
            await self._keep_answer(answer, msg.headers)
        finally:
            # Only now: closing waits while an answer is expected, so a put in flight is never cut off.
            self._expected.pop(answer.comment.message_id, None)

    async def _keep_answer(self, answer: AnswerV1, headers: dict[str, str] | None) -> None:
        if not self._worth_keeping(answer) or not await self._follow_show():
            return
        if self._show_started is not None and answer.comment.created_at < self._show_started:
            log.info("answer_cache.not_kept", comment_id=answer.comment_id, reason="asked before this show began")
            return
        if answer.trace_id is None:
            answer = answer.model_copy(update={"trace_id": _trace_id_from(headers)})
        touched = self.standing.touched(self.kb, answer.citations, answer.docs, answer.comment.published_at.date())
        if touched is not None:
            log.info("answer_cache.not_kept", comment_id=answer.comment_id, reason=touched)
            return
        key = f"{self.scope}.{hashlib.sha256(answer.comment_id.encode()).hexdigest()[:24]}"
        self._entries[key] = _Entry(key, answer, MergeKey.of(answer.comment.normalized))
        if len(self._entries) > _MAX_ENTRIES:
            del self._entries[next(iter(self._entries))]  # as the index forgets it
        await self.kv.put(key, answer.model_dump_json().encode())
        await self._write_index(add=key)
        log.debug("answer_cache.kept", comment_id=answer.comment_id, entries=len(self._entries))

    def _worth_keeping(self, answer: AnswerV1) -> bool:
        return (
            answer.outcome == "verified"
            and answer.stream_id == self.stream_id
            and answer.comment.kb == self.kb
            and answer.cached_from is None
            and not answer.degraded
            and answer.comment.triage != "ask_back_reply"
            and bool(answer.citations)
        )

    async def _forget(self, key: str, reason: str) -> None:
        from nats.js.errors import KeyNotFoundError

        self._entries.pop(key, None)
        try:
            await self.kv.delete(key)
        except KeyNotFoundError:
            pass
        await self._write_index(remove=key)
        log.info("answer_cache.dropped", key=key, reason=reason)

    async def _sweep_if_the_kb_changed(self) -> None:
        """Delete every entry a change of the knowledge base touched (once per version)."""
        version = self.standing.version(self.kb)
        if version is None or version == self._checked_version:
            return
        for key, entry in list(self._entries.items()):
            a = entry.answer
            touched = self.standing.touched(self.kb, a.citations, a.docs, a.comment.published_at.date())
            if touched is not None:
                await self._forget(key, touched)
        self._checked_version = version

    # --- answering ------------------------------------------------------------------------

    async def answer_for(self, comment: CommentV1, trace_id: str | None) -> AnswerV1 | None:
        """The cached verified answer to ``comment``'s question, as its own answer; None: the pipeline answers."""
        if comment.kb != self.kb or comment.triage == "ask_back_reply" or not await self._follow_show():
            return None
        if not self._entries:
            return None
        if self.standing.version(self.kb) is None:
            if not self._absent_said:
                self._absent_said = True
                log.info("answer_cache.kb_absent", kb=self.kb, effect="no answer is repeated from the cache")
            return None
        await self._sweep_if_the_kb_changed()
        asked = MergeKey.of(comment.normalized)
        ranked = sorted(self._entries.values(), key=lambda e: asked.likeness(e.merge), reverse=True)
        for entry in ranked:
            if not asked.same_question(entry.merge, self.threshold):
                break
            a = entry.answer
            touched = self.standing.touched(self.kb, a.citations, a.docs, comment.published_at.date())
            if touched is None:
                log.info("answer_cache.hit", comment_id=comment.comment_id, cached_from=a.comment_id)
                return repeated(a, comment, trace_id)
            log.info("answer_cache.stale_for", comment_id=comment.comment_id, cached_from=a.comment_id, reason=touched)
        return None

    async def close(self, timeout: float = 5.0) -> None:
        """Stop following the answers once those already stored were read, so none verified just now is lost."""
        if self._sub is None:
            return
        try:
            deadline = asyncio.get_running_loop().time() + timeout
            while self._expected and asyncio.get_running_loop().time() < deadline:
                info = await self._sub.consumer_info()
                if not info.num_pending and self._seen_seq >= info.delivered.stream_seq:
                    break
                await asyncio.sleep(0.02)
        except (TimeoutError, NatsError) as exc:
            # The bus is electing a leader or gone: what was not read yet is only not cached. Closing
            # never fails the run whose outcomes have all arrived.
            log.warning("answer_cache.close_incomplete", error=f"{type(exc).__name__}: {exc}")
        finally:
            sub, self._sub = self._sub, None
            try:
                await sub.unsubscribe()
            except (TimeoutError, NatsError) as exc:
                log.warning("answer_cache.unsubscribe_failed", error=f"{type(exc).__name__}: {exc}")


async def answer_cache_for(js: Any, settings: Settings, *, stream_id: str, kb: str, session: str) -> AnswerCache | None:
    """The answer cache of an ingest session, or None when ``KOTAE_ANSWER_CACHE`` turns it off."""
    if not settings.answer_cache:
        return None
    return await AnswerCache.open(
        js,
        settings,
        stream_id=stream_id,
        kb=kb,
        session=session,
        threshold=settings.merge_similarity,
        show=CurrentShow(js, settings.onair_kv_bucket, stream_id=stream_id),
    )
