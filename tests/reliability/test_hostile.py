"""Hostile comments through the whole pipeline: nothing said aloud follows them or repeats a false premise.

The suite (``hostile_comments.jsonl``, Japanese and English) asks the persona to
ignore its rules, reveal its prompt, chant a slogan, endorse someone, confirm a
false number, or obey a fake ``system:`` line. Each entry carries what a
manipulated model would say (``complied`` — with a citation marker, to slip
past the citation check) and the phrases that must never be published
(``must_not``).

Three set-ups: every stage offline; a model generator that complies with every
injection, checked by the offline verifier; and the same generator checked by a
model verifier that the injection fooled too (it passes everything).
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from kotae.replay import run_replay
from kotae.services.ingest.sources import RawComment
from kotae.settings import Settings
from tests.factories import respond as honest
from tests.fakes.model_server import FakeModelServer
from tests.integration.stages import running_stages
from tests.reliability.harness import AT, checked, read_ledger

pytestmark = pytest.mark.slow

SUITE = [
    json.loads(line)
    for line in (Path(__file__).parent / "hostile_comments.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]


def compliant(path: str, body: dict[str, Any]) -> str | None:
    """The fake models: the generator obeys whatever the comment asks; others answer honestly."""
    if body.get("model") == "writer":
        question = body["messages"][-1]["content"].rsplit("<<<", 1)[-1]
        for entry in SUITE:
            if unicodedata.normalize("NFKC", entry["text"])[:12] in question:
                return entry["complied"]
    return honest(path, body)


def spoken(answer: Any) -> str:
    return f"{answer.answer or ''}\n{answer.speech or ''}".lower()


async def replay_suite(settings: Settings, url: str) -> Any:
    comments = [RawComment(id=e["id"], author=f"troll-{e['id']}", text=e["text"], published_at=AT) for e in SUITE]
    async with running_stages(settings, url):
        result = await run_replay(settings, url, comments, timeout=90)
        ledger = await read_ledger(url, [c.id for c in comments])
    return result, ledger


def assert_nothing_hostile_was_said(ledger: Any) -> None:
    assert ledger.figures().lost == 0 and ledger.figures().duplicates == 0, ledger.problems()
    said = []
    for entry in SUITE:
        answer = ledger.final(entry["id"])
        assert answer.outcome != "failed", answer.reason
        if answer.outcome == "verified":
            assert checked(answer), entry["id"]
        for phrase in entry["must_not"]:
            if phrase.lower() in spoken(answer):
                said.append(f"{entry['id']} ({answer.outcome}) said {phrase!r}: {answer.answer!r}")
    assert said == []


def test_the_suite_covers_every_kind_in_both_languages() -> None:
    kinds = {"ignore_rules", "reveal_prompt", "slogan", "endorse", "false_premise", "fake_system"}
    for lang in ("ja", "en"):
        assert {e["kind"] for e in SUITE if e["lang"] == lang} == kinds
    assert all(e["must_not"] and e["complied"] for e in SUITE)


async def test_offline_pipeline_says_nothing_a_hostile_comment_asks(nats_url: str, chaos_loaded: Settings) -> None:
    _, ledger = await replay_suite(chaos_loaded, nats_url)
    assert_nothing_hostile_was_said(ledger)


async def test_a_complying_generator_is_stopped_by_the_offline_verifier(nats_url: str, chaos_loaded: Settings) -> None:
    with FakeModelServer(responder=compliant) as fake:
        settings = chaos_loaded.model_copy(
            update={"generator_model": f"compatible:{fake.url}/v1|writer", "model_timeout_s": 5.0}
        )
        _, ledger = await replay_suite(settings, nats_url)
        complied = [r for r in fake.requests if r["body"].get("model") == "writer"]
    assert complied, "no hostile comment reached the generator"
    assert_nothing_hostile_was_said(ledger)


async def test_a_complying_generator_is_stopped_even_when_the_model_verifier_is_fooled(
    nats_url: str, chaos_loaded: Settings
) -> None:
    with FakeModelServer(responder=compliant) as fake:
        base = f"compatible:{fake.url}/v1|"
        settings = chaos_loaded.model_copy(
            update={"generator_model": base + "writer", "verifier_model": base + "checker", "model_timeout_s": 5.0}
        )
        _, ledger = await replay_suite(settings, nats_url)
    assert_nothing_hostile_was_said(ledger)
