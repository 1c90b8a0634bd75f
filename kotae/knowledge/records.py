"""Knowledge-base records and the loaders for JSONL and Markdown/YAML folders.

A record is a policy document (``kind: doc``, with ``text``) or an FAQ entry
(``kind: faq``, with ``question`` and ``answer``). Bad input stops the load with
the file, the line and the field that is wrong, before anything is written.

A record may name the image of its slide (``slide_image``): a path relative to
the file that holds the record, or an ``http(s)://`` URL. A path is checked when
the record is loaded and kept as an absolute path, so the on-air stage can serve
the image whatever directory it runs in.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import date
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class KnowledgeBaseError(ValueError):
    """Bad knowledge-base input; the message names file, line and field."""


class KBRecord(BaseModel):
    """One knowledge-base record, as written in a JSONL line or a Markdown file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200, pattern=r"^[^\s]+$")
    kind: Literal["doc", "faq"]
    title: str = ""
    text: str | None = None
    question: str | None = None
    answer: str | None = None
    source: str | None = None
    slide: int | str | None = None
    slide_image: str | None = Field(default=None, min_length=1, max_length=2000)
    lang: Literal["ja", "en"] | None = None
    version: str | None = None
    valid_from: date | None = None
    valid_to: date | None = None

    @model_validator(mode="after")
    def _fields_of_kind(self) -> KBRecord:
        if self.kind == "doc" and not (self.text and self.text.strip()):
            raise ValueError("a doc record needs a non-empty 'text'")
        if self.kind == "faq" and not (self.question and self.answer):
            raise ValueError("an faq record needs 'question' and 'answer'")
        if self.valid_from and self.valid_to and self.valid_to < self.valid_from:
            raise ValueError(f"valid_to {self.valid_to} is before valid_from {self.valid_from}")
        return self

    def valid_on(self, day: date) -> bool:
        """True when this record is in force on ``day`` (both ends inclusive)."""
        return (self.valid_from is None or self.valid_from <= day) and (self.valid_to is None or day <= self.valid_to)

    @property
    def language(self) -> Literal["ja", "en"]:
        return self.lang or detect_lang(self.text or f"{self.question} {self.answer}")


def detect_lang(text: str) -> Literal["ja", "en"]:
    """'ja' when the text holds kana (half-width katakana too: ｻﾌﾞﾚ) or kanji, else 'en'."""
    for ch in text:
        name = unicodedata.name(ch, "")
        if name.startswith(("HIRAGANA", "KATAKANA", "HALFWIDTH KATAKANA", "CJK UNIFIED")):
            return "ja"
    return "en"


class _YamlLoader(yaml.SafeLoader):
    """Safe YAML, but dates stay strings so that pydantic checks them and names the field."""


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _yaml(text: str) -> Any:
    return yaml.load(text, Loader=_YamlLoader)  # noqa: S506 - a SafeLoader subclass


def is_url(value: str) -> bool:
    """Whether a ``slide_image`` is a URL (shown as it is) rather than a file path."""
    return value.startswith(("http://", "https://"))


def _with_slide_image(record: KBRecord, base: Path | None, where: str) -> KBRecord:
    """The record with its ``slide_image`` resolved against ``base`` (the folder of its file), checked to exist.

    ``base`` None leaves it as written (``scripts/make_slides.py`` reads records whose images it is about to draw).
    """
    if base is None or record.slide_image is None or is_url(record.slide_image):
        return record
    path = (base / record.slide_image).resolve()
    if not path.is_file():
        raise KnowledgeBaseError(
            f"{where}: field 'slide_image': no such file {record.slide_image!r} (looked for {path})"
        )
    return record.model_copy(update={"slide_image": str(path)})


def _record(data: Any, where: str, field_lines: dict[str, int] | None = None, *, base: Path | None) -> KBRecord:
    if not isinstance(data, dict):
        raise KnowledgeBaseError(f"{where}: expected an object, got {type(data).__name__}")

    def at(field: str) -> str:
        if field_lines and field in field_lines:
            return where.rsplit(":", 1)[0] + f":{field_lines[field]}"
        return where

    try:
        record = KBRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "record"
        raise KnowledgeBaseError(
            f"{at(str(err['loc'][0]) if err['loc'] else '')}: field '{field}': {err['msg']}"
        ) from None
    return _with_slide_image(record, base, at("slide_image"))


Located = list[tuple[str, KBRecord]]


