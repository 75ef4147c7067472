// What the console's browser scenarios (console.test.mjs) share that holds
// no browser state: assertions, reading the page's transcript, frames and
// metrics, screenshots. SCREENSHOT_DIR and CONSOLE_URL as the script takes
// them.

import path from "node:path";
import fs from "node:fs";

const BASE = process.env.CONSOLE_URL;
const SHOTS = process.env.SCREENSHOT_DIR;

export function assert(condition, message) {
  if (!condition) throw new Error(`assertion failed: ${message}`);
}

export function assertEq(actual, expected, message) {
  if (actual !== expected) {
    throw new Error(`assertion failed: ${message}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

export const lastAssistant = (page) => page.locator("[data-testid=msg-assistant]").last();

export async function waitOpen(page) {
  await page.waitForSelector("[data-testid=status][data-state=open]");
}

/** A new chat with `agent` (choosing it opens a new connection). */
export async function fresh(page, agent) {
  const current = await page.locator("[data-testid=agent-select]").inputValue();
  if (current === agent) {
    await page.click("[data-testid=new-chat]");
  } else {
    await page.selectOption("[data-testid=agent-select]", agent);
  }
  await waitOpen(page);
  assertEq(await page.locator("[data-testid=transcript] > *").count(), 0, "a new chat is empty");
}

export async function setMetadata(page, value) {
  await page.evaluate(() => {
    document.querySelector("details.metadata").open = true;
  });
  await page.fill("[data-testid=metadata]", value ? JSON.stringify(value) : "");
}

export async function setCredential(page, value) {
  await page.fill("[data-testid=credential]", value);
  await page.dispatchEvent("[data-testid=credential]", "change");
}

export async function send(page, text) {
  page.repliesBefore = await page.locator("[data-testid=msg-assistant]").count();
  await page.fill("[data-testid=input]", text);
  await page.click("[data-testid=send]");
}

/** The text of a reply: its runs of text, without the tool cards between them. */
export async function replyText(bubble) {
  return (await bubble.locator("[data-testid=msg-text]").allTextContents()).join("").trim();
}

/** Waits for the last reply to end in `state` and returns its text. */
export async function reply(page, state = "done") {
  await page.waitForFunction(
    ([before, wanted]) => {
      const bubbles = document.querySelectorAll("[data-testid=msg-assistant]");
      return bubbles.length > before && bubbles[bubbles.length - 1].dataset.state === wanted;
    },
    [page.repliesBefore ?? 0, state],
  );
  return replyText(lastAssistant(page));
}

/** What a reply's body shows, in order: `text:…` for a run of text, `tool-card:NAME` for a tool card. */
export function bodyOrder(bubble) {
  return bubble.locator("[data-testid=msg-body]").evaluate((body) =>
    [...body.children].map((child) =>
      child.dataset.testid === "msg-text"
        ? `text:${child.innerText.trim()}`
        : `${child.dataset.testid}:${child.dataset.toolName ?? ""}`,
    ),
  );
}

/** A turn's text, its tool card, then the text after it, in that order. */
export function assertNarratedOrder(order, what) {
  const shown = JSON.stringify(order);
  assertEq(order.length, 3, `${what}: three pieces: ${shown}`);
  assertEq(order[0], "text:Let me look up your time zone.", `${what}: the text before the call first: ${shown}`);
  assertEq(order[1], "tool-card:get_timezone", `${what}: then the tool card: ${shown}`);
  assert(
    order[2].startsWith("text:Your time zone is ") && order[2].includes("America/Denver"),
    `${what}: then the answer after the tool: ${shown}`,
  );
}

/** Records the text of the last reply and its state at every change. */
export async function recordSnapshots(page) {
  await page.evaluate(() => {
    window.__snapshots = [];
    const transcript = document.querySelector("[data-testid=transcript]");
    const observer = new MutationObserver(() => {
      const bubbles = transcript.querySelectorAll("[data-testid=msg-assistant]");
      const last = bubbles[bubbles.length - 1];
      if (!last) return;
      const runs = last.querySelectorAll("[data-testid=msg-text]");
      const text = [...runs].map((run) => run.textContent).join("");
      const previous = window.__snapshots[window.__snapshots.length - 1];
      if (!previous || previous.text !== text || previous.state !== last.dataset.state) {
        window.__snapshots.push({ text, state: last.dataset.state });
      }
    });
    observer.observe(transcript, { subtree: true, childList: true, characterData: true, attributes: true });
  });
}

export const snapshots = (page) => page.evaluate(() => window.__snapshots);

export async function screenshot(page, name) {
  if (!SHOTS) return;
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

/** Records the frames the page's sockets receive (JSON) and send (JSON and binary). */
export function frameLog(page) {
  const log = { sockets: [], frames: [], sent: [], binarySent: [] };
  page.on("websocket", (ws) => {
    log.sockets.push(ws.url());
    ws.on("framereceived", (event) => {
      try {
        log.frames.push(JSON.parse(event.payload));
      } catch {
        // a binary frame
      }
    });
    ws.on("framesent", (event) => {
      if (typeof event.payload !== "string") {
        log.binarySent.push(event.payload);
        return;
      }
      try {
        log.sent.push(JSON.parse(event.payload));
      } catch {
        // not JSON
      }
    });
  });
  return log;
}

/** A binary OMNI frame's header fields and metadata. */
export function omniFrame(buffer) {
  const metadataLen = buffer.readUInt32BE(8);
  return {
    magic: buffer.subarray(0, 4).toString("latin1"),
    version: buffer[4],
    flags: buffer[5],
    messageType: buffer.readUInt16BE(6),
    payloadLen: buffer.readUInt32BE(12),
    sequence: buffer.readUInt32BE(16),
    mediaIdZero: buffer.subarray(20, 32).every((b) => b === 0),
    metadata: JSON.parse(buffer.subarray(32, 32 + metadataLen).toString("utf8")),
    total: buffer.length,
    metadataLen,
  };
}

/** A sample's value in the server's /metrics. */
export async function metricValue(name) {
  const body = await (await fetch(`${BASE}/metrics`)).text();
  const line = body.split("\n").find((l) => l.startsWith(`${name} `));
  assert(line, `${name} in /metrics`);
  return Number(line.slice(name.length + 1));
}

export async function waitForMetric(name, wanted, timeout = 5000) {
  const until = Date.now() + timeout;
  let value = await metricValue(name);
  while (value !== wanted && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    value = await metricValue(name);
  }
  assertEq(value, wanted, name);
}

export const callState = (page) => page.locator("[data-testid=call-state]");
export const callStat = async (page, name) => Number(await callState(page).getAttribute(`data-${name}`));
