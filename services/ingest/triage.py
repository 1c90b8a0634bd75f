"""Triage: which comments are worth the expensive stages.

Every comment is normalised (NFKC, widths, chat noise) and deduplicated by its
platform id; then, in this order:

1. **blocklist** — configured abuse words and spam-link patterns end the comment
   as ``dropped`` (``blocked: …``), Super Chats included;
2. **question detector** — everything that may be a question goes on; only
   certain chatter ends as ``dropped`` (``not_a_question: …``). The offline
   method ``question_rules`` (:mod:`kotae.services.ingest.chatter`) drops
   laughter, applause, emoji, greetings, reactions and remarks on the stream,
   and keeps bare keywords, は-endings, hearsay, requests and complaints for the
   retriever's gate; the ``model`` method asks a chat model about a whole batch
   of comments in one call and falls back to the rules (the output says so) when
   the model fails. Super Chats skip this step;
3. **merging** — a question nearly identical to one admitted within the merge
   window ends as ``dropped`` with ``merged_into`` naming the earlier comment;
4. **rate limit** — at most ``admit_per_minute`` comments per minute of chat
   time are admitted; the excess ends as ``dropped`` (``rate_limited``);
5. **priority** — Super Chats (and a viewer's reply to an ask-back) 2, fresh
   questions 1, questions older than ``stale_after_s`` in chat time 0.

Nothing here touches the bus: :class:`Triage` returns the comment to publish
or a :class:`Dropped` outcome, and the bus edge publishes it.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from kotae.contracts import CommentV1
from kotae.knowledge.records import detect_lang
from kotae.language.answer_slot import asks_for_slot
from kotae.language.question_focus import question_focus
from kotae.language.sentence_analysis import analyse
from kotae.language.terms import key_terms
from kotae.language.text import normalize, search_tokens
from kotae.services.ingest.chatter import is_question
from kotae.services.ingest.sources import RawComment

if TYPE_CHECKING:
    from kotae.providers import ChatModel
    from kotae.settings import Settings

METHOD = "question_rules"
MODEL_METHOD = "model"
PROMPT_VERSION = "triage.v2"
PROMPTS = Path(__file__).parent / "prompts"

# --- outcomes -----------------------------------------------------------------


@dataclass(frozen=True)
class Dropped:
    """A comment triage did not admit, with the reason its outcome will carry."""

    comment: CommentV1
    reason: str
    method: str = METHOD
    merged_into: str | None = None
    degraded_reason: str | None = None


Decision = CommentV1 | Dropped


# --- authors ------------------------------------------------------------------


def hash_author(author: str, salt: str = "") -> str:
    """A platform user id as it may enter the bus: salted sha256, never the id itself.

    Display names are kept as they are; strings that look like YouTube channel
    ids (``UC`` + 22 characters) are hashed, so an id never leaks through a name field.
    """
    if author.startswith("UC") and len(author) == 24:
        return hash_user_id(author, salt)
    return author


def hash_user_id(user_id: str, salt: str = "") -> str:
    """``ch_`` + the first 16 hex digits of sha256(salt + id): stable per salt, not reversible."""
    return "ch_" + hashlib.sha256((salt + user_id).encode()).hexdigest()[:16]


def author_salt(settings: Settings) -> str:
    """The salt from KOTAE_AUTHOR_SALT, else a random one kept in the data folder (created once)."""
    if settings.author_salt is not None:
        return settings.author_salt.get_secret_value()
    path = settings.data_dir / "author_salt"
    if path.is_file():
        return path.read_text(encoding="utf-8").strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    salt = secrets.token_hex(16)
    path.write_text(salt + "\n", encoding="utf-8")
    path.chmod(0o600)
    return salt


# --- blocklist ----------------------------------------------------------------


class BlocklistError(ValueError):
    """A blocklist term or file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class Blocklist:
    """Blocked words and link patterns, matched on NFKC, case-folded text.

    A plain term matches anywhere in the text (``死ね``, ``bit.ly/``); a term
    written ``re:<pattern>`` is a regular expression (``re:https?://\\S+``).
    """

    terms: tuple[str, ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def parse(cls, terms: Sequence[str], where: str = "KOTAE_INGEST_BLOCKLIST") -> Blocklist:
        plain: list[str] = []
        patterns: list[re.Pattern[str]] = []
        for i, term in enumerate(terms, 1):
            term = term.strip()
            if not term:
                continue
            if term.startswith("re:"):
                try:
                    patterns.append(re.compile(term[3:], re.IGNORECASE))
                except re.error as exc:
                    raise BlocklistError(f"{where}: term {i} {term!r}: invalid regular expression: {exc}") from None
            else:
                plain.append(normalize(term).casefold())
        return cls(tuple(plain), tuple(patterns))

    @classmethod
    def from_file(cls, path: Path) -> Blocklist:
        if not Path(path).is_file():
            raise BlocklistError(f"KOTAE_INGEST_BLOCKLIST_FILE: {path}: no such file")
        terms: list[str] = []
        for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            line = line.strip()
            if line and not line.startswith("#"):
                cls.parse([line], f"{path}:{lineno}")  # report the bad line by its number
                terms.append(line)
        return cls.parse(terms, str(path))

    def __add__(self, other: Blocklist) -> Blocklist:
        return Blocklist(self.terms + other.terms, self.patterns + other.patterns)

    def match(self, normalized: str) -> str | None:
        """The first term found in the text, or None."""
        folded = normalized.casefold()
        for term in self.terms:
            if term in folded:
                return term
        for pattern in self.patterns:
            if pattern.search(normalized):
                return "re:" + pattern.pattern
        return None


# --- merging near-duplicate questions ------------------------------------------


def similarity(a: str, b: str) -> float:
    """How alike two normalised questions are, 0..1: Jaccard over their content words
    (Sudachi's normalised forms, so 作る/つくる and 保育料/保育料って meet; question
    words and particles carry no weight, so 保育料いくら? and バス代いくら? stay apart).
    Questions that name different numbers are different questions (2004年の人数 and
    2007年の人数), one shared word is not a shared question (サブレ and
    サブレのカロリーは), and a question with as many words of its own as shared ones (two at
    least) asks more than the other (工場見学 and 工場見学っておみやげもらえる?): all 0."""
    return _similarity(_Words.of(a), _Words.of(b))


@dataclass(frozen=True)
class _Words:
    """What a question is compared by: its content words, and the nouns among them."""

    tokens: frozenset[str]
    nouns: frozenset[str]

    @classmethod
    def of(cls, normalized: str) -> _Words:
        # A Latin word is a noun here only when it names something (capitalised): start and begin are not.
        nouns = frozenset(t.form for t in key_terms(normalized) if not t.latin or t.specific)
        return cls(frozenset(search_tokens(normalized)), nouns)


def _similarity(a: _Words, b: _Words) -> float:
    ta, tb = a.tokens, b.tokens
    if not ta or not tb or {t for t in ta if t.isdigit()} != {t for t in tb if t.isdigit()}:
        return 0.0
    shared = len(ta & tb)
    if shared < 2 and ta != tb:
        return 0.0
    if any(len(own) >= max(_ASKS_MORE, shared) for own in (ta - tb, tb - ta)):
        return 0.0
    a_own, b_own = a.nouns - b.nouns - tb, b.nouns - a.nouns - ta
    # Nouns, not tokens, say how much of a topic is shared: 日本共産党 splits into 共産, 共産党
    # and 日本, which would make 日本共産党の略称 and 日本共産党の機関紙 share three words.
    topic = len(a.nouns & b.nouns)
    if a_own and b_own and (topic < _SAME_TOPIC or (_names(a_own) and _names(b_own))):
        # Each asks about a thing of its own: ドミニカ国の首都 / ドミニカ国の政体, エチオピアの公用語 /
        # アムハラ語を公用語とする国. (ラオスで流通 / 国内で流通 say one thing twice: 国内 names nothing.)
        return 0.0
    return shared / len(ta | tb)


#: Content words of its own (and no fewer than it shares) that make a question another one.
_ASKS_MORE = 2
#: Nouns two questions must share to be one question when each also has nouns of its own.
_SAME_TOPIC = 2
_NAME = re.compile(r"^([ァ-ヺー]{2,}|[A-Za-z][A-Za-z0-9]+)$")


def _names(words: frozenset[str]) -> bool:
    """Whether ``words`` hold a name (a katakana word, or a capitalised Latin one): what a question is about."""
    return any(_NAME.match(w) for w in words)


@dataclass(frozen=True)
class MergeKey:
    """What the merge rule reads of a question, computed once: ingest's answer cache matches by it too,
    so a cached answer goes only to a question that triage would have merged into the one it answered.

    Example::

        MergeKey.of("日本共産党の略称は？").same_question(MergeKey.of("日本共産党の機関紙は？"), 0.5)   # False
    """

    words: _Words
    asks: _Asks

    @classmethod
    def of(cls, normalized: str) -> MergeKey:
        return cls(_Words.of(normalized), _Asks.of(normalized))

    def likeness(self, other: MergeKey) -> float:
        """0 for another kind of answer asked for, else :func:`similarity`."""
        return _likeness(self.words, self.asks, other.words, other.asks)

    def same_question(self, other: MergeKey, threshold: float) -> bool:
        return self.likeness(other) >= threshold


def _likeness(words: _Words, asks: _Asks | None, other_words: _Words, other_asks: _Asks) -> float:
    if asks is not None and asks.differs(other_asks):
        return 0.0
    return _similarity(words, other_words)


@dataclass
class _Recent:
    at: datetime
    comment_id: str
    words: _Words
    asks: _Asks


@dataclass(frozen=True)
class _Asks:
    """What kind of answer a question asks for: the kinds its wh-word names (None without one), and
    whether it asks for something at all (〜国は, いつ？) rather than stating or offering it."""

    kinds: frozenset[str] | None
    open: bool

    @classmethod
    def of(cls, normalized: str) -> _Asks:
        focus = question_focus(normalized)
        kinds = frozenset(focus.kinds) if focus.explicit else None
        return cls(kinds, kinds is not None or asks_for_slot(analyse(normalized)))

    def differs(self, other: _Asks) -> bool:
        """Another kind of answer (when vs how long), or one asks for a thing the other only states
        (…適法とされる国は / …適法とされる): two questions, whatever words they share."""
        if self.open != other.open:
            return True
        return self.kinds is not None and other.kinds is not None and self.kinds != other.kinds


# --- the model method -----------------------------------------------------------


@dataclass
class ModelVerdicts:
    """Question flags for a batch, and how they were decided."""

    flags: list[bool]
    method: str
    degraded_reason: str | None = None


async def classify_with_model(model: ChatModel, texts: Sequence[str]) -> list[bool]:
    """Ask the model which of ``texts`` are questions, in one call; BadReply when the reply is unusable."""
    from kotae.model_reply import json_object, number_list
    from kotae.prompts import load_prompt
    from kotae.providers import BadReply

    system = load_prompt(PROMPTS, PROMPT_VERSION)
    user = "\n".join(f"{i}. {text}" for i, text in enumerate(texts, 1))
    reply = await model.acomplete(system=system, user=user, max_tokens=40 + 6 * len(texts), json_mode=True)
    # Read as every stage reads a model's JSON (kotae.model_reply): fenced or with words around
    # it, a bare list, numbers as strings; ids out of range are ignored.
    data = json_object(reply.text, list_key="question_ids", finish_reason=reply.finish_reason)
    if "question_ids" not in data:
        raise BadReply(f"{model.name}: expected {{'question_ids': [numbers]}}, got {reply.text[:120]!r}")
    chosen = set(number_list(data["question_ids"], len(texts), key="question_ids"))
    return [i in chosen for i in range(1, len(texts) + 1)]


# --- triage -----------------------------------------------------------------------


class RecentIds:
    """The last ``capacity`` platform ids seen: resends arrive within seconds or a
    restart's re-read page, so an hours-long stream need not keep every id."""

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self._ids: dict[str, None] = {}

    def __contains__(self, comment_id: object) -> bool:
        return comment_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, comment_id: str) -> None:
        if comment_id in self._ids:
            return
        self._ids[comment_id] = None
        if len(self._ids) > self.capacity:
            del self._ids[next(iter(self._ids))]  # dicts keep insertion order: the oldest goes


