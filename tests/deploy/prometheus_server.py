"""A real Prometheus for tests, and the check that every shipped query finds what it reads.

:class:`PrometheusServer` runs the ``prometheus`` binary (Debian's package) on a free
loopback port with a temporary data folder and the config it is given, and talks to its
HTTP API. :func:`query_problems` asks it about each query of a dashboard or an alert:

* the query parses and evaluates (``/api/v1/query``);
* every series selector in it matches at least one series since ``since`` (``/api/v1/series``),
  so a typo'd or renamed metric or label value is found even where ``or vector(0)`` or a
  comparison hides it from the result;
* every label it groups or matches on (``by``, ``on``, ...) is a label its metrics carry;
* a dashboard query returns at least one series now.

A metric listed in ``may_stay_empty`` (with the reason) excuses its selectors and the
queries that read it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.promql import read


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrometheusServer:
    """``prometheus`` with ``config`` (a dict) in ``folder``, listening on 127.0.0.1; stop() ends it.

    Example::

        with PrometheusServer(binary, config, tmp_path) as prom:
            prom.query("up")
    """

    def __init__(self, binary: str, config: dict[str, Any], folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = folder / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        self.log_path = folder / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={self.folder / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.process.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"prometheus not ready after {timeout:.0f}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else "(no log)"

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- HTTP API ----------------------------------------------------------------------

    def api(self, path: str, **params: Any) -> dict[str, Any]:
        """POST ``/api/v1/<path>`` with form ``params``; the decoded body (``status`` says success or error)."""
        data = urllib.parse.urlencode(params, doseq=True).encode()
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}", data=data, timeout=30) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:  # 400/422: a query that does not parse or evaluate
            return json.loads(exc.read())

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` now; a query error raises."""
        body = self.api("query", query=expr)
        if body["status"] != "success":
            raise ValueError(f"{expr!r}: {body.get('error')}")
        return body["data"]["result"]

    def series(self, selector: str, since: float) -> list[dict[str, str]]:
        body = self.api("series", **{"match[]": selector, "start": since})
        if body["status"] != "success":
            raise ValueError(f"{selector!r}: {body.get('error')}")
        return body["data"]

    def rules(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/api/v1/rules", timeout=10) as response:
            return [rule for group in json.loads(response.read())["data"]["groups"] for rule in group["rules"]]

    def active_alerts(self) -> list[dict[str, Any]]:
        """Alerts firing or pending now, each with its labels and state."""
        with urllib.request.urlopen(f"{self.url}/api/v1/alerts", timeout=10) as response:
            return json.loads(response.read())["data"]["alerts"]

    def wait_for(self, expr: str, timeout: float) -> list[dict[str, Any]]:
        """Poll ``expr`` until it returns a series; the last result (empty when it never did)."""
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(expr)
            if result:
                break
            time.sleep(0.5)
        return result


def query_problems(
    prom: PrometheusServer,
    queries: dict[str, str],
    *,
    since: float,
    may_stay_empty: dict[str, str],
    must_return: set[str],
) -> list[str]:
    """What is wrong with each of ``queries`` (name → PromQL) on ``prom``; empty when nothing is.

    Names in ``must_return`` must return at least one series (dashboard panels do, alerts
    only while they fire).
    """
    problems = []
    labels_of: dict[str, set[str]] = {}
    for name, expr in queries.items():
        body = prom.api("query", query=expr)
        if body["status"] != "success":
            problems.append(f"{name}: does not evaluate: {body.get('error')}")
            continue
        reading = read(expr)
        excused = reading.metrics & set(may_stay_empty)
        for selector in reading.selectors:
            if selector.metric not in may_stay_empty and not prom.series(str(selector), since):
                problems.append(f"{name}: {selector} matches no series")
        for metric in reading.metrics - excused:
            if metric not in labels_of:
                labels_of[metric] = {label for series in prom.series(metric, since) for label in series}
        known = set().union(*(labels_of[m] for m in reading.metrics - excused)) if reading.metrics - excused else set()
        if not excused:
            for label in sorted(reading.grouping - known):
                problems.append(f"{name}: groups or matches on {label!r}, which none of its series carries")
        if name in must_return and not excused and not body["data"]["result"]:
            problems.append(f"{name}: returns no series")
    return problems
