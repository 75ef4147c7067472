"""The HTTP half of an upload: sending the bytes where ``upload_ready`` says.

Done with the standard library in a worker thread, so that the client keeps
``websockets`` as its only dependency and the event loop never blocks on a
large body.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, Optional

from .errors import UploadFailed
from .frames import UploadReady


@dataclass(frozen=True)
class Uploaded:
    """An uploaded file, ready to be named in a message."""

    storage_ref: str
    upload_id: str
    filename: str
    mime_type: str
    size_bytes: int

    def part(self, kind: Optional[str] = None) -> Dict[str, Any]:
        """The message content part naming this upload; ``kind`` defaults from
        the MIME type (image, audio, video, else file)."""
        if kind is None:
            top = self.mime_type.split("/", 1)[0]
            kind = top if top in ("image", "audio", "video") else "file"
        return {
            "type": kind,
            "media": {
                "storage_ref": self.storage_ref,
                "mime_type": self.mime_type,
                "filename": self.filename,
                "size_bytes": self.size_bytes,
            },
        }


def _put(ready: UploadReady, data: bytes, token: Optional[str], timeout: float) -> int:
    headers = dict(ready.headers)
    if token and "Authorization" not in headers:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        ready.upload_url, data=data, method=ready.method or "PUT", headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        raise UploadFailed(f"upload answered HTTP {error.code}") from None
    except urllib.error.URLError as error:
        raise UploadFailed(f"upload failed: {error.reason}") from None


async def put_bytes(
    ready: UploadReady, data: bytes, token: Optional[str], timeout: float = 60.0
) -> None:
    status = await asyncio.to_thread(_put, ready, data, token, timeout)
    if status >= 300:
        raise UploadFailed(f"upload answered HTTP {status}")
