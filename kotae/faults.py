"""The two kinds of fault a stage tells apart: worth retrying later, or never.

Kept apart from the bus edge so that anything (a model client, an embedder, a
retriever) can raise them without importing the bus.
"""

from __future__ import annotations


class TransientError(Exception):
    """A fault worth retrying later: a model timeout, a 429, a backend restarting."""


class PoisonError(ValueError):
    """Input that no retry can fix; it is dead-lettered at once."""
