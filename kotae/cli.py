"""The ``kotae`` command line.

Commands and their formats are a public interface (see README.md). Bad input
stops a command with the file, line and field, a non-zero exit, and nothing
half-written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from kotae import __version__
from kotae.settings import Settings, SettingsError, load_settings

EXIT_USAGE = 2
EXIT_FAILED = 1


class CommandError(Exception):
    """A command cannot go on; the message says why."""


#: Commands that stop as soon as the NATS server refuses them something (set by ``main``): a short
#: request of the operator's or of ``kotae streams`` can do nothing once refused, and waiting for
#: its timeout only delays the message that says which user it ran as.
_stop_when_refused = False


async def _unless_refused(main: Any) -> Any:
    from kotae.bus.connection import on_permission_denial

    work = asyncio.ensure_future(main)
    refused = asyncio.Event()
    remove = on_permission_denial(lambda _violation: refused.set())
    watch = asyncio.ensure_future(refused.wait())
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        remove()
        watch.cancel()
    if not work.done():
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        raise CommandError("the NATS server refused this command")  # main() says which user it ran as
    return work.result()


def _run(main: Any) -> Any:
    """``asyncio.run`` that closes the model clients the command opened before the loop ends."""

    async def closing() -> Any:
        try:
            return await (_unless_refused(main) if _stop_when_refused else main)
        finally:
            providers = sys.modules.get("kotae.providers")  # loaded only if the command called a model
            if providers is not None:
                await providers.close_models()

    return asyncio.run(closing())


def _samples() -> Path:
    return Path(str(resources.files("kotae.samples")))


def _write_atomically(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _read_jsonl(path: Path, what: str) -> list[tuple[str, dict[str, Any]]]:
    from kotae.jsonl import json_objects

    return list(json_objects(path, what, CommandError))


def _require_str(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise CommandError(f"{where}: field '{key}': required, a non-empty string")
    return value


# --- kb -----------------------------------------------------------------------


class LoadProgress:
    """Progress of a long knowledge-base load on stderr: chunks embedded, elapsed, an estimate of what is left.

    Quiet for a load that embeds fewer than ``from_chunks`` chunks (the bundled sample, a reload
    that changed one record); otherwise a line every ``every_s`` seconds and one at the end.
    """

    def __init__(self, name: str, *, from_chunks: int = 200, every_s: float = 2.0) -> None:
        import time

        self.name, self.from_chunks, self.every_s = name, from_chunks, every_s
        self.clock = time.monotonic
        self.started = self.clock()
        self.last = -every_s

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if total < self.from_chunks or (done < total and now - self.last < self.every_s):
            return
        self.last = now
        elapsed = now - self.started
        left = f", about {elapsed / done * (total - done):.0f} s left" if 0 < done < total else ""
        print(
            f"kotae: knowledge base {self.name!r}: embedded {done}/{total} new or changed chunks ({elapsed:.0f} s{left})",
            file=sys.stderr,
            flush=True,
        )


def load_knowledge_base(path: Path, name: str, settings: Settings) -> dict[str, Any]:
    from kotae.knowledge import loading
    from kotae.knowledge.records import load_records

    records = load_records(path)  # every line checked first
    return loading.load_knowledge_base(records, name, settings, progress=LoadProgress(name))


def cmd_kb_load(args: argparse.Namespace, settings: Settings) -> int:
    report = load_knowledge_base(Path(args.path), args.name, settings)
    print(json.dumps(report, ensure_ascii=False))
    return 0


# --- search / verify ----------------------------------------------------------


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    from kotae.language.text import normalize
    from kotae.services.retriever.logic import Retriever

    queries = []
    for where, row in _read_jsonl(Path(args.batch), "a query"):
        qid = row.get("id")
        if not isinstance(qid, str | int) or isinstance(qid, bool):
            raise CommandError(f"{where}: field 'id': required, a string or number")
        text = _require_str(row, "text", where)
        at = row.get("at")
        try:
            day = date.fromisoformat(at[:10]) if isinstance(at, str) else (date.today() if at is None else None)
        except ValueError:
            day = None
        if day is None:
            raise CommandError(f"{where}: field 'at': expected an ISO date such as 2027-04-01")
        queries.append((qid, text, day))
    retriever = Retriever(settings)
    retriever.searcher(args.kb or settings.kb)  # refuse early: a missing index or another model
    lines = []
    for qid, text, day in queries:
        result = retriever.retrieve(normalize(text), kb=args.kb or settings.kb, day=day)
        lines.append(
            json.dumps(
                {
                    "id": qid,
                    "gate": result.gate,
                    "top_score": result.top_score,
                    "docs": [{"doc_id": d.doc_id, "chunk_id": d.chunk_id, "score": d.score} for d in result.docs],
                    "faq": [{"faq_id": f.faq_id, "score": f.score} for f in result.faq],
                },
                ensure_ascii=False,
            )
        )
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    from kotae.contracts import Evidence
    from kotae.language.relevance import relevance
    from kotae.language.text import split_sentences
    from kotae.services.verifier.logic import verify

    cases = []
    for where, row in _read_jsonl(Path(args.batch), "a verification case"):
        cid = row.get("id")
        if not isinstance(cid, str | int) or isinstance(cid, bool):
            raise CommandError(f"{where}: field 'id': required, a string or number")
        question = _require_str(row, "question", where)
        answer = row.get("answer")
        if not isinstance(answer, str):
            raise CommandError(f"{where}: field 'answer': required, a string")
        contexts = row.get("contexts")
        if not isinstance(contexts, list):
            raise CommandError(f"{where}: field 'contexts': required, a list of {{id, text}}")
        docs = []
        for i, ctx in enumerate(contexts):
            if not isinstance(ctx, dict) or not isinstance(ctx.get("text"), str):
                raise CommandError(f"{where}: field 'contexts.{i}.text': required, a string")
            ctx_id = str(ctx.get("id", i + 1))
            docs.append(Evidence(doc_id=ctx_id, chunk_id=ctx_id, text=ctx["text"]))
        cases.append((cid, question, answer, docs))
    out = []
    for cid, question, answer, docs in cases:
        verdict = verify(answer, docs, [], question=question, sure=settings.verifier_sure)
        rel = (
            relevance(question, split_sentences(answer), [(d.title, d.text) for d in docs]) if answer.strip() else None
        )
        out.append(
            json.dumps(
                {
                    "id": cid,
                    "verdict": verdict.verdict,
                    "reasons": verdict.reasons,
                    "method": verdict.method,
                    "decision": verdict.decision,
                    "support": verdict.support,
                    "decided_by": "offline",
                    "relevant": None if rel is None else rel.relevant,
                    "relevance_reasons": [] if rel is None else rel.reasons,
                },
                ensure_ascii=False,
            )
        )
    sys.stdout.write("".join(line + "\n" for line in out))
    return 0


# --- the bus: serve, up, replay, demo, report ---------------------------------


def _process_stages() -> dict[str, Any]:
    from kotae.services import STAGES

    return {stage.name: stage for stage in STAGES if stage.runs_as_process}


def _on_request_stages() -> dict[str, Any]:
    """Stages ``kotae up``/``demo``/``replay`` run only when asked (``--<name>``), e.g. the on-air stage."""
    return {name: stage for name, stage in _process_stages().items() if stage.on_request}


def _asked(args: argparse.Namespace) -> dict[str, Any]:
    """The on-request stages whose ``--<name>`` was given."""
    return {name: stage for name, stage in _on_request_stages().items() if getattr(args, name, False)}


def _airs(args: argparse.Namespace | None) -> bool:
    """Whether a stage asked for puts answers on air: a demo or a replay then waits for their air outcomes and shows them."""
    from kotae.contracts import subjects

    if args is None:
        return False
    outcomes = {subjects.onair(outcome) for outcome in subjects.AIR_OUTCOMES}
    return any(outcomes & set(stage.published) for stage in _asked(args).values())


def _stack_options(
    args: argparse.Namespace, *, standby: bool
) -> tuple[tuple[str, ...], dict[str, int], dict[str, str]]:
    """(stages, processes per stage where not one, environment of the stage processes) for the flags given.

    ``standby``: run as many processes of an on-request stage as its declaration asks
    (the on-air stage: one voice and a standby), as ``kotae up`` does; a demo or a
    replay runs one, and its extra ports take any free port unless their variable says
    which: nothing needs a stable address there. Each asked stage's options become the
    variables its declaration names.
    """
    from kotae.stack import STAGES

    asked = _asked(args)
    replicas = {name: stage.resources.min_replicas for name, stage in asked.items()} if standby else {}
    env: dict[str, str] = {}
    for stage in asked.values():
        for option in stage.on_request.options:
            value = getattr(args, option.dest, None)
            if value and option.path:
                value = str(Path(value).expanduser().resolve())
            value = value or stage.on_request.default_of(option)
            if value:
                env[option.env] = value
        if not standby:
            for port in stage.extra_ports:
                if port.setting not in os.environ:
                    env[port.setting] = "0"
    return STAGES + tuple(asked), replicas, env


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from kotae.logs import get_logger
    from kotae.runtime import build_stage_app, run_loop, settle_heap
    from kotae.stack import Stack

    stages = _process_stages()
    if args.stage not in stages:
        raise CommandError(f"unknown stage {args.stage!r}; expected one of {', '.join(stages)}")
    stage = stages[args.stage]
    stack = None
    if not settings.nats_url:
        stack = Stack(settings, stages=(), client=args.stage)
        stack.start_server()
        settings = stack.settings_for()
        print(
            f"kotae: started nats-server at {stack.address}; other processes connect with the credentials "
            f"in {stack.write_env_files()}/<user>.env (or set KOTAE_NATS_URL to share a server)",
            file=sys.stderr,
        )
    app = build_stage_app(stage, settings)

    @app.after_startup
    async def _settle() -> None:
        frozen = settle_heap(stage, settings)
        get_logger("kotae.serve").info("stage.heap_frozen", service=stage.name, objects=frozen)

    try:
        run_loop(app.run(), settings)
    finally:
        if stack:
            stack.stop()
    return 0


def _refuse_without_kb(settings: Settings) -> None:
    """Stop before starting anything when the knowledge base is not loaded: every comment would fail."""
    from kotae.knowledge.loading import not_loaded

    problem = not_loaded(settings, settings.kb)
    if problem:
        raise CommandError(
            f"{problem}: load it first with `kotae kb load PATH` (a JSONL file or a folder of Markdown and FAQ "
            f"YAML{'' if settings.kb == 'default' else f', with --name {settings.kb}'}), "
            "or start anyway with --allow-empty-kb"
        )


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    from kotae.stack import Stack, StackError

    if not args.allow_empty_kb:
        _refuse_without_kb(settings)

    async def run() -> None:
        from kotae.bus.permissions import STACK

        stages, per_stage, env = _stack_options(args, standby=True)
        prepared = _prepare_asked(args, settings)
        stack = Stack(settings, stages=stages, replicas=args.replicas, client=STACK, stage_replicas=per_stage, env=env)
        await stack.start()
        # Ctrl-C stops every process from here on: before the first line, so whoever reads it may send it.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            print(
                f"kotae is up: nats {stack.address}, stages {', '.join(stack.stages)}; logs in {stack.log_dir}",
                flush=True,
            )
            _announce_asked(args, settings, env, stack, prepared)
            if settings.metrics_port:
                from kotae.metrics import serve_metrics

                serve_metrics(settings.metrics_port)  # this process's own: stage restarts
            env_dir = stack.write_env_files()
            if env_dir:
                print(
                    f"Other processes log in with the credentials in {env_dir}, e.g. "
                    f"set -a; . {env_dir}/replay.env; set +a; kotae ingest replay FILE",
                    flush=True,
                )
            print("A stage that exits is started again; Ctrl-C stops every process.", flush=True)
            while not stop.is_set():
                try:
                    for stage in stack.supervise():
                        print(f"kotae: restarted {stage} (see {stack.log_dir})", file=sys.stderr, flush=True)
                except StackError as exc:
                    raise CommandError(str(exc)) from None
                try:
                    await asyncio.wait_for(stop.wait(), 0.5)
                except TimeoutError:
                    pass
        finally:
            stack.stop()

    _run(run())
    return 0


def _prepare_asked(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Each asked on-request stage's preparation, before anything starts (one that may not start stops here)."""
    from kotae.stage import StartRefused

    try:
        return {name: stage.on_request.run_prepare(settings) for name, stage in _asked(args).items()}
    except StartRefused as exc:
        raise CommandError(str(exc)) from None


