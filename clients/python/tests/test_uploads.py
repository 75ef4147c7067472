"""Uploading a file and naming it in a message."""

from __future__ import annotations

import pytest

from agentwire_client import Done, ServerError, connect
from conftest import ALICE_KEY, Server

PNG = bytes(range(256)) * 8


async def test_an_uploaded_image_is_seen_by_the_agent(server: Server) -> None:
    async with connect(server.url, agent="test-agent", token=ALICE_KEY) as conn:
        uploaded = await conn.upload(PNG, "photo.png", "image/png")
        assert uploaded.storage_ref.startswith(f"omnia://sessions/{conn.session_id}/media/")
        stored = [p for p in (server.data_dir / "media").rglob("*") if p.is_file()]
        assert any(p.read_bytes() == PNG for p in stored), "the bytes reached the store"
        done = await conn.send(
            parts=[{"type": "text", "text": "What is this?"}, uploaded.part()],
            metadata={"mock_scenario": "parts"},
        ).result()
        assert isinstance(done, Done)
        assert done.parts == [{"type": "text", "text": "I see your image"}]


async def test_a_reference_to_nothing_uploaded_is_refused(server: Server) -> None:
    async with connect(server.url, agent="test-agent", token=ALICE_KEY) as conn:
        bogus = f"omnia://sessions/{conn.session_id}/media/0123456789abcdef0123456789abcdef"
        with pytest.raises(ServerError) as refused:
            await conn.send(
                parts=[{"type": "image", "media": {"storage_ref": bogus, "mime_type": "image/png"}}],
                metadata={"mock_scenario": "parts"},
            ).result()
        assert refused.value.code == "INVALID_MESSAGE"
        assert "storage_ref" in refused.value.message
