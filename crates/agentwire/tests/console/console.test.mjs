// The web console in headless Chromium, against the real server the Rust
// test `e2e::console::the_console_in_a_browser` started. One browser, the
// scenarios in sequence; each asserts what a user sees. Exit status 0 when
// every scenario passed.
//
// Environment: CONSOLE_URL (http://127.0.0.1:PORT), CONSOLE_API_KEY (a key
// the server accepts), SCREENSHOT_DIR, AGENTWIRE_TEST_CHROMIUM (the
// browser), AGENTWIRE_TEST_PLAYWRIGHT (the playwright-core package folder),
// CALL_WAV (what the fake microphone plays, looped: speech, then 4 s of
// silence), CALL_REPLY and LONG_REPLY (what the voice agents answer),
// FRAMES_FILE (where every WebSocket frame the pages sent and received is
// written, one JSON line each, for the Rust test to hold to the AsyncAPI
// document).

import { createRequire } from "node:module";
import net from "node:net";
import path from "node:path";
import fs from "node:fs";

import {
  assert,
  assertEq,
  lastAssistant,
  waitOpen,
  fresh,
  setMetadata,
  setCredential,
  send,
  replyText,
  reply,
  bodyOrder,
  assertNarratedOrder,
  recordSnapshots,
  snapshots,
  screenshot,
  frameLog,
  omniFrame,
  metricValue,
  waitForMetric,
  callState,
  callStat,
} from "./support.mjs";

const require = createRequire(import.meta.url);
const { chromium } = require(process.env.AGENTWIRE_TEST_PLAYWRIGHT);

const BASE = process.env.CONSOLE_URL;
const API_KEY = process.env.CONSOLE_API_KEY;
const SHOTS = process.env.SCREENSHOT_DIR;
const CALL_WAV = process.env.CALL_WAV;
const CALL_REPLY = process.env.CALL_REPLY;
const LONG_REPLY = process.env.LONG_REPLY;
const VIEWPORT = { width: 1280, height: 800 };
/** A 4×4 red PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAYAAACp8Z5+AAAAEklEQVR42mP4z8DwHxkzkC4AADxAH+Ea86VIAAAAAElFTkSuQmCC",
  "base64",
);

const browser = await chromium.launch({
  executablePath: process.env.AGENTWIRE_TEST_CHROMIUM,
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    // A microphone that plays CALL_WAV, granted without asking.
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
    ...(CALL_WAV ? [`--use-file-for-fake-audio-capture=${CALL_WAV}`] : []),
  ],
});
const context = await browser.newContext({
  viewport: VIEWPORT,
  deviceScaleFactor: 1,
  permissions: ["geolocation", "microphone"],
  geolocation: { latitude: 39.7392, longitude: -104.9903 },
  timezoneId: "America/Denver",
  locale: "en-US",
});

const dialogs = [];
const pageErrors = [];
/** Every WebSocket frame of every page: {dir: "sent"|"received", text} or {dir, binary: base64}. */
const socketFrames = [];
const recordFrame = (dir) => ({ payload }) =>
  socketFrames.push(typeof payload === "string" ? { dir, text: payload } : { dir, binary: payload.toString("base64") });

async function openPage(url) {
  const page = await context.newPage();
  page.setDefaultTimeout(8000);
  page.on("dialog", (dialog) => {
    dialogs.push(dialog.message());
    dialog.dismiss().catch(() => {});
  });
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  page.on("websocket", (socket) => {
    socket.on("framesent", recordFrame("sent"));
    socket.on("framereceived", recordFrame("received"));
  });
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(`console: ${message.text()}`);
  });
  await page.goto(url);
  await page.waitForSelector("body[data-ready=true]");
  return page;
}

// -------------------------------------------------------------- scenarios

const scenarios = [];
const scenario = (name, run) => scenarios.push({ name, run });

const page = await openPage(`${BASE}/`);
const frames = frameLog(page);

scenario("the demo agent's reply streams before done", async () => {
  await fresh(page, "demo");
  await recordSnapshots(page);
  await send(page, "hello");
  const text = await reply(page);
  assert(text.startsWith("Hello! I'm the agentwire demo agent."), `greeting: ${text}`);
  const seen = await snapshots(page);
  const partial = seen.filter((s) => s.state === "streaming" && s.text && s.text.length < text.length);
  assert(partial.length >= 2, `intermediate text was shown while streaming: ${JSON.stringify(seen)}`);
  for (const s of partial) assert(text.startsWith(s.text.trim()), `streamed text is a prefix: ${s.text}`);
  assertEq(await page.locator("[data-testid=msg-user]").last().innerText(), "hello", "the user's message");
});

