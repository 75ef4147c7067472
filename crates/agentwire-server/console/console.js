// The agentwire web console: an Omnia client in the browser, built on the
// project's TypeScript client (agentwire-client.js, the bundle of
// clients/typescript, copied here by its build). The client owns the socket:
// it connects to `/ws?agent=…&stream=2&binary=true` (with a credential, to
// `/console/ws?…&access_token=…`, since a browser cannot set headers on a
// WebSocket), tracks the log position `(epoch, seq)`, and after a connection
// it did not close itself rejoins with `resume`/`after`/`epoch`, so a reply
// continues where it stopped and no frame is shown twice. This file draws
// what the client's turns deliver; it has no socket or frame code of its own.
//
// A voice call's audio (voice.js) goes through the client's call object;
// its transcripts go to their own bubbles, beside any text turn. A turn's
// streamed media (binary OMNI frames or `media_chunk`s) arrives assembled.
//
// Model text reaches the page only through markdown.js, which builds text
// nodes; nothing here hands a string to an HTML parser.
//
// Agent memory: a `memory_facet` typed into the top bar goes on the upgrade
// (checked here first: a malformed one is shown, not sent), and for an agent
// with memory (`/api/v1/agents` says its tier) the sidebar's memory panel
// lists the caller's memories with that agent in that facet
// (`/api/v1/memories`), with Forget and Delete all. A runtime agent's
// memory tool calls are not sent on the socket (server tools stay in the
// runtime): after such an agent's turn, the console reads the turn's stored
// steps (`/api/v1/sessions/{id}/messages`) and, when a memory tool ran,
// draws the turn again from them, its memory cards in place, and reloads
// the panel.

import { OmniaClient } from "./agentwire-client.js";
import { renderMarkdown } from "./markdown.js";
import { browserTools, consentCard, isMemoryTool, toolCard } from "./tools.js";
import { mediaItemElement, renderParts, uploadedPart } from "./media.js";
import { PROPOSED_RATE, VoiceCall, voiceSupported } from "./voice.js";

/** A tool call without a consent message whose result does not follow within this is a client tool. */
const SERVER_RESULT_GRACE_MS = 300;
/** Rejoin attempts after a dropped connection: 150 ms, doubling to 4 s, jittered; five of them. */
const REJOIN_BACKOFF = { initialMs: 150, maxMs: 4000, attempts: 5, jitter: 0.3 };
const HISTORY_PAGES = 20;
/** Omnia's `memory_facet`: 1 to 128 of `A-Z a-z 0-9 . _ : / -`, starting with a letter or digit. */
const MEMORY_FACET = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;
/** Memories per page of the memory panel. */
const MEMORY_PAGE = 50;
const $ = (id) => document.getElementById(id);
const ui = {
  agent: $("agent"),
  credential: $("credential"),
  newChat: $("new-chat"),
  status: $("status"),
  sessions: $("sessions"),
  sessionsError: $("sessions-error"),
  sessionsRefresh: $("sessions-refresh"),
  sessionId: $("session-id"),
  transcript: $("transcript"),
  composer: $("composer"),
  input: $("input"),
  send: $("send"),
  stop: $("stop"),
  fileInput: $("file-input"),
  attachLabel: $("attach-label"),
  attachments: $("attachments"),
  metadata: $("metadata"),
  call: $("call"),
  callState: $("call-state"),
  memoryFacet: $("memory-facet"),
  memoryFacetError: $("memory-facet-error"),
  memoryPanel: $("memory-panel"),
  facadesPanel: $("facades-panel"),
  packPanel: $("pack-panel"),
  packSummary: $("pack-summary"),
  packError: $("pack-error"),
  packWarnings: $("pack-warnings"),
  packRefresh: $("pack-refresh"),
  facades: $("facades"),
  memoryScope: $("memory-scope"),
  memoryError: $("memory-error"),
  memoryStatus: $("memory-status"),
  memories: $("memories"),
  memoryMore: $("memory-more"),
  memoryRefresh: $("memory-refresh"),
  memoryDeleteAll: $("memory-delete-all"),
  memoryConfirm: $("memory-confirm"),
  memoryConfirmDelete: $("memory-confirm-delete"),
  memoryConfirmCancel: $("memory-confirm-cancel"),
};

const state = {
  agents: [],
  /** The connection (agentwire-client.js), while there is one. */
  client: null,
  /** Whether the current client connected once (a failed first upgrade is told apart). */
  opened: false,
  /** The session messages go to. */
  sessionId: null,
  canCancel: false,
  /** The assistant reply being built: {el, body, note, streamed, run} (assistantBubble). */
  turn: null,
  running: false,
  /** Tool calls not yet settled: id → {card, consent, timer, call}. */
  calls: new Map(),
  uploads: [],
  /** The voice call (voice.js), while there is one. */
  call: null,
  /** The call's reply being spoken: a bubble like `turn`, plus `interrupted`. */
  callTurn: null,
  /** The top bar's memory facet as last changed, which connections carry; "" for none. */
  facet: "",
  /** The facet the server says the connection has (`connected.memory_facet`); null: not connected. */
  connectedFacet: null,
  /** The highest stored `seq` of the session this console has read (memory agents' turns). */
  storedSeq: 0,
  /** Bumped for every load of the memory panel; an older load's answer is dropped. */
  memoryLoad: 0,
  /** The next page's offset of the memory panel's list, or null. */
  memoryNext: null,
};

// ---------------------------------------------------------------- helpers

function credential() {
  return ui.credential.value.trim();
}

