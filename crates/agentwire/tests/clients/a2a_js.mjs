// Drives agentwire's A2A door with the official JavaScript SDK
// (@a2a-js/sdk, from target/npm; run with NODE_PATH=target/npm/node_modules).
//
// Usage: node a2a_js.mjs BASE_URL VERSION KEY
//   VERSION 1.0 or 0.3: the card's interface the client takes (0.3 through
//   the SDK's legacy compatibility layer).
// Prints `ok <scenario>` per scenario and `ok all`; exits 1 at the first
// failure. Run by crates/agentwire/tests/e2e/a2a.rs.
import { createRequire } from "node:module";
import { randomUUID } from "node:crypto";

const require = createRequire(import.meta.url);
const { ClientFactory, JsonRpcTransportFactory, DefaultAgentCardResolver } = require("@a2a-js/sdk/client");

const [base, version, key] = process.argv.slice(2);

function check(condition, what) {
  if (!condition) {
    console.log(`FAILED: ${what}`);
    process.exit(1);
  }
}

const authed = (input, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.set("Authorization", `Bearer ${key}`);
  return fetch(input, { ...init, headers });
};

async function clientFor(agent) {
  const resolver = new DefaultAgentCardResolver({ fetchImpl: authed });
  const card = await resolver.resolve(`${base}/a2a/${agent}/`);
  card.supportedInterfaces = card.supportedInterfaces.filter((i) => i.protocolVersion === version);
  check(card.supportedInterfaces.length === 1, `the card has a ${version} interface`);
  const factory = new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl: authed, legacyCompat: { enabled: true } })],
  });
  return factory.createFromAgentCard(card);
}

function message(text, scenario, taskId, data) {
  const parts = [];
  if (text !== undefined) parts.push({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" });
  if (data !== undefined) parts.push({ content: { $case: "data", value: data }, metadata: undefined, filename: "", mediaType: "" });
  return {
    message: {
      messageId: randomUUID(),
      contextId: "",
      taskId: taskId || "",
      role: 1,
      parts,
      metadata: scenario ? { mock_scenario: scenario } : undefined,
      extensions: [],
      referenceTaskIds: [],
    },
  };
}

const textOf = (parts) => parts.map((p) => (p.content && p.content.$case === "text" ? p.content.value : "")).join("");
const COMPLETED = 3, CANCELED = 5, INPUT_REQUIRED = 6;

async function sendAndGet(echo) {
  const result = await echo.sendMessage(message("hello"));
  const task = result.payload ? result.payload.value : result;
  check(task.status.state === COMPLETED, `completed: ${JSON.stringify(task.status)}`);
  check(textOf(task.artifacts[0].parts) === "Echo: hello", "the reply artifact");
  const got = await echo.getTask({ id: task.id, tenant: "" });
  check(got.status.state === COMPLETED && got.contextId === task.contextId, "GetTask sees it");
  console.log("ok send-and-get");
}

async function stream(test) {
  let text = "", last;
  for await (const event of test.sendMessageStream(message("hi", "stream"))) {
    const { $case, value } = event.payload;
    if ($case === "artifactUpdate") text += textOf(value.artifact.parts);
    last = event.payload;
  }
  check(text === "Hello world", `the chunks: ${text}`);
  check(last.$case === "statusUpdate" && last.value.status.state === COMPLETED, "ends completed");
  console.log("ok stream");
}

async function cancel(test) {
  let taskId, state;
  for await (const event of test.sendMessageStream(message("go", "paced"))) {
    const { $case, value } = event.payload;
    if ($case === "task") taskId = value.id;
    if ($case === "artifactUpdate" && state === undefined) {
      const canceled = await test.cancelTask({ id: taskId, tenant: "", metadata: undefined });
      check(canceled.status.state === CANCELED, "canceled");
      state = CANCELED;
    }
    if ($case === "statusUpdate") state = value.status.state;
  }
  check(state === CANCELED, `the stream ends canceled: ${state}`);
  console.log("ok cancel");
}

async function inputRequired(test) {
  let last;
  for await (const event of test.sendMessageStream(message("where", "client-tool"))) last = event.payload;
  check(last.$case === "statusUpdate" && last.value.status.state === INPUT_REQUIRED, "input required");
  const data = last.value.status.message.parts.find((p) => p.content.$case === "data").content.value;
  const answer = message(undefined, undefined, last.value.taskId, { tool_result: { call_id: data.tool_call.call_id, result: "Lisbon" } });
  const result = await test.sendMessage(answer);
  const task = result.payload ? result.payload.value : result;
  check(task.status.state === COMPLETED, `completed after the answer: ${JSON.stringify(task.status)}`);
  check(textOf(task.status.message.parts) === "Tool result received", "the reply");
  console.log("ok input-required");
}

async function resubscribe(test) {
  const stream = test.sendMessageStream(message("go", "paced"));
  const first = await stream.next();
  const taskId = first.value.payload.value.id;
  await stream.return();
  const events = [];
  for await (const event of test.resubscribeTask({ id: taskId, tenant: "" })) events.push(event.payload);
  check(events[0].$case === "task" && events[0].value.id === taskId, "the task first");
  const end = events[events.length - 1];
  check(end.$case === "statusUpdate" && end.value.status.state === COMPLETED, "then to the end");
  console.log("ok resubscribe");
}

const echo = await clientFor("echo");
const test = await clientFor("test-agent");
await sendAndGet(echo);
await stream(test);
await cancel(test);
await inputRequired(test);
await resubscribe(test);
console.log("ok all");
