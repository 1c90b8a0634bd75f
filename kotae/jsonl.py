"""Reading JSONL input files line by line, with errors that name the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def json_objects(path: Path, what: str, error: type[Exception]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(path:line, object)`` for each non-blank line; ``error`` names the first bad one.

    Example::

        for where, row in json_objects(Path("questions.jsonl"), "a labelled question", ValueError):
            ...
    """
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: no such file")
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{where}: invalid JSON: {exc.msg}") from None
            if not isinstance(data, dict):
                raise error(f"{where}: expected a JSON object ({what})")
            yield where, data