scenario("the weather flow shows its tool card", async () => {
  await send(page, "what's the weather?");
  const text = await reply(page);
  assert(text.startsWith("Checking the weather for you..."), text);
  assert(text.includes("72°F and sunny in Denver, CO"), text);
  const card = lastAssistant(page).locator("[data-testid=tool-card][data-tool-name=weather]");
  assertEq(await card.count(), 1, "one weather card");
  assertEq(await card.getAttribute("data-state"), "ok", "the card has its result");
  assertEq(await card.evaluate((d) => d.tagName), "DETAILS", "collapsible");
  await card.locator("summary").click();
  assert((await card.locator("[data-testid=tool-args]").innerText()).includes("Denver, CO"), "arguments");
  assert((await card.locator("[data-testid=tool-result]").innerText()).includes("Sunny"), "result");
  await screenshot(page, "chat");
});

scenario("an error is shown with its code", async () => {
  await fresh(page, "test-agent");
  await setMetadata(page, { mock_scenario: "error" });
  await send(page, "please fail");
  const error = page.locator("[data-testid=error]").last();
  await error.waitFor();
  assertEq(await error.locator("[data-testid=error-code]").innerText(), "TEST_ERROR", "the code");
  assertEq(await error.locator("[data-testid=error-message]").innerText(), "something went wrong", "the message");
  assert(await page.locator("[data-testid=send]").isEnabled(), "the composer is usable again");
});

scenario("done.parts media are rendered", async () => {
  await fresh(page, "demo");
  await send(page, "show image");
  await reply(page);
  const image = lastAssistant(page).locator("[data-testid=media-image] img");
  await page.waitForFunction(() => {
    const imgs = document.querySelectorAll("[data-testid=media-image] img");
    return imgs.length && imgs[imgs.length - 1].complete && imgs[imgs.length - 1].naturalWidth === 4;
  });
  assert((await image.getAttribute("src")).startsWith("blob:"), "the image is decoded into a blob");
  assert((await lastAssistant(page).innerText()).includes("Here's a test image for you:"), "the text part");
  await send(page, "play audio");
  await reply(page);
  assertEq(await lastAssistant(page).locator("[data-testid=media-audio] audio[controls]").count(), 1, "audio");
  await send(page, "play video");
  await reply(page);
  assertEq(await lastAssistant(page).locator("[data-testid=media-video] video").count(), 1, "video");
  await send(page, "send pdf");
  await reply(page);
  const link = lastAssistant(page).locator("[data-testid=media-file] a[download]");
  assertEq(await link.count(), 1, "a file link");
  assert((await link.innerText()).includes("application/pdf"), "the link names the type");
});

scenario("markup in a model reply is text", async () => {
  await fresh(page, "assistant");
  await setMetadata(page, { mock_scenario: "xss" });
  await send(page, "say something nasty");
  const text = await reply(page);
  await page.waitForTimeout(300);
  assert(text.includes('<script>window.__pwned = 1; alert("xss")</script>'), `the script tag as text: ${text}`);
  assert(text.includes('<img src=x onerror="alert(2)">'), `the img tag as text: ${text}`);
  const body = lastAssistant(page).locator("[data-testid=msg-body]");
  assertEq(await page.locator("[data-testid=transcript] script").count(), 0, "no script element");
  assertEq(await page.locator("[data-testid=transcript] img").count(), 0, "no img element");
  assertEq(await body.locator("strong").innerText(), "bold", "markdown still renders");
  const links = await body.locator("a").evaluateAll((as) => as.map((a) => [a.href, a.rel, a.textContent]));
  assertEq(JSON.stringify(links), JSON.stringify([["https://example.com/docs", "noopener noreferrer", "docs"]]), "only the https link is a link");
  assert(text.includes("[a link](javascript:alert(3))"), "the javascript: link stays text");
  assertEq(await page.evaluate(() => window.__pwned), undefined, "no script ran");
  assertEq(dialogs.length, 0, `no dialog: ${dialogs}`);
});

scenario("a client tool approved through the button", async () => {
  await fresh(page, "assistant");
  await setMetadata(page, { mock_scenario: "locate" });
  await send(page, "where am I?");
  const consent = page.locator("[data-testid=consent]").last();
  await consent.waitFor();
  assertEq(await consent.locator("[data-testid=consent-message]").innerText(), "Share your location?", "consent message");
  await screenshot(page, "consent");
  await consent.locator("[data-testid=approve]").click();
  const text = await reply(page);
  assert(text.includes("39.7392") && text.includes("-104.9903"), `the location reached the model: ${text}`);
  const card = lastAssistant(page).locator("[data-testid=tool-card][data-tool-name=get_location]");
  assertEq(await card.getAttribute("data-state"), "ok", "the card shows the result");
  assert((await card.locator("[data-testid=tool-result]").innerText()).includes("latitude"), "result shown");
});

