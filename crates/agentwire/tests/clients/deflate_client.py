"""A WebSocket client that negotiates permessage-deflate, as browsers do
(websockets 15.0.1, whose deflate is zlib's), for the compression e2e
tests (crates/agentwire/tests/e2e/compression.rs).

Usage: deflate_client.py URL OFFER GREETING MESSAGES_JSON
  OFFER: `deflate` (websockets' default offer, `client_max_window_bits`),
         `no-takeover` (also `server_no_context_takeover` and
         `client_no_context_takeover`) or `none` (no offer at all).
  GREETING: frames the server sends before the first message (Omnia: 1).
  MESSAGES_JSON: a JSON list; each is sent as one text message, then
         frames are read up to the turn's terminal (`done`, `error` or
         `agent_completed`).
Prints one line of JSON: {"extensions": the answer's
Sec-WebSocket-Extensions or null, "frames": every frame received (parsed),
"compressed_in" and "plain_in": data frames received with and without
RSV1 once the extension is in use, "compressed_out": data frames sent with
RSV1}.
"""

import asyncio
import json
import sys

from websockets.asyncio.client import connect
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.frames import Opcode

DATA = (Opcode.TEXT, Opcode.BINARY)
TERMINALS = ("done", "error", "agent_completed")
counts = {"compressed_in": 0, "plain_in": 0, "compressed_out": 0}


class CountingFactory(ClientPerMessageDeflateFactory):
    """websockets' own extension, counting the data frames that carry RSV1
    each way (a frame without it was sent uncompressed)."""

    def process_response_params(self, params, accepted_extensions):
        extension = super().process_response_params(params, accepted_extensions)
        decode, encode = extension.decode, extension.encode

        def counting_decode(frame, *, max_size=None):
            if frame.opcode in DATA:
                counts["compressed_in" if frame.rsv1 else "plain_in"] += 1
            return decode(frame, max_size=max_size)

        def counting_encode(frame):
            encoded = encode(frame)
            if encoded.opcode in DATA and encoded.rsv1:
                counts["compressed_out"] += 1
            return encoded

        extension.decode, extension.encode = counting_decode, counting_encode
        return extension


def extensions(offer):
    if offer == "none":
        return None
    no_takeover = offer == "no-takeover"
    return [
        CountingFactory(
            server_no_context_takeover=no_takeover,
            client_no_context_takeover=no_takeover,
            client_max_window_bits=True,
        )
    ]


async def main(url, offer, greeting, messages):
    frames = []
    async with connect(url, compression=None, extensions=extensions(offer)) as ws:
        for _ in range(greeting):
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
        for message in messages:
            await ws.send(json.dumps(message))
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                frames.append(frame)
                if frame.get("type") in TERMINALS:
                    break
        answer = ws.response.headers.get("Sec-WebSocket-Extensions")
    print(json.dumps({"extensions": answer, "frames": frames, **counts}))


if __name__ == "__main__":
    url, offer, greeting, messages = sys.argv[1:5]
    asyncio.run(main(url, offer, int(greeting), json.loads(messages)))