def _announce_asked(
    args: argparse.Namespace, settings: Settings, env: dict[str, str], stack: Any, prepared: dict[str, Any]
) -> None:
    """What each asked on-request stage says once it runs (the on-air stage: where its pages are)."""
    for name, stage in _asked(args).items():
        for line in stage.on_request.run_announce(settings, env, stack.replicas_of(name), prepared[name]):
            print(line, flush=True)


def cmd_nats(args: argparse.Namespace, settings: Settings) -> int:
    from kotae import nats_users

    if args.action == "passwords":
        return nats_users.write_passwords(Path(args.out) if args.out else None)
    return nats_users.write_creds(Path(args.account_seed), Path(args.out), args.account)


def _load_kb_if_given(path: str | None, name: str, settings: Settings) -> None:
    if path:
        r = load_knowledge_base(Path(path), name, settings)
        index = r["index"]
        built = f"index rebuilt with {index['model']} in {index['seconds']}s" if index["rebuilt"] else "index current"
        print(
            f"kotae: knowledge base {name!r}: {r['docs']} documents, {r['faq']} FAQ, {r['chunks']} chunks "
            f"({r['added']} added, {r['updated']} updated, {r['unchanged']} unchanged; {built})",
            file=sys.stderr,
        )


async def _replay_on_stack(
    settings: Settings,
    comments: list[Any],
    timeout: float,
    wait_evals: float,
    args: argparse.Namespace | None = None,
) -> Any:
    from kotae.bus.permissions import REPLAY
    from kotae.replay import run_replay
    from kotae.stack import STAGES, Stack

    stages, per_stage, env = _stack_options(args, standby=False) if args is not None else (STAGES, {}, {})
    stack = Stack(settings, stages=stages, client=REPLAY, stage_replicas=per_stage, env=env)
    await stack.start()
    try:
        return await run_replay(
            stack.settings_for(),
            stack.address,
            comments,
            timeout=timeout,
            wait_for_evaluations=wait_evals,
            onair=_airs(args),
            timing=getattr(args, "timing", "fast"),
            speed=getattr(args, "speed", 1.0),
        )
    finally:
        stack.stop()


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    from kotae.replay import write_jsonl
    from kotae.services.ingest.sources import read_replay_file

    if args.speed <= 0:
        raise CommandError(f"--speed must be above 0, got {args.speed}")
    comments = read_replay_file(Path(args.file))  # whole file checked before anything starts
    if args.kb:
        from kotae.knowledge.records import load_records

        load_records(Path(args.kb))  # check before starting anything
    _load_kb_if_given(args.kb, settings.kb, settings)
    result = _run(_replay_on_stack(settings, comments, args.timeout, 0.0, args))
    # What did arrive is written even when the timeout cut the wait short: a slow run keeps its results.
    records = result.ordered()
    if args.out:
        _write_atomically(Path(args.out), write_jsonl(records))
        print(f"kotae: {len(records)} outcomes written to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(write_jsonl(records))
    if result.missing:
        raise CommandError(
            f"{len(result.missing)} of {len(result.order)} comment(s) had no outcome within {args.timeout:g}s "
            f"(--timeout), so they are not in {args.out or 'the output'}: {', '.join(result.missing[:20])}"
        )
    if result.unaired:
        raise CommandError(
            f"{len(result.unaired)} verified answer(s) had no air outcome within {args.timeout:g}s (--timeout): "
            + ", ".join(result.unaired[:20])
        )
    return 0


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from kotae.replay import run_replay, write_jsonl
    from kotae.services.ingest.sources import read_replay_file, read_stream

    if not settings.nats_url:
        raise CommandError("kotae ingest publishes to a running bus: set KOTAE_NATS_URL (see `kotae up`)")
    if args.source in ("youtube", "onecomme") or getattr(args, "follow", False):
        return _ingest_live(args, settings)
    if getattr(args, "speed", 1.0) <= 0:
        raise CommandError(f"--speed must be above 0, got {args.speed}")
    comments = read_replay_file(Path(args.file)) if args.source == "replay" else list(read_stream(sys.stdin))
    timing = getattr(args, "timing", "fast")
    result = _run(
        run_replay(
            settings,
            settings.nats_url,
            comments,
            timeout=args.timeout,
            source=args.source,
            timing=timing,
            speed=getattr(args, "speed", 1.0),
        )
    )
    sys.stdout.write(write_jsonl(result.ordered()))
    if result.missing:
        print(
            f"kotae: {len(result.missing)} of {len(result.order)} comment(s) had no outcome within {args.timeout:g}s "
            f"(--timeout): {', '.join(result.missing[:20])}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return 0


def _ingest_youtube(args: argparse.Namespace, settings: Settings) -> int:
    """``kotae ingest youtube``: by streamList (polling when it is refused) or, with ``--transport poll``, by polling."""
    from kotae.services.ingest.live import run_live
    from kotae.services.ingest.state import KvState
    from kotae.services.ingest.youtube import YouTubeError, YouTubeLiveChat
    from kotae.services.ingest.youtube_stream import YouTubeChatStream

    if not (settings.youtube_api_key or settings.youtube_oauth_token):
        raise CommandError("kotae ingest youtube needs KOTAE_YOUTUBE_API_KEY (or KOTAE_YOUTUBE_OAUTH_TOKEN)")
    transport = args.transport or settings.youtube_transport
    ended: list[str | None] = []

    def announce(name: str, reason: str | None) -> None:
        if name == "stream":
            print(f"kotae: reading the YouTube chat of {args.video} by streamList", file=sys.stderr)
        else:
            print(f"kotae: streamList refused ({reason}); polling liveChatMessages.list instead", file=sys.stderr)

    def source(js: Any) -> Any:
        async def pages() -> Any:
            state = await KvState.open(js, settings.ingest_kv_bucket)
            if transport == "stream":
                chat: Any = YouTubeChatStream.from_settings(settings, args.video, state, on_transport=announce)
            else:
                print(f"kotae: reading the YouTube chat of {args.video} by polling", file=sys.stderr)
                chat = YouTubeLiveChat.from_settings(settings, args.video, state)
            try:
                async for page in chat.pages():
                    yield page
            finally:
                ended.append(chat.end_reason)
                await chat.aclose()

        return pages()

    try:
        _run(run_live(settings, settings.nats_url, source, source_name="youtube"))
    except YouTubeError as exc:
        raise CommandError(str(exc)) from None
    print(f"kotae: YouTube chat of {args.video} ended ({ended[0] if ended else 'stopped'})", file=sys.stderr)
    return 0


def _ingest_live(args: argparse.Namespace, settings: Settings) -> int:
    """``kotae ingest youtube|onecomme``: publish until the chat ends (or Ctrl-C), one status line per comment."""
    from kotae.services.ingest.live import run_live
    from kotae.services.ingest.triage import BlocklistError, Triage

    try:
        Triage.from_settings(settings, source=args.source)  # refuse a bad blocklist or model before connecting
    except BlocklistError as exc:
        raise CommandError(str(exc)) from None
    if args.source == "stdin":
        from kotae.services.ingest.sources import follow_stream, report_bad_line

        skipped: list[Any] = []

        def skip(error: Any) -> None:
            skipped.append(error)
            report_bad_line(error)

        _run(
            run_live(
                settings, settings.nats_url, lambda js: follow_stream(sys.stdin, on_bad_line=skip), source_name="stdin"
            )
        )
        if skipped:  # the feed went on; the exit status still says that some of it was not published
            print(f"kotae: {len(skipped)} bad line(s) skipped (above); the others were published", file=sys.stderr)
            return EXIT_FAILED
        return 0
    if args.source == "youtube":
        return _ingest_youtube(args, settings)
    from kotae.services.ingest.onecomme import OneCommeError, OneCommeFeed

    try:
        feed = OneCommeFeed(args.url or settings.onecomme_url, reconnect=not args.once)
    except OneCommeError as exc:
        raise CommandError(str(exc)) from None
    _run(run_live(settings, settings.nats_url, lambda js: feed.batches(), source_name="onecomme"))
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from kotae.demo_table import render, render_air
    from kotae.services.ingest.sources import RawComment, read_replay_file

    samples = _samples()
    kb_path = Path(args.kb) if args.kb else samples / "kb"
    comments_path = Path(args.comments) if args.comments else samples / "comments.jsonl"
    items = read_replay_file(comments_path)
    comments = [item for item in items if isinstance(item, RawComment)]
    _load_kb_if_given(str(kb_path), settings.kb, settings)
    print(
        f"kotae demo: {len(comments)} comments from {comments_path.name}, knowledge base {kb_path.name}; starting the stack…",
        flush=True,
    )
    airs = _airs(args)
    result = _run(_replay_on_stack(settings, items, args.timeout, 0.0 if airs else 15.0, args))
    print(render(comments, result))
    if airs:
        print()
        print(render_air(comments, result, _slide_images(kb_path)))
    if result.missing:
        raise CommandError(f"{len(result.missing)} comment(s) had no outcome: {', '.join(result.missing)}")
    if result.unaired:
        raise CommandError(f"{len(result.unaired)} verified answer(s) had no air outcome: {', '.join(result.unaired)}")
    return 0


def _slide_images(kb_path: Path) -> dict[str, str]:
    """Each record's slide image, as a path within the knowledge base folder where it is one."""
    from kotae.knowledge.records import load_records

    base = kb_path.resolve() if kb_path.is_dir() else kb_path.resolve().parent
    images = {}
    for record in load_records(kb_path):
        if record.slide_image:
            image = Path(record.slide_image)
            images[record.id] = str(image.relative_to(base)) if image.is_relative_to(base) else record.slide_image
    return images


def cmd_onair(args: argparse.Namespace, settings: Settings) -> int:
    from kotae.services.onair.commands import OperatorError, check, operator_settings, run_command

    try:
        check(args.action, args.target)
        print(_run(run_command(operator_settings(settings), args.action, args.target)))
    except OperatorError as exc:
        raise CommandError(str(exc)) from None
    return 0


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    from kotae.services.evaluator.counting import InvalidCount
    from kotae.services.evaluator.logic import SummaryMismatch
    from kotae.services.evaluator.report import collect_evaluations, render_report, write_png
    from kotae.stack import Stack

    async def run() -> list[Any]:
        from kotae.bus.permissions import REPORT

        stack = Stack(settings, stages=(), client=REPORT)
        stack.start_server()
        try:
            return await collect_evaluations(stack.settings_for(), stack.address)
        finally:
            stack.stop()

    evaluations = _run(run())
    try:
        text = render_report(evaluations, as_json=args.json)
    except (InvalidCount, SummaryMismatch) as exc:
        raise CommandError(f"{settings.data_dir} (stream KOTAE_EVALUATIONS): {exc}") from None
    if args.png:
        write_png(evaluations, Path(args.png))
        print(f"kotae: chart of the rates over time written to {args.png}", file=sys.stderr)
    print(text)
    return 0


def cmd_streams(args: argparse.Namespace, settings: Settings) -> int:
    """Create kotae's streams on KOTAE_NATS_URL, or bring existing ones to this version's settings."""
    import nats

    from kotae.bus.connection import connect_options
    from kotae.bus.topology import differences, ensure_streams, stream_config
    from kotae.contracts import subjects

    if not settings.nats_url:
        raise CommandError("KOTAE_NATS_URL is not set: `kotae streams` manages the streams of an existing server")

    async def run() -> list[str]:
        nc = await nats.connect(**connect_options(settings))
        try:
            js = nc.jetstream()
            await ensure_streams(js, settings, update=True)
            lines = []
            for name in subjects.STREAM_SUBJECTS:
                info = await js.stream_info(name)
                left = differences(stream_config(name, settings), info.config)
                state = "as declared" if not left else "kept (cannot change in place): " + "; ".join(left)
                lines.append(
                    f"{name}: {info.state.messages} messages, {', '.join(info.config.subjects or [])} — {state}"
                )
            return lines
        finally:
            await nc.close()

    for line in _run(run()):
        print(line)
    return 0


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    from kotae.replay import run_replay, write_jsonl
    from kotae.services.evaluator.counting import summarize
    from kotae.services.evaluator.labelled import read_question_set
    from kotae.services.evaluator.scorecard import QuestionResult, follow_merges, misses, render, score
    from kotae.services.ingest.sources import RawComment
    from kotae.stack import Stack

    files = [Path(f) for f in args.files]
    questions = read_question_set(files)  # every line of every file checked before anything starts
    if args.kb:
        from kotae.knowledge.records import load_records

        load_records(Path(args.kb))
    _load_kb_if_given(args.kb, settings.kb, settings)
    versions = sorted({q.set_version for q in questions})

    async def run() -> list[tuple[Any, Any]]:
        from kotae.bus.permissions import REPLAY

        stack = Stack(settings, client=REPLAY)
        await stack.start()
        try:
            runs = []
            for version in versions:
                batch = [q for q in questions if q.set_version == version]
                # One viewer per question: a shared author would make each question after an ask-back
                # read as that viewer's reply to it.
                comments = [
                    RawComment(id=q.id, author=f"kotae-eval:{q.id}", text=q.text, published_at=q.at) for q in batch
                ]
                result = await run_replay(
                    stack.settings_for(),
                    stack.address,
                    comments,
                    timeout=args.timeout,
                    source=f"eval:{version}",
                    wait_for_evaluations=args.evaluations_wait,
                )
                runs.append((batch, result))
            return runs
        finally:
            stack.stop()

    names = ", ".join(str(f) for f in files)
    print(f"kotae eval: {len(questions)} questions from {names}; starting the stack…", file=sys.stderr, flush=True)
    scores, results, evaluations = [], [], []
    for batch, result in _run(run()):
        rows = follow_merges(
            [
                QuestionResult(q, result.records.get(q.id), result.answers.get(q.id), result.evaluations.get(q.id))
                for q in batch
            ]
        )
        results += rows
        scores.append(score(rows))
        evaluations += list(result.evaluations.values())
    if args.out:
        _write_atomically(Path(args.out), write_jsonl([r.as_dict() for r in results]))
        print(f"kotae: {len(results)} per-question records written to {args.out}", file=sys.stderr)
    if args.json:
        print(
            json.dumps(
                {"sets": [s.as_dict() for s in scores], "evaluations": summarize(evaluations)},
                ensure_ascii=False,
                indent=2,
            )
        )
    else:
        from kotae.services.evaluator.report import render_table

        print(render(scores, misses(results)))
        if evaluations:
            print("\nevaluator, same questions (kotae report's rules):")
            print(render_table(summarize(evaluations)))
    return 0 if all(s.failed == 0 for s in scores) else EXIT_FAILED


def cmd_calibrate(args: argparse.Namespace, settings: Settings) -> int:
    from kotae.services.retriever.calibrate import choose, histogram, scores_for
    from kotae.services.retriever.logic import Retriever

    questions = []
    for where, row in _read_jsonl(Path(args.file), "a labelled question"):
        _require_str(row, "text", where)
        if row.get("kind") not in ("answerable", "offtopic"):
            raise CommandError(f"{where}: field 'kind': expected 'answerable' or 'offtopic'")
        questions.append(row)
    kinds = {q["kind"] for q in questions}
    if kinds != {"answerable", "offtopic"}:
        raise CommandError(
            f"{args.file}: needs both answerable and offtopic questions (found: {', '.join(sorted(kinds)) or 'none'})"
        )
    kb = args.kb or settings.kb
    day = date.fromisoformat(args.at) if args.at else date.today()
    retriever = Retriever(settings)
    answerable, offtopic = scores_for(retriever, questions, kb, day)
    cal = choose(answerable, offtopic, args.offtopic_target)
    png = Path(args.png)
    histogram(cal, png, f"gate scores, knowledge base {kb!r}")

    def dist(name: str, xs: list[float]) -> str:
        q = np.percentile(xs, [0, 25, 50, 75, 100])
        return f"{name:<11} n={len(xs):<4} min {q[0]:.2f}  p25 {q[1]:.2f}  median {q[2]:.2f}  p75 {q[3]:.2f}  max {q[4]:.2f}"

    print(dist("answerable", answerable))
    print(dist("off-topic", offtopic))
    print(f"\nsuggested: KOTAE_GATE_CLARIFY={cal.gate_clarify}  KOTAE_GATE_ANSWER={cal.gate_answer}")
    for label, answer, clarify in (
        ("current", settings.gate_answer, settings.gate_clarify),
        ("suggested", cal.gate_answer, cal.gate_clarify),
    ):
        rates = cal.rates(answer, clarify)
        a, o = rates["answerable"], rates["offtopic"]
        print(
            f"{label:<10} (answer ≥ {answer:.2f}, clarify ≥ {clarify:.2f}): answerable → answer {a['answer']:.0%}, "
            f"clarify {a['clarify']:.0%}, no_match {a['no_match']:.0%}; off-topic → no_match {o['no_match']:.0%}"
        )
    print(f"histogram: {png}")
    return 0


def cmd_contracts(args: argparse.Namespace, settings: Settings) -> int:
    from kotae import asyncapi

    root = Path(args.dir)
    if args.action == "check":
        stale = asyncapi.stale(root)
        if stale:
            raise CommandError(
                f"generated contracts are stale in {root}: {', '.join(stale)} (run: kotae contracts gen)"
            )
        print(f"kotae: generated contracts in {root} are current")
        return 0
    for path in asyncapi.write(root):
        print(f"kotae: wrote {path}")
    return 0


# --- parser -------------------------------------------------------------------


def _add_timing_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timing",
        choices=["fast", "original"],
        default="fast",
        help="original: keep the gaps between published_at times",
    )
    p.add_argument("--speed", type=float, default=1.0, help="with --timing original: play this many times faster")


def _add_on_request_flags(p: argparse.ArgumentParser) -> None:
    """``--<stage>`` for each stage run only when asked (from the registry), and the options it takes."""
    for name, stage in _on_request_stages().items():
        p.add_argument(f"--{name}", action="store_true", default=False, help=f"also run {name}: {stage.description}")
        for option in stage.on_request.options:
            p.add_argument(
                option.flag,
                dest=option.dest,
                default=None,
                metavar=option.metavar,
                help=f"with --{name}: {option.help}",
            )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kotae", description="Grounded, cited, verified answers for a live stream's chat."
    )
    parser.add_argument("--version", action="version", version=f"kotae {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="run the bundled sample end to end on the embedded stack")
    p.add_argument("--kb", help="knowledge base to load instead of the bundled sample")
    p.add_argument("--comments", help="comments JSONL to replay instead of the bundled sample")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for every outcome")
    _add_on_request_flags(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("up", help="run nats-server (unless KOTAE_NATS_URL) and every stage until Ctrl-C")
    p.add_argument("--replicas", type=int, default=1, help="processes per stage")
    p.add_argument(
        "--allow-empty-kb",
        action="store_true",
        help="start even though the knowledge base (KOTAE_KB) is not loaded: comments fail until `kotae kb load`",
    )
    _add_on_request_flags(p)
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("serve", help="run one stage (start more to scale it)")
    p.add_argument("stage", choices=list(_process_stages()), help="the stage to run")
    p.set_defaults(func=cmd_serve)

    kb = sub.add_parser("kb", help="knowledge base commands").add_subparsers(dest="kb_command", required=True)
    p = kb.add_parser("load", help="load a JSONL file or a folder of Markdown + FAQ YAML (idempotent)")
    p.add_argument("path")
    p.add_argument("--name", default=None, help="knowledge base name (default: KOTAE_KB, 'default')")
    p.set_defaults(func=cmd_kb_load)

    p = sub.add_parser("search", help="retrieve for a batch of queries, offline")
    p.add_argument("--batch", required=True, help='JSONL {"id","text"[,"at"]}')
    p.add_argument("--kb", default=None)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("verify", help="verify a batch of answers against their contexts, offline")
    p.add_argument("--batch", required=True, help='JSONL {"id","question","contexts":[{"id","text"}],"answer"}')
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("replay", help="feed a comments file through every stage and write each outcome")
    p.add_argument("file")
    p.add_argument("--kb", help="load this knowledge base first (idempotent)")
    p.add_argument("--out", help="write JSONL here instead of stdout")
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to wait, once every comment is published, for the outcomes still out (default 300); "
        "what arrived is written either way, and a comment left without one makes the exit status 1",
    )
    _add_timing_flags(p)
    _add_on_request_flags(p)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("onair", help="the on-air stage of a running stack: its status, and the operator's commands")
    p.add_argument(
        "action",
        choices=["status", "skip", "next", "pause", "resume", "hold", "approve", "reject", "block", "end"],
        help="status; skip what is on air; next: air a comment id's answer next; pause/resume; hold on|off "
        "(nothing airs until approved); approve/reject a comment id; block an author; end the stream",
    )
    p.add_argument(
        "target", nargs="?", help="on|off for hold, a comment id for next/approve/reject, an author for block"
    )
    p.set_defaults(func=cmd_onair)

    ing = sub.add_parser("ingest", help="publish comments to a running bus").add_subparsers(
        dest="source", required=True
    )
    ingest_timeout = (
        "seconds to wait, once every comment is published, for the outcomes still out (default 300); "
        "what arrived is printed either way, and a comment left without one makes the exit status 1"
    )
    p = ing.add_parser("replay", help="a JSONL comments file")
    p.add_argument("file")
    p.add_argument("--timeout", type=float, default=300.0, help=ingest_timeout)
    _add_timing_flags(p)
    p.set_defaults(func=cmd_ingest)
    p = ing.add_parser("youtube", help="a YouTube live chat, through the YouTube Data API v3, until it ends")
    p.add_argument("--video", required=True, help="the live video's id (the v= of its URL)")
    p.add_argument(
        "--transport",
        choices=("stream", "poll"),
        default=None,
        help="stream: liveChatMessages.streamList, polling when refused; poll: liveChatMessages.list "
        "(default: KOTAE_YOUTUBE_TRANSPORT, stream)",
    )
    p.set_defaults(func=cmd_ingest)
    p = ing.add_parser("onecomme", help="OneComme's local WebSocket feed, until Ctrl-C")
    p.add_argument("--url", default=None, help="the feed (default: KOTAE_ONECOMME_URL, ws://127.0.0.1:11180/sub)")
    p.add_argument("--once", action="store_true", help="stop when the connection closes instead of reconnecting")
    p.set_defaults(func=cmd_ingest)
    p = ing.add_parser("stdin", help="JSONL comments on standard input")
    p.add_argument("--timeout", type=float, default=300.0, help=ingest_timeout + " (not with --follow)")
    p.add_argument(
        "--follow",
        action="store_true",
        help="publish each line as it arrives and print what ingest did, without waiting for answers",
    )
    p.set_defaults(func=cmd_ingest, file=None)

    p = sub.add_parser("calibrate", help="choose the retrieval gate's thresholds from labelled questions")
    p.add_argument("file", help='JSONL {"id","text","kind":"answerable"|"offtopic"}')
    p.add_argument("--kb", default=None)
    p.add_argument("--at", default=None, help="search as of this ISO date (default: today)")
    p.add_argument("--png", default="gate-calibration.png", help="where to write the histogram")
    p.add_argument(
        "--offtopic-target", type=float, default=0.95, help="share of off-topic questions to leave unanswered"
    )
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("contracts", help="generate (gen) or check (check) JSON Schema and AsyncAPI in contracts/")
    p.add_argument("action", choices=["gen", "check"])
    p.add_argument("--dir", default="contracts", help="the contracts folder (default: ./contracts)")
    p.set_defaults(func=cmd_contracts)

    p = sub.add_parser("eval", help="run a labelled question set through every stage and score it")
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help='JSONL {"id","text","kind":"answerable"|"offtopic"|"injection"[,"expected_doc_ids","expected_facts",'
        '"must_not_contain","note","set_version","at"]}; several files are one set (ids unique across them)',
    )
    p.add_argument("--kb", help="load this knowledge base first (idempotent)")
    p.add_argument("--out", help="also write one JSONL record per question here")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for every outcome")
    p.add_argument(
        "--evaluations-wait",
        type=float,
        default=15.0,
        help="seconds to wait for the evaluator's judgements once every outcome is in (a slow judge model needs more)",
    )
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("streams", help="create the streams on KOTAE_NATS_URL or bring them to this version's settings")
    p.set_defaults(func=cmd_streams)

    nats_cmd = sub.add_parser("nats", help="NATS users of a deployment: passwords or .creds files").add_subparsers(
        dest="action", required=True
    )
    p = nats_cmd.add_parser(
        "passwords", help="print NATS_PASSWORD_<USER>=<random> for every service user (compose's .env)"
    )
    p.add_argument("--out", help="write them to this file (created 0600; an existing file is left alone)")
    p.set_defaults(func=cmd_nats)
    p = nats_cmd.add_parser(
        "creds", help="a .creds file per service user, its permissions in the JWT (servers on JWT accounts)"
    )
    p.add_argument(
        "--account-seed", required=True, help="file holding the seed (SA…) of the account that signs the users"
    )
    p.add_argument("--account", help="the account's public key, when --account-seed is one of its signing keys")
    p.add_argument("--out", required=True, help="folder for <user>.creds (created 0600; existing files are left alone)")
    p.set_defaults(func=cmd_nats)

    p = sub.add_parser("report", help="the evaluator's aggregate tables")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--png", default=None, help="also write a chart of the rates over time to this PNG file")
    p.set_defaults(func=cmd_report)
    return parser


