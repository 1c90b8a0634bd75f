"""How `kotae up` starts its processes: their environment and /metrics ports."""

from __future__ import annotations

import pytest

from kotae.settings import Settings, load_settings
from kotae.stack import SINGLE_THREADED, STAGES, Stack


def test_stage_processes_get_single_threaded_compute_pools(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in SINGLE_THREADED:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # an operator's explicit choice wins
    env = Stack(settings)._env()
    assert env["OPENBLAS_NUM_THREADS"] == env["RAYON_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["OMP_NUM_THREADS"] == "3"
    assert env["KOTAE_LOG_FORMAT"] == "json"


def test_every_replica_gets_its_own_metrics_port(tmp_path) -> None:  # noqa: ANN001
    stack = Stack(load_settings(data_dir=tmp_path, metrics_port=9100), replicas=2)
    ports = [stack.metrics_port(stage, i) for stage in STAGES for i in range(2)]
    assert len(set(ports)) == len(ports) and min(ports) == 9100
