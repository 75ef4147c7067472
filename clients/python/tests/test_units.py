"""The pieces that need no server: deadlines, media reassembly, parts."""

from __future__ import annotations

import base64

from agentwire_client.credentials import jwt_expiry, refresh_delay, server_deadline
from agentwire_client.frames import Media
from agentwire_client.media import MediaAssembler
from agentwire_client.uploads import Uploaded
from conftest import mint_jwt


def test_the_refresh_comes_before_the_servers_deadline() -> None:
    now = 1_000_000.0

    def token(exp: float) -> str:
        """A JWT's shape with this ``exp`` (the client reads, never verifies)."""
        claims = base64.urlsafe_b64encode(f'{{"exp": {int(exp)}}}'.encode()).rstrip(b"=").decode()
        return f"e30.{claims}.c2ln"

    assert jwt_expiry(token(now + 600)) == now + 600
    assert jwt_expiry(mint_jwt("x", ttl=60)) is not None
    # A long-lived token: the server stops 30 s before expiry.
    assert server_deadline(token(now + 600), now) == now + 570
    assert server_deadline(token(now + 10), now) == now + 5  # half the remaining life
    delay = refresh_delay(token(now + 600), now)
    assert delay is not None and 0 < delay < 570
    assert refresh_delay("an-api-key", now) is None


def test_json_media_chunks_out_of_order_are_reassembled_in_sequence() -> None:
    assembler = MediaAssembler()
    def chunk(sequence: int, data: bytes, last: bool) -> dict:
        return {"type": "media_chunk", "session_id": "s", "media_chunk": {
            "media_id": "m", "sequence": sequence, "is_last": last,
            "data": base64.b64encode(data).decode(), "mime_type": "audio/mp3"}}
    assert assembler.json_chunk(chunk(1, b"world", False)) is None
    assert assembler.json_chunk(chunk(0, b"hello ", False)) is None
    whole = assembler.json_chunk(chunk(2, b"!", True))
    assert whole == Media("m", "audio/mp3", b"hello world!", "s")


def test_an_uploads_part_names_its_storage_ref_by_kind() -> None:
    image = Uploaded("omnia://sessions/s/media/1", "1", "a.png", "image/png", 3)
    assert image.part() == {"type": "image", "media": {
        "storage_ref": "omnia://sessions/s/media/1", "mime_type": "image/png",
        "filename": "a.png", "size_bytes": 3}}
    assert Uploaded("r", "2", "a.pdf", "application/pdf", 1).part()["type"] == "file"