scenario("a client tool rejected through the button", async () => {
  await fresh(page, "assistant");
  await setMetadata(page, { mock_scenario: "timezone" });
  await send(page, "what's my time zone?");
  const consent = page.locator("[data-testid=consent]").last();
  await consent.waitFor();
  assertEq(await consent.locator("[data-testid=consent-message]").innerText(), "Share your time zone?", "consent message");
  await consent.locator("[data-testid=reject]").click();
  const text = await reply(page);
  assert(text.includes("declined by the user"), `the model heard the refusal: ${text}`);
  const card = lastAssistant(page).locator("[data-testid=tool-card][data-tool-name=get_timezone]");
  assertEq(await card.getAttribute("data-state"), "rejected", "the card says rejected");
  assertEq(await consent.locator("[data-testid=approve]").isVisible(), false, "the buttons are gone");
});

scenario("a browser tool the console runs itself: get_timezone", async () => {
  await fresh(page, "assistant");
  await setMetadata(page, { mock_scenario: "timezone" });
  await send(page, "what's my time zone?");
  await page.locator("[data-testid=approve]").last().click();
  const text = await reply(page);
  assert(text.includes("America/Denver"), `Intl's time zone reached the model: ${text}`);
});

scenario("an uploaded image reaches the agent by storage_ref", async () => {
  await fresh(page, "test-agent");
  await setMetadata(page, { mock_scenario: "parts" });
  await page.setInputFiles("[data-testid=file-input]", { name: "red.png", mimeType: "image/png", buffer: PNG });
  const chip = page.locator("[data-testid=attachment]").last();
  await page.waitForSelector("[data-testid=attachment][data-state=ready]");
  assertEq(await chip.getAttribute("data-progress"), "100", "the progress reached 100%");
  assertEq(await chip.locator("[data-testid=upload-progress]").evaluate((p) => p.value), 1, "progress bar full");
  const ref = await chip.getAttribute("data-storage-ref");
  const session = await page.locator("[data-testid=session-id]").innerText();
  assert(ref.startsWith(`omnia://sessions/${session}/media/`), `storage_ref of this session: ${ref}`);
  await send(page, "what is in this picture?");
  const text = await reply(page);
  assertEq(text, "I see your image", "the agent got the image part");
  assert((await page.locator("[data-testid=msg-user]").last().innerText()).includes("red.png"), "the attachment is named");
  assertEq(await page.locator("[data-testid=attachment]").count(), 0, "the attachment was sent");
  console.log(`STORAGE_REF=${ref}`);
});

scenario("Stop ends a paced turn with exactly one terminal", async () => {
  await fresh(page, "test-agent");
  await setMetadata(page, { mock_scenario: "paced" });
  const before = frames.frames.length;
  await send(page, "count slowly");
  await page.waitForFunction(() => {
    const bubbles = document.querySelectorAll("[data-testid=msg-assistant]");
    return bubbles.length && bubbles[bubbles.length - 1].textContent.includes("one");
  });
  assert(await page.locator("[data-testid=stop]").isVisible(), "Stop is shown during the turn");
  await page.click("[data-testid=stop]");
  const text = await reply(page, "cancelled");
  await page.waitForTimeout(1200); // longer than the rest of the script
  const terminals = frames.frames.slice(before).filter((f) => f.type === "done" || (f.type === "error" && f.seq));
  assertEq(terminals.length, 1, `one terminal: ${JSON.stringify(terminals)}`);
  assertEq(terminals[0].cancelled, true, "done{cancelled:true}");
  assert(!text.includes("five"), `the turn stopped early: ${text}`);
  assertEq(await lastAssistant(page).locator("[data-testid=msg-note]").innerText(), "stopped", "marked stopped");
  assertEq(await page.locator("[data-testid=msg-assistant]").count(), 1, "one reply bubble");
  assert(!(await page.locator("[data-testid=stop]").isVisible()), "Stop is gone after the turn");
});

scenario("a private agent needs a credential, and accepts one", async () => {
  await setCredential(page, "");
  await page.selectOption("[data-testid=agent-select]", "vault");
  const error = page.locator("[data-testid=error]").last();
  await error.waitFor();
  assertEq(await error.locator("[data-testid=error-code]").innerText(), "CONNECT_FAILED", "refused");
  assert((await error.innerText()).includes("requires a credential"), await error.innerText());
  await setCredential(page, "not-a-valid-key");
  await page.waitForSelector("[data-testid=error] >> text=refused the upgrade");
  await setCredential(page, API_KEY);
  await waitOpen(page);
  await send(page, "hello");
  const text = await reply(page);
  assert(text.startsWith("Hello! I'm the agentwire demo agent."), text);
});

