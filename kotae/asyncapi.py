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
from faststream.nats import JStream, NatsBroker, NatsRouter
from faststream.specification import AsyncAPI
from pydantic import BaseModel

from kotae import __version__
from kotae.bus.edge import StageEdge
from kotae.contracts import SCHEMAS
from kotae.services import STAGES
from kotae.settings import Settings, load_settings
from kotae.stage import Input, Stage


def _document_reading(router: NatsRouter, stage: Stage, read: Input) -> None:
    """A subscriber that only documents what a service stage reads through consumers of its own."""

    async def reads(message: BaseModel) -> None:  # never runs: the broker never connects
        return None

    reads.__annotations__ = {"message": read.contract, "return": None}
    router.subscriber(
        read.subject,
        stream=JStream(read.stream, declare=False),
        title=f"{stage.name}:{read.subject}",
        description=read.description or stage.description,
    )(reads)


def stage_router(stage: Stage, settings: Settings) -> NatsRouter:
    """What one stage consumes (or reads) and publishes, as FastStream documents it (nothing runs)."""
    if stage.consumes is not None:
        return StageEdge(stage, settings).router()
    router = NatsRouter()
    for read in stage.reads:
        _document_reading(router, stage, read)
    for output in stage.outputs:  # a source such as ingest, or a service stage: publishers
        router.publisher(
            output.subject,
            stream=JStream(output.stream, declare=False),
            schema=output.contract,
            title=f"{stage.name}:{output.subject}",
            description=output.description,
        )
    return router


def pipeline_app() -> FastStream:
    """Every declared stage on one broker, for documentation only (it never connects)."""
    settings = load_settings(nats_url="nats://nats:4222")
    broker = NatsBroker("nats://nats:4222", logger=None)
    for stage in STAGES:
        broker.include_router(stage_router(stage, settings))
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
