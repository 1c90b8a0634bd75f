"""The persona that answers: name, first person, tone and spoken length, from a YAML file.

``KOTAE_PERSONA_FILE`` points at the file; without it the bundled
``persona.default.yaml`` applies. A value may be one string for every language or
a mapping per language (``ja``, ``en``). A bad file stops the stage at start-up
with the file and the field named.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DEFAULT_FILE = Path(__file__).parent / "persona.default.yaml"
LANGS = ("ja", "en")


class PersonaError(ValueError):
    """The persona file cannot be used; the message names the file and field."""


def _per_language(value: object) -> object:
    if isinstance(value, str | int):
        return {lang: value for lang in LANGS}
    return value


class Persona(BaseModel):
    """Who answers, and how long an answer may be when spoken."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=80)
    first_person: dict[str, str]
    tone: dict[str, str]
    max_spoken_chars: dict[str, int]

    _per_lang = field_validator("first_person", "tone", "max_spoken_chars", mode="before")(_per_language)

    @field_validator("first_person", "tone", "max_spoken_chars")
    @classmethod
    def _every_language(cls, value: dict[str, object]) -> dict[str, object]:
        missing = [lang for lang in LANGS if lang not in value]
        if missing:
            raise ValueError(f"missing language(s): {', '.join(missing)}")
        return value

    @field_validator("max_spoken_chars")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        bad = {k: v for k, v in value.items() if v < 20}
        if bad:
            raise ValueError(f"must be at least 20 characters: {bad}")
        return value


def load_persona(path: Path | None = None) -> Persona:
    """The persona in ``path`` (default: the bundled one)."""
    path = path or DEFAULT_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PersonaError(f"{path}: persona file not found (KOTAE_PERSONA_FILE)") from None
    except yaml.YAMLError as exc:
        raise PersonaError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise PersonaError(f"{path}: expected a mapping with name, first_person, tone, max_spoken_chars")
    try:
        return Persona.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise PersonaError(f"{path}: {problems}") from None
