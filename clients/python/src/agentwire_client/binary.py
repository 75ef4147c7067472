"""The OMNI binary frame: a 32-byte header, JSON metadata, raw payload.

Media arrives this way with ``binary=True`` to save base64's third; voice
clients also send call audio in it. Layout from the Omnia contract
("Binary WebSocket frames"), all integers big-endian.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any, Dict

MAGIC = b"OMNI"
VERSION = 1
HEADER = struct.Struct(">4sBBHIII12s")
HEADER_LEN = 32
MEDIA_CHUNK = 1

FLAG_COMPRESSED = 0x01
FLAG_CHUNKED = 0x02
FLAG_IS_LAST = 0x04


class FrameError(ValueError):
    """Bytes that are not a valid OMNI frame."""


@dataclass(frozen=True)
class BinaryFrame:
    message_type: int
    flags: int
    sequence: int
    media_id: bytes
    metadata: Dict[str, Any] = field(default_factory=dict)
    payload: bytes = b""

    @property
    def chunked(self) -> bool:
        return bool(self.flags & FLAG_CHUNKED)

    @property
    def is_last(self) -> bool:
        return bool(self.flags & FLAG_IS_LAST)

    @property
    def media_key(self) -> str:
        """The 12-byte media id as text: its ASCII up to the padding, else hex."""
        trimmed = self.media_id.rstrip(b"\x00")
        if trimmed and all(32 <= b < 127 for b in trimmed):
            return trimmed.decode("ascii")
        return "" if not trimmed else self.media_id.hex()


def decode(data: bytes) -> BinaryFrame:
    if len(data) < HEADER_LEN:
        raise FrameError("shorter than the 32-byte header")
    magic, version, flags, mtype, meta_len, payload_len, seq, media_id = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise FrameError("bad magic")
    if version != VERSION:
        raise FrameError(f"unsupported version {version}")
    if HEADER_LEN + meta_len + payload_len != len(data):
        raise FrameError("lengths do not match the frame")
    meta_end = HEADER_LEN + meta_len
    metadata = json.loads(data[HEADER_LEN:meta_end]) if meta_len else {}
    if not isinstance(metadata, dict):
        raise FrameError("metadata is not a JSON object")
    return BinaryFrame(mtype, flags, seq, media_id, metadata, bytes(data[meta_end:]))


def encode(frame: BinaryFrame) -> bytes:
    meta = json.dumps(frame.metadata, separators=(",", ":")).encode() if frame.metadata else b""
    media_id = frame.media_id[:12].ljust(12, b"\x00")
    header = HEADER.pack(
        MAGIC, VERSION, frame.flags, frame.message_type, len(meta), len(frame.payload),
        frame.sequence, media_id,
    )
    return header + meta + frame.payload
