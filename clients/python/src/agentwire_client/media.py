"""Reassembles media items from ``media_chunk`` frames and binary frames.

The application wants whole items (an image, a clip), and the server may
split one over many frames, so chunks are held by media id until the last
arrives. Call audio (empty media id) has no last chunk worth waiting for,
so it is passed on chunk by chunk instead.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Dict, Optional, Union

from .binary import BinaryFrame
from .frames import JSON, Media, MediaChunk


@dataclass
class _Pending:
    mime_type: str
    session_id: Optional[str]
    chunks: Dict[int, bytes] = field(default_factory=dict)
    total: Optional[int] = None
    last_seen: bool = False


class MediaAssembler:
    def __init__(self) -> None:
        self._pending: Dict[str, _Pending] = {}

    def json_chunk(self, frame: JSON) -> Union[Media, MediaChunk, None]:
        body = frame.get("media_chunk") or {}
        media_id = str(body.get("media_id", ""))
        sequence = int(body.get("sequence", 0))
        data = base64.b64decode(body.get("data") or "")
        mime = str(body.get("mime_type", "application/octet-stream"))
        is_last = bool(body.get("is_last", False))
        sid = frame.get("session_id")
        if not media_id:
            return MediaChunk(media_id, sequence, is_last, data, mime, sid)
        pending = self._pending.setdefault(media_id, _Pending(mime, sid))
        pending.chunks[sequence] = data
        pending.last_seen = pending.last_seen or is_last
        return self._complete(media_id, pending) if pending.last_seen else None

    def binary_frame(self, frame: BinaryFrame) -> Union[Media, MediaChunk, None]:
        media_id = frame.media_key
        mime = str(frame.metadata.get("mime_type", "application/octet-stream"))
        sid = frame.metadata.get("session_id")
        if not media_id:
            return MediaChunk("", frame.sequence, frame.is_last, frame.payload, mime, sid)
        if not frame.chunked:
            return Media(media_id, mime, frame.payload, sid)
        pending = self._pending.setdefault(media_id, _Pending(mime, sid))
        pending.chunks[frame.sequence] = frame.payload
        if "total_chunks" in frame.metadata:
            pending.total = int(frame.metadata["total_chunks"])
        pending.last_seen = pending.last_seen or frame.is_last
        if pending.total is not None and len(pending.chunks) >= pending.total:
            return self._complete(media_id, pending)
        if pending.total is None and pending.last_seen:
            return self._complete(media_id, pending)
        return None

    def _complete(self, media_id: str, pending: _Pending) -> Media:
        del self._pending[media_id]
        data = b"".join(pending.chunks[i] for i in sorted(pending.chunks))
        return Media(media_id, pending.mime_type, data, pending.session_id)
