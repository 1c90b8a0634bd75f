"""Whether an answer's evidence still stands in the knowledge base as it is now.

``kotae kb load`` bumps a knowledge base's version (the content digest in its
manifest) whenever a record changes; a record's new version, its new text or
title gives its chunks new ids, and a superseded record (``valid_to`` set, or
replaced) is no longer valid on the question's day. :class:`KnowledgeStanding`
reads the current records again only when that version changes (a stat per
look), and says of a set of citations and evidence whether any of it was
touched since, and how. Readers that keep answers (ingest's answer cache) drop
what a change touched and keep the rest.

Example::

    standing = KnowledgeStanding(settings.kb_dir)
    standing.version("default")                                   # 'c0ffee…' (None: not loaded here)
    standing.touched("default", citations, docs, date(2027, 4, 1))  # 'childcare-2027 is now version 2' or None
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from kotae.contracts import Citation, Evidence
from kotae.knowledge.records import KBRecord
from kotae.knowledge.store import KnowledgeStore


@dataclass(frozen=True)
class _Snapshot:
    stamp: tuple[int, int, int]
    version: str | None
    records: dict[str, KBRecord]
    chunk_ids: frozenset[str]


class KnowledgeStanding:
    """The current version, records and chunk ids of each knowledge base under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._snapshots: dict[str, _Snapshot] = {}

    def _snapshot(self, kb: str) -> _Snapshot | None:
        store = KnowledgeStore(self.root, kb)
        try:
            st = store.manifest_path.stat()
        except OSError:
            self._snapshots.pop(kb, None)
            return None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        known = self._snapshots.get(kb)
        if known is None or known.stamp != stamp:
            chunks = store.chunks()
            known = _Snapshot(
                stamp,
                store.digest(),
                {chunk.doc_id: chunk.record for chunk in chunks},
                frozenset(chunk.chunk_id for chunk in chunks),
            )
            self._snapshots[kb] = known
        return known

    def version(self, kb: str) -> str | None:
        """The knowledge base's current version (its content digest); None when it is not loaded here."""
        snapshot = self._snapshot(kb)
        return snapshot.version if snapshot else None

    def touched(self, kb: str, citations: Iterable[Citation], docs: Iterable[Evidence], day: date) -> str | None:
        """Why this evidence no longer stands on ``day`` (a record changed, removed or out of force), or None.

        A knowledge base that is not loaded here stands for nothing: the reason says so.
        """
        snapshot = self._snapshot(kb)
        if snapshot is None:
            return f"knowledge base {kb!r} is not loaded here"
        docs = list(docs)
        cited = [(c.doc_id, c.chunk_id) for c in citations]
        for doc_id, chunk_id in [*cited, *((d.doc_id, d.chunk_id) for d in docs)]:
            record = snapshot.records.get(doc_id)
            if record is None:
                return f"{doc_id} is no longer in the knowledge base"
            if not record.valid_on(day):
                return f"{doc_id} is not valid on {day.isoformat()}"
            if chunk_id is not None and chunk_id not in snapshot.chunk_ids:
                return f"{doc_id} changed (now version {record.version})"
        for doc in docs:
            if doc.version is not None and snapshot.records[doc.doc_id].version != doc.version:
                return f"{doc.doc_id} is now version {snapshot.records[doc.doc_id].version} (was {doc.version})"
        return None
