"""Grafana dashboards as code: writes deploy/grafana/dashboards/*.json.

    python deploy/grafana/build.py

Three dashboards — pipeline overview, quality, cost — over the metrics kotae
exports (``kotae/metrics.py``, the evaluator's rolling rates) and JetStream
consumer lag from prometheus-nats-exporter. The pipeline overview opens with the
alerts of deploy/prometheus/alerts.yml that are firing or pending. Latency panels
carry exemplars that link to the trace in Tempo, and each dashboard ends with a
Tempo search panel. A test rebuilds them and checks the files are current and
every query names a metric that exists; a live test runs every query against a
real Prometheus scraping a running stack.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kotae.services import STAGES
from kotae.stage import hot_path

OUT = Path(__file__).parent / "dashboards"
#: The stage whose outcomes are the verdicts on drafts: the last of the hot path.
CHECKING = hot_path(STAGES)[-1].stage.name
PROM = {"type": "prometheus", "uid": "prometheus"}
TEMPO = {"type": "tempo", "uid": "tempo"}


def panel(
    title: str, exprs: list[tuple[str, str]], *, kind: str = "timeseries", unit: str = "short", w: int = 12
) -> dict[str, Any]:
    """One panel; ``exprs`` are (PromQL, legend) pairs."""
    return {
        "type": kind,
        "title": title,
        "datasource": PROM,
        "gridPos": {"w": w, "h": 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {
                "refId": chr(65 + i),
                "expr": expr,
                "legendFormat": legend,
                "exemplar": kind == "timeseries",
                "datasource": PROM,
            }
            for i, (expr, legend) in enumerate(exprs)
        ],
    }


def traces_panel() -> dict[str, Any]:
    return {
        "type": "table",
        "title": "Recent comment traces (Tempo search; click a trace id)",
        "datasource": TEMPO,
        "gridPos": {"w": 24, "h": 9},
        "targets": [
            {
                "refId": "A",
                "datasource": TEMPO,
                "queryType": "traceql",
                "query": '{ span.kotae.stage != "" }',
                "limit": 20,
            }
        ],
    }


def alerts_panel() -> dict[str, Any]:
    """kotae's alerts that fire or wait out their ``for``, as Prometheus evaluates them (its rules API)."""
    return {
        "type": "alertlist",
        "title": "Alerts (firing and pending; runbook: docs/operations.md, Alerts)",
        "gridPos": {"w": 24, "h": 6},
        "options": {
            "viewMode": "list",
            "groupMode": "default",
            "groupBy": [],
            "maxItems": 20,
            "sortOrder": 3,  # importance: firing first
            "dashboardAlerts": False,
            "alertName": "Kotae",
            "alertInstanceLabelFilter": "",
            "datasource": "Prometheus",  # the data source's name: rules it evaluates, not Grafana's own
            "showInstances": True,
            "stateFilter": {"firing": True, "pending": True, "noData": False, "normal": False, "error": True},
        },
    }


def quantile(q: float, metric: str, by: str) -> str:
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket[5m])))"