function authHeaders() {
  const token = credential();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

function setStatus(name, text) {
  ui.status.dataset.state = name;
  ui.status.textContent = text;
}

function scrollDown() {
  ui.transcript.scrollTop = ui.transcript.scrollHeight;
}

function element(tag, className, testid, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (testid) el.dataset.testid = testid;
  if (text !== undefined) el.textContent = text;
  return el;
}

function showError(code, message) {
  const box = element("div", "error", "error");
  box.dataset.code = code ?? "";
  box.append(element("span", "error-code", "error-code", code ?? "ERROR"));
  box.append(element("span", "error-message", "error-message", message ?? ""));
  ui.transcript.append(box);
  scrollDown();
}

function notice(text) {
  ui.transcript.append(element("div", "notice", "notice", text));
  scrollDown();
}

function setRunning(running) {
  state.running = running;
  ui.stop.hidden = !running || !state.canCancel;
  ui.stop.disabled = false;
  ui.send.disabled = running;
}

function currentAgent() {
  return state.agents.find((a) => a.name === ui.agent.value);
}

// ------------------------------------------------------------- the socket

/** Opens a connection; `opts.resume` names a session to attach to. */
function openSocket(opts = {}) {
  closeSocket();
  if (facetProblem(state.facet)) {
    // Never sent: the server would refuse the upgrade (400).
    showFacetProblem(state.facet);
    setStatus("error", "not connected: invalid memory facet");
    return;
  }
  const client = new OmniaClient({
    url: location.origin,
    agent: ui.agent.value,
    token: credential() || undefined,
    credentialIn: "query",
    memoryFacet: state.facet || undefined,
    resume: opts.resume?.session,
    reconnect: REJOIN_BACKOFF,
  });
  state.client = client;
  state.opened = false;
  const mine = (listener) => (value) => {
    if (state.client === client) listener(value);
  };
  client.on("status", mine(({ state: name }) => {
    if (name === "connecting") setStatus("connecting", "connecting…");
    if (name === "rejoining") setStatus("rejoining", "connection lost, reconnecting…");
  }));
  client.on("closed", mine(() => endCall(false, "call ended: the connection closed")));
  client.on("closed", mine((event) => {
    if (!event.willRetry) onClosed(event);
  }));
  client.on("connected", mine(({ frame, rejoin }) => onConnected(frame, rejoin, opts)));
  client.on("turn", mine((turn) => followTurn(client, turn)));
  client.on("history_gap", mine(({ session_id }) => {
    if (!state.running) return;
    // The log no longer reaches back: what was missed is in the history.
    endTurnInterrupted("reconnected; part of this reply was missed");
    reloadHistory(session_id);
  }));
  client.on("session_lost", mine(() => {
    endTurnInterrupted("reconnected, but the rest of this reply could not be recovered");
  }));
  client.on("going_away", mine(() => notice("the server is restarting; this reply will continue")));
  client.on("error", mine((error) => showError(error.code, error.reason)));
  client.connect().catch(() => {}); // told through "closed"
}

/** Closes the connection on the user's behalf: no rejoin follows. */
function closeSocket() {
  endCall(true, "call ended");
  const client = state.client;
  state.client = null;
  state.connectedFacet = null;
  client?.close(1000, "closed by the user");
}

/** The connection is over for good (the client gave up rejoining, or never connected). */
function onClosed(event) {
  endCall(false, "call ended: the connection closed");
  state.connectedFacet = null;
  if (event.code === 4401) {
    setStatus("error", "credential expired");
    showError("CREDENTIAL_EXPIRED", "the credential expired; enter a new one to go on");
    endTurnInterrupted("the connection closed: credential expired");
    return;
  }
  setStatus("error", "disconnected");
  endTurnInterrupted("the connection was lost");
  if (!state.opened) {
    const agent = currentAgent();
    // An agent bound to a memory container refuses another facet (403).
    const why = credential()
      ? `the server refused the upgrade; is the credential valid for this agent${state.facet ? ", and the memory facet allowed" : ""}?`
      : agent?.credential_required
        ? "this agent requires a credential: enter an API key or token above"
        : `the server refused the upgrade or cannot be reached${state.facet ? "; does the agent allow this memory facet?" : ""}`;
    showError("CONNECT_FAILED", `cannot connect to "${ui.agent.value}": ${why}`);
  } else {
    showError("CONNECTION_LOST", `the connection closed (${event.code}${event.reason ? ` ${event.reason}` : ""})`);
  }
}

function onConnected(frame, rejoin, opts) {
  const connected = frame.connected ?? {};
  state.opened = true;
  state.canCancel = connected.capabilities?.cancel === true;
  if (rejoin || (opts.resume && connected.resumed)) {
    // Rejoined (or attached to the session asked for); a rejoin that found
    // the session gone is on a fresh one ("session_lost").
    state.sessionId = frame.session_id;
  } else if (opts.resume) {
    // Not attached (an anonymous caller, or the session is gone): messages
    // still name the session, which resumes it by id if it can be.
    state.sessionId = opts.resume.session;
  } else {
    state.sessionId = frame.session_id;
  }
  ui.sessionId.textContent = state.sessionId ?? "–";
  highlightSession();
  const facet = typeof connected.memory_facet === "string" ? connected.memory_facet : "";
  state.connectedFacet = facet;
  // The facet is named when it is not the one typed (the agent's own container).
  const pinned = facet && facet !== state.facet ? ` · facet ${facet}` : "";
  setStatus("open", `connected to ${ui.agent.value}${pinned}${rejoin ? " (rejoined)" : ""}`);
  loadMemories();
  setRunning(state.running);
}

// --------------------------------------------------------------- the call

function callUserBubble(text) {
  const bubble = userBubble(text);
  bubble.classList.add("voice");
  bubble.dataset.via = "voice";
}

function appendCallChunk(text) {
  if (!state.callTurn) {
    state.callTurn = assistantBubble("streaming");
    state.callTurn.el.classList.add("voice");
    state.callTurn.el.dataset.via = "voice";
  }
  appendText(state.callTurn, text);
}

function finishCallTurn(why) {
  const turn = state.callTurn;
  if (!turn) return;
  state.callTurn = null;
  if (why) {
    turn.interrupted = true;
    turn.note.textContent = why;
    turn.note.hidden = false;
  }
  turn.el.dataset.state = turn.interrupted ? "interrupted" : "done";
  refreshSessionsSoon();
}

const CALL_LABELS = {
  idle: "",
  starting: "asking for the microphone…",
  connecting: "calling…",
};

function renderCallState(name, { speaking }) {
  const box = ui.callState;
  box.dataset.state = name;
  box.dataset.speaking = String(speaking);
  box.hidden = name === "idle";
  box.textContent =
    name === "live" ? `on call · ${speaking ? "agent speaking" : "listening"}` : (CALL_LABELS[name] ?? name);
  ui.call.dataset.state = name;
  ui.call.textContent = name === "idle" ? "Call" : "Hang up";
  ui.call.title = name === "idle" ? "Start a voice call with the agent" : "End the call";
  ui.call.classList.toggle("danger", name !== "idle");
}

function startCall() {
  if (state.call) return;
  if (state.client?.state !== "open") {
    showError("NOT_CONNECTED", "not connected; press New chat");
    return;
  }
  const link = state.client.startCall({ sampleRate: PROPOSED_RATE });
  link.on("transcript", ({ role, text }) => {
    if (role === "user") callUserBubble(text);
    else appendCallChunk(text);
  });
  link.on("interrupt", () => {
    if (state.callTurn) {
      state.callTurn.interrupted = true;
      state.callTurn.note.textContent = "interrupted";
      state.callTurn.note.hidden = false;
    }
  });
  link.on("response_done", () => finishCallTurn());
  link.on("failed", ({ code, message }) => {
    if (state.call?.link !== link) return;
    endCall(false, null);
    showError(code, message);
  });
  const call = new VoiceCall({
    link,
    stats: ui.callState,
    onState: (name, detail) => {
      if (state.call !== call) return;
      renderCallState(name, detail);
      if (name === "idle") state.call = null;
    },
    onFailure: (code, message) => {
      finishCallTurn(state.callTurn ? "call ended" : null);
      showError(code, message);
    },
  });
  state.call = call;
  call.start();
}

/** Ends the call on this side; `hangup` tells the server. */
function endCall(hangup, why) {
  const call = state.call;
  if (!call) return;
  call.end(hangup);
  state.call = null;
  renderCallState("idle", { speaking: false });
  finishCallTurn(state.callTurn ? "call ended" : null);
  if (why) notice(why);
}

/** The Call button, where the browser has a microphone API (and the agent may take calls). */
function offerCall() {
  ui.call.hidden = !voiceSupported() || currentAgent()?.voice === false;
}

// ------------------------------------------------------------------ turns

function userBubble(text, attachments = []) {
  const bubble = element("div", "msg user", "msg-user", text);
  for (const name of attachments) bubble.append(element("div", "attachment-note", null, `attached: ${name}`));
  ui.transcript.append(bubble);
  scrollDown();
  return bubble;
}

/**
 * An assistant bubble. Its body holds the turn in the order its events
 * came: runs of text (`msg-text`), each ended by a tool card or a media
 * element that arrived after it. `streamed` is all the text; `run` is the
 * text run still open (none once something else came after it).
 */
function assistantBubble(stateName) {
  const el = element("article", "msg assistant", "msg-assistant");
  el.dataset.state = stateName;
  const body = element("div", "body", "msg-body");
  const note = element("span", "note", "msg-note");
  note.hidden = true;
  el.append(body, note);
  ui.transcript.append(el);
  return { el, body, note, streamed: "", run: null };
}

/** The bubble's open text run, started at the end of its body if none is open. */
function textRun(bubble) {
  if (!bubble.run) {
    bubble.run = { el: element("div", "text", "msg-text"), text: "" };
    bubble.body.append(bubble.run.el);
  }
  return bubble.run;
}

/** Streamed text, at the end of the bubble's open text run. */
function appendText(bubble, text) {
  setRunText(bubble, textRun(bubble).text + text);
}

/** The open text run's text becomes `text`. */
function setRunText(bubble, text) {
  const before = shownBefore(bubble);
  const run = textRun(bubble);
  run.text = text;
  bubble.streamed = before + text;
  run.el.replaceChildren(renderMarkdown(text));
  scrollDown();
}

/** The text the bubble shows before its open text run. */
function shownBefore(bubble) {
  return bubble.streamed.slice(0, bubble.streamed.length - (bubble.run?.text.length ?? 0));
}

/** A tool card or a media element, after what came before it; text after it starts a new run. */
function appendItem(bubble, item) {
  bubble.body.append(item);
  bubble.run = null;
  scrollDown();
}

/**
 * A whole reply (a `done`, a stored message) in the open text run: where it
 * starts with the text shown before that run (a reply that repeats what
 * preceded its tool cards), the rest of it; else all of it (a model's last
 * answer, after its tools).
 */
function showReply(bubble, reply) {
  const before = shownBefore(bubble);
  if (Array.isArray(reply.parts) && reply.parts.length) {
    textRun(bubble).el.replaceChildren(renderParts(withoutLead(reply.parts, before)));
  } else if (typeof reply.content === "string" && reply.content) {
    const rest = reply.content.startsWith(before) ? reply.content.slice(before.length) : reply.content;
    if (rest) setRunText(bubble, rest);
  }
}

/** `parts` without `lead` at the start of their text, when their text starts with it. */
function withoutLead(parts, lead) {
  let rest = lead;
  const kept = [];
  for (const part of parts) {
    if (rest && part?.type === "text" && typeof part.text === "string") {
      if (part.text.startsWith(rest)) {
        if (part.text.length > rest.length) kept.push({ ...part, text: part.text.slice(rest.length) });
        rest = "";
      } else if (rest.startsWith(part.text)) {
        rest = rest.slice(part.text.length);
      } else {
        return parts;
      }
      continue;
    }
    if (rest) return parts;
    kept.push(part);
  }
  return rest ? parts : kept;
}

function ensureTurn() {
  if (!state.turn) {
    state.turn = assistantBubble("streaming");
    setRunning(true);
    scrollDown();
  }
  return state.turn;
}

function settleOpenCalls(reason) {
  for (const [id, pending] of state.calls) {
    clearTimeout(pending.timer);
    if (pending.consent) pending.consent.settle({ error: reason });
    else pending.card?.finish({ result: "(no result shown)" });
    state.calls.delete(id);
  }
}

function finishTurn(done) {
  const turn = ensureTurn();
  settleOpenCalls("the turn ended");
  showReply(turn, done);
  if (done.cancelled) {
    turn.el.dataset.state = "cancelled";
    turn.note.textContent = "stopped";
    turn.note.hidden = false;
  } else {
    turn.el.dataset.state = "done";
  }
  state.turn = null;
  setRunning(false);
  scrollDown();
  refreshSessionsSoon();
  if (currentAgent()?.memory) afterMemoryTurn(turn);
  reloadPack();
}

function endTurnInterrupted(why) {
  if (!state.turn && !state.running) return;
  const turn = state.turn;
  if (turn) {
    turn.el.dataset.state = "interrupted";
    turn.note.textContent = why;
    turn.note.hidden = false;
  }
  settleOpenCalls(why);
  state.turn = null;
  setRunning(false);
}

/** Errors the connection's own handlers show (a lost or closed connection). */
const CONNECTION_ERRORS = new Set(["CLOSED", "CONNECTION_LOST", "CONNECT_FAILED", "CREDENTIAL_EXPIRED", "SESSION_LOST"]);

/**
 * Draws `turn` (the client's) as its events come: its text, tool cards and
 * media in order, then its end. Nothing of a connection that was replaced
 * is drawn.
 */
async function followTurn(client, turn) {
  const live = () => state.client === client;
  try {
    for await (const event of turn) {
      if (!live()) return;
      switch (event.type) {
        case "started":
          ensureTurn();
          break;
        case "text":
          appendText(ensureTurn(), event.delta);
          break;
        case "tool_call":
          onToolCall(event.handle);
          break;
        case "tool_result":
          onToolResult(event);
          break;
        case "media":
          appendItem(ensureTurn(), mediaItemElement(event.media));
          break;
        default:
          break;
      }
    }
    const done = await turn.result;
    if (live()) finishTurn(done);
  } catch (error) {
    if (live() && !CONNECTION_ERRORS.has(error.code)) onTurnError(error);
  }
}

/** The turn failed, or the message that would have started one was refused. */
function onTurnError(error) {
  const code = error.code ?? "ERROR";
  const message = error.reason ?? error.message ?? "";
  if (state.turn) {
    state.turn.el.dataset.state = "error";
    if (!state.turn.streamed) state.turn.el.hidden = true;
  }
  settleOpenCalls("the turn failed");
  state.turn = null;
  setRunning(false);
  // A compile-mode session that did not open: what failed is in the details.
  const detail = code === "pack_compile_failed" ? error.details?.error : null;
  showError(code, detail ? `${message}: ${detail}` : message);
  if (code === "pack_compile_failed") reloadPack();
}

// ------------------------------------------------------------ tool calls

function onToolCall(handle) {
  const call = handle.call;
  // Acknowledged at once (the ack timeout is short and a person may take
  // longer to decide); a server tool's id is ignored by the server.
  handle.ack();
  const turn = ensureTurn();
  if (isMemoryTool(call.name)) turn.usedMemory = true;
  if (call.consent_message) {
    askConsent(handle);
    return;
  }
  const card = toolCard(call, "server");
  appendItem(turn, card.element);
  const timer = setTimeout(() => {
    // No result came: the client is expected to run it.
    state.calls.delete(call.id);
    askConsent(handle, card.element);
  }, SERVER_RESULT_GRACE_MS);
  state.calls.set(call.id, { card, timer, call });
}

/** A consent card for the call: in the place of `replacing` (its card), else after what came so far. */
function askConsent(handle, replacing) {
  const call = handle.call;
  const card = consentCard(call, (approved) => answerCall(handle, approved, card));
  if (replacing) {
    replacing.replaceWith(card.element);
    scrollDown();
  } else {
    appendItem(ensureTurn(), card.element);
  }
  state.calls.set(call.id, { consent: card, call });
}

async function answerCall(handle, approved, card) {
  const call = handle.call;
  if (!approved) {
    handle.reject("declined by the user");
    card.settle({ error: "declined by the user", rejected: true });
    state.calls.delete(call.id);
    return;
  }
  const tool = browserTools[call.name];
  try {
    const result = tool ? await tool(call.arguments ?? {}) : { approved: true };
    if (!state.calls.has(call.id)) return; // ended meanwhile
    handle.result(result);
    card.settle({ result });
  } catch (error) {
    if (!state.calls.has(call.id)) return;
    handle.error(error.message);
    card.settle({ error: error.message });
  }
  state.calls.delete(call.id);
}

function onToolResult(result) {
  const pending = state.calls.get(result.id);
  if (!pending) return;
  clearTimeout(pending.timer);
  state.calls.delete(result.id);
  if (pending.consent) {
    // The server ended a client call (a timeout, a cancelled turn).
    pending.consent.settle({ error: result.error ?? "ended by the server" });
  } else {
    pending.card.finish(result);
  }
}

// --------------------------------------------------------------- messages

function readMetadata() {
  const raw = ui.metadata.value.trim();
  if (!raw) return null;
  const value = JSON.parse(raw);
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    throw new Error("metadata must be a JSON object");
  }
  // Omnia metadata values are strings.
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)]),
  );
}

