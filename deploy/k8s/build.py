"""Kubernetes objects for every kotae stage, and the NATS users: writes deploy/k8s/stages.yaml,
deploy/k8s/nats-values.yaml, deploy/nats/nats-server.conf and deploy/nats/compose.conf.

    python deploy/k8s/build.py

Per stage: a Deployment (probes on /metrics, resources, settings from the
``kotae-settings`` ConfigMap with production overrides, keys from the
``kotae-secrets`` Secret, the password of that stage's own NATS user from
``kotae-nats``), a Service
for Prometheus, and a KEDA ScaledObject that scales the stage on its JetStream
consumer's lag (a stage that runs a service instead, such as the on-air stage with its
lease, keeps the fixed number of replicas its declaration asks for). Once per release: a Job running ``kotae streams`` as the
``streams`` user, the only service login that may change a stream, so a new
version's stream settings reach the cluster (stages only create missing ones). Every stage
that consumes gets these objects, from its declaration (kotae.services.STAGES: its consumer,
resources and ports). The NATS users and their permissions come from kotae.bus.permissions,
which the embedded server uses too; the Helm values, the cluster node's config and the
single server of deploy/compose.yaml all carry the same ones. A test rebuilds the files
and checks they are current.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kotae.bus.permissions import STREAMS
from kotae.bus.server_conf import password_variable, render_conf, user_entries
from kotae.nats_users import deployment_users
from kotae.services import STAGES
from kotae.stage import Stage

OUT = Path(__file__).parent / "stages.yaml"
NATS_VALUES = Path(__file__).parent / "nats-values.yaml"
NATS_CONF = Path(__file__).parents[1] / "nats" / "nats-server.conf"
COMPOSE_CONF = Path(__file__).parents[1] / "nats" / "compose.conf"
NAMESPACE = "kotae"
IMAGE = "ghcr.io/kotae/kotae:0.1.0"
NATS_URL = "nats://nats.nats.svc:4222"
NATS_MONITOR = "nats.nats.svc.cluster.local:8222"
# TLS Secrets (tls.crt, tls.key and ca.crt, as cert-manager writes them; secrets.example.yaml):
NATS_SERVER_TLS = "kotae-nats-server-tls"  # namespace nats: the servers' certificate
NATS_CA = "kotae-nats-ca"  # namespace nats: ca.crt, the CA that signed the clients' certificates
NATS_CLIENT_TLS = "kotae-nats-client-tls"  # namespaces kotae and nats: the clients' certificate and the CA
CLIENT_TLS_DIR = "/etc/kotae/nats-tls"
CLIENT_TLS_ENV = [
    {"name": "KOTAE_NATS_TLS_CA", "value": f"{CLIENT_TLS_DIR}/ca.crt"},
    {"name": "KOTAE_NATS_TLS_CERT", "value": f"{CLIENT_TLS_DIR}/tls.crt"},
    {"name": "KOTAE_NATS_TLS_KEY", "value": f"{CLIENT_TLS_DIR}/tls.key"},
]
CLIENT_TLS_VOLUME = {"name": "nats-tls", "secret": {"secretName": NATS_CLIENT_TLS}}
CLIENT_TLS_MOUNT = {"name": "nats-tls", "mountPath": CLIENT_TLS_DIR, "readOnly": True}

#: The stages that run as Deployments: every declared stage that consumes.
DEPLOYED: tuple[Stage, ...] = tuple(stage for stage in STAGES if stage.runs_as_process)

OVERRIDES = {
    "KOTAE_NATS_URL": NATS_URL,
    "KOTAE_STREAM_REPLICAS": "3",
    "KOTAE_QDRANT_URL": "http://qdrant.qdrant.svc:6333",
    "KOTAE_OTLP_ENDPOINT": "http://otel-collector.observability.svc:4318",
    "KOTAE_METRICS_PORT": "9100",
    "KOTAE_LOG_FORMAT": "json",
    "KOTAE_DATA_DIR": "/data",
}


def deployment(declared: Stage) -> dict[str, Any]:
    stage, res = declared.name, declared.resources
    labels = {"app.kubernetes.io/name": "kotae", "app.kubernetes.io/component": stage}
    probe = {"httpGet": {"path": "/metrics", "port": "metrics"}, "periodSeconds": 10, "timeoutSeconds": 3}
    env = [{"name": k, "value": v} for k, v in OVERRIDES.items()]
    env.append({"name": "KOTAE_SERVICE_NAME", "value": f"kotae-{stage}"})
    ports = [{"name": "metrics", "containerPort": 9100}]
    for extra in declared.extra_ports:  # e.g. the evaluator's rolling quality rates, from their own registry
        env.append({"name": extra.setting, "value": str(extra.port)})
        ports.append({"name": extra.name, "containerPort": extra.port})
    env.append({"name": "KOTAE_NATS_USER", "value": stage})
    env.append({"name": "KOTAE_NATS_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "kotae-nats", "key": stage}}})
    env += CLIENT_TLS_ENV
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"kotae-{stage}", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": res.min_replicas,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9100"},
                },
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
                            "envFrom": [
                                {"configMapRef": {"name": "kotae-settings"}},
                                {"secretRef": {"name": "kotae-secrets", "optional": True}},
                            ],
                            "env": env,
                            "resources": {
                                "requests": {"cpu": res.cpu, "memory": res.memory},
                                "limits": {"cpu": res.cpu_limit, "memory": res.memory_limit},
                            },
                            "startupProbe": {**probe, "failureThreshold": 30},
                            "livenessProbe": {**probe, "failureThreshold": 3},
                            "readinessProbe": {**probe, "failureThreshold": 2},
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}, CLIENT_TLS_MOUNT],
                        }
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}, CLIENT_TLS_VOLUME],
                },
            },
        },
    }


def streams_job() -> dict[str, Any]:
    """``kotae streams`` with the stages' settings: creates missing streams and applies changed ones.

    A Job's pod template cannot change in place: after an upgrade, delete the finished
    Job and apply again (docs/operations.md).
    """
    labels = {"app.kubernetes.io/name": "kotae", "app.kubernetes.io/component": "streams"}
    env = [{"name": k, "value": v} for k, v in OVERRIDES.items() if k != "KOTAE_METRICS_PORT"]
    env.append({"name": "KOTAE_NATS_USER", "value": STREAMS})
    env.append({"name": "KOTAE_NATS_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "kotae-nats", "key": STREAMS}}})
    env += CLIENT_TLS_ENV
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "kotae-streams", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "backoffLimit": 6,  # NATS may still be electing leaders right after its own upgrade
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
                    "containers": [
                        {
                            "name": "streams",
                            "image": IMAGE,
                            "command": ["kotae", "streams"],
                            "envFrom": [{"configMapRef": {"name": "kotae-settings"}}],
                            "env": env,
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "128Mi"},
                                "limits": {"cpu": "500m", "memory": "256Mi"},
                            },
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}, CLIENT_TLS_MOUNT],
                        }
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}, CLIENT_TLS_VOLUME],
                },
            },
        },
    }


def service(declared: Stage) -> dict[str, Any]:
    stage = declared.name
    labels = {"app.kubernetes.io/name": "kotae", "app.kubernetes.io/component": stage}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"kotae-{stage}", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": labels,
            "ports": [{"name": "metrics", "port": 9100, "targetPort": "metrics"}]
            + [{"name": e.name, "port": e.port, "targetPort": e.name} for e in declared.extra_ports],
        },
    }


def scaled_object(declared: Stage) -> dict[str, Any]:
    assert declared.consumes is not None
    stage, res = declared.name, declared.resources
    stream, consumer = declared.consumes.stream, declared.durable
    min_r, max_r, lag = res.min_replicas, res.max_replicas, res.lag_per_replica
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


def nats_users() -> list[dict[str, Any]]:
    """One NATS user per service (kotae.bus.permissions, as the embedded server), passwords from the environment."""
    return user_entries(dict(deployment_users()))  # defaults, not this shell's environment


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
            # Mutual TLS for clients, as in nats-server.conf: the server certificate from
            # NATS_SERVER_TLS, and a client without a certificate signed by NATS_CA is refused.
            "nats": {"tls": {"enabled": True, "secretName": NATS_SERVER_TLS, "merge": {"verify": True}}},
            "merge": {
                "accounts": {
                    "KOTAE": {"jetstream": "enabled", "users": nats_users()},
                    "$SYS": {"users": [{"user": "sys", "password": "$NATS_PASSWORD_SYS"}]},
                }
            },
        },
        "container": {
            "env": {
                password_variable(u["user"]): {"valueFrom": {"secretKeyRef": {"name": "kotae-nats", "key": u["user"]}}}
                for u in [*nats_users(), {"user": "sys"}]
            }
        },
        "promExporter": {"enabled": True, "port": 7777, "podMonitor": {"enabled": False}},
        "tlsCA": {"enabled": True, "secretName": NATS_CA},
        # nats-box (kubectl exec into it to inspect streams) needs a client certificate too.
        "natsBox": {"contexts": {"default": {"tls": {"secretName": NATS_CLIENT_TLS}}}},
    }


def documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for stage in DEPLOYED:
        docs += [deployment(stage), service(stage)]
        if stage.consumes is not None:  # lag on its durable consumer says how many it needs
            docs.append(scaled_object(stage))
    docs.append(streams_job())
    return docs


HEAD = "# Generated by deploy/k8s/build.py — edit that file, not this one.\n"


NATS_CONF_HEAD = """\
# One node of a 3-node JetStream cluster for kotae (start three, each with its own
# server_name, store_dir and ports; list the other two under cluster.routes).
#
# Clients: mutual TLS (kotae's processes set KOTAE_NATS_TLS_CA, KOTAE_NATS_TLS_CERT and
# KOTAE_NATS_TLS_KEY), then one user per service (KOTAE_NATS_USER/KOTAE_NATS_PASSWORD) whose
# permissions come from kotae/bus/permissions.py. The server reads each password from its own
# environment: NATS_PASSWORD_RETRIEVER, NATS_PASSWORD_RERANKER, ... NATS_PASSWORD_SYS.
"""

NATS_CONF_BODY = """\
server_name: kotae-nats-1
listen: 0.0.0.0:4222
http: 0.0.0.0:8222          # /healthz, /jsz for monitoring and the Prometheus exporter