@dataclass
class Triage:
    """Stateful triage for one stream: ids seen, recent questions, the admission rate.

    Example::

        triage = Triage(stream_id="s1", kb="campaign", source="youtube", admit_per_minute=60)
        triage.admit(RawComment(id="c1", text="保育料っていくら？"))        # → CommentV1
        await triage.admit_batch([raw1, raw2])                           # → [CommentV1 | Dropped | None, …]
    """

    stream_id: str
    kb: str
    source: str
    salt: str = ""
    blocklist: Blocklist = field(default_factory=Blocklist)
    model: ChatModel | None = None
    batch_size: int = 16
    merge_window_s: float = 180.0
    merge_similarity: float = 0.5
    admit_per_minute: int = 0
    stale_after_s: float = 120.0
    seen: RecentIds = field(default_factory=RecentIds)

    def __post_init__(self) -> None:
        self._recent: deque[_Recent] = deque()
        self._admitted_at: deque[datetime] = deque()
        self._latest: datetime | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, source: str, stream_id: str | None = None) -> Triage:
        """Triage configured by the ``KOTAE_INGEST_*``/``KOTAE_TRIAGE_*`` settings."""
        blocklist = Blocklist.parse(settings.ingest_blocklist)
        if settings.ingest_blocklist_file:
            blocklist = blocklist + Blocklist.from_file(settings.ingest_blocklist_file)
        model = None
        if settings.triage_model:
            from kotae.providers import ChatModel

            model = ChatModel.from_settings(settings, settings.triage_model, setting="KOTAE_TRIAGE_MODEL")
        stream = stream_id or settings.stream_id
        return cls(
            stream_id=stream,
            kb=settings.kb_for(stream),
            source=source,
            salt=author_salt(settings),
            blocklist=blocklist,
            model=model,
            batch_size=settings.triage_batch_size,
            merge_window_s=settings.merge_window_s,
            merge_similarity=settings.merge_similarity,
            admit_per_minute=settings.admit_per_minute,
            stale_after_s=settings.stale_after_s,
        )

    # --- building the comment ---------------------------------------------------

    def author_of(self, raw: RawComment) -> str:
        """What the bus knows of the author: the hashed platform id, else the display name."""
        if raw.author_id:
            return hash_user_id(raw.author_id, self.salt)
        return hash_author(raw.author, self.salt)

    def to_comment(self, raw: RawComment) -> CommentV1:
        norm = normalize(raw.text) or raw.text
        # A membership event without the viewer's words carries the platform's line, whose language is the
        # API client's, not the viewer's: it is thanked in the stream's language (the contract's default).
        own_words = raw.membership is None or raw.membership.with_message
        return CommentV1(
            comment_id=raw.id,
            stream_id=self.stream_id,
            author=self.author_of(raw),
            text=raw.text,
            normalized=norm,
            lang=detect_lang(norm) if own_words else CommentV1.model_fields["lang"].default,
            published_at=raw.published_at or datetime.now(UTC),
            source=self.source,
            superchat=raw.superchat,
            priority=2 if raw.superchat else 1,
            kb=self.kb,
            membership=raw.membership,
        )

    # --- the steps ----------------------------------------------------------------

    def admit(self, raw: RawComment, *, awaiting_reply: bool = False) -> Decision | None:
        """The comment to publish, a Dropped outcome, or None for a resend of a seen id.

        Uses the offline question detector; :meth:`admit_batch` uses the model when
        one is configured. ``awaiting_reply``: the stream asked this viewer which
        topic they meant, so their next line is admitted even when it is not a question.
        """
        if raw.id in self.seen:
            return None
        self.seen.add(raw.id)
        comment = self.to_comment(raw)
        blocked = self._blocked(comment) or _thanks_only(comment)
        if blocked:
            return blocked
        verdict = None if awaiting_reply or comment.superchat else is_question(comment.normalized)
        return self._decide(comment, verdict, METHOD, None, awaiting_reply)

    async def admit_batch(self, raws: Sequence[RawComment], *, awaiting: Collection[str] = ()) -> list[Decision | None]:
        """Triage a batch in input order; the model (if any) classifies it in calls of ``batch_size``.

        ``awaiting``: ids of comments whose authors owe an ask-back a reply.
        """
        decisions: list[Decision | None] = [None] * len(raws)
        pending: list[tuple[int, CommentV1]] = []
        for i, raw in enumerate(raws):
            if raw.id in self.seen:
                continue
            self.seen.add(raw.id)
            comment = self.to_comment(raw)
            blocked = self._blocked(comment) or _thanks_only(comment)
            if blocked:
                decisions[i] = blocked
            else:
                pending.append((i, comment))
        to_classify = [c for i, c in pending if c.superchat is None and raws[i].id not in awaiting]
        verdicts = await self._classify([c.normalized for c in to_classify])
        flag_of = dict(zip((c.comment_id for c in to_classify), verdicts.flags, strict=True))
        for i, comment in pending:
            replying = raws[i].id in awaiting
            decisions[i] = self._decide(
                comment, flag_of.get(comment.comment_id), verdicts.method, verdicts.degraded_reason, replying
            )
        return decisions

    async def _classify(self, texts: list[str]) -> ModelVerdicts:
        if not texts:
            return ModelVerdicts([], METHOD)
        if self.model is None:
            return ModelVerdicts([is_question(t) for t in texts], METHOD)
        flags: list[bool] = []
        try:
            for start in range(0, len(texts), self.batch_size):
                flags += await classify_with_model(self.model, texts[start : start + self.batch_size])
        except Exception as exc:  # unavailable, unparseable, misconfigured: the rules still decide
            reason = f"triage model failed ({type(exc).__name__}: {str(exc)[:160]}); offline rules used"
            return ModelVerdicts([is_question(t) for t in texts], METHOD, reason)
        return ModelVerdicts(flags, f"{MODEL_METHOD}:{PROMPT_VERSION}")

    def _blocked(self, comment: CommentV1) -> Dropped | None:
        term = self.blocklist.match(comment.normalized)
        if term is None:
            return None
        return Dropped(comment, f"blocked: matches the blocklist term {term!r}", method="blocklist")

    def _decide(
        self, comment: CommentV1, question: bool | None, method: str, degraded: str | None, awaiting_reply: bool
    ) -> Decision:
        """Steps 2–5 for one comment; ``question`` None means the detector was skipped."""
        at = comment.published_at
        if self._latest is None or at > self._latest:
            self._latest = at
        if awaiting_reply:
            self._count(at)
            return comment.model_copy(update={"priority": 2, "triage": "ask_back_reply"})
        if question is False:
            return Dropped(comment, "not_a_question: chatter (greeting, reaction or laughter)", method, None, degraded)
        paid = comment.superchat is not None
        words = _Words.of(comment.normalized) if self.merge_window_s else None
        asks = _Asks.of(comment.normalized) if self.merge_window_s else None
        # A paying viewer, or one marking their membership, is answered or thanked on their own: never
        # merged into another's question, never rate-limited away.
        if not paid and comment.membership is None:
            earlier = self._near_duplicate(at, words, asks) if words is not None else None
            if earlier is not None:
                return Dropped(
                    comment,
                    f"merged_into: {earlier}: a near-identical question was asked before",
                    method,
                    earlier,
                    degraded,
                )
            if self.admit_per_minute and self._rate(at) >= self.admit_per_minute:
                return Dropped(
                    comment,
                    f"rate_limited: more than {self.admit_per_minute} comments a minute",
                    method,
                    None,
                    degraded,
                )
        self._count(at)
        if words is not None and asks is not None:
            self._recent.append(_Recent(at, comment.comment_id, words, asks))
        stale = (self._latest - at).total_seconds() > self.stale_after_s
        priority = 2 if paid else (0 if stale else 1)
        return comment.model_copy(update={"priority": priority, "triage": "superchat" if paid else method})

    def _near_duplicate(self, at: datetime, words: _Words, asks: _Asks | None) -> str | None:
        if not self.merge_window_s:
            return None
        horizon = at - timedelta(seconds=self.merge_window_s)
        while self._recent and self._recent[0].at < horizon - timedelta(seconds=self.merge_window_s):
            self._recent.popleft()  # keep a margin: comments may arrive slightly out of order
        best, best_id = 0.0, None
        for r in self._recent:
            if horizon <= r.at <= at:
                s = _likeness(words, asks, r.words, r.asks)
                if s > best:
                    best, best_id = s, r.comment_id
        return best_id if best >= self.merge_similarity else None

    def _rate(self, at: datetime) -> int:
        start = at - timedelta(seconds=60)
        while self._admitted_at and self._admitted_at[0] < start - timedelta(seconds=60):
            self._admitted_at.popleft()
        return sum(1 for t in self._admitted_at if start < t <= at)

    def _count(self, at: datetime) -> None:
        self._admitted_at.append(at)
        horizon = at - timedelta(seconds=120)  # the last minute, with a margin for late arrivals
        while self._admitted_at and self._admitted_at[0] < horizon:
            self._admitted_at.popleft()


#: The method of a membership event that triage sends on as a thanks only (it asks nothing).
THANKS_ONLY_METHOD = "membership"


def _thanks_only(comment: CommentV1) -> Dropped | None:
    """A membership event without a message of the viewer's own: the on-air stage thanks it, nothing answers it."""
    membership = comment.membership
    if membership is None or membership.with_message:
        return None
    return Dropped(
        comment, f"thanks_only: a membership event ({membership.kind}) without a message", THANKS_ONLY_METHOD
    )


def order_for_publishing(decisions: Sequence[tuple[int, Decision]]) -> list[tuple[int, Decision]]:
    """Admitted comments by priority (Super Chat first, then fresh, then stale), in arrival order within one;
    dropped outcomes after them: the expensive stages see the important comments first."""

    def key(item: tuple[int, Decision]) -> tuple[int, int]:
        i, d = item
        return (-(d.priority + 1) if isinstance(d, CommentV1) else 0, i)

    return sorted(decisions, key=key)