function sendMessage() {
  const text = ui.input.value.trim();
  const uploads = state.uploads;
  if (uploads.some((u) => u.status === "uploading")) {
    showError("UPLOAD_PENDING", "wait for the upload to finish");
    return;
  }
  const ready = uploads.filter((u) => u.status === "ready");
  if ((!text && !ready.length) || state.running) return;
  const client = state.client;
  if (client?.state !== "open") {
    showError("NOT_CONNECTED", "not connected; press New chat");
    return;
  }
  let metadata;
  try {
    metadata = readMetadata();
  } catch (error) {
    showError("INVALID_METADATA", error.message);
    return;
  }
  const frame = {};
  if (state.sessionId) frame.session_id = state.sessionId;
  if (ready.length) {
    frame.parts = [...(text ? [{ type: "text", text }] : []), ...ready.map(uploadedPart)];
  } else {
    frame.content = text;
  }
  if (metadata) frame.metadata = metadata;
  userBubble(text, ready.map((u) => u.filename));
  ui.input.value = "";
  clearUploads();
  setRunning(true);
  followTurn(client, client.send(frame));
}

// ---------------------------------------------------------------- uploads

function clearUploads() {
  state.uploads = [];
  ui.attachments.replaceChildren();
}

async function addUpload(file) {
  const chip = element("div", "chip", "attachment");
  chip.dataset.state = "uploading";
  const progress = element("progress", null, "upload-progress");
  progress.max = 1;
  progress.value = 0;
  const remove = element("button", null, "attachment-remove", "×");
  remove.type = "button";
  chip.append(element("span", null, null, file.name), progress, remove);
  ui.attachments.append(chip);
  const upload = { filename: file.name, mime_type: file.type || "application/octet-stream", status: "uploading" };
  state.uploads.push(upload);
  remove.addEventListener("click", () => {
    state.uploads = state.uploads.filter((u) => u !== upload);
    chip.remove();
  });
  try {
    if (!state.client) throw Object.assign(new Error("not connected; press New chat"), { code: "NOT_CONNECTED" });
    const ready = await state.client.upload(file, { filename: file.name, mime_type: upload.mime_type }, (fraction) => {
      progress.value = fraction;
      chip.dataset.progress = String(Math.round(fraction * 100));
    });
    upload.storage_ref = ready.storage_ref;
    upload.status = "ready";
    chip.dataset.state = "ready";
    chip.dataset.storageRef = ready.storage_ref;
  } catch (error) {
    upload.status = "failed";
    chip.dataset.state = "error";
    state.uploads = state.uploads.filter((u) => u !== upload);
    showError(error.code ?? "UPLOAD_FAILED", error.reason ?? error.message);
  }
}

