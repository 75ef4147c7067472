"""Cancelling a running turn."""

from __future__ import annotations

import asyncio

from agentwire_client import Chunk, Done, connect
from conftest import ALICE_KEY, Server


async def test_cancel_ends_the_running_turn_with_what_was_streamed(server: Server) -> None:
    async with connect(server.url, agent="test-agent", token=ALICE_KEY) as conn:
        turn = conn.send("wait", metadata={"mock_scenario": "hold"})
        seen = []
        async for event in turn:
            seen.append(event)
            if isinstance(event, Chunk):
                await turn.cancel()
        done = seen[-1]
        assert isinstance(done, Done), seen
        assert done.cancelled is True
        assert done.content == "held"
        # A turn that would have held for ten minutes is over: the next one runs.
        reply = await asyncio.wait_for(conn.send("next").result(), 5)
        assert isinstance(reply, Done) and reply.content == "echo: next"


async def test_a_cancel_with_nothing_running_changes_nothing(server: Server) -> None:
    async with connect(server.url, agent="test-agent", token=ALICE_KEY) as conn:
        await conn.cancel()
        reply = await conn.send("still here").result()
        assert isinstance(reply, Done) and reply.content == "echo: still here"
        assert not reply.cancelled