max_payload: 1MB

tls {
  cert_file: /etc/nats/tls/server.pem
  key_file: /etc/nats/tls/server-key.pem
  ca_file: /etc/nats/tls/ca.pem
  verify: true              # a client without a certificate signed by ca.pem is refused
}

jetstream {
  store_dir: /data/jetstream
  # fsync every write. The default (2m) acknowledges writes that a power failure on
  # a majority of nodes can still lose; answers and the audit log are worth the cost.
  sync_interval: always
  max_file_store: 20GB
}

cluster {
  name: kotae
  listen: 0.0.0.0:6222
  routes: [
    nats-route://kotae-nats-2:6222
    nats-route://kotae-nats-3:6222
  ]
}

system_account: SYS
"""


def nats_conf() -> str:
    """deploy/nats/nats-server.conf: the same account and users as the Helm values."""
    accounts = {
        "KOTAE": {"jetstream": "enabled", "users": nats_users()},
        "SYS": {"users": [{"user": "sys", "password": "$" + password_variable("sys")}]},
    }
    return HEAD + NATS_CONF_HEAD + "\n" + NATS_CONF_BODY + "\naccounts " + render_conf(accounts) + "\n"


COMPOSE_CONF_HEAD = """\
# The single NATS server of deploy/compose.yaml, with the same users as nats-server.conf
# and the Helm values: each service publishes only its own subjects (kotae/bus/permissions.py).
# The server reads each password from its environment (NATS_PASSWORD_RETRIEVER, ...), which
# compose passes from deploy/.env:
#
#   kotae nats passwords --out deploy/.env
#
# No TLS: clients reach this server over compose's private network, and the host only on
# 127.0.0.1. For a server other machines reach, use nats-server.conf (mutual TLS).
"""

COMPOSE_CONF_BODY = """\
server_name: kotae-nats
listen: 0.0.0.0:4222
http: 0.0.0.0:8222          # /healthz for compose's healthcheck, /jsz for the exporter

max_payload: 1MB

jetstream {
  store_dir: /data
  # sync_interval stays at the default (2m), as on the embedded server: one host whose
  # stream can be replayed. Why production uses `always`: docs/operations.md.
}
"""


def compose_conf() -> str:
    """deploy/nats/compose.conf: one server, no TLS, the same KOTAE account and users as :func:`nats_conf`.

    No system-account user: nothing in compose needs one (the exporter reads the monitoring port).
    """
    accounts = {"KOTAE": {"jetstream": "enabled", "users": nats_users()}}
    return HEAD + COMPOSE_CONF_HEAD + "\n" + COMPOSE_CONF_BODY + "\naccounts " + render_conf(accounts) + "\n"


def render() -> dict[Path, str]:
    return {
        OUT: HEAD + yaml.safe_dump_all(documents(), sort_keys=False, allow_unicode=True),
        NATS_VALUES: HEAD
        + "# helm install nats nats/nats -n nats -f deploy/k8s/nats-values.yaml\n"
        + yaml.safe_dump(nats_values(), sort_keys=False, allow_unicode=True),
        NATS_CONF: nats_conf(),
        COMPOSE_CONF: compose_conf(),
    }


def main() -> None:
    for path, text in render().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