// --------------------------------------------------------------- sessions

let refreshTimer = null;
function refreshSessionsSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(loadSessions, 300);
}

/** `METHOD path` on the API with the caller's credential: the JSON answer (null for a 204). */
async function apiRequest(method, path) {
  const response = await fetch(path, { method, headers: authHeaders(), cache: "no-store" });
  if (response.status === 204) return null;
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw Object.assign(new Error(body.error ?? response.statusText), { status: response.status });
  }
  return body;
}

function apiGet(path) {
  return apiRequest("GET", path);
}

function when(timestamp) {
  const date = new Date(timestamp);
  if (Number.isNaN(date.getTime())) return "";
  const same = date.toDateString() === new Date().toDateString();
  return same
    ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : date.toLocaleDateString([], { month: "short", day: "numeric" });
}

async function loadSessions() {
  let listing;
  try {
    listing = await apiGet("/api/v1/sessions?limit=20");
  } catch (error) {
    ui.sessions.replaceChildren();
    ui.sessionsError.textContent = `sessions: ${error.status ?? ""} ${error.message}`.trim();
    ui.sessionsError.hidden = false;
    return;
  }
  ui.sessionsError.hidden = true;
  const items = (listing.sessions ?? []).map((session) => {
    const li = element("li", "session", "session-item");
    li.dataset.sessionId = session.id;
    li.title = session.id;
    li.append(element("span", "session-time", null, when(session.last_active_at)));
    li.append(element("div", "session-agent", null, session.agent));
    const summary = session.summary?.text ?? `${session.id.slice(0, 8)}…`;
    li.append(element("div", "session-summary", "session-summary", summary));
    li.addEventListener("click", () => resumeSession(session));
    return li;
  });
  if (!items.length) {
    const empty = credential()
      ? "No sessions yet."
      : "No sessions listed: anonymous sessions are not listed; enter a credential to see yours.";
    items.push(element("li", "sessions-empty", "sessions-empty", empty));
  }
  ui.sessions.replaceChildren(...items);
  highlightSession();
}

