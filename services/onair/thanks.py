"""A Super Chat or a membership event thanked on air: a fixed line naming the viewer, never their message.

On YouTube a Super Chat is read out and thanked; silence reads as ignoring the
one viewer who paid. So a Super Chat never ends without airing something:

* its question was answered already (a near-identical one aired within the
  repeat window) — a short thanks that names the viewer and says the answer
  aired a moment ago (``KOTAE_ONAIR_SUPERCHAT_REPEAT=thank``, the default), or
  the answer airs again (``again``);
* it asks nothing, or nothing could be answered (unanswered, clarify, rejected,
  failed) — a thanks.

A membership event (:class:`~kotae.contracts.v1.Membership`: joined, a milestone,
a gift given or received) is thanked the same way: a milestone's message is a
question like any other; an event without a message, or a message that asks
nothing, ends ``dropped`` at ingest and is thanked (never one ingest's blocklist
dropped). Its lines are the ``member_*`` and ``gift_*`` templates.

The words are the templates of ``thanks.yaml`` (no model). The viewer's name is
said only when it passes the same checks as anything else said aloud: ingest's
blocklist (``KOTAE_INGEST_BLOCKLIST``, ``KOTAE_INGEST_BLOCKLIST_FILE``, read the
same way) and the injection filter of :mod:`kotae.services.onair.question`;
otherwise the unnamed line is said. The message itself is never read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kotae.contracts import AnswerV1, CommentV1
from kotae.contracts.v1 import Lang
from kotae.language.text import normalize
from kotae.services.onair.question import withheld_because

TEMPLATES_FILE = Path(__file__).parent / "thanks.yaml"
#: A display name longer than this is not said (a name that long is rarely a name).
MAX_NAME_CHARS = 30
#: What a comment that never became a verified answer is thanked for (its answer outcome).
THANKED_OUTCOMES = frozenset({"unanswered", "clarify", "rejected", "failed"})
#: Ingest's methods of a dropped membership event that is still thanked: it asked nothing (never the blocklist).
_THANKED_DROPS = frozenset({"membership", "question_rules"})
#: The template lines each kind of thanks says, a ``{name}`` line and its unnamed twin for each case.
_NEEDED = tuple(
    f"{prefix}{case}{unnamed}"
    for prefix in ("", "member_", "gift_")
    for case in ("answered", "thanked")
    for unnamed in ("", "_unnamed")
)


@dataclass(frozen=True)
class Thanks:
    """Why a queue entry airs as a thanks instead of its answer.

    ``credited_to`` is the comment whose answer already aired (None: nothing of it was answered).
    """

    reason: str
    credited_to: str | None = None


def thanked_viewer(comment: CommentV1) -> bool:
    """Whether the platform marks this viewer as one to thank: a Super Chat or a membership event."""
    return comment.superchat is not None or comment.membership is not None


def thanks_due(answer: AnswerV1) -> Thanks | None:
    """The thanks an answer that will not air as an answer airs as instead, or None (it airs nothing).

    A Super Chat or a membership event nothing answered is thanked; so is a membership event
    ingest dropped because it asks nothing (a new member, a milestone without a question), but
    never one whose message the blocklist dropped, nor one merged into another's question.
    """
    comment = answer.comment
    if answer.outcome in THANKED_OUTCOMES and thanked_viewer(comment):
        what = "a Super Chat" if comment.superchat is not None else "a membership event"
        return Thanks(f"{answer.outcome}: {what} is thanked when it is not answered")
    if (
        answer.outcome == "dropped"
        and comment.membership is not None
        and answer.merged_into is None
        and (answer.methods.get("ingest") in _THANKED_DROPS or str(answer.methods.get("ingest")).startswith("model:"))
    ):
        return Thanks(f"a membership event ({comment.membership.kind}) that asks nothing: thanked")
    return None


class ThanksError(ValueError):
    """The templates or the blocklist cannot be used; the message names the file and the line."""


class ThanksWords:
    """The thanks lines of one stream, and the filters a viewer's name passes before it is said.

    Example::

        words = ThanksWords.from_settings(settings)
        words.line(comment, Thanks("its question aired already", credited_to="c12"))
        # ('Aliceさん、スーパーチャットありがとうございます！いただいたご質問には、さきほどお答えしました。', 'ja')
    """

    def __init__(self, templates: dict[str, dict[str, str]], blocked: list[str], version: str = "") -> None:
        self.templates = templates
        self.version = version
        self._terms = tuple(normalize(t).casefold() for t in blocked if t.strip() and not t.startswith("re:"))
        patterns = []
        for term in blocked:
            if term.startswith("re:"):
                try:
                    patterns.append(re.compile(term[3:], re.IGNORECASE))
                except re.error as exc:
                    raise ThanksError(f"blocklist term {term!r}: invalid regular expression: {exc}") from None
        self._patterns = tuple(patterns)

    @classmethod
    def load(cls, blocked: list[str] | None = None, templates_file: Path = TEMPLATES_FILE) -> ThanksWords:
        """The templates of ``templates_file``, with ``blocked`` terms (as ``KOTAE_INGEST_BLOCKLIST`` writes them)."""
        templates, version = _templates(templates_file)
        return cls(templates, list(blocked or ()), version)

    @classmethod
    def from_settings(cls, settings: Any, templates_file: Path = TEMPLATES_FILE) -> ThanksWords:
        blocked = list(settings.ingest_blocklist)
        path = settings.ingest_blocklist_file
        if path is not None:
            try:
                lines = Path(path).read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise ThanksError(f"KOTAE_INGEST_BLOCKLIST_FILE: {path}: {exc.strerror}") from None
            blocked += [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
        return cls.load(blocked, templates_file)

    def name_of(self, comment: CommentV1) -> str | None:
        """The viewer's display name as it may be said, or None (it did not pass the filters)."""
        name = normalize(comment.author_name or comment.author or "").strip()
        if not name or len(name) > MAX_NAME_CHARS or withheld_because(name):
            return None
        folded = name.casefold()
        if any(term in folded for term in self._terms) or any(p.search(name) for p in self._patterns):
            return None
        return name

    def line(self, comment: CommentV1, thanks: Thanks) -> tuple[str, Lang]:
        """What the voice says (display text too: it has no citations), and in which language."""
        lang: Lang = comment.lang if comment.lang in self.templates else "ja"
        words = self.templates[lang]
        case = "answered" if thanks.credited_to else "thanked"
        if comment.superchat is None and comment.membership is not None:
            case = ("gift_" if comment.membership.kind == "gift" else "member_") + case
        name = self.name_of(comment)
        if name is None:
            return words[f"{case}_unnamed"], lang
        return words[case].replace("{name}", name), lang


def _templates(path: Path) -> tuple[dict[str, dict[str, str]], str]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ThanksError(f"{path}: {exc}") from None
    templates: dict[str, dict[str, str]] = {}
    for lang in ("ja", "en"):
        words = (raw or {}).get(lang) or {}
        missing = [key for key in _NEEDED if not isinstance(words.get(key), str) or not words[key].strip()]
        if missing:
            raise ThanksError(f"{path}: {lang}: missing {', '.join(missing)}")
        unnamed = [key for key in _NEEDED if not key.endswith("_unnamed") and "{name}" not in words[key]]
        if unnamed:
            raise ThanksError(f"{path}: {lang}: the named lines say {{name}} ({', '.join(unnamed)} does not)")
        templates[lang] = {key: words[key] for key in _NEEDED}
    return templates, str((raw or {}).get("version") or "")
