"""Prometheus metrics of the evaluator: rolling rates, labelled by the report's group keys.

Each group (version, stream, mode, models, judge prompt versions — the same
keys ``kotae report`` never pools across) keeps its last
``KOTAE_EVALUATOR_WINDOW`` evaluations; every scrape counts them with the
report's rules (``counting.py``). A rate with a zero denominator is not
exported at all (no sample rather than a 0), while its numerator, denominator
and unknown count always are. Served on ``KOTAE_EVALUATOR_METRICS_PORT`` from
the evaluator process, from a registry of its own.

Exported families (labels ``version, stream, mode, model, prompt_version``,
plus ``metric`` where it says so)::

    kotae_evaluation_rate{metric}          rolling rate, 0..1
    kotae_evaluation_numerator{metric}     rolling numerator
    kotae_evaluation_denominator{metric}   rolling denominator
    kotae_evaluation_unknown{metric}       rolling count of answers that could not be judged
    kotae_evaluation_window_attempts       evaluations in the window
    kotae_evaluation_window_failed         of which failed as a whole
    kotae_evaluations_total{status}        evaluations since the process started (ok / failed)
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kotae.contracts import EvaluationV1
from kotae.services.evaluator.counting import GROUP_FIELDS, group_key, summarize_group

LABELS = ["version", "stream", "mode", "model", "prompt_version"]
assert len(LABELS) == len(GROUP_FIELDS)


class RollingRates(Collector):
    """The last ``window`` evaluations of each group, counted on every scrape.

    Example::

        rates = RollingRates(window=200)
        rates.add(evaluation)
        server, thread = rates.serve(9464)   # GET http://host:9464/metrics
    """

    def __init__(self, window: int = 200) -> None:
        self.window = window
        self._groups: dict[tuple[str, ...], deque[EvaluationV1]] = {}
        self._totals: Counter[tuple[tuple[str, ...], str]] = Counter()
        self._lock = threading.Lock()
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def add(self, evaluation: EvaluationV1) -> None:
        key = group_key(evaluation)
        with self._lock:
            self._groups.setdefault(key, deque(maxlen=self.window)).append(evaluation)
            self._totals[(key, evaluation.status)] += 1

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            groups = {k: list(v) for k, v in self._groups.items()}
            totals = dict(self._totals)
        families: dict[str, Any] = {
            "rate": GaugeMetricFamily(
                "kotae_evaluation_rate",
                "Rolling rate of a metric (numerator ÷ denominator).",
                labels=LABELS + ["metric"],
            ),
            "numerator": GaugeMetricFamily(
                "kotae_evaluation_numerator", "Rolling numerator of a metric.", labels=LABELS + ["metric"]
            ),
            "denominator": GaugeMetricFamily(
                "kotae_evaluation_denominator",
                "Rolling denominator of a metric (judged answers or claims).",
                labels=LABELS + ["metric"],
            ),
            "unknown": GaugeMetricFamily(
                "kotae_evaluation_unknown",
                "Answers in the window whose metric could not be judged.",
                labels=LABELS + ["metric"],
            ),
        }
        attempts = GaugeMetricFamily(
            "kotae_evaluation_window_attempts", "Evaluations in the rolling window.", labels=LABELS
        )
        failed = GaugeMetricFamily(
            "kotae_evaluation_window_failed", "Evaluations in the window that failed as a whole.", labels=LABELS
        )
        for key, evs in groups.items():
            labels = list(key)
            try:
                row = summarize_group(evs)
            except ValueError:  # a record the report would refuse is not exported either
                continue
            attempts.add_metric(labels, row["attempts"])
            failed.add_metric(labels, row["failed"])
            for metric, m in row["metrics"].items():
                if m["rate"] is not None:
                    families["rate"].add_metric(labels + [metric], m["rate"])
                families["numerator"].add_metric(labels + [metric], m["numerator"])
                families["denominator"].add_metric(labels + [metric], m["denominator"])
                families["unknown"].add_metric(labels + [metric], m["unknown"])
        total = CounterMetricFamily(
            "kotae_evaluations", "Evaluations since the process started.", labels=LABELS + ["status"]
        )
        for (key, status), n in sorted(totals.items()):
            total.add_metric(list(key) + [status], n)
        yield from families.values()
        yield attempts
        yield failed
        yield total

    def serve(self, port: int, addr: str = "0.0.0.0") -> Any:
        """Serve ``/metrics`` on ``port`` in a daemon thread; returns the HTTP server (``shutdown()`` stops it)."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        return server