function highlightSession() {
  for (const li of ui.sessions.querySelectorAll("[data-session-id]")) {
    li.classList.toggle("current", li.dataset.sessionId === state.sessionId);
  }
}

async function resumeSession(session) {
  closeSocket();
  if (![...ui.agent.options].some((o) => o.value === session.agent)) {
    ui.agent.append(new Option(session.agent, session.agent));
  }
  ui.agent.value = session.agent;
  offerCall();
  resetConversation();
  state.sessionId = session.id;
  ui.sessionId.textContent = session.id;
  highlightSession();
  await reloadHistory(session.id);
  openSocket({ resume: { session: session.id } });
}

async function reloadHistory(id) {
  const messages = [];
  try {
    let after = null;
    for (let page = 0; page < HISTORY_PAGES; page += 1) {
      const query = after === null ? "" : `?after=${after}`;
      const body = await apiGet(`/api/v1/sessions/${encodeURIComponent(id)}/messages${query}`);
      messages.push(...(body.messages ?? []));
      after = body.next_after;
      if (after === null || after === undefined) break;
    }
  } catch (error) {
    showError(`HTTP_${error.status ?? 0}`, `cannot load the session's history: ${error.message}`);
    return;
  }
  ui.transcript.replaceChildren();
  renderHistory(messages);
  state.storedSeq = Math.max(state.storedSeq, ...messages.map((m) => Number(m.seq) || 0));
  notice(`resumed session ${id.slice(0, 8)}… (${messages.length} messages)`);
}