#: The exit status of a command whose reader closed its output (``kotae onair status | head``), as for SIGPIPE.
EXIT_PIPE_CLOSED = 128 + signal.SIGPIPE


def _reader_went_away() -> int:
    """End quietly when stdout's reader has gone (a pipe to ``head``), as the Python docs recommend.

    What is left in stdout's buffer can never be written; pointing stdout at /dev/null keeps the
    interpreter's flush at exit from raising the same error again as a traceback.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_PIPE_CLOSED


def _warn_unknown_settings() -> None:
    """Warn on stderr about each ``KOTAE_*`` variable no setting reads (a typo changes nothing otherwise)."""
    from kotae.unknown_settings import unknown_setting_warnings

    for line in unknown_setting_warnings(os.environ):
        print(line, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``kotae`` command; returns its exit status."""
    try:
        status = _main(argv)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
        return status
    except BrokenPipeError:
        return _reader_went_away()


def _user_needed(args: argparse.Namespace) -> str | None:
    """The NATS user a command that joins a running bus logs in as (None: it starts its own stack)."""
    from kotae.bus import permissions

    if args.func is cmd_onair:
        return permissions.OPERATOR
    if args.func is cmd_streams:
        return permissions.STREAMS
    if args.func is cmd_ingest:
        # A live source only publishes; a replay also reads the outcomes back.
        live = args.source in ("youtube", "onecomme") or getattr(args, "follow", False)
        return permissions.INGEST if live else permissions.REPLAY
    return None


