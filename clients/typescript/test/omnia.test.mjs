// The Omnia dialect against the real server: a streamed turn, cancel,
// client tools, an upload, SESSION_EXPIRED, the server's refusals.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { AgentwireError, OmniaClient, ToolRejection } from "../dist/index.js";
import { ALICE_KEY, collect, startServer, WebSocket, within } from "./support.mjs";

let server;
before(async () => {
  server = await startServer();
});
after(() => server?.stop());

function client(options = {}) {
  return new OmniaClient({ url: server.url, agent: "test-agent", token: ALICE_KEY, WebSocket, ...options });
}

test("a streamed turn delivers its deltas in order, then the reply", async () => {
  const c = client();
  const connected = await c.connect();
  assert.equal(connected.type, "connected");
  assert.equal(c.capabilities.cancel, true, "stream=2 is on");
  const turn = c.send({ content: "hi", metadata: { mock_scenario: "stream" } });
  const { events, result, text } = await within(5000, collect(turn), "the turn");
  assert.deepEqual(
    events.filter((e) => e.type === "text").map((e) => e.delta),
    ["Hello", " ", "world"],
  );
  assert.equal(events[0].type, "started");
  assert.equal(events[0].agent, "test-agent");
  assert.equal(text, "Hello world");
  assert.equal(result.content, "Hello world");
  assert.equal(result.cancelled, false);
  assert.equal(result.session_id, c.sessionId);
  // A second turn on the same connection and session.
  const echo = await within(5000, c.send("again").result, "the echo");
  assert.equal(echo.content, "echo: again");
  c.close();
});

test("a failed turn rejects with the server's code; a refused message too", async () => {
  const c = client();
  await c.connect();
  await assert.rejects(c.send({ content: "x", metadata: { mock_scenario: "error" } }).result, (error) => {
    assert.ok(error instanceof AgentwireError);
    assert.equal(error.code, "TEST_ERROR");
    return true;
  });
  // A message while the session's turn runs: TURN_IN_PROGRESS, and the running turn is unharmed.
  const slow = c.send({ content: "wait", metadata: { mock_scenario: "slow" } });
  await new Promise((r) => setTimeout(r, 200));
  const refused = new OmniaClient({ url: server.url, agent: "test-agent", token: ALICE_KEY, WebSocket });
  await refused.connect();
  await assert.rejects(refused.send({ content: "too soon", session_id: c.sessionId }).result, { code: "TURN_IN_PROGRESS" });
  assert.equal((await within(5000, slow.result, "the slow turn")).content, "done: wait");
  refused.close();
  c.close();
});

test("cancel ends the running turn once, with what was streamed", async () => {
  const c = client();
  await c.connect();
  const turn = c.send({ content: "hold it", metadata: { mock_scenario: "hold" } });
  const seen = [];
  for await (const event of turn) {
    seen.push(event);
    if (event.type === "text") {
      assert.equal(event.delta, "held");
      c.cancel();
    }
  }
  const result = await turn.result;
  assert.equal(result.cancelled, true);
  assert.equal(result.content, "held");
  // The session takes the next message at once.
  assert.equal((await within(5000, c.send("after").result, "next turn")).content, "echo: after");
  c.close();
});

test("a registered client tool is acknowledged and answered; the agent gets the result", async () => {
  const calls = [];
  const c = client({
    tools: {
      get_location: (args, call) => {
        calls.push({ args, call });
        return { city: "Lisbon" };
      },
    },
  });
  await c.connect();
  const turn = c.send({ content: "where am I?", metadata: { mock_scenario: "client-tool" } });
  const { events, result } = await within(5000, collect(turn), "the tool turn");
  assert.equal(result.content, "Tool result received");
  assert.equal(calls.length, 1, "the handler ran once");
  assert.deepEqual(calls[0].args, { query: "current" });
  assert.equal(calls[0].call.consent_message, "Allow location access?");
  assert.deepEqual(calls[0].call.categories, ["location"]);
  const call = events.find((e) => e.type === "tool_call");
  assert.deepEqual(call.handle.outcome, { kind: "result", result: { city: "Lisbon" } });
  c.close();
});

test("a client tool the user declines is a nack, and the agent says so", async () => {
  const c = client({
    tools: {
      get_location: () => {
        throw new ToolRejection("the user said no");
      },
    },
  });
  await c.connect();
  const result = await within(5000, c.send({ content: "where?", metadata: { mock_scenario: "client-tool" } }).result, "turn");
  assert.equal(result.content, "Tool rejected: the user said no");
  c.close();
});