function renderHistory(messages) {
  let open = null; // the assistant bubble tool steps collect in
  const cards = new Map();
  for (const message of messages) {
    const voice = message.metadata?.via === "voice";
    if (message.role === "user") {
      open = null;
      const bubble = userBubble(typeof message.content === "string" ? message.content : "");
      bubble.classList.add("history");
      if (voice) {
        bubble.classList.add("voice");
        bubble.dataset.via = "voice";
      }
    } else if (message.role === "assistant") {
      const bubble = open ?? assistantBubble("done");
      bubble.el.classList.add("history");
      if (voice) {
        bubble.el.classList.add("voice");
        bubble.el.dataset.via = "voice";
      }
      showReply(bubble, { content: String(message.content ?? "") });
      if (message.metadata?.cancelled === "true") {
        bubble.el.dataset.state = "cancelled";
        bubble.note.textContent = "stopped";
        bubble.note.hidden = false;
      } else if (voice && message.metadata?.interrupted === "true") {
        // A spoken reply cut short (barge-in, the call's end).
        bubble.el.dataset.state = "interrupted";
        bubble.note.textContent = "interrupted";
        bubble.note.hidden = false;
      }
      open = message.metadata?.step === "interim" ? bubble : null;
    } else if (message.role === "tool" && message.content?.call) {
      open = open ?? assistantBubble("done");
      drawToolStep(open, message.content, cards);
    } else if (message.role === "tool" && message.content?.result) {
      drawToolStep(null, message.content, cards);
    }
  }
  scrollDown();
}

/** A stored tool step: a call's card at the end of `bubble`, or a result on the card drawn for its call. */
function drawToolStep(bubble, step, cards) {
  if (step.call) {
    const call = step.call;
    const card = toolCard(call, call.side === "client" ? "client" : "server");
    appendItem(bubble, card.element);
    cards.set(call.id, card);
  } else if (step.result) {
    const result = step.result;
    const ok = result.status === "ok";
    cards.get(result.id)?.finish(ok ? { result: result.value } : { error: result.value ?? result.status });
  }
}

// ----------------------------------------------------------------- memory

/** What is wrong with `facet` as a `memory_facet` (null: nothing; "" is none). */
function facetProblem(facet) {
  if (!facet || MEMORY_FACET.test(facet)) return null;
  if (facet.length > 128) return `the memory facet is ${facet.length} characters long; at most 128`;
  if (!/^[A-Za-z0-9]/.test(facet)) return "the memory facet must start with a letter or a digit";
  return "the memory facet may hold only letters, digits and . _ : / -";
}

/** Shows beside the field what is wrong with `facet` (nothing when it is valid); true when something is. */
function showFacetProblem(facet) {
  const problem = facetProblem(facet);
  ui.memoryFacetError.hidden = !problem;
  ui.memoryFacetError.textContent = problem ?? "";
  ui.memoryFacet.setAttribute("aria-invalid", String(Boolean(problem)));
  return Boolean(problem);
}

/**
 * The top bar's facet was changed: a new chat in it. A malformed one is
 * not sent: the chat in the old facet ends (it is not carried on as if it
 * were in the new one) and the field says why.
 */
function onFacetChange() {
  state.facet = ui.memoryFacet.value.trim();
  if (!facetProblem(state.facet)) localStorage.setItem("agentwire.memory_facet", state.facet);
  newChat();
  loadMemories();
}

/** The facet the panel lists: the connection's (as the server echoed it), else the top bar's. */
function panelFacet() {
  return state.connectedFacet ?? state.facet;
}

function memoryError(text) {
  ui.memoryError.textContent = text ?? "";
  ui.memoryError.hidden = !text;
}

function memoryStatus(text) {
  ui.memoryStatus.textContent = text ?? "";
}

/** An API failure as the panel says it. */
function failure(what, error) {
  return `${what}: ${error.status ? `${error.status} ` : ""}${error.message}`;
}

/** The `/api/v1/memories` query of the panel: the agent (none for the `caller` tier) and facet. */
function memoryQuery(agent, offset) {
  const params = new URLSearchParams({
    agent: agent.memory === "caller" ? "" : agent.name,
    memory_facet: panelFacet(),
    limit: String(MEMORY_PAGE),
  });
  if (offset) params.set("offset", String(offset));
  return `/api/v1/memories?${params}`;
}

/**
 * Shows or hides the memory panel for the chosen agent and (re)loads its
 * list: the first page, or the next one after what is shown (`more`). The
 * line saying what the last Forget or Delete all did stays with `keepStatus`.
 */
async function loadMemories({ more = false, keepStatus = false } = {}) {
  const agent = currentAgent();
  const load = ++state.memoryLoad;
  ui.memoryPanel.hidden = !agent?.memory;
  if (!agent?.memory) return;
  hideMemoryConfirm();
  if (!keepStatus && !more) memoryStatus("");
  const facet = panelFacet();
  ui.memoryScope.textContent = `${agent.memory === "caller" ? "Shared by your agents" : `With ${agent.name}`}, ${
    facet ? `facet ${facet}` : "no facet"
  }`;
  ui.memoryPanel.dataset.agent = agent.name;
  ui.memoryPanel.dataset.facet = facet;
  const idle = (why, name) => {
    ui.memories.replaceChildren(element("li", "memories-empty", "memories-empty", why));
    ui.memoryMore.hidden = true;
    ui.memoryDeleteAll.disabled = true;
    memoryError(null);
    ui.memoryPanel.dataset.state = name;
  };
  if (facetProblem(facet)) {
    idle("Fix the memory facet to see its memories.", "invalid-facet");
    return;
  }
  if (!credential()) {
    idle("Enter a credential to see your memories: an anonymous caller has none.", "anonymous");
    return;
  }
  ui.memoryPanel.dataset.state = "loading";
  let page;
  try {
    page = await apiGet(memoryQuery(agent, more ? state.memoryNext : 0));
  } catch (error) {
    if (load !== state.memoryLoad) return;
    // Not the list of another credential, agent or facet under this error.
    if (!more) ui.memories.replaceChildren();
    ui.memoryMore.hidden = true;
    ui.memoryDeleteAll.disabled = true;
    memoryError(failure("cannot list the memories", error));
    ui.memoryPanel.dataset.state = "error";
    return;
  }
  if (load !== state.memoryLoad) return; // a newer load is on the way
  memoryError(null);
  ui.memoryDeleteAll.disabled = false;
  const items = (page.memories ?? []).map(memoryItem);
  if (more) {
    ui.memories.append(...items);
  } else {
    ui.memories.replaceChildren(...items);
  }
  if (!ui.memories.querySelector("[data-testid=memory-item]")) {
    ui.memories.replaceChildren(
      element("li", "memories-empty", "memories-empty", "No memories with this agent in this facet."),
    );
  }
  state.memoryNext = typeof page.next_offset === "number" ? page.next_offset : null;
  ui.memoryMore.hidden = state.memoryNext === null;
  ui.memoryPanel.dataset.state = "ready";
}