scenario("a session is listed, and resumed with its history after a reload", async () => {
  await page.selectOption("[data-testid=agent-select]", "test-agent");
  await waitOpen(page);
  await setMetadata(page, null);
  await send(page, "remember the blue door");
  assertEq(await reply(page), "echo: remember the blue door", "echo");
  const session = await page.locator("[data-testid=session-id]").innerText();
  await page.waitForSelector(`[data-testid=session-item][data-session-id="${session}"]`);
  // The session's summary is written 200 ms after the turn (the test
  // config's summary_after_idle); wait for it so the list shows it.
  await page.waitForFunction(
    async ([id, key]) => {
      const response = await fetch(`/api/v1/sessions/${id}`, { headers: { Authorization: `Bearer ${key}` } });
      return (await response.json()).summary?.text;
    },
    [session, API_KEY],
    { polling: 100, timeout: 5000 },
  );
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assertEq(await page.locator("[data-testid=credential]").inputValue(), API_KEY, "the credential survives a reload");
  const item = page.locator(`[data-testid=session-item][data-session-id="${session}"]`);
  await item.waitFor();
  assert(
    (await item.locator("[data-testid=session-summary]").innerText()).includes("remember the blue door"),
    "the list shows the session's summary",
  );
  await item.click();
  await page.waitForSelector("[data-testid=notice] >> text=resumed session");
  await waitOpen(page);
  assertEq(await page.locator("[data-testid=session-id]").innerText(), session, "the same session");
  assertEq(await page.locator("[data-testid=msg-user]").first().innerText(), "remember the blue door", "history: user");
  assertEq(
    (await page.locator("[data-testid=msg-assistant] [data-testid=msg-body]").first().innerText()).trim(),
    "echo: remember the blue door",
    "history: reply",
  );
  await setMetadata(page, { mock_scenario: "history" });
  await send(page, "what did I say?");
  const text = await reply(page);
  assert(text.includes("user: remember the blue door"), `the server resumed the session: ${text}`);
  await setMetadata(page, null);
  await page.evaluate(() => {
    document.querySelector("details.metadata").open = false;
  });
  await screenshot(page, "sessions");
});

scenario("a turn is drawn in the order it came: text, the tool card, the text after it", async () => {
  // With a credential (set above), so the session is listed and its
  // history can be drawn again.
  await fresh(page, "assistant");
  await setMetadata(page, { mock_scenario: "narrated" });
  await send(page, "what's my time zone?");
  const consent = page.locator("[data-testid=consent]").last();
  await consent.waitFor();
  const bubble = lastAssistant(page);
  const asking = await bodyOrder(bubble);
  assertEq(
    JSON.stringify(asking),
    JSON.stringify(["text:Let me look up your time zone.", "tool-card:get_timezone"]),
    "while the tool waits: the text streamed before it, then its card",
  );
  await consent.locator("[data-testid=approve]").click();
  const text = await reply(page);
  assert(text.startsWith("Let me look up your time zone."), `the reply's text starts with what came first: ${text}`);
  assertNarratedOrder(await bodyOrder(bubble), "live");
  assertEq(await page.locator("[data-testid=msg-assistant]").count(), 1, "one reply bubble");

  // The stored turn is drawn the same way from the session's history.
  const session = await page.locator("[data-testid=session-id]").innerText();
  await setMetadata(page, null);
  const item = page.locator(`[data-testid=session-item][data-session-id="${session}"]`);
  await item.waitFor();
  await item.click();
  await page.waitForSelector("[data-testid=notice] >> text=resumed session");
  await waitOpen(page);
  assertNarratedOrder(await bodyOrder(lastAssistant(page)), "from the history");
});

async function setFacet(page, value) {
  await page.fill("[data-testid=memory-facet]", value);
  await page.dispatchEvent("[data-testid=memory-facet]", "change");
}

const memoryItems = (page) => page.locator("[data-testid=memory-panel] [data-testid=memory-item]");

/** Waits until the memory panel has loaded and lists `n` memories. */
async function waitMemories(page, n) {
  await page.waitForFunction(
    (wanted) =>
      document.querySelector("[data-testid=memory-panel]").dataset.state === "ready" &&
      document.querySelectorAll("[data-testid=memory-panel] [data-testid=memory-item]").length === wanted,
    n,
  );
}

/** The caller's memories as the API lists them (not through the page). */
async function apiMemories() {
  const response = await fetch(`${BASE}/api/v1/memories`, { headers: { Authorization: `Bearer ${API_KEY}` } });
  assertEq(response.status, 200, "the memories API answers");
  return (await response.json()).memories;
}

