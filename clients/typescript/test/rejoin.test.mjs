// A dropped socket mid-turn: the client rejoins through the same proxy with
// resume/after/epoch and the reply reaches the application exactly once.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { OmniaClient } from "../dist/index.js";
import { ALICE_KEY, collect, startProxy, startServer, WebSocket, within } from "./support.mjs";

let server;
let proxy;
before(async () => {
  server = await startServer();
  proxy = await startProxy(server.port);
});
after(async () => {
  await proxy?.close();
  await server?.stop();
});

const fast = { initialMs: 50, maxMs: 400, attempts: 6, jitter: 0.5 };

test("a socket cut mid-turn is rejoined and the reply is delivered exactly once", async () => {
  const c = new OmniaClient({ url: proxy.url, agent: "test-agent", token: ALICE_KEY, WebSocket, reconnect: fast });
  await c.connect();
  const session = c.sessionId;
  const statuses = [];
  const rejoins = [];
  c.on("status", (s) => statuses.push(s.state));
  c.on("rejoin", (r) => rejoins.push(r));
  const turn = c.send({ content: "go", metadata: { mock_scenario: "paced" } });
  const events = [];
  let cut = false;
  for await (const event of turn) {
    events.push(event);
    if (!cut && event.type === "text") {
      // After "one ": the rest comes while the socket is down or after the rejoin.
      cut = true;
      proxy.cut();
    }
  }
  const result = await within(10_000, turn.result, "the rejoined turn");
  const deltas = events.filter((e) => e.type === "text").map((e) => e.delta);
  assert.equal(deltas.join(""), "one two three four five", `deltas: ${JSON.stringify(deltas)}`);
  assert.deepEqual(deltas, ["one ", "two ", "three ", "four ", "five"], "each delta once");
  assert.equal(result.content, "one two three four five");
  assert.equal(events.filter((e) => e.type === "started").length, 1);
  assert.equal(events.filter((e) => e.type === "tool_call").length, 1, "the server tool's call once");
  assert.equal(events.filter((e) => e.type === "tool_result").length, 1);
  assert.deepEqual(rejoins, [{ replayed: true, session_id: session }]);
  assert.ok(events.some((e) => e.type === "rejoined" && e.replayed === true));
  assert.ok(statuses.includes("rejoining") && statuses.at(-1) === "open", statuses.join(","));
  assert.equal(c.sessionId, session, "the same session");
  assert.ok(proxy.connections >= 2);
  // The session goes on.
  assert.equal((await within(5000, c.send("still here").result, "next")).content, "echo: still here");
  c.close();
});

test("a rejoin whose log is of another epoch surfaces replayed:false (reload the history)", async () => {
  const c = new OmniaClient({ url: proxy.url, agent: "test-agent", token: ALICE_KEY, WebSocket, reconnect: fast });
  await c.connect();
  await within(5000, c.send("first").result, "first turn");
  const gaps = [];
  c.on("history_gap", (g) => gaps.push(g.session_id));
  const rejoined = new Promise((r) => c.once("rejoin", r));
  // Pretend the last position seen was of an epoch the server no longer has.
  c.position.epoch = "0123456789abcdef";
  proxy.cut();
  const rejoin = await within(5000, rejoined, "the rejoin");
  assert.equal(rejoin.replayed, false);
  assert.deepEqual(gaps, [c.sessionId]);
  assert.equal((await within(5000, c.send("after the gap").result, "next")).content, "echo: after the gap");
  c.close();
});

test("a client that gives up reports CONNECTION_LOST on the running turn", async () => {
  const lonely = await startProxy(server.port);
  const c = new OmniaClient({ url: lonely.url, agent: "test-agent", token: ALICE_KEY, WebSocket, reconnect: { initialMs: 20, maxMs: 40, attempts: 2, jitter: 0 } });
  await c.connect();
  const turn = c.send({ content: "go", metadata: { mock_scenario: "paced" } });
  for await (const event of turn) {
    if (event.type === "text") {
      await lonely.close(); // no more connections through it
      break;
    }
  }
  const { error } = await within(5000, collect(turn), "the turn's end");
  assert.equal(error.code, "CONNECTION_LOST");
  assert.equal(c.state, "closed");
});

test("a client tool call pending when the socket drops is answered from the rejoined socket", async () => {
  const c = new OmniaClient({ url: proxy.url, agent: "test-agent", token: ALICE_KEY, WebSocket, reconnect: fast });
  await c.connect();
  const session = c.sessionId;
  const before = proxy.connections;
  const asked = [];
  c.on("tool_call", (handle) => {
    asked.push(handle);
    handle.ack(); // acknowledged at once; the answer waits for the user
  });
  const turn = c.send({ content: "where am I?", metadata: { mock_scenario: "client-tool" } });
  const events = [];
  let rejoined = null;
  for await (const event of turn) {
    events.push(event);
    if (event.type === "tool_call") {
      // The network drops while the call waits for its answer.
      rejoined = new Promise((r) => c.once("rejoin", r));
      proxy.cut();
      const rejoin = await within(5000, rejoined, "the rejoin");
      assert.deepEqual(rejoin, { replayed: true, session_id: session });
      event.handle.result({ city: "Porto" });
    }
  }
  const result = await within(10_000, turn.result, "the tool turn");
  assert.equal(result.content, "Tool result received", "the agent got the answer sent on the new socket");
  assert.equal(asked.length, 1, "the application was asked once");
  assert.equal(events.filter((e) => e.type === "tool_call").length, 1, "the call's tool_call once");
  assert.deepEqual(asked[0].outcome, { kind: "result", result: { city: "Porto" } });
  assert.equal(c.sessionId, session);
  assert.ok(proxy.connections > before, "the answer went out on a new connection");
  c.close();
});
