"""Media from the agent: binary OMNI frames and JSON media_chunk, reassembled."""

from __future__ import annotations

import pytest

from agentwire_client import Done, Media, connect
from agentwire_client.binary import FLAG_CHUNKED, FLAG_IS_LAST, BinaryFrame, decode, encode
from conftest import ALICE_KEY, Server


def pattern(length: int) -> bytes:
    """The test handler's media bytes: byte i is i mod 256."""
    return bytes(i % 256 for i in range(length))


@pytest.mark.parametrize("binary_frames", [True, False])
async def test_a_media_item_arrives_whole(server: Server, binary_frames: bool) -> None:
    async with connect(
        server.url, agent="test-agent", token=ALICE_KEY, binary_frames=binary_frames
    ) as conn:
        assert conn.connected is not None
        assert conn.connected.capabilities["binary_frames"] is binary_frames
        events = [e async for e in conn.send("x", metadata={"mock_scenario": "binary-media"})]
    media = [e for e in events if isinstance(e, Media)]
    assert len(media) == 1
    assert (media[0].media_id, media[0].mime_type) == ("test-media", "audio/mp3")
    assert media[0].data == b"test audio data"
    assert isinstance(events[-1], Done)


@pytest.mark.parametrize("binary_frames", [True, False])
@pytest.mark.parametrize(
    "scenario,mime,length",
    [("big-media", "video/mp4", 1_081_344), ("small-media", "image/png", 1_048_575)],
)
async def test_a_large_media_item_is_reassembled_whole(
    server: Server, binary_frames: bool, scenario: str, mime: str, length: int
) -> None:
    """big-media is split over several binary frames; small-media is one
    frame whose sequence is 42, not 0."""
    async with connect(
        server.url, agent="test-agent", token=ALICE_KEY, binary_frames=binary_frames
    ) as conn:
        events = [e async for e in conn.send("x", metadata={"mock_scenario": scenario})]
    media = [e for e in events if isinstance(e, Media)]
    assert len(media) == 1, [type(e).__name__ for e in events]
    assert media[0].mime_type == mime
    assert len(media[0].data) == length
    assert media[0].data == pattern(length)


def test_an_omni_frame_survives_encoding_and_bad_frames_are_refused() -> None:
    frame = BinaryFrame(1, FLAG_CHUNKED | FLAG_IS_LAST, 7, b"clip", {"mime_type": "audio/pcm"}, b"\x01\x02")
    data = encode(frame)
    assert data[:4] == b"OMNI" and len(data) == 32 + len(b'{"mime_type":"audio/pcm"}') + 2
    back = decode(data)
    assert back.media_key == "clip" and back.is_last and back.chunked and back.sequence == 7
    assert back.payload == b"\x01\x02" and back.metadata == {"mime_type": "audio/pcm"}
    with pytest.raises(ValueError):
        decode(b"NOPE" + data[4:])
    with pytest.raises(ValueError):
        decode(data[:-1])