scenario("agent memory: the facet, memory cards, the panel, Forget and Delete all", async () => {
  const FACT = "prefers <em>window</em> seats";
  await setCredential(page, API_KEY);
  await page.selectOption("[data-testid=agent-select]", "keeper");
  await waitOpen(page);
  await setMetadata(page, null);
  const panel = page.locator("[data-testid=memory-panel]");
  assert(await panel.isVisible(), "a memory panel for an agent with memory");
  assertEq(await panel.locator("[data-testid=memory-scope]").innerText(), "With keeper, no facet", "the panel's scope");

  // A malformed facet is shown, not sent.
  const socketsBefore = frames.sockets.length;
  const facetError = page.locator("[data-testid=memory-facet-error]");
  await setFacet(page, "bad facet!");
  await facetError.waitFor();
  assert((await facetError.innerText()).includes("only letters, digits and . _ : / -"), await facetError.innerText());
  assertEq(await page.locator("[data-testid=memory-facet]").getAttribute("aria-invalid"), "true", "aria-invalid");
  assertEq(await page.locator("[data-testid=status]").getAttribute("data-state"), "error", "not connected");
  assert((await page.locator("[data-testid=status]").innerText()).includes("invalid memory facet"), "the status says why");
  await setFacet(page, "a".repeat(129));
  assert((await facetError.innerText()).includes("129 characters"), await facetError.innerText());
  await page.waitForTimeout(200);
  assertEq(frames.sockets.length, socketsBefore, "no connection with a bad facet");

  // A good one goes on the upgrade.
  await setFacet(page, "trip-7");
  await waitOpen(page);
  assert(await facetError.isHidden(), "the message is gone");
  assert(/[?&]memory_facet=trip-7(&|$)/.test(frames.sockets.at(-1)), `the upgrade carries the facet: ${frames.sockets.at(-1)}`);
  await page.waitForFunction(() => document.querySelector("[data-testid=memory-scope]").textContent === "With keeper, facet trip-7");
  await waitMemories(page, 0);
  await panel.locator("[data-testid=memories-empty]").waitFor();

  // A turn that remembers: its card says what, and the panel lists it, as text.
  await setMetadata(page, { mock_scenario: "remember" });
  await send(page, "remember my seat");
  assertEq(await reply(page), "Noted.", "the reply");
  const card = lastAssistant(page).locator("[data-testid=tool-card][data-tool-name=memory__remember]");
  await card.waitFor();
  assertEq(await card.getAttribute("data-state"), "ok", "the card has its result");
  assertEq(await card.locator("[data-testid=tool-summary]").innerText(), `Remembered: ${FACT}`, "the card says what");
  assertEq(
    JSON.stringify(await bodyOrder(lastAssistant(page))),
    JSON.stringify(["tool-card:memory__remember", "text:Noted."]),
    "the card, then the reply",
  );
  await waitMemories(page, 1);
  const item = memoryItems(page).first();
  assertEq(await item.locator("[data-testid=memory-content]").innerText(), FACT, "the fact, as text");
  assertEq(await item.locator("[data-testid=memory-type]").innerText(), "preference", "its type");
  assertEq(await panel.locator("em").count(), 0, "no markup from the memory text");
  const stored = await apiMemories();
  assertEq(stored.length, 1, "one memory stored");
  assertEq(stored[0].memory_facet, "trip-7", "in the facet");
  assertEq(stored[0].agent, "keeper", "with the agent");
  assertEq(await item.getAttribute("data-memory-id"), stored[0].id, "the panel's id");
  await page.evaluate(() => {
    document.querySelector("details.metadata").open = false;
  });
  await screenshot(page, "memory");

  // Forgotten from the panel: gone from the list, then from recall (in a
  // new chat: the scripted model counts a session's turns).
  await item.locator("[data-testid=memory-forget]").click();
  await waitMemories(page, 0);
  assert((await panel.locator("[data-testid=memory-status]").innerText()).startsWith("Forgot"), "the panel says so");
  assertEq((await apiMemories()).length, 0, "the API lists none");
  await fresh(page, "keeper");
  await setMetadata(page, { mock_scenario: "recall" });
  await send(page, "what do you remember?");
  const recalled = await reply(page);
  assert(recalled.includes('"count":0'), `recall finds nothing: ${recalled}`);
  const recall = lastAssistant(page).locator("[data-testid=tool-card][data-tool-name=memory__recall]");
  await recall.waitFor();
  assertEq(await recall.locator("[data-testid=tool-summary]").innerText(), "Recalled 0 memories", "the recall card");

  // An API error is shown in the panel.
  await setCredential(page, "not-a-valid-key");
  const panelError = panel.locator("[data-testid=memory-error]");
  await panelError.waitFor();
  assert((await panelError.innerText()).includes("401"), `the panel shows the API's answer: ${await panelError.innerText()}`);
  await setCredential(page, API_KEY);
  await waitOpen(page);
  await waitMemories(page, 0);
  assert(await panelError.isHidden(), "the error is gone once the list loads");

  // Delete all, after a confirm step.
  await setMetadata(page, { mock_scenario: "remember" });
  await send(page, "remember my seat again");
  await reply(page);
  await waitMemories(page, 1);
  const confirm = panel.locator("[data-testid=memory-confirm]");
  await panel.locator("[data-testid=memory-delete-all]").click();
  await confirm.waitFor();
  assert((await confirm.innerText()).includes("every agent"), "the confirm says what goes");
  await confirm.locator("[data-testid=memory-confirm-cancel]").click();
  assert(await confirm.isHidden(), "cancelled");
  assertEq(await memoryItems(page).count(), 1, "nothing deleted on cancel");
  await panel.locator("[data-testid=memory-delete-all]").click();
  await confirm.locator("[data-testid=memory-confirm-delete]").click();
  await waitMemories(page, 0);
  assertEq(await panel.locator("[data-testid=memory-status]").innerText(), "Deleted 1 memory.", "how many");
  assertEq((await apiMemories()).length, 0, "none left");

  await setMetadata(page, null);
  await setFacet(page, "");
  await waitOpen(page);
  assert(!/memory_facet=/.test(frames.sockets.at(-1)), "no facet once cleared");
});

