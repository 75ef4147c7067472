"""Drives agentwire's A2A door with the official Python SDK (a2a-sdk).

Usage: a2a_sdk.py BASE_URL VERSION KEY OTHER_KEY [SUBSCRIBE_URL [KILL_PID]]
  BASE_URL       the server, http://127.0.0.1:PORT
  VERSION        1.0 or 0.3: which of the card's interfaces the client uses
  KEY            an API key the calls carry; OTHER_KEY another caller's
  SUBSCRIBE_URL  with it, only the replay scenario runs: the stream is read
                 from BASE_URL and, after it is dropped, resubscribed on
                 SUBSCRIBE_URL (another replica)
  KILL_PID       and the replica at BASE_URL, this process, is killed
                 (SIGKILL) when the stream is dropped: the turn ends failed
                 ("turn interrupted") and the replay has what it had sent

Runs every scenario against the agents `echo` (handler echo) and
`test-agent` (handler test, scripts chosen by metadata.mock_scenario),
prints one line `ok <scenario>` per scenario that passed, and exits 1 at
the first failure with what differed. The end-to-end test
(crates/agentwire/tests/e2e/a2a.rs) runs it against the real server.
"""

import asyncio
import json
import os
import signal
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

BASE, VERSION, KEY, OTHER_KEY = sys.argv[1:5]
SUBSCRIBE_BASE = sys.argv[5] if len(sys.argv) > 5 else BASE
KILL_PID = int(sys.argv[6]) if len(sys.argv) > 6 else None


def check(condition, what):
    if not condition:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)


def message(text, scenario=None, task_id=None, context_id=None, data=None):
    metadata = struct_pb2.Struct()
    if scenario:
        metadata.update({"mock_scenario": scenario})
    parts = [Part(text=text)] if text is not None else []
    if data is not None:
        value = struct_pb2.Value()
        value.struct_value.update(data)
        parts.append(Part(data=value))
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=parts,
        metadata=metadata,
        task_id=task_id or "",
        context_id=context_id or "",
    )


async def client_for(agent, key, streaming=True):
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    card = await A2ACardResolver(http, f"{BASE}/a2a/{agent}").get_agent_card()
    # The client takes the interface of the version under test.
    chosen = [i for i in card.supported_interfaces if i.protocol_version == VERSION]
    check(chosen, f"the card has a {VERSION} interface")
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(chosen)
    config = ClientConfig(streaming=streaming, httpx_client=http)
    return ClientFactory(config).create(card), card


def text_of(parts):
    return "".join(p.text for p in parts)


async def events_of(stream):
    return [event async for event in stream]


def position(event):
    for kind in ("status_update", "artifact_update"):
        if event.HasField(kind):
            return MessageToDict(getattr(event, kind).metadata).get("agentwire.position")
    return None


async def send_and_get(echo):
    events = await events_of(echo.send_message(SendMessageRequest(message=message("hello"))))
    check(len(events) == 1 and events[0].HasField("task"), f"one task answers a blocking send: {events}")
    task = events[0].task
    check(task.status.state == TaskState.TASK_STATE_COMPLETED, f"completed: {task.status}")
    check(text_of(task.artifacts[0].parts) == "Echo: hello", f"the reply artifact: {task.artifacts}")
    got = await echo.get_task(GetTaskRequest(id=task.id))
    check(got.status.state == TaskState.TASK_STATE_COMPLETED, "GetTask sees it completed")
    check(text_of(got.status.message.parts) == "Echo: hello", "GetTask has the reply")
    check(got.context_id == task.context_id, "the same context")
    print("ok send-and-get", flush=True)
    return task


