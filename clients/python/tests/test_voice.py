"""A voice call against voice-demo (the mock provider with ``output: echo``):
``send_audio`` streams the caller's PCM as OMNI frames and the audio that
comes back is the caller's own, byte for byte."""

from __future__ import annotations

import asyncio
from typing import List

from agentwire_client import Chunk, Done, Event, SessionConfig, connect
from agentwire_client.binary import MEDIA_CHUNK, BinaryFrame
from agentwire_client.frames import MediaChunk
from conftest import ALICE_KEY, REPO, Server

WEATHER_16K = (REPO / "crates/agentwire/tests/fixtures/audio/weather-16k.pcm").read_bytes()
FRAME = 640  # 20 ms of PCM16 at 16 kHz, mono


def find_aligned(hay: bytes, needle: bytes, step: int) -> int:
    """Where ``needle`` starts in ``hay`` at a multiple of ``step``; -1 when it is not there."""
    at = hay.find(needle)
    while at >= 0 and at % step:
        at = hay.find(needle, at + 1)
    return at


async def test_send_audio_on_a_voice_call_comes_back_byte_for_byte(server: Server) -> None:
    events: List[Event] = []
    answered = asyncio.Event()

    def on_event(event: Event) -> None:
        events.append(event)
        if isinstance(event, Done):
            answered.set()

    async with connect(
        server.url, agent="voice-demo", token=ALICE_KEY, binary_frames=True, on_event=on_event
    ) as conn:
        metadata = {
            "session_id": conn.session_id, "mime_type": "audio/pcm",
            "sample_rate": 16000, "channels": 1, "codec": "pcm",
        }
        # Two 20 ms frames every 20 ms: a little faster than real time.
        for sequence, at in enumerate(range(0, len(WEATHER_16K) - FRAME + 1, FRAME)):
            frame = BinaryFrame(MEDIA_CHUNK, 0, sequence, b"", metadata, WEATHER_16K[at:at + FRAME])
            await conn.send_audio(frame)
            if sequence % 2:
                await asyncio.sleep(0.02)
        await asyncio.wait_for(answered.wait(), 15)

        configs = [e for e in events if isinstance(e, SessionConfig)]
        assert [(c.codec, c.sample_rate, c.channels) for c in configs] == [("pcm", 16000, 1)]
        user = [e.content for e in events if isinstance(e, Chunk) and e.role == "user"]
        assert user and user[0].startswith("utterance 1 ("), user
        reply = "".join(e.content for e in events if isinstance(e, Chunk) and e.role != "user")
        assert reply == "I heard you."
        audio = [e for e in events if isinstance(e, MediaChunk)]
        assert audio and all(a.media_id == "" and a.mime_type.startswith("audio/pcm") for a in audio)
        echoed = b"".join(a.data for a in audio)
        assert len(echoed) >= 16_000, f"at least half a second echoed: {len(echoed)}"
        assert find_aligned(WEATHER_16K, echoed, FRAME) >= 0, "the caller's own bytes, in order"

        await conn.send_frame({"type": "hangup"})
        typed = await conn.send("typed").result()
        assert isinstance(typed, Done) and typed.content == "Echo: typed"
