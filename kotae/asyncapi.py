"""Generated interface documents: JSON Schema per message and one AsyncAPI for the pipeline.

``kotae contracts gen`` writes them to ``contracts/``; ``kotae contracts check``
(run by the test suite) fails when the checked-in copies are stale. The AsyncAPI
document is FastStream's, so ``faststream docs gen kotae.asyncapi:app`` gives the
same result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from faststream import FastStream
from faststream.nats import NatsBroker
from faststream.specification import AsyncAPI

from kotae import __version__
from kotae.contracts import SCHEMAS
from kotae.settings import load_settings


def pipeline_app() -> FastStream:
    """Every stage's router on one broker, for documentation only (it never connects)."""
    from kotae.services.evaluator.handlers import build_router as evaluator
    from kotae.services.generator.handlers import build_router as generator
    from kotae.services.reranker.handlers import build_router as reranker
    from kotae.services.retriever.handlers import build_router as retriever
    from kotae.services.verifier.handlers import build_router as verifier

    settings = load_settings(nats_url="nats://nats:4222")
    broker = NatsBroker("nats://nats:4222", logger=None)
    for build in (retriever, reranker, generator, verifier, evaluator):
        broker.include_router(build(settings))
    return FastStream(
        broker,
        logger=None,
        specification=AsyncAPI(
            title="kotae",
            version=__version__,
            description="Live-stream comments in; grounded, cited, verified answers out.",
        ),
    )


def documents() -> dict[str, str]:
    """File name (relative to contracts/) → generated content."""
    out: dict[str, str] = {}
    for name, model in SCHEMAS.items():
        schema: dict[str, Any] = model.model_json_schema(mode="serialization")
        out[f"schema/{name}.json"] = json.dumps(schema, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    spec = pipeline_app().schema.to_specification().to_jsonable()
    out["asyncapi.json"] = json.dumps(spec, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    return out


def write(root: Path) -> list[Path]:
    written = []
    for rel, text in documents().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def stale(root: Path) -> list[str]:
    """Generated files under ``root`` that differ from what the code generates now."""
    return [
        rel
        for rel, text in documents().items()
        if not (root / rel).exists() or (root / rel).read_text(encoding="utf-8") != text
    ]




def __getattr__(name: str) -> Any:
    if name == "app":
        return pipeline_app()
    raise AttributeError(name)
