"""A socket that drops mid-turn: the client rejoins and the application
gets the reply exactly once, as if nothing had happened."""

from __future__ import annotations

import asyncio
from typing import List

from agentwire_client import (
    Chunk,
    Done,
    Event,
    HistoryLost,
    ReconnectPolicy,
    ToolCall,
    TurnStarted,
    connect,
)
from conftest import ALICE_KEY, Server
from proxy import CutProxy

FAST = ReconnectPolicy(initial_delay=0.05, max_delay=0.5, max_attempts=10)


def shape(event: Event) -> tuple:
    """What the application renders of an event (ids and times differ per run)."""
    if isinstance(event, Chunk):
        return ("chunk", event.content)
    if isinstance(event, Done):
        return ("done", event.content)
    if isinstance(event, ToolCall):
        return ("tool_call", event.name)
    return (type(event).__name__,)


async def test_a_dropped_socket_mid_turn_is_rejoined_and_the_reply_arrives_once(
    server: Server, proxy: CutProxy
) -> None:
    async with connect(server.url, agent="test-agent", token=ALICE_KEY) as whole:
        expected = [shape(e) async for e in whole.send("go", metadata={"mock_scenario": "paced"})]
    assert expected[-1] == ("done", "one two three four five")

    for cut_after in (2, 4, 6):
        async with connect(proxy.url, agent="test-agent", token=ALICE_KEY, reconnect=FAST) as conn:
            seen: List[Event] = []
            async for event in conn.send("go", metadata={"mock_scenario": "paced"}):
                seen.append(event)
                if len(seen) == cut_after:
                    proxy.cut()
            assert [shape(e) for e in seen] == expected, f"cut after {cut_after} events"
            assert conn.reconnects == 1
            text = "".join(e.content for e in seen if isinstance(e, Chunk))
            assert text == "one two three four five"
            seqs = [e.seq for e in seen if getattr(e, "seq", None) is not None]
            assert seqs == sorted(set(seqs)), "no event twice"
            # The rejoined socket carries the session on.
            after = await conn.send("more").result()
            assert isinstance(after, Done) and after.session_id == seen[0].session_id  # type: ignore[union-attr]
    assert proxy.cuts == 3


async def test_a_client_back_after_the_turn_ended_gets_its_end(
    server: Server, proxy: CutProxy
) -> None:
    async with connect(
        proxy.url, agent="test-agent", token=ALICE_KEY,
        reconnect=ReconnectPolicy(initial_delay=1.2, max_delay=2, max_attempts=5, jitter=False),
    ) as conn:
        seen: List[Event] = []
        async for event in conn.send("go", metadata={"mock_scenario": "paced"}):
            seen.append(event)
            if isinstance(event, TurnStarted):
                proxy.cut()  # back only after the turn's 750 ms are over
        assert [shape(e) for e in seen][-1] == ("done", "one two three four five")
        assert "".join(e.content for e in seen if isinstance(e, Chunk)) == "one two three four five"


async def test_a_rejoin_the_server_cannot_replay_is_surfaced_as_history_lost(
    own_server: Server,
) -> None:
    proxy = CutProxy(lambda: ("127.0.0.1", own_server.port))
    await proxy.start()
    notices: List[Event] = []
    try:
        async with connect(
            proxy.url, agent="test-agent", token=ALICE_KEY, reconnect=FAST,
            on_event=notices.append,
        ) as conn:
            first = await conn.send("remember me").result()
            session = conn.session_id
            # A restart loses the in-memory log (a new epoch); the session is
            # kept in the database.
            own_server.restart()
            proxy.cut()
            for _ in range(100):
                if notices:
                    break
                await asyncio.sleep(0.05)
            lost = [n for n in notices if isinstance(n, HistoryLost)]
            assert len(lost) == 1, notices
            assert lost[0].session_id == session and not lost[0].turn_lost
            # Still the same conversation: the history script shows it.
            history = await conn.send("and now?", metadata={"mock_scenario": "history"}).result()
            assert isinstance(first, Done) and isinstance(history, Done)
            assert history.session_id == session
            assert "remember me" in (history.content or "")
    finally:
        await proxy.stop()


async def test_an_idle_socket_dropped_before_any_turn_comes_back_on_its_session(
    server: Server, proxy: CutProxy
) -> None:
    async with connect(proxy.url, agent="test-agent", token=ALICE_KEY, reconnect=FAST) as conn:
        session = conn.session_id
        proxy.cut()
        done = await conn.send("still mine?").result()
        assert isinstance(done, Done) and done.content == "echo: still mine?"
        assert done.session_id == session
        assert conn.reconnects == 1
