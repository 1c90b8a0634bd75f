"""The evaluator as its own process: ``kotae serve evaluator`` or
``faststream run kotae.services.evaluator.main:app`` (with KOTAE_NATS_URL set).

With ``KOTAE_EVALUATOR_METRICS_PORT`` set, the process also serves Prometheus
``/metrics`` with the rolling rates (see ``metrics.py``)."""

from __future__ import annotations

import os
from typing import Any

from faststream import FastStream

from kotae.logs import get_logger
from kotae.runtime import build_stage_app
from kotae.settings import Settings, get_settings
from kotae.services.evaluator.handlers import build_router
from kotae.services.evaluator.metrics import RollingRates


def build_app(settings: Settings | None = None) -> FastStream:
    settings = settings or get_settings()
    rates = RollingRates(window=settings.evaluator_window)
    app = build_stage_app("evaluator", [build_router(settings, rates=rates)], settings, description=__doc__ or "")
    servers: list[Any] = []

    @app.on_startup
    async def _yield_cpu() -> None:
        # Scoring can wait; answering cannot. Where processes share cores (the embedded
        # stack, one VM), the scheduler then serves the hot-path stages first.
        if settings.evaluator_nice:
            os.nice(settings.evaluator_nice)

    @app.on_startup
    async def _serve_metrics() -> None:
        if settings.evaluator_metrics_port:
            try:
                servers.append(rates.serve(settings.evaluator_metrics_port))
            except OSError as exc:
                raise SystemExit(f"KOTAE_EVALUATOR_METRICS_PORT={settings.evaluator_metrics_port}: cannot listen: {exc}") from None
            get_logger("kotae.evaluator").info("metrics.serving", port=settings.evaluator_metrics_port, path="/metrics")

    @app.after_shutdown
    async def _stop_metrics() -> None:
        for server in servers:
            server.shutdown()
            server.server_close()

    return app


def __getattr__(name: str) -> Any:
    # `app` is built on first access, so importing this module has no side effects.
    if name == "app":
        return build_app()
    raise AttributeError(name)
