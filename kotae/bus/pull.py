"""A stage's pull loop on nats-py's JetStream API: fetch, and at most KOTAE_INFLIGHT at a time.

Each fetched message starts its handling at once (:meth:`StageEdge.process`) in a
task of its own; what waits for a free worker holds the loop, so nothing more is
fetched meanwhile. While the consumer has nothing else waiting, a fetch asks for
one message: it returns as the message arrives, where a larger one first waits
for the server's end-of-batch status. A message is kept "in progress" with
JetStream from the moment it is fetched until it is acked: while it waits for a
worker, while its handler waits for a model slot, and while a slow model call
runs, so none of that is taken for a dead process and handed to another replica.

On stop, the fetch under way ends by itself (it is bounded by the pull timeout),
running handlers get the graceful timeout, and everything fetched but not
finished is handed back (nak) so another replica, or this stage's next process,
takes it at once instead of after KOTAE_ACK_WAIT_S. Outputs carry message ids, so
a half-done message redone elsewhere stores nothing twice.

Only public nats-py calls are used: ``pull_subscribe``, ``fetch``, ``ack``,
``nak``, ``in_progress``, ``pending_msgs`` and ``unsubscribe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog
from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError, TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.errors import ServiceUnavailableError

from kotae.bus.connection import inbox_prefix
from kotae.bus.edge import StageEdge
from kotae.bus.topology import consumer_config

log = structlog.get_logger("kotae.bus")

#: How long one pull request waits for messages; a stopping stage waits this long at most for it.
FETCH_TIMEOUT_S = 1.0
#: Largest batch one fetch asks for, however many workers are free.
MAX_BATCH = 64


def _still_pending(msg: Msg) -> int:
    """Messages the consumer still held for delivery when JetStream sent ``msg`` (0 if unknown)."""
    try:
        return int(msg.metadata.num_pending or 0)
    except Exception:  # not a JetStream delivery
        return 0


class PullLoop:
    """The durable pull consumer of one stage process, feeding :meth:`StageEdge.process`.

    Example::

        loop = PullLoop(edge, graceful_timeout=15.0)
        await loop.start(nc.jetstream())
        ...
        await loop.stop()        # hands back what it fetched and did not finish
    """

    def __init__(self, edge: StageEdge, *, graceful_timeout: float = 15.0) -> None:
        self.edge = edge
        self.settings = edge.settings
        self.graceful_timeout = graceful_timeout
        self._workers = asyncio.Semaphore(max(1, self.settings.inflight))
        self._unfinished: dict[int, Msg] = {}  # fetched and not yet acked or nak'ed, by id()
        self._kept: dict[int, tuple[Msg, float]] = {}  # fetched, not finished: when JetStream last heard so
        self._running: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = False
        self._sub: JetStreamContext.PullSubscription | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._keepalive: asyncio.Task[None] | None = None

    async def start(self, js: JetStreamContext) -> None:
        """Bind (creating when missing) the stage's durable consumer and start pulling."""
        consumes = self.edge.stage.consumes
        assert consumes is not None
        prefix = inbox_prefix(self.settings)
        self._sub = await js.pull_subscribe(
            consumes.subject,
            durable=self.edge.stage.durable,
            stream=consumes.stream,
            config=consumer_config(self.edge.stage, self.settings),
            # Pull replies arrive on this process's own inbox: a kotae NATS user may read no other.
            inbox_prefix=(prefix + ".").encode() if prefix else None,
        )
        self._loop_task = asyncio.create_task(self._pull(), name=f"{self.edge.name}-pull")
        self._keepalive = asyncio.create_task(self._keep_in_progress(), name=f"{self.edge.name}-in-progress")

    async def _pull(self) -> None:
        assert self._sub is not None
        batch = most = min(self.settings.inflight, MAX_BATCH)
        while not self._stopping:
            self._idle.clear()
            msgs: list[Msg] = []
            try:
                with contextlib.suppress(
                    asyncio.TimeoutError, NatsTimeoutError, ConnectionClosedError, ServiceUnavailableError
                ):
                    msgs = await self._sub.fetch(batch=batch, timeout=FETCH_TIMEOUT_S)
            except Exception as exc:  # a reconnect, a consumer being recreated: keep pulling
                log.warning("fetch.failed", stage=self.edge.name, error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(FETCH_TIMEOUT_S)
            finally:
                self._idle.set()
            if msgs:
                batch = most if _still_pending(msgs[-1]) else 1
            fetched = time.monotonic()
            for msg in msgs:
                self._unfinished[id(msg)] = msg
                self._kept[id(msg)] = (msg, fetched)  # waiting for a worker counts as work in progress
            for msg in msgs:
                await self._workers.acquire()
                if self._stopping:  # the rest is handed back
                    self._workers.release()
                    break
                task = asyncio.create_task(self._handle(msg))
                self._running.add(task)
                task.add_done_callback(self._running.discard)
            if msgs:
                await asyncio.sleep(0)  # let the handlers start before the next pull request goes out

    async def _handle(self, msg: Msg) -> None:
        key = id(msg)
        try:
            disposition = await self.edge.process(msg)
            try:
                if disposition.ack:
                    await msg.ack()
                else:
                    await msg.nak(delay=disposition.delay or None)
            except Exception as exc:  # the connection is gone: JetStream redelivers after the ack wait
                log.warning("ack.failed", stage=self.edge.name, error=f"{type(exc).__name__}: {exc}")
            self._unfinished.pop(key, None)
        finally:
            self._kept.pop(key, None)
            self._workers.release()

    async def _keep_in_progress(self) -> None:
        """Tell JetStream which fetched messages are not finished, so a slow model call is not redelivered.

        One task for the whole stage rather than one per message: at hundreds of
        messages a second, a timer per message costs more CPU than the acks it sends.
        """
        interval = max(0.5, self.settings.ack_wait_s / 3)
        while True:
            await asyncio.sleep(interval / 2)
            due = time.monotonic() - interval
            for key, (msg, since) in list(self._kept.items()):
                if since > due:
                    continue
                try:
                    await msg.in_progress()
                except Exception:  # the connection is gone: redelivery decides
                    continue
                if key in self._kept:
                    self._kept[key] = (msg, time.monotonic())

    async def stop(self) -> None:
        """Stop fetching, let running handlers finish (up to the graceful timeout), hand back the rest."""
        self._stopping = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=FETCH_TIMEOUT_S + 2.0)
        except TimeoutError:
            log.warning("fetch.still_running", stage=self.edge.name)
        if self._running:
            _, late = await asyncio.wait(set(self._running), timeout=self.graceful_timeout)
            for task in late:
                task.cancel()
            if late:
                await asyncio.gather(*late, return_exceptions=True)
        for task in (self._loop_task, self._keepalive):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._take_late_replies()
        await self._hand_back()
        if self._sub is not None:
            # Without this a drain of the connection waits out its timeout: the subscription
            # counts the messages fetch() took from its queue as never finished.
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _take_late_replies(self) -> None:
        """Count as unfinished the messages that reached the subscription after its last fetch returned."""
        if self._sub is None or not self._sub.pending_msgs:
            return
        with contextlib.suppress(Exception):
            for msg in await self._sub.fetch(batch=self._sub.pending_msgs, timeout=0.2):
                self._unfinished[id(msg)] = msg

    async def _hand_back(self) -> None:
        """Nak every unfinished message (the connection is still open while the stage stops)."""
        pending = list(self._unfinished.values())
        self._unfinished.clear()
        for msg in pending:
            try:
                await msg.nak()
            except Exception:  # already acked, or the connection is gone: redelivery decides
                continue
        if pending:
            log.info("messages.handed_back", stage=self.edge.name, count=len(pending))