def _refused(args: argparse.Namespace, settings: Settings) -> str | None:
    """Why the command failed when the NATS server refused it something: which user it ran as, which to load."""
    from kotae.bus.connection import explain_denial

    needs = _user_needed(args)
    return explain_denial(settings, needs, settings.data_dir / "nats") if needs else None


def _main(argv: Sequence[str] | None) -> int:
    from kotae.faults import TransientError
    from kotae.knowledge.embeddings import EmbeddingMismatch
    from kotae.knowledge.records import KnowledgeBaseError
    from kotae.logs import configure_logging
    from kotae.services.evaluator.labelled import QuestionSetError
    from kotae.services.ingest.sources import CommentInputError

    _warn_unknown_settings()
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"kotae: {exc}", file=sys.stderr)
        return EXIT_USAGE
    global _stop_when_refused
    _stop_when_refused = args.func in (cmd_onair, cmd_streams)
    if getattr(args, "name", None) is None and args.func is cmd_kb_load:
        args.name = settings.kb
    if args.func is not cmd_serve:
        configure_logging(
            settings.model_copy(update={"log_level": "warning"}) if settings.log_level == "info" else settings
        )
    try:
        return args.func(args, settings)
    except (
        CommandError,
        KnowledgeBaseError,
        CommentInputError,
        TransientError,
        EmbeddingMismatch,
        QuestionSetError,
        SettingsError,
    ) as exc:
        print(f"kotae: {_refused(args, settings) or exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the stack failed to start, a server is unreachable, …
        from kotae.bus.embedded import EmbeddedServerError
        from kotae.stack import StackError

        refused = _refused(args, settings)  # a refusal shows up as a timeout of the request it refused
        if refused or (
            isinstance(exc, EmbeddedServerError | StackError | OSError) and not isinstance(exc, BrokenPipeError)
        ):
            print(f"kotae: {refused or exc}", file=sys.stderr)
            return EXIT_FAILED
        raise
