"""The server's model thread: turns of concurrent users share batches, fairly across API keys.

Requests wait in one queue per owner (a namespace: one API key's user). Whenever the engine has a
free place, the next owner in turn (round robin) gives its oldest request, so a key that sends
fifty requests delays another key's one by at most one turn per other waiting key, not by fifty.
One thread steps the engine (any memory_runtime.generation.decoder.Decoder, through that interface
only) and hands results back to the event loop: a turn that failed alone fails its own request only.
A turn's text is handed over as it grows, for streaming. Sessions of turns (a feedback correction)
queue their turns like any other; jobs that need the model thread outside a turn run on it between
steps.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable
from typing import Any

from memory_runtime.generation.decoder import Decoder, Session, check_decoder
from memory_runtime.generation.turn import TurnRequest, TurnResult


class Overloaded(Exception):
    """More turns are waiting than the server's queue allows."""


class OwnerBusy(Overloaded):
    """One owner (an API key) has as many turns waiting or running as it may."""


class TurnScheduler:
    """Admits requests fairly into `engine` and steps it on its own thread. An engine that does not
    implement the interface is refused here, before the thread starts, with its name and what it lacks."""

    def __init__(self, engine: Decoder, max_queue: int, max_per_owner: int | None = None) -> None:
        self.engine = check_decoder(engine, "the server's engine")
        self.max_queue = max_queue
        self.max_per_owner = max_per_owner  # turns one owner may have waiting or running at once
        self._in_flight: collections.Counter[str] = collections.Counter()  # owner -> turns waiting or running
        self._queues: collections.OrderedDict[str, collections.deque] = collections.OrderedDict()
        self._jobs: collections.deque = collections.deque()
        self._waiting = 0
        self._wake = threading.Condition()
        self._closed = False
        self._futures: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._thread = threading.Thread(target=self._loop, name="memlm-generate", daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        """Turns waiting for a place in the batch."""
        return self._waiting

    def submit(self, request: TurnRequest, owner: str) -> asyncio.Future:
        """Queue a turn (from the event loop); its result arrives on the returned future. Raises
        Overloaded when the queue is full, ValueError for limits or sampling no engine runs."""
        request.check()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._wake:
            if self.max_per_owner is not None and self._in_flight[owner] >= self.max_per_owner:
                raise OwnerBusy(f"{self._in_flight[owner]} turns of this key are waiting or running")
            if self._waiting >= self.max_queue:
                raise Overloaded(f"{self._waiting} turns are waiting")
            self._queues.setdefault(owner, collections.deque()).append((request, loop, future))
            self._waiting += 1
            self._in_flight[owner] += 1
            future.add_done_callback(lambda _: self._release(owner))
            self._wake.notify()
        return future

    def _release(self, owner: str) -> None:
        with self._wake:
            self._in_flight[owner] -= 1
            if self._in_flight[owner] <= 0:
                del self._in_flight[owner]

    async def run(self, request: TurnRequest, owner: str) -> TurnResult:
        return await self.submit(request, owner)

    async def run_session(self, session: Session, owner: str) -> Any:
        """Drive `session` (engine.Session: yields requests, gets their results) with its turns queued for
        `owner` like any other (Overloaded, OwnerBusy as :meth:`submit`); what the session returns."""
        try:
            request = next(session)
            while True:
                request = session.send(await self.submit(request, owner))
        except StopIteration as done:
            return done.value
        finally:
            session.close()

    async def call(self, job: Callable[[], Any]) -> Any:
        """Run `job` on the model thread between two steps (e.g. a correction that decodes alone)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._wake:
            self._jobs.append((job, loop, future))
            self._wake.notify()
        return await future

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=30)

    # ------------------------------------------------------------------ the model thread

    def _next_fair(self) -> tuple[TurnRequest, asyncio.AbstractEventLoop, asyncio.Future] | None:
        """The oldest request of the next owner in turn (the owner then goes to the back)."""
        while self._queues:
            owner, queue = next(iter(self._queues.items()))
            item = queue.popleft()
            self._waiting -= 1
            if queue:
                self._queues.move_to_end(owner)
            else:
                del self._queues[owner]
            if not item[2].cancelled():  # the client went away while it waited
                return item
        return None

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._closed and not self._jobs and not self._queues and not self.engine.busy:
                    self._wake.wait()
                if self._closed:
                    break
                jobs = list(self._jobs)
                self._jobs.clear()
                admitted = []
                while self.engine.room > len(admitted) and self._queues:  # the rest wait their turn, fairly
                    item = self._next_fair()
                    if item is not None:
                        admitted.append(item)
            for job, loop, future in jobs:
                self._settle(loop, future, job)
            for request, loop, future in admitted:
                self._futures[id(request)] = (loop, future)
                self.engine.submit(request)
            if not self.engine.busy:
                continue
            try:
                finished = self.engine.step()
            except Exception as err:  # the engine's own failure: every turn in it is lost, the server goes on
                self._fail_all(err)
                continue
            for request, outcome in finished:  # a turn that failed alone fails only its own request
                loop, future = self._futures.pop(id(request))
                if isinstance(outcome, Exception):
                    loop.call_soon_threadsafe(_resolve, future, None, outcome)
                else:
                    loop.call_soon_threadsafe(_resolve, future, outcome, None)
        self._fail_all(RuntimeError("the server is shutting down"))

    def _settle(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future, job: Callable[[], Any]) -> None:
        try:
            value, error = job(), None
        except Exception as err:
            value, error = None, err
        loop.call_soon_threadsafe(_resolve, future, value, error)

    def _fail_all(self, err: Exception) -> None:
        for loop, future in self._futures.values():
            loop.call_soon_threadsafe(_resolve, future, None, err)
        self._futures.clear()
        try:
            self.engine.abort_all()
        except Exception:  # an engine too broken to drop its turns: its next step fails the same way
            pass


def _resolve(future: asyncio.Future, value: Any, error: Exception | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
