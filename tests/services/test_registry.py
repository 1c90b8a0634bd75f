"""The one list of stages (kotae.services.STAGES) and everything that derives from it.

Adding a stage is its folder, one line in the registry, its contract, and
regenerating the deployment files; these tests say what else would have gone
wrong if any list were still written out by hand somewhere.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from kotae import asyncapi
from kotae.bus.permissions import service_users
from kotae.cli import build_parser
from kotae.contracts import subjects
from kotae.services import STAGES
from kotae.settings import Settings
from kotae.stack import ON_REQUEST, STAGES as STACK_STAGES
from kotae.stage import hot_path

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = [stage.name for stage in STAGES if stage.runs_as_process]


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_stage_folder_declares_itself_and_is_listed_once() -> None:
    folders = sorted(p.name for p in (ROOT / "services").iterdir() if (p / "__init__.py").exists())
    names = [stage.name for stage in STAGES]
    assert sorted(names) == folders
    assert len(set(names)) == len(names)
    for stage in STAGES:
        assert importlib.import_module(f"kotae.services.{stage.name}").STAGE is stage


def test_each_declaration_is_consistent_with_the_bus() -> None:
    for stage in STAGES:
        for output in stage.outputs:
            assert subjects.stream_of(output.subject)  # some stream stores every output
            assert "schema_version" in output.contract.model_fields or output.contract.__name__ == "DeadLetterV1"
        if stage.consumes is not None:
            assert stage.handler, f"{stage.name} consumes but names no handler"
            module, _, function = stage.handler.partition(":")
            assert callable(getattr(importlib.import_module(module), function))
        if stage.service is not None:  # a long-running service instead of a shared durable and a handler
            assert stage.consumes is None and stage.handler is None, stage.name
            assert inspect.iscoroutinefunction(stage.load_service()), stage.service
        for read in stage.reads:
            assert read.subject.startswith(subjects.PREFIX + ".") and read.stream in subjects.STREAM_SUBJECTS
            assert "schema_version" in read.contract.model_fields
        if stage.model_setting:
            assert stage.model_setting in Settings.model_fields, stage.model_setting
        for extra in stage.extra_ports:
            assert extra.setting.removeprefix("KOTAE_").lower() in Settings.model_fields, extra.setting


def test_the_hot_path_runs_from_comments_to_answers_through_declared_stages() -> None:
    hops = hot_path(STAGES)
    assert hops[0].takes == subjects.COMMENT
    assert hops[-1].passes == subjects.ANSWER_PREFIX
    for before, after in zip(hops, hops[1:], strict=False):
        assert before.passes == after.takes


def test_the_stack_the_cli_and_the_nats_users_derive_from_the_registry() -> None:
    assert list(STACK_STAGES) == [stage.name for stage in STAGES if stage.runs_as_process and not stage.on_request]
    assert list(ON_REQUEST) == [stage.name for stage in STAGES if stage.runs_as_process and stage.on_request]
    parser = build_parser()
    for name in PROCESSES:
        assert parser.parse_args(["serve", name]).stage == name
    for name in ON_REQUEST:  # run only when asked: a flag of up, demo and replay each
        for command in (["up"], ["demo"], ["replay", "comments.jsonl"]):
            assert getattr(parser.parse_args([*command, f"--{name}"]), name) is True
            assert getattr(parser.parse_args(command), name) is False
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "ingest"])  # declared, but driven by its commands: not a process
    users = service_users(STAGES, Settings.model_construct())
    for stage in STAGES:
        published = [s for s in users[stage.name].publish if s.startswith(subjects.PREFIX + ".")]
        assert sorted(published) == list(stage.published)


def test_an_on_request_stage_brings_its_options_and_the_stack_names_no_stage(tmp_path: Path) -> None:
    """``kotae up/demo/replay --<name>`` take the options its declaration lists and pass them as it says."""
    from kotae.cli import _airs, _stack_options

    parser = build_parser()
    asked = [stage for stage in STAGES if stage.on_request]
    assert asked, "a stage runs only when asked"
    for stage in asked:
        for option in stage.on_request.options:
            args = parser.parse_args(["replay", "comments.jsonl", f"--{stage.name}", option.flag, "given"])
            _, _, env = _stack_options(args, standby=False)
            assert env[option.env] == (str(Path("given").resolve()) if option.path else "given")
            _, _, env = _stack_options(parser.parse_args(["up", f"--{stage.name}"]), standby=True)
            assert (option.env in env) == (option.default is not None)  # e.g. a new show unless one is named
            _, _, env = _stack_options(parser.parse_args(["up"]), standby=True)
            assert option.env not in env  # not asked: nothing of it
        airs = subjects.onair("finished") in stage.published  # a demo then waits for what aired, and shows it
        assert _airs(parser.parse_args(["demo", f"--{stage.name}"])) is airs
    assert _airs(parser.parse_args(["demo"])) is False
    names = {stage.name for stage in STAGES}
    tree = ast.parse((ROOT / "kotae" / "stack.py").read_text(encoding="utf-8"))
    assert [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names] == []


def test_a_stage_that_reads_through_consumers_of_its_own_may_do_that_and_nothing_more() -> None:
    """Its user may create consumers on the streams it reads, never bind or delete another stage's durable."""
    users = service_users(STAGES, Settings.model_construct())
    readers = [stage for stage in STAGES if stage.reads]
    assert readers, "a stage reads streams through consumers of its own"
    for stage in readers:
        user = users[stage.name]
        for read in stage.reads:
            assert f"$JS.API.CONSUMER.CREATE.{read.stream}" in user.publish
            assert f"$JS.API.CONSUMER.MSG.NEXT.{read.stream}.>" in user.publish
            for other in STAGES:
                if other.consumes is not None and other.consumes.stream == read.stream:
                    assert f"$JS.API.CONSUMER.*.{read.stream}.{other.durable}" in user.publish_deny
        assert not any(s.startswith("$JS.API.STREAM.UPDATE") for s in user.publish)