scenario("a turn's streamed media comes as a binary frame and is shown", async () => {
  await fresh(page, "test-agent");
  assert(/[?&]binary=true(&|$)/.test(frames.sockets.at(-1)), `the socket asks for binary frames: ${frames.sockets.at(-1)}`);
  await setMetadata(page, { mock_scenario: "binary-media" });
  await send(page, "stream me something");
  await reply(page);
  const media = lastAssistant(page).locator("[data-testid=media-audio]");
  assertEq(await media.locator("audio[controls]").count(), 1, "an audio element");
  assert((await media.locator("audio").getAttribute("src")).startsWith("blob:"), "assembled into a blob");
  assertEq(await media.locator("figcaption").innerText(), "test-media · audio/mp3", "the frame's media id and type");
  await setMetadata(page, null);
});

scenario("a voice call: both transcripts, the reply's audio, and Hang up", async () => {
  assert(CALL_WAV && CALL_REPLY, "CALL_WAV and CALL_REPLY are set");
  await fresh(page, "caller");
  await setMetadata(page, null);
  const button = page.locator("[data-testid=call]");
  assert(await button.isVisible(), "the Call button is offered");
  assertEq(await button.innerText(), "Call", "the button's label");
  assertEq(await callState(page).getAttribute("data-state"), "idle", "no call yet");
  const session = await page.locator("[data-testid=session-id]").innerText();
  const sentBefore = frames.binarySent.length;
  const textsBefore = frames.sent.length;
  await button.click();
  await page.waitForSelector("[data-testid=call-state][data-state=live]");
  assertEq(await button.innerText(), "Hang up", "the toggle");
  assertEq(await callStat(page, "sample-rate"), 16000, "session_config's rate");
  assertEq(await metricValue("agentwire_calls_active"), 1, "the call is open on the server");

  // What the mock heard, as the user's bubble; its reply, streamed into one bubble.
  const said = page.locator("[data-testid=msg-user][data-via=voice]").first();
  await said.waitFor({ timeout: 15000 });
  const transcript = await said.innerText();
  assert(/^utterance 1 \(\d+ ms\)$/.test(transcript), `the caller's transcript: ${transcript}`);
  const answer = page.locator("[data-testid=msg-assistant][data-via=voice]").first();
  await page.waitForSelector("[data-testid=msg-assistant][data-via=voice][data-state=done]", { timeout: 15000 });
  assertEq((await answer.locator("[data-testid=msg-body]").innerText()).trim(), CALL_REPLY, "the reply's transcript");
  const order = await page.evaluate(() => {
    const user = document.querySelector("[data-testid=msg-user][data-via=voice]");
    const reply = document.querySelector("[data-testid=msg-assistant][data-via=voice]");
    return Boolean(user.compareDocumentPosition(reply) & Node.DOCUMENT_POSITION_FOLLOWING);
  });
  assert(order, "the caller's bubble comes before the reply's");

  // The reply's audio was played back (buffers whose playback ended).
  await page.waitForFunction(
    () => Number(document.querySelector("[data-testid=call-state]").dataset.playedSamples) > 0,
    null,
    { timeout: 10000 },
  );
  const received = await callStat(page, "received-frames");
  const scheduled = await callStat(page, "scheduled-samples");
  const played = await callStat(page, "played-samples");
  assert(received > 0 && scheduled >= played && played > 0, `playback: ${received} frames, ${scheduled} samples scheduled, ${played} played`);
  console.log(`call: ${received} audio frames in, ${scheduled} samples scheduled, ${played} played`);

  // What went out: OMNI frames, sequence from 0, the proposal on the first,
  // 20 ms at 16 kHz after it.
  const sent = frames.binarySent.slice(sentBefore).map(omniFrame);
  assert(sent.length > 10, `audio frames were sent: ${sent.length}`);
  assertEq(await callStat(page, "sent-frames") >= sent.length, true, "the page counts what it sent");
  sent.forEach((frame, i) => {
    assertEq(frame.magic, "OMNI", "magic");
    assertEq(frame.version, 1, "version");
    assertEq(frame.messageType, 1, "message type");
    assertEq(frame.flags, 0, "not IsLast");
    assertEq(frame.sequence, i, "sequence");
    assert(frame.mediaIdZero, "media id zeros");
    assertEq(frame.total, 32 + frame.metadataLen + frame.payloadLen, "lengths");
    assertEq(
      JSON.stringify(frame.metadata),
      JSON.stringify({ session_id: session, mime_type: "audio/pcm", sample_rate: 16000, channels: 1, codec: "pcm" }),
      "metadata",
    );
    if (i > 0) assertEq(frame.payloadLen, 640, "20 ms of PCM16 at 16 kHz");
  });
  await screenshot(page, "call");

  // Hang up: `hangup`, the microphone stops, the server's call is over.
  await button.click();
  await page.waitForSelector("[data-testid=call-state][data-state=idle]", { state: "attached" });
  assertEq(await button.innerText(), "Call", "the toggle is back");
  assert(frames.sent.slice(textsBefore).some((f) => f.type === "hangup"), "hangup was sent");
  await waitForMetric("agentwire_calls_active", 0);
  assertEq(await metricValue("agentwire_calls_parked"), 0, "a hang-up parks nothing");
  const after = frames.binarySent.length;
  await page.waitForTimeout(300);
  assertEq(frames.binarySent.length, after, "no audio after the hang-up");
  assertEq(await page.locator("[data-testid=error]").count(), 0, "no error shown");
  console.log(`CALL_SESSION=${session}`);

  // The chat goes on on the same socket.
  await send(page, "still here");
  assertEq(await reply(page), "Echo: still here", "a text turn after the call");
});