async def stream(test):
    request = SendMessageRequest(message=message("hi", scenario="stream"))
    events = await events_of(test.send_message(request))
    check(events[0].HasField("task"), "the stream starts with the task")
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    text = "".join(text_of(c.artifact.parts) for c in chunks)
    check(text == "Hello world", f"the chunks make the reply: {text!r}")
    check(chunks[0].append is False and chunks[-1].last_chunk, "append and last_chunk")
    last = events[-1]
    check(last.HasField("status_update"), "the stream ends with a status")
    check(last.status_update.status.state == TaskState.TASK_STATE_COMPLETED, "completed")
    positions = [position(e) for e in events[1:]]
    check(all(positions), f"every event carries its position: {positions}")
    seqs = [int(p.split("-")[1]) for p in positions]
    check(seqs == sorted(seqs), f"positions in order: {seqs}")
    print("ok stream", flush=True)
    return events[0].task


async def list_tasks(test, first, second):
    listed = await test.list_tasks(ListTasksRequest())
    ids = [t.id for t in listed.tasks]
    check(second.id in ids, f"the caller's task is listed: {ids}")
    check(first.id not in ids, "another agent's task is not")
    check(listed.next_page_token == "", f"one page: an empty nextPageToken: {listed.next_page_token!r} {len(listed.tasks)} {listed.total_size}")
    page = await test.list_tasks(ListTasksRequest(page_size=1))
    check(len(page.tasks) == 1 and page.next_page_token, "a page of one, and a token")
    rest = await test.list_tasks(ListTasksRequest(page_size=1, page_token=page.next_page_token))
    check(rest.tasks and rest.tasks[0].id != page.tasks[0].id, "the next page goes on")
    print("ok list", flush=True)


async def cancel_during_stream(test):
    request = SendMessageRequest(message=message("go", scenario="paced"))
    stream = test.send_message(request)
    task_id = None
    states = []
    async for event in stream:
        if event.HasField("task"):
            task_id = event.task.id
        if event.HasField("artifact_update") and task_id and not states:
            canceled = await test.cancel_task(CancelTaskRequest(id=task_id))
            check(canceled.status.state == TaskState.TASK_STATE_CANCELED, f"canceled: {canceled.status}")
            states.append("canceled")
        if event.HasField("status_update"):
            states.append(event.status_update.status.state)
    check(states[-1] == TaskState.TASK_STATE_CANCELED, f"the stream ends canceled: {states}")
    again = await test.cancel_task(CancelTaskRequest(id=task_id))
    check(again.status.state == TaskState.TASK_STATE_CANCELED, "cancel is idempotent")
    print("ok cancel", flush=True)


async def input_required(test):
    events = await events_of(test.send_message(SendMessageRequest(message=message("where", scenario="client-tool"))))
    last = events[-1].status_update
    check(last.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, f"input required: {last.status}")
    asked = MessageToDict(last.status.message)
    call = next(p["data"]["tool_call"] for p in asked["parts"] if "data" in p)
    check(call["name"] == "get_location", f"the call: {call}")
    answer = message(None, task_id=last.task_id, data={"tool_result": {"call_id": call["call_id"], "result": {"city": "Lisbon"}}})
    done = await events_of(test.send_message(SendMessageRequest(message=answer)))
    final = done[-1].status_update.status
    check(final.state == TaskState.TASK_STATE_COMPLETED, f"completed after the answer: {final}")
    check(text_of(final.message.parts) == "Tool result received", f"the reply: {final.message}")
    print("ok input-required", flush=True)


