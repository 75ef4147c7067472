"""Rejoins that cannot simply carry on: an expired session, a restarted
server, a draining one."""

from __future__ import annotations

import asyncio
import signal
from typing import List

import pytest

from agentwire_client import (
    Chunk,
    ConnectionLost,
    Done,
    Event,
    GoingAway,
    HistoryLost,
    ReconnectPolicy,
    SessionExpired,
    TurnFailed,
    connect,
)
from conftest import ALICE_KEY, Server
from proxy import CutProxy

FAST = ReconnectPolicy(initial_delay=0.05, max_delay=0.3, max_attempts=4)


async def test_a_rejoin_into_an_expired_session_surfaces_session_expired(
    server: Server, proxy: CutProxy
) -> None:
    slow = ReconnectPolicy(initial_delay=0.8, max_delay=1, max_attempts=3, jitter=False)
    async with connect(proxy.url, agent="short-lived", token=ALICE_KEY, reconnect=slow) as conn:
        await conn.send("hello").result()
        old = conn.session_id
        proxy.cut()  # back after 0.8 s; short-lived keeps a session 300 ms
        with pytest.raises(SessionExpired) as expired:
            await conn.send("are you there?").result()
        assert expired.value.session_id == old
        assert expired.value.new_session_id == conn.session_id != old
        done = await conn.send("starting over").result()
        assert isinstance(done, Done) and done.session_id == conn.session_id


async def test_a_turn_lost_with_a_restarted_server_ends_the_turn(own_server: Server) -> None:
    proxy = CutProxy(lambda: ("127.0.0.1", own_server.port))
    await proxy.start()
    try:
        async with connect(proxy.url, agent="test-agent", token=ALICE_KEY, reconnect=FAST) as conn:
            await conn.send("a first turn").result()
            turn = conn.send("go", metadata={"mock_scenario": "paced"})
            seen: List[Event] = []
            async for event in turn:
                seen.append(event)
                if len(seen) == 2:
                    own_server.restart()
                    proxy.cut()
            lost = seen[-1]
            assert isinstance(lost, HistoryLost) and lost.turn_lost, seen
            assert not any(isinstance(e, Done) for e in seen)
            with pytest.raises(TurnFailed, match="reload the history"):
                await turn.result()  # the same outcome, as result() reports it
            # The session goes on on the new server.
            done = await conn.send("after the restart").result()
            assert isinstance(done, Done) and done.session_id == lost.session_id
    finally:
        await proxy.stop()


async def test_a_drain_announces_going_away_and_lets_the_turn_finish(own_server: Server) -> None:
    async with connect(own_server.url, agent="test-agent", token=ALICE_KEY, reconnect=FAST) as conn:
        events: List[Event] = []
        async for event in conn.send("go", metadata={"mock_scenario": "paced"}):
            events.append(event)
            if len(events) == 2:
                assert own_server.process is not None
                own_server.process.send_signal(signal.SIGTERM)
        away = [e for e in events if isinstance(e, GoingAway)]
        assert len(away) == 1 and away[0].resume["session_id"] == conn.session_id
        done = events[-1]
        assert isinstance(done, Done) and done.content == "one two three four five"
        # The server is gone after its drain: the rejoin attempts fail.
        with pytest.raises(ConnectionLost):
            await asyncio.wait_for(conn.send("anyone?").result(), 10)


async def test_a_rejoin_closed_1013_session_unavailable_is_tried_again(server: Server) -> None:
    """A single server on SQLite has no Redis to lose and no way to make its
    store fail one lookup, so the 1013 comes from a stand-in: the first
    rejoin reaches an endpoint that accepts the upgrade and closes 1013
    "session unavailable, try again" before ``connected``, as a replica cut
    off from Redis does; the next attempt reaches the real server."""
    from websockets.asyncio.server import ServerConnection, serve

    refused: List[str] = []

    async def unavailable(ws: ServerConnection) -> None:
        assert ws.request is not None
        refused.append(ws.request.path)
        await ws.close(1013, "session unavailable, try again")

    stand_in = await serve(unavailable, "127.0.0.1", 0)
    stand_in_port = stand_in.sockets[0].getsockname()[1]
    divert = {"next": False}

    def upstream() -> tuple:
        if divert["next"]:
            divert["next"] = False
            return ("127.0.0.1", stand_in_port)
        return ("127.0.0.1", server.port)

    proxy = CutProxy(upstream)
    await proxy.start()
    try:
        async with connect(proxy.url, agent="test-agent", token=ALICE_KEY, reconnect=FAST) as conn:
            await conn.send("a first turn").result()
            session = conn.session_id
            turn = conn.send("go", metadata={"mock_scenario": "paced"})
            seen: List[Event] = []
            async for event in turn:
                seen.append(event)
                if len(seen) == 2:
                    divert["next"] = True
                    proxy.cut()
            done = seen[-1]
            assert isinstance(done, Done) and done.content == "one two three four five"
            deltas = [e.content for e in seen if isinstance(e, Chunk)]
            assert "".join(deltas) == "one two three four five", deltas
            assert len(refused) == 1 and f"resume={session}" in refused[0], refused
            assert conn.reconnects == 1 and conn.session_id == session
            after = await conn.send("after the 1013").result()
            assert isinstance(after, Done) and after.content == "echo: after the 1013"
    finally:
        await proxy.stop()
        stand_in.close()
        await stand_in.wait_closed()