scenario("barge-in: the caller speaks over a long reply, its playback is flushed", async () => {
  await fresh(page, "long-caller");
  await page.click("[data-testid=call]");
  await page.waitForSelector("[data-testid=call-state][data-state=live]");
  // The reply takes longer than the microphone's loop: the question comes
  // again over it, the server sends `interrupt`, then the reply's `done`.
  await page.waitForSelector("[data-testid=msg-assistant][data-via=voice][data-state=interrupted]", { timeout: 20000 });
  const cut = page.locator("[data-testid=msg-assistant][data-via=voice]").first();
  assertEq(await cut.locator("[data-testid=msg-note]").innerText(), "interrupted", "marked interrupted");
  const text = (await cut.locator("[data-testid=msg-body]").innerText()).trim();
  assertEq(text, LONG_REPLY, "its transcript came whole before its audio");
  assert((await callStat(page, "interrupts")) >= 1, "the page saw interrupt");
  const played = await callStat(page, "played-samples");
  const longTone = (LONG_REPLY.length * 80 * 16000) / 1000;
  assert(played > 0 && played < longTone, `part of the reply was played: ${played} of ${longTone} samples`);
  console.log(`barge-in: ${played} samples played, ${await callStat(page, "dropped-samples")} flushed`);
  // What was said over it is answered in its turn.
  await page.locator("[data-testid=msg-user][data-via=voice]").nth(1).waitFor({ timeout: 10000 });
  assert(
    /^utterance 2 \(\d+ ms\)$/.test(await page.locator("[data-testid=msg-user][data-via=voice]").nth(1).innerText()),
    "the second utterance",
  );
  await page.click("[data-testid=call]");
  await page.waitForSelector("[data-testid=call-state][data-state=idle]", { state: "attached" });
  await waitForMetric("agentwire_calls_active", 0);
  assertEq(await page.locator("[data-testid=error]").count(), 0, "no error shown");
});

scenario("an agent without a voice offers no call button", async () => {
  // `/api/v1/agents` says `"voice": false` for it.
  await fresh(page, "demo");
  assertEq(await page.locator("[data-testid=call]").isHidden(), true, "no Call button for demo");
  await fresh(page, "caller");
  assertEq(await page.locator("[data-testid=call]").isVisible(), true, "a Call button for a voice agent");
});

