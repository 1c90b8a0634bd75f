"""Prompts as versioned files next to the stage that uses them.

A prompt lives in ``services/<stage>/prompts/<name>.v<N>.txt``; its file name
without the extension is the prompt version that travels in every message the
prompt produced. A changed prompt is a new file, so past answers keep pointing
at the text that made them.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


class PromptMissing(FileNotFoundError):
    """A configured prompt version has no file."""


@lru_cache(maxsize=32)
def load_prompt(folder: Path, version: str) -> str:
    """The text of prompt ``version`` (e.g. ``"rerank.v1"``) in ``folder``."""
    path = folder / f"{version}.txt"
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise PromptMissing(f"prompt {version!r} not found: {path}") from None
