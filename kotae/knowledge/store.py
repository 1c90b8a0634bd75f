"""The knowledge base on disk, and its chunks.

Each knowledge base (one per channel or campaign) is a folder under
``$KOTAE_DATA_DIR/kb/<name>/`` holding ``records.jsonl`` (sorted by id) and
``manifest.json``. Loading upserts records by id and rewrites both files
atomically, so re-loading the same input changes nothing and a reader never sees
half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

from kotae.knowledge.records import KBRecord, KnowledgeBaseError
from kotae.language.text import split_sentences

MAX_CHUNK_CHARS = 320
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")


@dataclass(frozen=True)
class Chunk:
    """A searchable piece of a record. FAQ entries are one chunk each."""

    chunk_id: str
    record: KBRecord
    text: str

    @property
    def doc_id(self) -> str:
        return self.record.id

    @property
    def kind(self) -> str:
        return self.record.kind

    def valid_on(self, day: date) -> bool:
        return self.record.valid_on(day)


def _chunk_id(record: KBRecord, text: str) -> str:
    # The title is part of what is embedded and searched, so it is part of the identity too.
    digest = hashlib.sha256(f"{record.id}\x00{record.version or ''}\x00{record.title}\x00{text}".encode()).hexdigest()
    return f"{record.id}#{digest[:12]}"


def chunk_record(record: KBRecord, max_chars: int = MAX_CHUNK_CHARS) -> list[Chunk]:
    """Split a record into chunks on heading, paragraph and sentence boundaries.

    Chunk ids derive from the record id, version and chunk text, so the same
    content always yields the same ids.
    """
    if record.kind == "faq":
        text = f"{record.question}\n{record.answer}"
        return [Chunk(_chunk_id(record, text), record, text)]
    chunks: list[str] = []
    current: list[str] = []
    heading = ""

    def flush() -> None:
        if current:
            body = "".join(current) if record.language == "ja" else " ".join(current)
            chunks.append(f"{heading}\n{body}" if heading else body)
            current.clear()

    for block in re.split(r"\n\s*\n", record.text or ""):
        for line in block.splitlines():
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                flush()
                heading = line.lstrip("#").strip()
                continue
            for sentence in split_sentences(line):
                if current and sum(len(s) for s in current) + len(sentence) > max_chars:
                    flush()
                current.append(sentence)
        flush()
    return [Chunk(_chunk_id(record, text), record, text) for text in chunks]


@dataclass(frozen=True)
class LoadReport:
    name: str
    added: int
    updated: int
    unchanged: int
    total: int
    docs: int
    faq: int
    chunks: int
    digest: str

    def as_dict(self) -> dict[str, object]:
        return self.__dict__.copy()


def _atomic_write(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class KnowledgeStore:
    """One named knowledge base under ``root``."""

    def __init__(self, root: Path, name: str = "default") -> None:
        if not _NAME.match(name):
            raise KnowledgeBaseError(f"knowledge base name {name!r}: use letters, digits, '-' or '_' (max 64)")
        self.name = name
        self.dir = Path(root) / name
        self.records_path = self.dir / "records.jsonl"
        self.manifest_path = self.dir / "manifest.json"

    def exists(self) -> bool:
        return self.records_path.exists()

    def records(self) -> list[KBRecord]:
        if not self.records_path.exists():
            return []
        with self.records_path.open(encoding="utf-8") as fh:
            return [KBRecord.model_validate_json(line) for line in fh if line.strip()]

    def digest(self) -> str | None:
        """Content digest of the stored records; changes exactly when they change."""
        try:
            return json.loads(self.manifest_path.read_text())["digest"]
        except (OSError, ValueError, KeyError):
            return None

    def chunks(self) -> list[Chunk]:
        return [chunk for record in self.records() for chunk in chunk_record(record)]

    def load(self, records: list[KBRecord]) -> LoadReport:
        """Upsert ``records`` by id; idempotent."""
        existing = {r.id: r for r in self.records()}
        added = updated = unchanged = 0
        for record in records:
            old = existing.get(record.id)
            if old is None:
                added += 1
            elif old == record:
                unchanged += 1
            else:
                updated += 1
            existing[record.id] = record
        ordered = [existing[k] for k in sorted(existing)]
        body = "".join(r.model_dump_json(exclude_none=False) + "\n" for r in ordered)
        digest = hashlib.sha256(body.encode()).hexdigest()
        n_chunks = sum(len(chunk_record(r)) for r in ordered)
        if digest != self.digest():
            _atomic_write(self.records_path, body)
            manifest = {
                "name": self.name,
                "digest": digest,
                "records": len(ordered),
                "chunks": n_chunks,
                "updated_at": datetime.now(UTC).isoformat(),
            }
            _atomic_write(self.manifest_path, json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")
        return LoadReport(
            name=self.name,
            added=added,
            updated=updated,
            unchanged=unchanged,
            total=len(ordered),
            docs=sum(1 for r in ordered if r.kind == "doc"),
            faq=sum(1 for r in ordered if r.kind == "faq"),
            chunks=n_chunks,
            digest=digest,
        )