/** One memory in the panel: its text (as text), its type and when, and Forget. */
function memoryItem(memory) {
  const li = element("li", "memory", "memory-item");
  li.dataset.memoryId = memory.id;
  const content = element("div", "memory-content", "memory-content", memory.content ?? "");
  content.title = memory.content ?? "";
  const meta = element("div", "memory-meta");
  meta.append(element("span", "memory-type", "memory-type", memory.type ?? "general"));
  const at = when(memory.updated_at ?? memory.created_at);
  if (at) meta.append(element("span", "memory-time", null, at));
  const forget = element("button", "memory-forget", "memory-forget", "Forget");
  forget.type = "button";
  const clipped = String(memory.content ?? "").slice(0, 60);
  forget.setAttribute("aria-label", `Forget: ${clipped}`);
  forget.addEventListener("click", () => forgetMemory(memory, li, forget));
  meta.append(forget);
  li.append(content, meta);
  return li;
}

async function forgetMemory(memory, li, button) {
  button.disabled = true;
  li.dataset.state = "forgetting";
  try {
    await apiRequest("DELETE", `/api/v1/memories/${encodeURIComponent(memory.id)}`);
  } catch (error) {
    button.disabled = false;
    li.dataset.state = "";
    memoryError(failure("cannot forget the memory", error));
    return;
  }
  const at = [...ui.memories.querySelectorAll("[data-testid=memory-item]")].indexOf(li);
  memoryStatus(`Forgot “${String(memory.content ?? "").slice(0, 60)}”.`);
  await loadMemories({ keepStatus: true });
  // Focus goes to the memory that took its place, else to the panel's reload.
  const buttons = ui.memories.querySelectorAll("[data-testid=memory-forget]");
  (buttons[Math.min(at, buttons.length - 1)] ?? ui.memoryRefresh).focus();
}

function showMemoryConfirm() {
  ui.memoryConfirm.hidden = false;
  ui.memoryDeleteAll.setAttribute("aria-expanded", "true");
  ui.memoryConfirmCancel.focus();
}

function hideMemoryConfirm() {
  if (ui.memoryConfirm.hidden) return;
  ui.memoryConfirm.hidden = true;
  ui.memoryDeleteAll.setAttribute("aria-expanded", "false");
}

async function deleteAllMemories() {
  ui.memoryConfirmDelete.disabled = true;
  let answer;
  try {
    answer = await apiRequest("DELETE", "/api/v1/memories");
  } catch (error) {
    memoryError(failure("cannot delete the memories", error));
    return;
  } finally {
    ui.memoryConfirmDelete.disabled = false;
  }
  hideMemoryConfirm();
  const n = Number(answer?.deleted ?? 0);
  memoryStatus(`Deleted ${n} ${n === 1 ? "memory" : "memories"}.`);
  ui.memoryDeleteAll.focus();
  await loadMemories({ keepStatus: true });
}

/** The stored messages of session `id` after `after` (every page). */
async function storedMessages(id, after) {
  const messages = [];
  let from = after;
  for (let page = 0; page < HISTORY_PAGES; page += 1) {
    const query = from ? `?after=${from}` : "";
    const body = await apiGet(`/api/v1/sessions/${encodeURIComponent(id)}/messages${query}`);
    messages.push(...(body.messages ?? []));
    from = body.next_after;
    if (from === null || from === undefined) break;
  }
  return messages;
}

/**
 * After a turn of an agent with memory: the turn's stored steps. When a
 * memory tool ran, the turn's bubble is drawn again from them (its tool
 * cards where they came; not a bubble with media, which the stored steps
 * do not hold) and the panel reloads.
 */
async function afterMemoryTurn(bubble) {
  const session = state.sessionId;
  let usedMemory = bubble.usedMemory === true;
  if (session) {
    let messages;
    try {
      messages = await storedMessages(session, state.storedSeq);
    } catch (error) {
      memoryError(failure("cannot read the turn's memory steps", error));
      loadMemories();
      return;
    }
    if (session !== state.sessionId) return; // another chat meanwhile
    for (const message of messages) state.storedSeq = Math.max(state.storedSeq, Number(message.seq) || 0);
    const lastUser = messages.map((m) => m.role).lastIndexOf("user");
    const steps = messages.slice(lastUser + 1);
    const stored = steps.some((m) => m.role === "tool" && isMemoryTool(m.content?.call?.name));
    usedMemory = usedMemory || stored;
    const drawable =
      stored &&
      bubble.el.isConnected &&
      !bubble.usedMemory &&
      !bubble.body.querySelector(".media") &&
      steps.some((m) => m.role === "assistant");
    if (drawable) redrawTurn(bubble, steps);
  }
  if (usedMemory) loadMemories();
}

/** `bubble` drawn again from its turn's stored messages (those after its user message). */
function redrawTurn(bubble, steps) {
  bubble.body.replaceChildren();
  bubble.streamed = "";
  bubble.run = null;
  const cards = new Map();
  for (const message of steps) {
    if (message.role === "assistant") {
      showReply(bubble, { content: String(message.content ?? "") });
    } else if (message.role === "tool" && message.content) {
      drawToolStep(bubble, message.content, cards);
    }
  }
  bubble.el.dataset.steps = "stored";
  scrollDown();
}

// ------------------------------------------------------------- lifecycle

