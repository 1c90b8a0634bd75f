"""The verifier's model method: a separate prompt classifies the draft against the evidence.

The model sees the numbered evidence (documents, then FAQ) and the draft, and
returns ``{"verdict": 0-3, "findings": [...]}``. Prompt ``verify.v2`` (the default) also shows
the viewer's question and asks relevance as its own class: 4, every claim supported but the
draft does not answer the question (another thing than the one asked about, or not the kind of
answer asked for); ``verify.v1`` stays loadable (KOTAE_VERIFIER_PROMPT). Programmatic checks run as well
and their findings always count, whatever the model says: the citation check (a
block that does not exist, an uncited claim) and a lexical floor (a number the
cited blocks do not hold, a proper name they do not hold, or a sentence sharing under half its
content words with them) — so a fooled verifier model cannot pass an injected slogan or a name
it made up.

It fails closed. A reply that is not that JSON is asked again
(``KOTAE_MODEL_REASK`` times); if it still is not, or the model stays
unavailable through every delivery, the draft is rejected with
``verifier_unavailable`` — never passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kotae.citations import Block, citation_check, cited_numbers, numbered_blocks, strip_markers, without_title_label
from kotae.contracts import DraftV1, ModelCall
from kotae.language.grounding import support
from kotae.language.sentence_analysis import analyse
from kotae.language.text import is_japanese, normalize, split_sentences
from kotae.model_reply import again, as_int, json_object
from kotae.prompts import load_prompt
from kotae.providers import BadReply, ChatModel

METHOD = "model"
PROMPTS = Path(__file__).parent / "prompts"
PROMPT = "verify.v2"
#: Prompts that ask relevance as class 4 and are shown the question.
ASKS_RELEVANCE = {"verify.v2"}
IRRELEVANT = 4
UNAVAILABLE = "verifier_unavailable"
MAX_BLOCK_CHARS = 2000


@dataclass(frozen=True)
class ModelVerdict:
    verdict: int
    reasons: list[str]
    method: str = METHOD
    prompt_version: str = PROMPT
    calls: list[ModelCall] = field(default_factory=list)
    unavailable: bool = False
    floor: bool = False  # the programmatic floor found what the model passed

    @property
    def passed(self) -> bool:
        return self.verdict == 0 and not self.unavailable

    @property
    def irrelevant(self) -> bool:
        """Supported, says the model, but not an answer to the question (class 4 of verify.v2)."""
        return self.verdict == IRRELEVANT and not self.unavailable


def render_user(draft_text: str, blocks: list[Block], question: str | None = None) -> str:
    parts = ["Question / 質問:", "<<<", question, ">>>", ""] if question is not None else []
    parts.append("Evidence / 資料:")
    for b in blocks:
        label = "FAQ" if b.kind == "faq" else "document"
        parts += ["", f"[{b.n}] ({label}) {b.title}".rstrip(), b.text[:MAX_BLOCK_CHARS]]
    parts += ["", "Draft answer / 検査する回答:", "<<<", draft_text, ">>>"]
    return "\n".join(parts)


def read_verdict(text: str, *, classes: int = 4) -> tuple[int, list[str]]:
    """Class and findings of a verifier reply; :class:`BadReply` when it is not the JSON asked for.

    ``classes``: how many classes the prompt asked for (4: 0-3; 5: 0-4, relevance as class 4).
    """
    value = json_object(text)
    verdict = as_int(value.get("verdict"))
    if verdict is None or not 0 <= verdict < classes:
        allowed = ", ".join(str(c) for c in range(classes - 1)) + f" or {classes - 1}"
        raise BadReply(f"'verdict' must be {allowed}: {text[:120]!r}")
    findings = value.get("findings", [])
    if not isinstance(findings, list):
        raise BadReply(f"'findings' must be a list: {text[:120]!r}")
    reasons = []
    for item in findings:
        if isinstance(item, dict):
            bits = [f"{k}: {item[k]}" for k in ("sentence", "claim", "evidence", "problem") if item.get(k)]
            reasons.append("; ".join(bits) if bits else str(item))
        else:
            reasons.append(str(item))
    if verdict != 0 and not reasons:
        reasons.append(f"the model judged class {verdict} without details")
    return verdict, reasons


#: Share of a cited sentence's content words that its cited blocks must hold even when a
#: model judged it: a paraphrase keeps most of them; an injected slogan or endorsement does not.
LEXICAL_FLOOR = 0.5


def _spaceless(text: str) -> str:
    return normalize(text).lower().replace(" ", "")


def missing_names(claim: str, cited: list[Block]) -> list[str]:
    """The proper names (people, organisations, places, products) of ``claim`` that no cited block holds.

    A name in Latin letters is not looked for in Japanese evidence (nor one in Japanese script in
    English evidence): an answer across languages writes names by their sound, which a string
    cannot check; the model judges those.

    Example::

        >>> from kotae.citations import Block
        >>> b = Block(1, "doc", "r", None, "", "海野あかりは救急医として働いた。", None, None, "ja")
        >>> missing_names("岩城剛は救急医として働いた。", [b])
        ['岩城剛']
    """
    # Compared without spaces: ドームシアター ステラ is the name its evidence writes ドームシアター ステラ.
    held = _spaceless("\n".join(f"{b.title}\n{b.text}" for b in cited))
    evidence_ja = is_japanese(normalize(" ".join(b.text for b in cited)))
    analysis = analyse(claim)
    japanese = is_japanese(claim)
    out = []
    for term in analysis.terms:
        if not term.proper:
            continue
        # The name itself, each run of proper-noun tokens: 海野 of 海野さん, 岩城 of 岩城氏.
        # In English each capitalised word on its own (a list of languages is one phrase).
        runs: list[list[str]] = [[]]
        for token in analysis.tokens[term.start : term.end]:
            if token.pos[:2] == ("名詞", "固有名詞"):
                runs[-1].append(token.surface)
                if not japanese:
                    runs.append([])
            elif runs[-1]:
                runs.append([])
        names = [_spaceless("".join(r)) for r in runs if r] or [_spaceless(term.text)]
        if any(n not in held and is_japanese(n) == evidence_ja for n in names):
            out.append(term.text)
    return out


def lexical_floor_findings(draft_text: str, blocks: list[Block]) -> list[str]:
    """What a fooled verifier model cannot let through: numbers or names absent from the cited
    blocks, or a sentence that shares under half its content words with them."""
    by_n = {b.n: b for b in blocks}
    reasons = []
    for sentence in split_sentences(draft_text):
        cited = [by_n[n] for n in cited_numbers(sentence) if n in by_n]
        if not cited:
            continue  # uncited sentences are the citation check's
        bare = strip_markers(without_title_label(sentence, cited))
        result = support(bare, [b.text for b in cited])
        refs = "".join(f"[{b.n}]" for b in cited)
        names = missing_names(bare, cited)
        if result.missing_numbers:
            reasons.append(f"{bare!r}: number(s) {', '.join(result.missing_numbers)} not in {refs}")
        elif names:
            reasons.append(f"{bare!r}: name(s) {', '.join(names)} not in {refs}")
        elif result.terms and result.ratio < LEXICAL_FLOOR:
            reasons.append(f"{bare!r}: only {result.ratio:.0%} of its content words are in {refs}")
    return reasons


def citation_findings(draft: DraftV1, block_count: int) -> list[str]:
    check = citation_check(draft.answer, block_count)
    reasons = [f"[{n}] cites no evidence block (there are {block_count})" for n in check.unknown_ids]
    reasons += [f"uncited claim: {s!r}" for s in check.uncited_sentences]
    return reasons


async def model_verify(draft: DraftV1, model: ChatModel, *, reask: int, prompt_version: str = PROMPT) -> ModelVerdict:
    """Classify ``draft`` with ``model``; ModelUnavailable propagates for a later redelivery."""
    blocks = numbered_blocks(list(draft.docs), list(draft.faq))
    system = load_prompt(PROMPTS, prompt_version)
    relevance = prompt_version in ASKS_RELEVANCE
    user = render_user(draft.answer, blocks, draft.comment.text if relevance else None)
    programmatic = citation_findings(draft, len(blocks)) + lexical_floor_findings(draft.answer, blocks)
    calls: list[ModelCall] = []
    problem = ""
    for _ in range(1 + reask):
        try:
            asked = user if not problem else again(user, problem)
            reply = await model.acomplete(system=system, user=asked, max_tokens=400, json_mode=True)
        except BadReply as exc:  # a response body the SDK could not read
            problem = str(exc)
            continue
        try:
            verdict, reasons = read_verdict(reply.text, classes=5 if relevance else 4)
        except BadReply as exc:
            calls.append(reply.call("verifier", prompt_version, outcome="unparseable"))
            problem = str(exc)
            continue
        calls.append(reply.call("verifier", prompt_version))
        floor = bool(programmatic) and verdict in (0, IRRELEVANT)
        if programmatic:
            verdict = 2 if verdict == IRRELEVANT else max(verdict, 2)
        return ModelVerdict(verdict, programmatic + reasons, calls=calls, prompt_version=prompt_version, floor=floor)
    return ModelVerdict(2, [f"{UNAVAILABLE}: {problem}"], calls=calls, prompt_version=prompt_version, unavailable=True)
