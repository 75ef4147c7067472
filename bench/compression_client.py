"""Streamed turns on CONNECTIONS Omnia sockets, TURNS each, one after the
other on each socket, with or without permessage-deflate: the client side
of bench/compression.sh (websockets 15.0.1, from target/clients-venv).

Usage: compression_client.py URL CONNECTIONS TURNS OFFER
  OFFER: `deflate` (browsers' offer) or `none`.
Prints one line of JSON: {"turns", "chunks", "seconds", "received",
"sent" (bytes on the wire each way, handshakes included), "extensions"}.
"""

import asyncio
import json
import sys
import time

from websockets.asyncio.client import ClientConnection, connect

MESSAGE = json.dumps({"type": "message", "content": "bench"})
wire = {"received": 0, "sent": 0}


class CountingConnection(ClientConnection):
    """Counts the bytes the socket carried each way: TCP payload, WebSocket
    framing included, as the wire has it (compressed or not)."""

    def connection_made(self, transport):
        write = transport.write

        def counting_write(data):
            wire["sent"] += len(data)
            write(data)

        transport.write = counting_write
        super().connection_made(transport)

    def data_received(self, data):
        wire["received"] += len(data)
        super().data_received(data)


async def client(url, turns, compression, answers):
    chunks = 0
    async with connect(
        url, compression=compression, max_size=None, create_connection=CountingConnection
    ) as ws:
        answers.append(ws.response.headers.get("Sec-WebSocket-Extensions"))
        await asyncio.wait_for(ws.recv(), 10)  # connected
        for _ in range(turns):
            await ws.send(MESSAGE)
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if frame["type"] == "chunk":
                    chunks += 1
                elif frame["type"] == "done":
                    break
                elif frame["type"] == "error":
                    raise RuntimeError(frame)
    return chunks


async def main(url, connections, turns, offer):
    compression = "deflate" if offer == "deflate" else None
    answers = []
    start = time.monotonic()
    counts = await asyncio.gather(
        *(client(url, turns, compression, answers) for _ in range(connections))
    )
    seconds = time.monotonic() - start
    print(json.dumps({
        "turns": connections * turns,
        "chunks": sum(counts),
        "seconds": round(seconds, 2),
        "received": wire["received"],
        "sent": wire["sent"],
        "extensions": answers[0],
    }))


if __name__ == "__main__":
    url, connections, turns, offer = sys.argv[1:5]
    asyncio.run(main(url, int(connections), int(turns), offer))