function resetConversation() {
  settleOpenCalls("closed");
  state.turn = null;
  state.callTurn = null;
  state.sessionId = null;
  state.storedSeq = 0;
  setRunning(false);
  clearUploads();
  ui.transcript.replaceChildren();
  ui.sessionId.textContent = "–";
}

function newChat() {
  closeSocket();
  resetConversation();
  highlightSession();
  openSocket();
}

async function loadAgents() {
  let listing = { agents: [], media: false };
  try {
    listing = await apiGet("/api/v1/agents");
  } catch (error) {
    showError(`HTTP_${error.status ?? 0}`, `cannot list the agents: ${error.message}`);
  }
  state.agents = listing.agents ?? [];
  ui.attachLabel.hidden = !listing.media;
  const wanted = new URLSearchParams(location.search).get("agent") ?? localStorage.getItem("agentwire.agent");
  ui.agent.replaceChildren(
    ...state.agents.map((a) => new Option(a.credential_required ? `${a.name} (private)` : a.name, a.name)),
  );
  const names = state.agents.map((a) => a.name);
  ui.agent.value = names.includes(wanted) ? wanted : names.includes("demo") ? "demo" : (names[0] ?? "");
  offerCall();
  showFacades();
  showPack();
}

/**
 * A pack agent's pack and its latest compile (`/api/v1/agents`' `pack`):
 * id, version and prompt, the compile mode, the error and the warnings. A
 * compile-mode agent compiles at every session open, so the panel reloads
 * after each turn and refusal.
 */
function showPack() {
  const pack = currentAgent()?.pack;
  ui.packPanel.hidden = !pack;
  if (!pack) return;
  const what = pack.id ? `${pack.id} ${pack.version}, prompt ${pack.prompt}` : "not compiled yet";
  const mode = pack.compile === "per_session" ? "compiled at every session open" : "compiled at startup";
  ui.packSummary.textContent = `${what} (${mode}; compiles: ${pack.compiles})`;
  ui.packError.hidden = !pack.error;
  ui.packError.textContent = pack.error ?? "";
  ui.packWarnings.replaceChildren(...(pack.warnings ?? []).map((w) => element("li", "", "pack-warning", w)));
  ui.packPanel.dataset.state = pack.error ? "error" : "ok";
}

/** Reloads the agents listing's entry of a compile-mode agent and shows its pack. */
async function reloadPack() {
  if (currentAgent()?.pack?.compile !== "per_session") return;
  try {
    const listing = await apiGet("/api/v1/agents");
    state.agents = listing.agents ?? state.agents;
  } catch {
    return;
  }
  showPack();
}

/** The current agent's other front doors (A2A card, MCP tool, REST function), as links and URLs to copy. */
function showFacades() {
  const agent = currentAgent();
  const doors = [];
  if (agent?.a2a_card) doors.push(["A2A card", new URL(agent.a2a_card, location.href).href, true]);
  if (agent?.mcp_tool) doors.push([`MCP tool ${agent.mcp_tool}`, new URL("/mcp", location.href).href, false]);
  if (agent?.function) doors.push(["REST function (POST)", new URL(agent.function, location.href).href, false]);
  ui.facades.replaceChildren(
    ...doors.map(([label, url, link]) => {
      const item = document.createElement("li");
      const name = document.createElement("span");
      name.textContent = `${label}: `;
      const target = document.createElement(link ? "a" : "code");
      target.textContent = url;
      if (link) {
        target.href = url;
        target.target = "_blank";
        target.rel = "noopener";
      }
      item.append(name, target);
      return item;
    }),
  );
  ui.facadesPanel.hidden = doors.length === 0;
}

function wire() {
  ui.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    sendMessage();
  });
  ui.input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      sendMessage();
    }
  });
  ui.stop.addEventListener("click", () => {
    ui.stop.disabled = true;
    state.client?.cancel();
  });
  ui.newChat.addEventListener("click", newChat);
  ui.agent.addEventListener("change", () => {
    localStorage.setItem("agentwire.agent", ui.agent.value);
    offerCall();
    showFacades();
    showPack();
    newChat();
    loadMemories();
  });
  ui.packRefresh.addEventListener("click", reloadPack);
  ui.call.addEventListener("click", () => {
    if (state.call) endCall(true, "call ended");
    else startCall();
  });
  ui.credential.addEventListener("change", () => {
    sessionStorage.setItem("agentwire.credential", credential());
    loadSessions();
    newChat();
    loadMemories();
  });
  ui.memoryFacet.addEventListener("change", onFacetChange);
  // Checked as it is typed; sent (a new chat) when changed.
  ui.memoryFacet.addEventListener("input", () => showFacetProblem(ui.memoryFacet.value.trim()));
  ui.memoryRefresh.addEventListener("click", () => loadMemories());
  ui.memoryMore.addEventListener("click", () => loadMemories({ more: true }));
  ui.memoryDeleteAll.addEventListener("click", showMemoryConfirm);
  ui.memoryConfirmCancel.addEventListener("click", () => {
    hideMemoryConfirm();
    ui.memoryDeleteAll.focus();
  });
  ui.memoryConfirmDelete.addEventListener("click", deleteAllMemories);
  ui.memoryConfirm.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      hideMemoryConfirm();
      ui.memoryDeleteAll.focus();
    }
  });
  ui.sessionsRefresh.addEventListener("click", loadSessions);
  ui.fileInput.addEventListener("change", () => {
    for (const file of ui.fileInput.files) addUpload(file);
    ui.fileInput.value = "";
  });
  window.addEventListener("pagehide", closeSocket);
}

async function main() {
  ui.credential.value = sessionStorage.getItem("agentwire.credential") ?? "";
  const facet =
    new URLSearchParams(location.search).get("memory_facet") ?? localStorage.getItem("agentwire.memory_facet") ?? "";
  ui.memoryFacet.value = facet;
  state.facet = facet.trim();
  showFacetProblem(state.facet);
  wire();
  await loadAgents();
  loadSessions();
  loadMemories();
  renderCallState("idle", { speaking: false });
  if (ui.agent.value) openSocket();
  document.body.dataset.ready = "true";
}

main();
