"""The word lists of the language layer, as data: one file a list, loaded by name.

A list is ``kotae/language/lexicon/NAME.txt``: its first line is ``# `` and what the list is
for; further ``#`` lines may say more. Every other non-blank line is one entry, written as the
text reads after normalisation (NFKC), optionally followed by ``  # why`` for that entry. The
readers that use a list load it here, once::

    >>> "為る" in words("search_stop_ja")
    True

Each entry is exercised by a test (a module of ``tests/language/`` naming the list in ``LEXICONS``): a list nobody reads,
or an entry no test shows at work, fails the suite.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_COMMENT = re.compile(r"\s+#\s.*$")


class LexiconError(ValueError):
    """A list file that breaks the format: names the file and the line."""


@cache
def _read(name: str) -> tuple[str, tuple[str, ...]]:
    path = resources.files(__name__) / f"{name}.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith("# ") or len(lines[0]) < 8:
        raise LexiconError(f"{name}.txt:1: the first line must be '# ' and what the list is for")
    out: list[str] = []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip() or line.startswith("#"):
            continue
        entry = _COMMENT.sub("", line).strip()
        if not entry:
            raise LexiconError(f"{name}.txt:{n}: an entry is empty")
        out.append(entry)
    return lines[0][2:].strip(), tuple(out)


def entries(name: str) -> tuple[str, ...]:
    """The entries of list ``name``, in the file's order."""
    return _read(name)[1]


@cache
def words(name: str) -> frozenset[str]:
    """The entries of list ``name`` as a set, for membership."""
    return frozenset(entries(name))


def purpose(name: str) -> str:
    """What list ``name`` is for (its first line)."""
    return _read(name)[0]


def alternation(name: str) -> str:
    """The entries of list ``name`` as a regular-expression alternation of literals, longest first
    (so 何時頃 is tried before 何時)."""
    return "|".join(re.escape(e) for e in sorted(entries(name), key=len, reverse=True))


def names() -> list[str]:
    """Every list this folder holds."""
    return sorted(p.name[:-4] for p in resources.files(__name__).iterdir() if p.name.endswith(".txt"))