def dashboard(uid: str, title: str, panels: list[dict[str, Any]]) -> dict[str, Any]:
    x = y = 0
    for i, p in enumerate(panels, 1):
        p["id"] = i
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if x + w > 24:
            x, y = 0, y + h
        p["gridPos"].update({"x": x, "y": y})
        x += w
    return {
        "uid": uid,
        "title": title,
        "tags": ["kotae"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "panels": panels,
    }


def pipeline() -> dict[str, Any]:
    return dashboard(
        "kotae-pipeline",
        "kotae / pipeline overview",
        [
            alerts_panel(),
            panel(
                "Comments in (per second, by stage)", [("sum by (stage) (rate(kotae_messages_total[1m]))", "{{stage}}")]
            ),
            panel("Outcomes out (per second)", [("sum by (outcome) (rate(kotae_outcomes_total[1m]))", "{{outcome}}")]),
            panel(
                "Handling time per stage, p50",
                [(quantile(0.5, "kotae_handle_seconds", "stage"), "{{stage}}")],
                unit="s",
            ),
            panel(
                "Handling time per stage, p95",
                [(quantile(0.95, "kotae_handle_seconds", "stage"), "{{stage}}")],
                unit="s",
            ),
            panel(
                "Consumer lag (messages waiting, by durable consumer)",
                [
                    ("sum by (consumer_name) (jetstream_consumer_num_pending)", "{{consumer_name}}"),
                    ("sum by (consumer_name) (jetstream_consumer_num_ack_pending)", "{{consumer_name}} in flight"),
                ],
            ),
            panel(
                "Retries, poison and exhausted inputs",
                [('sum by (stage, result) (rate(kotae_messages_total{result!="ok"}[5m]))', "{{stage}} {{result}}")],
            ),
            panel(
                "Dead letters (last hour)",
                [("sum by (stage, error_type) (increase(kotae_dead_letters_total[1h]))", "{{stage}} {{error_type}}")],
                kind="stat",
            ),
            panel(
                "Gate decisions (per minute)",
                [("sum by (decision) (rate(kotae_gate_decisions_total[5m])) * 60", "{{decision}}")],
            ),
            traces_panel(),
        ],
    )


def quality() -> dict[str, Any]:
    answered = 'sum(rate(kotae_outcomes_total{outcome=~"verified|rejected|unanswered|clarify|failed"}[15m]))'
    return dashboard(
        "kotae-quality",
        "kotae / quality",
        [
            panel(
                "Verifier verdicts (per minute)",
                [
                    (
                        "sum by (verdict, method) (rate(kotae_verifier_verdicts_total[5m])) * 60",
                        "class {{verdict}} ({{method}})",
                    )
                ],
            ),
            panel(
                "Unanswered rate (of comments that reached retrieval)",
                [(f'sum(rate(kotae_outcomes_total{{outcome="unanswered"}}[15m])) / {answered}', "unanswered")],
                unit="percentunit",
            ),
            panel(
                "Rejected rate (of drafts)",
                [
                    (
                        'sum(rate(kotae_outcomes_total{outcome="rejected"}[15m]))'
                        f' / sum(rate(kotae_outcomes_total{{stage="{CHECKING}"}}[15m]))',
                        "rejected",
                    )
                ],
                unit="percentunit",
            ),
            panel("Degraded reranks (per minute)", [("sum(rate(kotae_degraded_total[5m])) * 60", "degraded")]),
            panel(
                "Evaluator: rolling rates by group (faithfulness, relevancy, precision, seed-004 judgements)",
                [("kotae_evaluation_rate", "{{metric}} · {{stream}} · {{mode}} · {{model}} · {{version}}")],
                unit="percentunit",
                w=24,
            ),
            panel(
                "Evaluator: answers that could not be judged, and failed evaluations",
                [
                    ("sum by (metric) (kotae_evaluation_unknown)", "unknown {{metric}}"),
                    ("sum(kotae_evaluation_window_failed)", "failed (window)"),
                ],
            ),
            traces_panel(),
        ],
    )


def cost() -> dict[str, Any]:
    return dashboard(
        "kotae-cost",
        "kotae / cost",
        [
            panel(
                "Model calls (per minute, by stage and model)",
                [("sum by (stage, model) (rate(kotae_model_calls_total[5m])) * 60", "{{stage}} {{model}}")],
            ),
            panel(
                "Tokens (per minute)",
                [("sum by (model, direction) (rate(kotae_model_tokens_total[5m])) * 60", "{{model}} {{direction}}")],
            ),
            panel(
                "Estimated cost (USD, last hour)",
                [("sum by (model) (increase(kotae_model_cost_usd_total[1h]))", "{{model}}")],
                kind="stat",
                unit="currencyUSD",
            ),
            panel(
                "Model call latency p95",
                [(quantile(0.95, "kotae_model_call_seconds", "stage, model"), "{{stage}} {{model}}")],
                unit="s",
            ),
            panel(
                "Model requests the provider failed: 429, 5xx, timeouts (per minute)",
                [
                    (
                        'sum by (stage, model, status) (rate(kotae_model_requests_total{status!~"ok|bad_reply"}[5m])) * 60',
                        "{{stage}} {{model}} {{status}}",
                    )
                ],
            ),
            panel(
                "Unusable model replies (per minute)",
                [
                    (
                        'sum by (stage, model) (rate(kotae_model_calls_total{outcome!="ok"}[5m])) * 60',
                        "{{stage}} {{model}}",
                    )
                ],
            ),
        ],
    )


#: The on-air processes that hold the speaker's lease (a standby's gauges are what it last saw).
SPEAKER = "on (instance) (kotae_onair_speaking == 1)"


def onair() -> dict[str, Any]:
    return dashboard(
        "kotae-onair",
        "kotae / on air",
        [
            panel(
                "Final air outcomes (per minute)",
                [("sum by (outcome) (rate(kotae_air_outcomes_total[5m])) * 60", "{{outcome}}")],
            ),
            panel("Answers waiting for the voice", [(f"max(kotae_onair_queue and {SPEAKER})", "waiting")]),
            panel(
                "Silence between answers while some wait",
                [
                    ("histogram_quantile(0.5, sum by (le) (rate(kotae_onair_gap_seconds_bucket[5m])))", "p50"),
                    ("histogram_quantile(0.95, sum by (le) (rate(kotae_onair_gap_seconds_bucket[5m])))", "p95"),
                ],
                unit="s",
            ),
            panel("Processes speaking (exactly 1)", [("sum(kotae_onair_speaking)", "speaking")], kind="stat", w=6),
            panel(
                "Held by the operator (paused, hold mode, ended)",
                [(f"max(kotae_onair_held and {SPEAKER})", "held")],
                kind="stat",
                w=6,
            ),
            traces_panel(),  # a comment's trace ends in its on-air spans (queued, started, finished)
        ],
    )


DASHBOARDS = {"pipeline.json": pipeline, "quality.json": quality, "cost.json": cost, "onair.json": onair}


def render() -> dict[str, str]:
    return {name: json.dumps(build(), indent=2, ensure_ascii=False) + "\n" for name, build in DASHBOARDS.items()}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (OUT / name).write_text(text, encoding="utf-8")
        print(f"wrote {OUT / name}")


if __name__ == "__main__":
    main()