test("an unregistered tool call goes to the application, which answers it through its handle", async () => {
  const c = client({ agent: "quick-tools" });
  await c.connect();
  const asked = [];
  c.on("tool_call", (handle) => {
    asked.push(handle.call.name);
    handle.ack();
    setTimeout(() => handle.reject("not on this device"), 50);
  });
  const result = await within(5000, c.send({ content: "x", metadata: { mock_scenario: "client-tool" } }).result, "turn");
  assert.deepEqual(asked, ["get_location"]);
  assert.equal(result.content, "Tool rejected: not on this device");
  // A call nobody answers is ended by the server's timeout: the handle learns it.
  const silent = client({ agent: "quick-tools" });
  await silent.connect();
  let handle;
  silent.on("tool_call", (h) => (handle = h));
  const late = await within(5000, silent.send({ content: "y", metadata: { mock_scenario: "client-tool" } }).result, "timeout");
  assert.match(late.content, /^Tool rejected: /);
  assert.equal(handle.outcome.kind, "ended");
  assert.equal(handle.signal.aborted, true);
  silent.close();
  c.close();
});

test("an upload is sent over HTTP and referenced in a message", async () => {
  const c = client();
  await c.connect();
  const png = new Uint8Array(2048).map((_, i) => i % 256);
  const progress = [];
  const upload = await within(5000, c.upload(png, { filename: "dot.png", mime_type: "image/png" }, (f) => progress.push(f)), "upload");
  assert.match(upload.storage_ref, new RegExp(`^omnia://sessions/${c.sessionId}/media/`));
  assert.equal(upload.part.type, "image");
  assert.deepEqual(progress, [0, 1]);
  const result = await within(
    5000,
    c.send({ parts: [{ type: "text", text: "what is this?" }, upload.part], metadata: { mock_scenario: "parts" } }).result,
    "the turn",
  );
  assert.deepEqual(result.parts, [{ type: "text", text: "I see your image" }]);
  // The stored item is the bytes sent.
  const [, session, , media] = upload.storage_ref.replace("omnia://", "").split("/");
  const response = await fetch(`${server.url}/media/download/${session}/${media}`, {
    headers: { Authorization: `Bearer ${ALICE_KEY}` },
  });
  assert.equal(response.status, 200);
  assert.deepEqual(new Uint8Array(await response.arrayBuffer()), png);
  // A reference to another session's media is refused, and the turn rejects.
  await assert.rejects(
    c.send({ parts: [{ type: "image", media: { storage_ref: "omnia://sessions/other/media/x", mime_type: "image/png" } }] }).result,
    { code: "INVALID_MESSAGE" },
  );
  c.close();
});

test("a message naming an expired session is sent again on the connection's own (SESSION_EXPIRED)", async () => {
  const first = client({ agent: "short-lived" });
  await first.connect();
  await within(5000, first.send("remember me").result, "first turn");
  const old = first.sessionId;
  first.close();
  await new Promise((r) => setTimeout(r, 700)); // context_ttl: 300ms
  const second = client({ agent: "short-lived" });
  await second.connect();
  const expired = [];
  second.on("session_expired", (e) => expired.push(e.session_id));
  const result = await within(5000, second.send({ content: "back again", session_id: old }).result, "resent turn");
  assert.deepEqual(expired, [old]);
  assert.equal(result.expired_session, old);
  assert.equal(result.content, "echo: back again");
  assert.equal(result.session_id, second.sessionId);
  assert.notEqual(result.session_id, old);
  second.close();
});

test("media from the agent is assembled: binary OMNI frames and base64 media_chunk alike", async () => {
  for (const binary of [true, false]) {
    const c = client({ binary });
    await c.connect();
    for (const [scenario, size, mime, pattern] of [
      ["binary-media", 15, "audio/mp3", (b, i) => b === "test audio data".charCodeAt(i)],
      ["big-media", 1_081_344, "video/mp4", (b, i) => b === i % 256],
    ]) {
      const { events, result } = await within(10_000, collect(c.send({ content: "m", metadata: { mock_scenario: scenario } })), scenario);
      assert.equal(result.content, "");
      const media = events.filter((e) => e.type === "media").map((e) => e.media);
      assert.equal(media.length, 1, `${scenario} binary=${binary}: one item`);
      assert.equal(media[0].mime_type, mime);
      assert.equal(media[0].bytes.length, size);
      assert.ok(media[0].bytes.every(pattern), `${scenario} binary=${binary}: the bytes sent, in order`);
    }
    c.close();
  }
});

test("a JWT is refreshed with credential_refresh before its deadline, so the connection outlives it", async () => {
  const { aliceJwt } = await import("./support.mjs");
  let minted = 0;
  const c = client({
    token: () => {
      minted += 1;
      return aliceJwt(6);
    },
  });
  await c.connect();
  let closed = null;
  c.on("closed", (e) => (closed = e));
  // The first token's deadline is 3 s away (expiry less half its 6 s life).
  await new Promise((r) => setTimeout(r, 4500));
  assert.equal(closed, null, "not closed with 4401");
  assert.ok(minted >= 2, `a fresher token was asked for: ${minted}`);
  assert.equal((await within(5000, c.send("still valid").result, "turn")).content, "echo: still valid");
  c.close();
});
