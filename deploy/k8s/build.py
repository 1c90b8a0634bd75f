"""Kubernetes objects for every kotae stage: writes deploy/k8s/stages.yaml.

    python deploy/k8s/build.py

Per stage: a Deployment (probes on /metrics, resources, settings from the
``kotae-settings`` ConfigMap with production overrides, keys from the
``kotae-secrets`` Secret, the password of that stage's own NATS user from
``kotae-nats``), a Service
for Prometheus, and a KEDA ScaledObject that scales the stage on its JetStream
consumer's lag. A test rebuilds it and checks the file is current.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).parent / "stages.yaml"
NATS_VALUES = Path(__file__).parent / "nats-values.yaml"
NAMESPACE = "kotae"
IMAGE = "ghcr.io/kotae/kotae:0.1.0"
NATS_URL = "nats://nats.nats.svc:4222"
NATS_MONITOR = "nats.nats.svc.cluster.local:8222"

# stage → (JetStream stream, durable consumer, requests cpu/mem, limits cpu/mem, min, max replicas, lag per replica)
STAGES: dict[str, tuple[str, str, str, str, str, str, int, int, int]] = {
    "retriever": ("KOTAE_COMMENTS", "retriever", "500m", "1Gi", "2", "2Gi", 1, 4, 50),
    "reranker": ("KOTAE_PIPELINE", "reranker", "250m", "768Mi", "1", "1536Mi", 1, 6, 30),
    "generator": ("KOTAE_PIPELINE", "generator", "100m", "256Mi", "1", "512Mi", 1, 10, 20),
    "verifier": ("KOTAE_PIPELINE", "verifier", "250m", "512Mi", "1", "1Gi", 1, 10, 20),
    "evaluator": ("KOTAE_ANSWERS", "evaluator", "100m", "384Mi", "1", "768Mi", 1, 3, 200),
}

OVERRIDES = {
    "KOTAE_NATS_URL": NATS_URL,
    "KOTAE_STREAM_REPLICAS": "3",
    "KOTAE_QDRANT_URL": "http://qdrant.qdrant.svc:6333",
    "KOTAE_OTLP_ENDPOINT": "http://otel-collector.observability.svc:4318",
    "KOTAE_METRICS_PORT": "9100",
    "KOTAE_LOG_FORMAT": "json",
    "KOTAE_DATA_DIR": "/data",
}


def deployment(stage: str, spec: tuple[str, str, str, str, str, str, int, int, int]) -> dict[str, Any]:
    _, _, req_cpu, req_mem, lim_cpu, lim_mem, min_r, _, _ = spec
    labels = {"app.kubernetes.io/name": "kotae", "app.kubernetes.io/component": stage}
    probe = {"httpGet": {"path": "/metrics", "port": "metrics"}, "periodSeconds": 10, "timeoutSeconds": 3}
    env = [{"name": k, "value": v} for k, v in OVERRIDES.items()]
    env.append({"name": "KOTAE_SERVICE_NAME", "value": f"kotae-{stage}"})
    ports = [{"name": "metrics", "containerPort": 9100}]
    if stage == "evaluator":  # the rolling quality rates come from their own registry and port
        env.append({"name": "KOTAE_EVALUATOR_METRICS_PORT", "value": "9101"})
        ports.append({"name": "rates", "containerPort": 9101})
    env.append({"name": "KOTAE_NATS_USER", "value": stage})
    env.append({"name": "KOTAE_NATS_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "kotae-nats", "key": stage}}})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"kotae-{stage}", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": min_r,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": labels, "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9100"}},
                "spec": {
                    # SIGTERM drains in-flight messages for up to 15 s; leave room for it.
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
                    "containers": [
                        {
                            "name": stage,
                            "image": IMAGE,
                            "command": ["kotae", "serve", stage],
                            "ports": ports,
                            "envFrom": [{"configMapRef": {"name": "kotae-settings"}}, {"secretRef": {"name": "kotae-secrets", "optional": True}}],
                            "env": env,
                            "resources": {"requests": {"cpu": req_cpu, "memory": req_mem}, "limits": {"cpu": lim_cpu, "memory": lim_mem}},
                            "startupProbe": {**probe, "failureThreshold": 30},
                            "livenessProbe": {**probe, "failureThreshold": 3},
                            "readinessProbe": {**probe, "failureThreshold": 2},
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        }
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                },
            },
        },
    }


def service(stage: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "kotae", "app.kubernetes.io/component": stage}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"kotae-{stage}", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": labels,
            "ports": [{"name": "metrics", "port": 9100, "targetPort": "metrics"}]
            + ([{"name": "rates", "port": 9101, "targetPort": "rates"}] if stage == "evaluator" else []),
        },
    }


def scaled_object(stage: str, spec: tuple[str, str, str, str, str, str, int, int, int]) -> dict[str, Any]:
    stream, consumer, *_, min_r, max_r, lag = spec
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": f"kotae-{stage}", "namespace": NAMESPACE},
        "spec": {
            "scaleTargetRef": {"name": f"kotae-{stage}"},
            "minReplicaCount": min_r,
            "maxReplicaCount": max_r,
            "cooldownPeriod": 120,
            "triggers": [
                {
                    "type": "nats-jetstream",
                    "metadata": {
                        "natsServerMonitoringEndpoint": NATS_MONITOR,
                        "account": "KOTAE",
                        "stream": stream,
                        "consumer": consumer,
                        "lagThreshold": str(lag),
                        "useHttps": "false",
                    },
                }
            ],
        },
    }


def stage_subjects() -> dict[str, tuple[list[str], str]]:
    """Per stage: the subjects its router declares it publishes, and the subject it consumes."""
    from kotae.services.evaluator.handlers import build_router as evaluator
    from kotae.services.generator.handlers import build_router as generator
    from kotae.services.reranker.handlers import build_router as reranker
    from kotae.services.retriever.handlers import build_router as retriever
    from kotae.services.verifier.handlers import build_router as verifier
    from kotae.settings import load_settings

    settings = load_settings(reranker_offline="keep_top_n")  # no model to load just to list subjects
    builders = {"retriever": retriever, "reranker": reranker, "generator": generator, "verifier": verifier, "evaluator": evaluator}
    out = {}
    for stage, build in builders.items():
        router = build(settings)
        published = sorted({p.subject.broker_address for p in router.publishers})
        (consumed,) = {s.subject.broker_address for s in router.subscribers}
        out[stage] = (published, consumed)
    return out


def _js_consumer(stream: str, durable: str) -> list[str]:
    """What a process needs to bind and pull from its durable consumer, and to ack."""
    return [
        f"$JS.API.CONSUMER.INFO.{stream}.{durable}",
        f"$JS.API.CONSUMER.CREATE.{stream}.{durable}.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}",
        f"$JS.ACK.{stream}.{durable}.>",
    ]


# Every process declares the streams it uses on start-up (idempotent) and reads stream info.
_STREAM_ADMIN = ["$JS.API.INFO", "$JS.API.STREAM.INFO.>", "$JS.API.STREAM.CREATE.>", "$JS.API.STREAM.UPDATE.>", "$JS.API.STREAM.NAMES"]
# Key-value buckets: the ask-back state (retriever, ingest) and ingest's own state.
_KV = {
    "retriever": ["kotae_clarify"],
    "ingest": ["kotae_clarify", "kotae_ingest"],
}


def _kv(bucket: str) -> list[str]:
    return [f"$KV.{bucket}.>", f"$JS.API.STREAM.MSG.GET.KV_{bucket}", f"$JS.API.DIRECT.GET.KV_{bucket}.>",
            f"$JS.API.CONSUMER.CREATE.KV_{bucket}.>"]


def nats_users() -> list[dict[str, Any]]:
    """One NATS user per service, allowed to publish exactly its own outputs."""
    users = []
    for stage, (published, consumed) in stage_subjects().items():
        stream, durable = STAGES[stage][0], STAGES[stage][1]
        allow = [*published, *_STREAM_ADMIN, *_js_consumer(stream, durable)]
        for bucket in _KV.get(stage, []):
            allow += _kv(bucket)
        users.append({"user": stage, "password": f"$NATS_PASSWORD_{stage.upper()}",
                      "permissions": {"publish": {"allow": allow}, "subscribe": {"allow": ["_INBOX.>"]}}})
        assert consumed  # every stage consumes exactly one subject
    ingest_allow = ["kotae.comment.v1", "kotae.answer.v1.dropped", *_STREAM_ADMIN]
    for bucket in _KV["ingest"]:
        ingest_allow += _kv(bucket)
    users.append({"user": "ingest", "password": "$NATS_PASSWORD_INGEST",
                  "permissions": {"publish": {"allow": ingest_allow}, "subscribe": {"allow": ["_INBOX.>"]}}})
    # Overlays, TTS and other readers of the answers only read: their own durable or ordered consumers.
    users.append({"user": "reader", "password": "$NATS_PASSWORD_READER",
                  "permissions": {"publish": {"allow": ["$JS.API.CONSUMER.>", "$JS.ACK.KOTAE_ANSWERS.>", "$JS.API.STREAM.INFO.KOTAE_ANSWERS"]},
                                  "subscribe": {"allow": ["_INBOX.>", "kotae.answer.v1.>"]}}})
    return users


def nats_values() -> dict[str, Any]:
    """Values for the official NATS Helm chart (nats/nats): 3-node JetStream cluster, fsync always, one account."""
    return {
        "config": {
            "cluster": {"enabled": True, "replicas": 3},
            "jetstream": {
                "enabled": True,
                "fileStore": {"pvc": {"size": "20Gi"}},
                "merge": {"sync_interval": "always"},
            },
            "monitor": {"enabled": True, "port": 8222},
            "merge": {
                "accounts": {
                    "KOTAE": {"jetstream": "enabled", "users": nats_users()},
                    "$SYS": {"users": [{"user": "sys", "password": "$NATS_PASSWORD_SYS"}]},
                }
            },
        },
        "container": {
            "env": {
                f"NATS_PASSWORD_{u}": {"valueFrom": {"secretKeyRef": {"name": "kotae-nats", "key": u.lower()}}}
                for u in ["RETRIEVER", "RERANKER", "GENERATOR", "VERIFIER", "EVALUATOR", "INGEST", "READER", "SYS"]
            }
        },
        "promExporter": {"enabled": True, "port": 7777, "podMonitor": {"enabled": False}},
    }


def documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for stage, spec in STAGES.items():
        docs += [deployment(stage, spec), service(stage), scaled_object(stage, spec)]
    return docs


HEAD = "# Generated by deploy/k8s/build.py — edit that file, not this one.\n"


def render() -> dict[Path, str]:
    return {
        OUT: HEAD + yaml.safe_dump_all(documents(), sort_keys=False, allow_unicode=True),
        NATS_VALUES: HEAD + "# helm install nats nats/nats -n nats -f deploy/k8s/nats-values.yaml\n"
        + yaml.safe_dump(nats_values(), sort_keys=False, allow_unicode=True),
    }


def main() -> None:
    for path, text in render().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
