"""Every golden message parses, round-trips, and the generated documents are current."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kotae import asyncapi
from kotae.contracts import SCHEMAS, subjects

GOLDEN = Path(__file__).resolve().parents[2] / "contracts" / "golden"
FILES = sorted(GOLDEN.glob("*.json"))


def test_there_is_a_golden_message_for_every_schema() -> None:
    covered = {json.loads(f.read_text())["schema_version"] for f in FILES}
    assert covered == set(SCHEMAS)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_golden_message_parses_and_round_trips(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    model = SCHEMAS[data["schema_version"]]
    message = model.model_validate(data)
    again = model.model_validate_json(message.model_dump_json())
    assert again == message
    # Nothing in the golden file is silently dropped by the model.
    assert set(data) <= set(json.loads(message.model_dump_json()))


def test_answer_outcome_matches_its_golden_file_name() -> None:
    for path in GOLDEN.glob("answer.v1.*.json"):
        outcome = path.stem.split(".")[-1]
        assert json.loads(path.read_text())["outcome"] == outcome
        assert subjects.answer(outcome).endswith(outcome)


@pytest.mark.parametrize(("prefix", "field", "known"), [
    ("onair.v1", "event", subjects.ONAIR_EVENTS),
    ("moderation.v1", "action", subjects.MODERATION_ACTIONS),
])  # fmt: skip
def test_on_air_and_moderation_golden_files_are_named_by_what_they_say(prefix: str, field: str, known: tuple) -> None:
    paths = list(GOLDEN.glob(f"{prefix}.*.json"))
    assert paths
    for path in paths:
        value = json.loads(path.read_text())[field]
        assert value == path.stem.removeprefix(prefix + ".") and value in known


def test_a_comment_from_before_members_and_display_names_still_parses() -> None:
    """comment.v1 gained ``member`` and ``author_name`` (additive): a message without them means neither."""
    data = json.loads((GOLDEN / "comment.v1.json").read_text())
    assert "member" not in data and "author_name" not in data
    comment = SCHEMAS["comment.v1"].model_validate(data)
    assert comment.member is False and comment.author_name is None


def test_an_old_message_with_extra_fields_still_parses() -> None:
    """Additive changes only within a version: unknown fields from a newer producer are ignored."""
    data = json.loads((GOLDEN / "comment.v1.json").read_text())
    data["field_from_the_future"] = {"x": 1}
    assert SCHEMAS["comment.v1"].model_validate(data).comment_id == data["comment_id"]


def test_generated_schemas_and_asyncapi_are_current() -> None:
    stale = asyncapi.stale(GOLDEN.parent)
    assert not stale, f"regenerate with `kotae contracts gen`: {stale}"


def test_asyncapi_documents_every_stage_input_and_output() -> None:
    spec = json.loads((GOLDEN.parent / "asyncapi.json").read_text())
    addresses = {ch["address"] for ch in spec["channels"].values()}
    assert {subjects.COMMENT, subjects.RETRIEVAL, subjects.RERANK, subjects.DRAFT, subjects.EVALUATION} <= addresses
    assert {subjects.answer("verified"), subjects.answer("rejected"), subjects.deadletter("verifier")} <= addresses


def test_subject_helpers_refuse_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown answer outcome"):
        subjects.answer("maybe")
    with pytest.raises(ValueError, match="no stream stores"):
        subjects.stream_of("other.subject")
    assert subjects.stream_of(subjects.answer("verified")) == subjects.STREAM_ANSWERS
