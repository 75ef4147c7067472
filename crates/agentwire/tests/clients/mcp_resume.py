"""Resumes a dropped MCP stream through the official Python client's own
API (mcp 2.3.0): `ClientMessageMetadata.on_resumption_token_update` for
the event ids, then `resumption_token` (sent as `Last-Event-ID`).

Usage: mcp_resume.py URL TOKEN TOOL ARGS_JSON META_JSON
Calls TOOL with a progress callback, stops waiting after the second
progress notification (keeping the last event id), then asks again with
that id. Prints {"before": [...], "after": [...], "text", "isError"}: the
progress messages before the drop and after the resume, and the result.
"""

import asyncio
import json
import sys

import httpx2
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import ClientMessageMetadata


async def main(url, token, tool, arguments, meta):
    headers = {"Authorization": f"Bearer {token}"}
    request = types.CallToolRequest(
        params=types.CallToolRequestParams(name=tool, arguments=arguments, _meta=meta)
    )
    before, after, tokens = [], [], []
    second_progress = asyncio.Event()

    async def on_token(event_id):
        tokens.append(event_id)

    async def first_progress(progress, total, message):
        if not second_progress.is_set():
            before.append(message)
            if len(before) == 2:
                second_progress.set()

    async def later_progress(progress, total, message):
        after.append(message)

    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                first = asyncio.create_task(
                    session.send_request(
                        request,
                        session._call_tool_adapter,
                        metadata=ClientMessageMetadata(on_resumption_token_update=on_token),
                        progress_callback=first_progress,
                    )
                )
                await asyncio.wait_for(second_progress.wait(), timeout=10)
                last_seen = tokens[-1]
                first.cancel()
                result = await session.send_request(
                    request,
                    session._call_tool_adapter,
                    metadata=ClientMessageMetadata(resumption_token=last_seen),
                    progress_callback=later_progress,
                )
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    print(json.dumps({"before": before, "after": after, "text": text, "isError": bool(result.is_error)}))


if __name__ == "__main__":
    url, token, tool, arguments, meta = sys.argv[1:6]
    asyncio.run(main(url, token, tool, json.loads(arguments), json.loads(meta)))