async def subscribe_replays(test, card):
    """Drops a stream after two events, then resubscribes from the last
    position it read: every chunk arrives exactly once."""
    url = card.supported_interfaces[0].url
    headers = {"Authorization": f"Bearer {KEY}", "A2A-Version": VERSION, "Content-Type": "application/json"}
    stream_method, subscribe_method = (
        ("SendStreamingMessage", "SubscribeToTask") if VERSION == "1.0" else ("message/stream", "tasks/resubscribe")
    )
    if VERSION == "1.0":
        msg = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "go"}], "metadata": {"mock_scenario": "paced"}}
    else:
        msg = {"kind": "message", "messageId": str(uuid.uuid4()), "role": "user", "parts": [{"kind": "text", "text": "go"}], "metadata": {"mock_scenario": "paced"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": stream_method, "params": {"message": msg}}
    seen_text, last_id, task_id = "", None, None
    async with httpx.AsyncClient(timeout=30) as http:
        async with http.stream("POST", url, json=body, headers=headers) as response:
            read, event_id = 0, None
            async for line in response.aiter_lines():
                if line.startswith("id:"):
                    event_id = line[3:].strip()
                if line.startswith("data:"):
                    # An event's position is its own id, whichever line
                    # comes first: taken once the event is read whole.
                    last_id = event_id or last_id
                    result = json.loads(line[5:])["result"]
                    task_id = task_id or (result.get("task") or result).get("id")
                    chunk = result.get("artifactUpdate") or (result if result.get("kind") == "artifact-update" else None)
                    if chunk:
                        seen_text += "".join(p.get("text", "") for p in chunk["artifact"]["parts"])
                        read += 1
                    if read == 2:
                        break
        check(last_id and task_id, "the stream gave a position and the task")
        if KILL_PID:
            os.kill(KILL_PID, signal.SIGKILL)
        resub = {"jsonrpc": "2.0", "id": 2, "method": subscribe_method, "params": {"id": task_id}}
        elsewhere = url.replace(BASE, SUBSCRIBE_BASE)
        async with http.stream("POST", elsewhere, json=resub, headers={**headers, "Last-Event-ID": last_id}) as response:
            first = None
            state = None
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                result = json.loads(line[5:])["result"]
                if first is None:
                    first = result
                    continue
                chunk = result.get("artifactUpdate") or (result if result.get("kind") == "artifact-update" else None)
                if chunk:
                    seen_text += "".join(p.get("text", "") for p in chunk["artifact"]["parts"])
                status = result.get("statusUpdate") or (result if result.get("kind") == "status-update" else None)
                if status:
                    state = status["status"]["state"]
    snapshot = first.get("task") or first
    check(snapshot["id"] == task_id, f"the task comes first: {first}")
    if KILL_PID:
        # What the killed replica had published, once each, in order.
        check("one two three four five".startswith(seen_text), f"no chunk twice: {seen_text!r}")
        check(state in ("TASK_STATE_FAILED", "failed"), f"the orphaned turn ends failed: {state}")
    else:
        check(seen_text == "one two three four five", f"every chunk exactly once: {seen_text!r}")
        check(state in ("TASK_STATE_COMPLETED", "completed"), f"then the end: {state}")
    print("ok subscribe-replay", flush=True)


async def not_anothers(task):
    other, _ = await client_for("echo", OTHER_KEY, streaming=False)
    try:
        await other.get_task(GetTaskRequest(id=task.id))
        check(False, "another caller's task must not be found")
    except TaskNotFoundError:
        pass
    print("ok not-found-for-another", flush=True)


async def sdk_subscribe(test):
    """SubscribeToTask through the SDK: the current task first."""
    request = SendMessageRequest(message=message("go", scenario="paced"))
    stream = test.send_message(request)
    first = await stream.__anext__()
    await stream.aclose()
    task_id = first.task.id
    events = await events_of(test.subscribe(SubscribeToTaskRequest(id=task_id)))
    check(events[0].HasField("task") and events[0].task.id == task_id, "the task first")
    check(events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, "then the live events to the end")
    print("ok sdk-subscribe", flush=True)


async def main():
    if SUBSCRIBE_BASE != BASE:
        _, card = await client_for("test-agent", KEY)
        await subscribe_replays(None, card)
        print("ok all", flush=True)
        return
    echo, _ = await client_for("echo", KEY, streaming=False)
    test, card = await client_for("test-agent", KEY)
    first = await send_and_get(echo)
    second = await stream(test)
    await cancel_during_stream(test)
    await input_required(test)
    if VERSION == "1.0":  # v0.3 has no tasks/list
        await list_tasks(test, first, second)
    await subscribe_replays(test, card)
    await sdk_subscribe(test)
    await not_anothers(first)
    print("ok all", flush=True)


asyncio.run(main())
