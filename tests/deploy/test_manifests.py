"""The deployment files parse, are current, and name exactly what the code has.

Compose is validated against the compose specification and the Kubernetes
objects against the Kubernetes schemas (both validators install from PyPI); the
generated files (k8s objects, NATS values and configs, dashboards, the settings
env file) must equal what their builders produce now.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from kotae import envfile
from kotae.metrics import METRIC_NAMES
from kotae.services import STAGES as DECLARED
from kotae.settings import ENV_PREFIX, Settings
from kotae.stack import PROCESSES as STAGES  # every stage a deployment runs, on-request ones included
from kotae.stage import by_name
from tests.deploy.promql import read
from tests.factories import consumer_of

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def _module(path: Path):  # noqa: ANN202
    spec = importlib.util.spec_from_file_location(path.stem + "_builder", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _yaml_docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


# --- compose -------------------------------------------------------------------------


def test_compose_is_valid_against_the_compose_spec() -> None:
    exe = Path(sys.executable).parent / "check-jsonschema"
    run = subprocess.run(
        [str(exe), "--builtin-schema", "vendor.compose-spec", str(DEPLOY / "compose.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_compose_runs_every_stage_and_the_observability_stack() -> None:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))["services"]
    for stage in STAGES:
        assert services[stage]["command"] == ["kotae", "serve", stage]
        assert services[stage]["healthcheck"]["test"]
        assert services[stage]["depends_on"]["nats"]["condition"] == "service_healthy"
    assert {"nats", "nats-exporter", "qdrant", "otel-collector", "tempo", "prometheus", "grafana"} <= set(services)
    assert "-jsz=all" in services["nats-exporter"]["command"]


@pytest.mark.parametrize(
    "path",
    [
        "prometheus/prometheus.yml",
        "otel/collector.yaml",
        "tempo/tempo.yaml",
        "grafana/provisioning/datasources/datasources.yaml",
        "grafana/provisioning/dashboards/dashboards.yaml",
    ],
)
def test_observability_configs_parse(path: str) -> None:
    assert isinstance(yaml.safe_load((DEPLOY / path).read_text(encoding="utf-8")), dict)


def test_prometheus_scrapes_every_stage_and_the_nats_exporter() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text(encoding="utf-8"))
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    names = jobs["kotae"]["dns_sd_configs"][0]["names"]
    assert set(STAGES) <= set(names)
    assert jobs["nats"]["static_configs"][0]["targets"] == ["nats-exporter:7777"]


# --- settings ------------------------------------------------------------------------


def test_every_setting_appears_in_the_deployed_env_file_and_it_is_current() -> None:
    text = (DEPLOY / "k8s/kotae.env").read_text(encoding="utf-8")
    for name in Settings.model_fields:
        assert re.search(rf"^(# )?{ENV_PREFIX}{name.upper()}=", text, re.M), f"{ENV_PREFIX}{name.upper()} missing"
    assert text == "\n".join(envfile.env_lines()) + "\n", "regenerate: python -m kotae.envfile > deploy/k8s/kotae.env"


def test_no_secret_has_a_value_in_the_env_file() -> None:
    text = (DEPLOY / "k8s/kotae.env").read_text(encoding="utf-8")
    for name in Settings.model_fields:
        if envfile.is_secret(name):
            assert not re.search(rf"^{ENV_PREFIX}{name.upper()}=", text, re.M)


# --- kubernetes ----------------------------------------------------------------------


def test_k8s_files_are_current() -> None:
    builder = _module(DEPLOY / "k8s/build.py")
    rendered = builder.render()
    # compose's NATS config is generated with the others, so its users cannot drift from theirs.
    assert {
        DEPLOY / "k8s/stages.yaml",
        DEPLOY / "k8s/nats-values.yaml",
        DEPLOY / "nats/nats-server.conf",
        DEPLOY / "nats/compose.conf",
    } <= set(rendered)
    for path, text in rendered.items():
        assert path.read_text(encoding="utf-8") == text, f"regenerate: python deploy/k8s/build.py ({path.name})"


@pytest.mark.parametrize("name", ["namespace.yaml", "stages.yaml", "secrets.example.yaml"])
def test_k8s_objects_validate_against_the_kubernetes_schemas(name: str) -> None:
    for doc in _yaml_docs(DEPLOY / "k8s" / name):
        if doc["apiVersion"].startswith("keda.sh/"):
            continue  # a custom resource: checked below
        kubernetes_validate.validate(doc, "1.30.0", strict=True)


def test_every_stage_has_a_deployment_and_a_scaler_on_its_own_consumer() -> None:
    docs = _yaml_docs(DEPLOY / "k8s/stages.yaml")
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    scalers = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ScaledObject"}
    declared = by_name(DECLARED)
    for stage in STAGES:
        container = deployments[f"kotae-{stage}"]["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == ["kotae", "serve", stage]
        assert {"livenessProbe", "readinessProbe", "startupProbe", "resources"} <= set(container)
        if declared[stage].consumes is None:  # a service (the on-air stage): its replicas are fixed, no scaler
            assert f"kotae-{stage}" not in scalers
            replicas = deployments[f"kotae-{stage}"]["spec"]["replicas"]
            assert replicas == declared[stage].resources.min_replicas
            continue
        trigger = scalers[f"kotae-{stage}"]["spec"]["triggers"][0]
        assert trigger["type"] == "nats-jetstream"
        assert (trigger["metadata"]["stream"], trigger["metadata"]["consumer"]) == consumer_of(stage)
        env = {e["name"] for e in container["env"]}
        assert {"KOTAE_NATS_URL", "KOTAE_NATS_USER", "KOTAE_NATS_PASSWORD", "KOTAE_STREAM_REPLICAS"} <= env
        for name in env:
            assert name.removeprefix(ENV_PREFIX).lower() in Settings.model_fields, f"{name} is not a setting"


def test_a_job_applies_stream_changes_as_the_streams_user_with_the_stages_settings() -> None:
    docs = _yaml_docs(DEPLOY / "k8s/stages.yaml")
    (job,) = [d for d in docs if d["kind"] == "Job"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["kotae", "streams"]
    env = {e["name"]: e for e in container["env"]}
    assert env["KOTAE_NATS_USER"]["value"] == "streams"
    assert env["KOTAE_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "kotae-nats", "key": "streams"}
    # The streams it declares are the ones the stages expect: same ConfigMap, same overrides.
    retriever = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "kotae-retriever")
    stage = retriever["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"][0] == stage["envFrom"][0]
    shared = {
        e["name"]: e.get("value")
        for e in stage["env"]
        if "value" in e and e["name"] not in ("KOTAE_NATS_USER", "KOTAE_SERVICE_NAME")
    }
    shared.pop("KOTAE_METRICS_PORT")
    assert {name: env[name].get("value") for name in shared} == shared
    secrets = _yaml_docs(DEPLOY / "k8s/secrets.example.yaml")
    assert "streams" in next(d for d in secrets if d["metadata"]["name"] == "kotae-nats")["stringData"]


def test_every_process_reaches_nats_over_mutual_tls_with_files_from_its_mounted_secret() -> None:
    docs = _yaml_docs(DEPLOY / "k8s/stages.yaml")
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("Deployment", "Job")]
    assert len(pods) == len(STAGES) + 1
    for pod in pods:
        container = pod["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
        for name in ("KOTAE_NATS_TLS_CA", "KOTAE_NATS_TLS_CERT", "KOTAE_NATS_TLS_KEY"):
            folder, _, file = env[name].rpartition("/")
            assert mounts[folder]["secret"]["secretName"] == "kotae-nats-client-tls", (container["name"], name)
            assert file in ("ca.crt", "tls.crt", "tls.key")  # the keys cert-manager writes
    values = yaml.safe_load((DEPLOY / "k8s/nats-values.yaml").read_text(encoding="utf-8"))
    tls = values["config"]["nats"]["tls"]
    assert tls["enabled"] and tls["merge"]["verify"] is True  # a client without a certificate is refused
    assert values["tlsCA"]["enabled"] and values["tlsCA"]["secretName"]


def test_nats_users_may_publish_exactly_what_their_stage_declares() -> None:
    builder = _module(DEPLOY / "k8s/build.py")
    values = yaml.safe_load((DEPLOY / "k8s/nats-values.yaml").read_text(encoding="utf-8"))
    users = {u["user"]: u for u in values["config"]["merge"]["accounts"]["KOTAE"]["users"]}
    for stage in builder.STAGES:
        allowed = [s for s in users[stage.name]["permissions"]["publish"]["allow"] if s.startswith("kotae.")]
        assert sorted(allowed) == list(stage.published)
    assert values["config"]["jetstream"]["merge"]["sync_interval"] == "always"
    assert values["config"]["cluster"]["replicas"] == 3


# --- dashboards ----------------------------------------------------------------------

EXTERNAL_METRICS = {"jetstream_consumer_num_pending", "jetstream_consumer_num_ack_pending"}


def _metric_names(expr: str) -> set[str]:
    return read(expr).metrics


def _exported() -> set[str]:
    names = set(METRIC_NAMES) | EXTERNAL_METRICS
    for name in list(METRIC_NAMES):
        names |= {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    from kotae.services.evaluator.metrics import RollingRates

    for family in RollingRates().collect():  # the evaluator's rolling rates (their own registry)
        names |= {family.name, f"{family.name}_total"}
    return names


def test_dashboards_are_current_and_query_only_exported_metrics() -> None:
    builder = _module(DEPLOY / "grafana/build.py")
    exported = _exported()
    rendered = builder.render()
    assert set(rendered) == {p.name for p in (DEPLOY / "grafana/dashboards").glob("*.json")}
    for name, text in rendered.items():
        on_disk = (DEPLOY / "grafana/dashboards" / name).read_text(encoding="utf-8")
        assert on_disk == text, f"regenerate: python deploy/grafana/build.py ({name})"
        dashboard = json.loads(on_disk)
        queried = 0
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                if "expr" not in target:
                    continue
                names = _metric_names(target["expr"])
                assert names, f"{name}: {panel['title']!r} queries no metric"
                unknown = names - exported
                assert not unknown, f"{name}: {panel['title']!r} queries {sorted(unknown)}, which nothing exports"
                queried += 1
        assert queried >= 4
        assert any(p.get("datasource", {}).get("type") == "tempo" for p in dashboard["panels"]) or name == "cost.json"


def test_the_pipeline_overview_opens_with_kotaes_alerts_from_prometheus() -> None:
    dashboard = json.loads((DEPLOY / "grafana/dashboards/pipeline.json").read_text(encoding="utf-8"))
    first = dashboard["panels"][0]
    assert first["type"] == "alertlist"
    options = first["options"]
    assert options["stateFilter"]["firing"] and options["stateFilter"]["pending"]
    datasources = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/datasources.yaml").read_text())
    prometheus = next(d for d in datasources["datasources"] if d["type"] == "prometheus")
    assert options["datasource"] == prometheus["name"]  # the rules Prometheus evaluates
    rules = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text(encoding="utf-8"))
    names = [r["alert"] for g in rules["groups"] for r in g["rules"]]
    assert names and all(options["alertName"] in n for n in names)