def test_asyncapi_documents_every_declared_input_and_output() -> None:
    spec = json.loads(asyncapi.documents()["asyncapi.json"])
    channels = set(spec["channels"])
    for stage in STAGES:
        for subject in stage.published:
            assert f"{stage.name}:{subject}" in channels, (stage.name, subject)
        if stage.consumes is not None:
            assert f"{stage.name}:{stage.consumes.subject}" in channels
        for read in stage.reads:
            assert f"{stage.name}:{read.subject}" in channels


def test_the_deployment_files_run_every_stage_and_are_current() -> None:
    k8s = _module(ROOT / "deploy/k8s/build.py")
    rendered = k8s.render()
    for path, text in rendered.items():
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: python deploy/k8s/build.py"
    docs = [d for d in yaml.safe_load_all(rendered[k8s.OUT]) if d]
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert sorted(deployments) == sorted(f"kotae-{n}" for n in PROCESSES)
    scalers = {d["metadata"]["name"] for d in docs if d["kind"] == "ScaledObject"}
    for stage in STAGES:
        if stage.runs_as_process:  # lag scales a shared consumer; a service keeps the replicas it declares
            assert (f"kotae-{stage.name}" in scalers) == (stage.consumes is not None)
            if stage.service is not None:
                assert deployments[f"kotae-{stage.name}"]["spec"]["replicas"] == stage.resources.min_replicas
    compose = _module(ROOT / "deploy/compose/build.py")
    text = compose.render()
    assert compose.OUT.read_text(encoding="utf-8") == text, (
        "deploy/compose.yaml is stale: python deploy/compose/build.py"
    )
    services = yaml.safe_load(text)["services"]
    for name in PROCESSES:
        assert services[name]["command"] == ["kotae", "serve", name]
    for generated in (k8s.OUT, compose.OUT):
        assert generated.read_text(encoding="utf-8").startswith("# Generated by ")


def test_no_hand_written_list_of_the_model_path_stages_outside_the_registry() -> None:
    """Python outside services/ and tests/ never spells a hot-path stage's name: it asks the registry."""
    names = {hop.stage.name for hop in hot_path(STAGES)}
    found = []
    for folder in ("kotae", "bench", "deploy"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == []


def test_the_shared_kit_does_not_import_the_stages() -> None:
    """Settings, the bus, tracing, metrics, model clients, the knowledge base and the language layer know no stage."""
    kit = [
        *sorted((ROOT / "kotae/bus").glob("*.py")),
        *sorted((ROOT / "kotae/knowledge").glob("*.py")),
        *sorted((ROOT / "kotae/language").rglob("*.py")),
        *(ROOT / "kotae" / f"{name}.py" for name in ("settings", "stage", "tracing", "logs", "metrics", "providers",
                                                     "prompts", "faults", "citations", "clarify", "runtime")),
    ]  # fmt: skip
    importers = []
    for path in kit:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [module or ""]
            if any(n.startswith("kotae.services") for n in names):
                importers.append(str(path.relative_to(ROOT)))
    assert importers == []
