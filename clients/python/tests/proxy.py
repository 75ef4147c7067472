"""A TCP proxy a test can cut, standing for the network between client and
server: ``cut()`` resets every connection it carries at once (the client
sees its socket die without a Close frame, as on a network change) while
new connections still go through."""

from __future__ import annotations

import asyncio
from typing import Callable, List, Optional, Set, Tuple


class CutProxy:
    def __init__(self, upstream: Callable[[], Tuple[str, int]]) -> None:
        self._upstream = upstream
        self._server: Optional[asyncio.AbstractServer] = None
        self._writers: Set[asyncio.StreamWriter] = set()
        self.accepted = 0
        self.cuts = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._carry, "127.0.0.1", 0)

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"ws://127.0.0.1:{port}"

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        host, port = self._upstream()
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.transport.abort()
            return
        pair: List[asyncio.StreamWriter] = [writer, up_writer]
        self._writers.update(pair)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers.difference_update(pair)

    def cut(self) -> None:
        """Resets every carried connection now."""
        self.cuts += 1
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
