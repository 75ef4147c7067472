"""A first conversation: stream a reply, answer a client tool, survive a drop.

Run it against a server whose ``test-agent`` uses the ``test`` handler:

    AGENTWIRE_URL=ws://127.0.0.1:8080 AGENTWIRE_TOKEN=... python quickstart.py
"""

import asyncio
import os

from agentwire_client import Chunk, Done, HistoryLost, ToolCall, connect


async def main() -> None:
    url = os.environ.get("AGENTWIRE_URL", "ws://127.0.0.1:8080")
    token = os.environ.get("AGENTWIRE_TOKEN")  # a JWT or an API key; None on a public agent
    async with connect(url, agent="test-agent", token=token) as conn:

        @conn.tool("get_location")
        async def get_location(arguments: dict) -> dict:
            return {"city": "Lisbon"}

        # A streamed reply: print the chunks as they come.
        async for event in conn.send("hello", metadata={"mock_scenario": "stream"}):
            if isinstance(event, Chunk):
                print(event.content, end="", flush=True)
            elif isinstance(event, Done):
                print()
            elif isinstance(event, HistoryLost):
                print("(some of the reply was lost; reload the history)")

        # A turn in which the agent calls the client tool registered above.
        async for event in conn.send("where am I?", metadata={"mock_scenario": "client-tool"}):
            if isinstance(event, ToolCall):
                print(f"the agent asked for {event.name}")
            elif isinstance(event, Done):
                print(event.content)


if __name__ == "__main__":
    asyncio.run(main())