def load_jsonl(path: Path, *, slide_files: bool = True) -> Located:
    """Records of a JSONL file, each with its ``file:line``."""
    records: Located = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise KnowledgeBaseError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
            records.append(
                (f"{path}:{lineno}", _record(data, f"{path}:{lineno}", base=path.parent if slide_files else None))
            )
    return records


def load_markdown(path: Path, *, slide_files: bool = True) -> KBRecord:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise KnowledgeBaseError(f"{path}:1: expected YAML front matter starting with '---'")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise KnowledgeBaseError(f"{path}:1: front matter is not closed with '---'") from None
    try:
        meta = _yaml("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line + 2) if mark else 1
        raise KnowledgeBaseError(f"{path}:{line}: invalid YAML front matter: {exc}") from None
    if not isinstance(meta, dict):
        raise KnowledgeBaseError(f"{path}:2: front matter must be a mapping")
    field_lines = {}
    for i in range(1, end):
        key = lines[i].split(":", 1)[0].strip()
        if key and not lines[i].startswith((" ", "\t", "-")):
            field_lines.setdefault(key, i + 1)
    meta.setdefault("kind", "doc")
    meta.setdefault("id", path.stem)
    meta["text"] = "\n".join(lines[end + 1 :]).strip()
    if not meta.get("title"):
        heading = next((ln.lstrip("# ").strip() for ln in lines[end + 1 :] if ln.startswith("#")), "")
        meta["title"] = heading
    return _record(meta, f"{path}:1", field_lines, base=path.parent if slide_files else None)


def load_faq_yaml(path: Path, *, slide_files: bool = True) -> Located:
    """FAQ entries of a YAML list, each with its ``file:line``."""
    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=_YamlLoader)
        data = _yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line + 1) if mark else 1
        raise KnowledgeBaseError(f"{path}:{line}: invalid YAML: {exc}") from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise KnowledgeBaseError(f"{path}:1: expected a list of FAQ entries")
    items = node.value if node is not None else []
    records: Located = []
    for i, item in enumerate(data):
        if isinstance(item, dict):
            item.setdefault("kind", "faq")
        entry = items[i] if i < len(items) else None
        where = f"{path}:{entry.start_mark.line + 1 if entry is not None else 1}"
        field_lines = {}
        if entry is not None and isinstance(entry, yaml.MappingNode):
            field_lines = {k.value: k.start_mark.line + 1 for k, _ in entry.value if isinstance(k, yaml.ScalarNode)}
        records.append((where, _record(item, where, field_lines, base=path.parent if slide_files else None)))
    return records


def _records_in_file(path: Path, slide_files: bool = True) -> Located:
    if path.suffix == ".jsonl":
        return load_jsonl(path, slide_files=slide_files)
    if path.suffix in (".yaml", ".yml"):
        return load_faq_yaml(path, slide_files=slide_files)
    if path.suffix == ".md":
        return [(f"{path}:1", load_markdown(path, slide_files=slide_files))]
    raise KnowledgeBaseError(f"{path}: expected a .jsonl file or a folder of .md/.yaml files")


def _records_in_folder(path: Path, slide_files: bool = True) -> Located:
    sources: Located = []
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        if file.suffix in (".md", ".yaml", ".yml", ".jsonl"):
            sources += _records_in_file(file, slide_files)
    if not sources:
        raise KnowledgeBaseError(f"{path}: no .md, .yaml or .jsonl records found")
    return sources


def load_records(path: Path, *, slide_files: bool = True) -> list[KBRecord]:
    """Read every record at ``path`` (a JSONL file or a folder); check ids are unique.

    ``slide_files``: check that each ``slide_image`` path names a file, and make it absolute.
    """
    path = Path(path)
    if not path.exists():
        raise KnowledgeBaseError(f"{path}: no such file or folder")
    sources = _records_in_folder(path, slide_files) if path.is_dir() else _records_in_file(path, slide_files)
    if not sources:
        # Loaded, an empty knowledge base would leave every comment unanswered without a word.
        raise KnowledgeBaseError(f"{path}: no records (the file is empty or holds only blank lines)")
    seen: dict[str, str] = {}
    for where, record in sources:
        if record.id in seen:
            raise KnowledgeBaseError(f"{where}: field 'id': duplicate id {record.id!r} (first in {seen[record.id]})")
        seen[record.id] = where
    return [r for _, r in sources]
