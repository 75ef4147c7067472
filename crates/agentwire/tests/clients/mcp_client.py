"""Drives agentwire's /mcp with the official Python MCP client (mcp 2.3.0).

Usage: mcp_client.py URL TOKEN COMMAND [ARGS...]; TOKEN "-" is none.
Prints one JSON object on stdout: what the test asserts on.

  list                               the tools' names
  call TOOL ARGS_JSON [META_JSON]    one call: isError, text, structured
  progress TOOL ARGS_JSON META_JSON TIMEOUT_S
                                     a call with a progress callback and a
                                     read timeout: the progress seen, then
                                     the result or the error
  auto-call TOOL ARGS_JSON            the tools and one call with the
                                     high-level Client in its default "auto"
                                     mode (it probes server/discover and
                                     speaks 2026-07-28 where it can), no
                                     credential
  elicit TOOL ARGS_JSON META_JSON ANSWER
                                     a call from a client that takes
                                     elicitation and answers each with
                                     {"result": ANSWER}: the messages it
                                     was asked, then the result
"""

import asyncio
import json
import sys

import httpx2
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


def result_json(result):
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return {"isError": bool(result.is_error), "text": text, "structured": result.structured_content}


async def auto_call(url, args):
    from mcp import Client

    async with Client(url) as client:
        tools = await client.list_tools()
        result = await client.call_tool(args[0], json.loads(args[1]))
        out = result_json(result)
        out["protocol"] = client.protocol_version
        out["tools"] = [t.name for t in tools.tools]
        print(json.dumps(out), flush=True)


async def main(url, token, command, args):
    if command == "auto-call":
        return await auto_call(url, args)
    headers = {} if token == "-" else {"Authorization": f"Bearer {token}"}
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"result": args[3]})

    elicitation = on_elicit if command == "elicit" else None
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicitation) as session:
                init = await session.initialize()
                out = {"protocol": init.protocol_version}
                if command == "list":
                    tools = await session.list_tools()
                    out["tools"] = [t.name for t in tools.tools]
                elif command == "call":
                    meta = json.loads(args[2]) if len(args) > 2 else None
                    result = await session.call_tool(args[0], json.loads(args[1]), meta=meta)
                    out.update(result_json(result))
                elif command == "progress":
                    seen = []

                    async def on_progress(progress, total, message):
                        seen.append({"progress": progress, "message": message})

                    try:
                        result = await session.call_tool(
                            args[0],
                            json.loads(args[1]),
                            read_timeout_seconds=float(args[3]),
                            progress_callback=on_progress,
                            meta=json.loads(args[2]),
                        )
                        out.update(result_json(result))
                    except Exception as error:  # the timeout, reported for the test
                        out["error"] = type(error).__name__
                    out["progress"] = seen
                elif command == "elicit":
                    result = await session.call_tool(args[0], json.loads(args[1]), meta=json.loads(args[2]))
                    out.update(result_json(result))
                    out["asked"] = asked
                else:
                    raise SystemExit(f"unknown command {command}")
                print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
