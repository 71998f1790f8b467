"""The server's model thread: fair admission across owners, a bounded queue, clients that leave,
a failing batch that does not stop the server, sessions and jobs between steps, and only decoders."""

from __future__ import annotations

import asyncio
import collections
import threading

import pytest

from memory_runtime.generation.decoder import Decoder
from memory_runtime.generation.turn import TurnRequest
from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.scheduler import Overloaded, TurnScheduler


class Recorder(Decoder):
    """An engine stand-in: `places` turns at once; a step finishes every turn, recording the order."""

    def __init__(self, places: int = 1, fail_on: str | None = None, gate: threading.Event | None = None) -> None:
        self.max_batch_size, self.fail_on, self.gate = places, fail_on, gate
        self.fails_alone: str | None = None  # a turn whose step outcome is its own error
        self.waiting: collections.deque = collections.deque()
        self.order: list[str] = []
        self.aborted = 0

    def submit(self, request: TurnRequest) -> None:
        self.waiting.append(request)

    def abort(self, request: TurnRequest) -> bool:
        return False

    def abort_all(self) -> None:
        self.aborted += len(self.waiting)
        self.waiting.clear()

    @property
    def in_flight(self) -> int:
        return len(self.waiting)

    def prompt_tokens(self, request: TurnRequest) -> int | None:
        return None

    def close(self) -> None:
        pass

    def step(self):
        if self.gate is not None:
            self.gate.wait(10)
        done = list(self.waiting)
        self.waiting.clear()
        for request in done:
            if request.tag == self.fail_on:
                self.waiting.extend(done)  # still in the engine when its step fails
                raise RuntimeError("the model broke")
        self.order += [r.tag for r in done]
        return [
            (r, ValueError(f"{r.tag} failed alone") if r.tag == self.fails_alone else f"result of {r.tag}")
            for r in done
        ]


def request(tag: str) -> TurnRequest:
    return TurnRequest([{"role": "user", "content": tag}], TripletStore(":memory:"), tag=tag)


def test_a_busy_owner_does_not_starve_the_others():
    gate = threading.Event()
    decoder = Recorder(places=1, gate=gate)

    async def scenario():
        scheduler = TurnScheduler(decoder, max_queue=100)
        futures = [scheduler.submit(request(f"a{i}"), "alice") for i in range(6)]
        futures.append(scheduler.submit(request("b0"), "bob"))
        futures.append(scheduler.submit(request("c0"), "carol"))
        gate.set()
        results = await asyncio.gather(*futures)
        scheduler.close()
        return results

    results = asyncio.run(asyncio.wait_for(scenario(), timeout=20))
    assert results[-2:] == ["result of b0", "result of c0"]
    # alice's first turn was admitted at once; then the owners take turns
    assert decoder.order.index("b0") <= 2 and decoder.order.index("c0") <= 3
    assert [t for t in decoder.order if t.startswith("a")] == [f"a{i}" for i in range(6)]


def test_a_full_queue_is_refused_and_a_client_that_left_is_skipped():
    gate = threading.Event()
    decoder = Recorder(places=1, gate=gate)

    async def scenario():
        scheduler = TurnScheduler(decoder, max_queue=2)
        first = scheduler.submit(request("first"), "alice")
        await asyncio.sleep(0.1)  # admitted: the step waits at the gate
        gone = scheduler.submit(request("gone"), "bob")
        kept = scheduler.submit(request("kept"), "carol")
        with pytest.raises(Overloaded):
            scheduler.submit(request("refused"), "dave")
        gone.cancel()
        gate.set()
        out = await asyncio.gather(first, kept)
        scheduler.close()
        return out

    assert asyncio.run(asyncio.wait_for(scenario(), timeout=20)) == ["result of first", "result of kept"]
    assert "gone" not in decoder.order


def test_a_failing_batch_fails_its_turns_and_the_server_goes_on():
    decoder = Recorder(places=1, fail_on="bad")

    async def scenario():
        scheduler = TurnScheduler(decoder, max_queue=10)
        with pytest.raises(RuntimeError, match="the model broke"):
            await scheduler.run(request("bad"), "alice")
        good = await scheduler.run(request("good"), "alice")
        job = await scheduler.call(lambda: "a correction")
        scheduler.close()
        return good, job

    assert asyncio.run(asyncio.wait_for(scenario(), timeout=20)) == ("result of good", "a correction")
    assert decoder.aborted == 1  # the failed turn was dropped through the interface, nothing reached into


def test_a_turn_that_fails_alone_fails_only_its_own_request():
    """An engine hands back one turn's error among the others' results: that request fails, the
    others of the same step get their results."""
    decoder = Recorder(places=4)
    decoder.fails_alone = "poisoned"

    async def scenario():
        scheduler = TurnScheduler(decoder, max_queue=10)
        tags = [("alice", "a"), ("mallory", "poisoned"), ("bob", "b"), ("carol", "c")]
        futures = [scheduler.submit(request(tag), owner) for owner, tag in tags]
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        scheduler.close()
        return outcomes

    a, poisoned, b, c = asyncio.run(asyncio.wait_for(scenario(), timeout=20))
    assert (a, b, c) == ("result of a", "result of b", "result of c")
    assert isinstance(poisoned, ValueError) and decoder.aborted == 0


def test_a_session_queues_its_turns_for_its_owner():
    """A correction's turns go through the engine like any other turn, one after another."""
    decoder = Recorder(places=1)

    def session():
        first = yield request("s1")
        second = yield request(f"after {first}")
        return [first, second]

    async def scenario():
        scheduler = TurnScheduler(decoder, max_queue=10)
        value = await scheduler.run_session(session(), "alice")
        scheduler.close()
        return value

    assert asyncio.run(asyncio.wait_for(scenario(), timeout=20)) == ["result of s1", "result of after result of s1"]


def test_an_engine_without_the_interface_is_refused_at_start_up():
    class Partial:  # what the scheduler reached into before: a queue, a step, no interface
        busy, room, waiting, active = False, 1, [], {}

        def step(self):
            return []

    with pytest.raises(ValueError, match=r"Partial is not a decoder .*lacks .*submit, .*abort, abort_all"):
        TurnScheduler(Partial(), max_queue=10)


def test_one_key_holds_at_most_its_share_of_turns():
    from memory_runtime.serving.scheduler import OwnerBusy

    gate = threading.Event()
    decoder = Recorder(places=1, gate=gate)

    async def scenario():
        scheduler = TurnScheduler(decoder, max_queue=100, max_per_owner=2)
        mine = [scheduler.submit(request(f"a{i}"), "alice") for i in range(2)]
        with pytest.raises(OwnerBusy):
            scheduler.submit(request("a2"), "alice")
        theirs = scheduler.submit(request("b0"), "bob")  # another key is not held back
        gate.set()
        await asyncio.gather(*mine, theirs)
        again = scheduler.submit(request("a3"), "alice")  # a finished turn frees its place
        assert await again == "result of a3"
        mine[0].cancel()  # a done future: cancelling it frees nothing twice
        scheduler.close()
        return dict(scheduler._in_flight)

    assert asyncio.run(scenario()) == {}