scenario("a socket cut mid-reply: the reply completes without a duplicate", async () => {
  const target = new URL(BASE);
  const sockets = new Set();
  let cut = 0;
  const proxy = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const gone = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", gone).on("close", gone);
    upstream.on("error", gone).on("close", gone);
  });
  await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  try {
    const proxied = await openPage(`http://127.0.0.1:${proxy.address().port}/?agent=test-agent`);
    const log = frameLog(proxied);
    let armed = false;
    proxied.on("websocket", (ws) =>
      ws.on("framereceived", (event) => {
        if (armed && String(event.payload).includes('"type":"chunk"')) {
          // The first chunk is on screen: drop every connection.
          armed = false;
          cut = sockets.size;
          for (const socket of sockets) socket.destroy();
        }
      }),
    );
    await setCredential(proxied, API_KEY);
    await waitOpen(proxied);
    await setMetadata(proxied, { mock_scenario: "paced" });
    await recordSnapshots(proxied);
    armed = true;
    await send(proxied, "count slowly");
    const text = await reply(proxied);
    assertEq(text, "one two three four five", "the whole reply");
    assert(cut > 0, "the connection was cut");
    const rejoins = log.sockets.filter((url) => /resume=.*&after=\d+&epoch=[0-9a-f]{16}/.test(url));
    assert(rejoins.length >= 1, `rejoined with resume/after/epoch: ${log.sockets}`);
    for (const s of await snapshots(proxied)) {
      assert("one two three four five".startsWith(s.text.trim()), `never a duplicate on screen: ${JSON.stringify(s.text)}`);
    }
    const words = log.frames.filter((f) => f.type === "chunk").map((f) => f.content);
    assertEq(words.join(""), "one two three four five", "each word arrived once");
    assertEq(await proxied.locator("[data-testid=msg-assistant]").count(), 1, "one reply bubble");
    assertEq(await proxied.locator("[data-testid=error]").count(), 0, "no error shown");
    await proxied.close();
  } finally {
    for (const socket of sockets) socket.destroy();
    proxy.close();
  }
});

scenario("a pack agent's panel shows its latest compile; a compile-mode refusal shows why", async () => {
  await fresh(page, "packed");
  const summary = page.locator("[data-testid=pack-summary]");
  await summary.waitFor();
  assertEq(await summary.innerText(), "hello 1.0.0, prompt chat (compiled at startup; compiles: 1)", "the summary");
  const warnings = await page.locator("[data-testid=pack-warning]").allTextContents();
  assertEq(warnings.length, 1, "one warning");
  assert(warnings[0].startsWith("compilation: missing"), `the warning: ${warnings[0]}`);
  assert(await page.locator("[data-testid=pack-error]").isHidden(), "no error");
  await send(page, "hi");
  assertEq(await reply(page), "I only know scripts.", "the pack agent answers");

  await fresh(page, "authoring");
  await send(page, "hi");
  const error = page.locator("[data-testid=error]").last();
  await error.waitFor();
  assertEq(await error.locator("[data-testid=error-code]").innerText(), "pack_compile_failed", "the code");
  const message = await error.locator("[data-testid=error-message]").innerText();
  assertEq(
    message,
    "the agent's pack did not compile: prompt 'chat': system_template references variables, but none are declared",
    "the message, with details.error",
  );
  await page.waitForFunction(() => !document.querySelector("[data-testid=pack-error]").hidden);
  const shown = await page.locator("[data-testid=pack-error]").innerText();
  assertEq(shown, "prompt 'chat': system_template references variables, but none are declared", "the panel");
  assert(await page.locator("[data-testid=send]").isEnabled(), "the composer is usable again");
});

// -------------------------------------------------------------------- run

let failed = 0;
const started = Date.now();
for (const { name, run } of scenarios) {
  const at = Date.now();
  try {
    await run();
    console.log(`ok   ${name} (${Date.now() - at} ms)`);
  } catch (error) {
    failed += 1;
    console.log(`FAIL ${name}: ${error.stack ?? error}`);
    await page.screenshot({ path: `/tmp/console-fail-${scenarios.findIndex((s) => s.name === name)}.png` }).catch(() => {});
  }
}
const unexpected = pageErrors.filter((e) => !/WebSocket|status of 40[14]/.test(e));
if (unexpected.length) {
  failed += 1;
  console.log(`FAIL page errors: ${unexpected.join("\n")}`);
}
if (dialogs.length) {
  failed += 1;
  console.log(`FAIL dialogs opened: ${dialogs.join(", ")}`);
}
await browser.close();
if (process.env.FRAMES_FILE) {
  fs.writeFileSync(process.env.FRAMES_FILE, socketFrames.map((f) => JSON.stringify(f) + "\n").join(""));
}
console.log(`${scenarios.length - failed} of ${scenarios.length} scenarios passed in ${Date.now() - started} ms`);
process.exit(failed ? 1 : 0);
