// The agentwire web console: an Omnia client in the browser, built on the
// project's TypeScript client (agentwire-client.js, the bundle of
// clients/typescript, copied here by its build). The client owns the socket:
// it connects to `/ws?agent=…&stream=2&binary=true` (with a credential, to
// `/console/ws?…&access_token=…`, since a browser cannot set headers on a
// WebSocket), tracks the log position `(epoch, seq)`, and after a connection
// it did not close itself rejoins with `resume`/`after`/`epoch`, so a reply
// continues where it stopped and no frame is shown twice. This file wires
// the page and draws what the client's turns deliver; it has no socket or
// frame code of its own. page.js holds the page's elements, state and
// helpers; bubbles.js draws messages; sessions.js the sessions and a
// session's history; memory.js the memory facet and panel.
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
import { appendItem, appendText, assistantBubble, showReply, userBubble } from "./bubbles.js";
import { mediaItemElement, uploadedPart } from "./media.js";
import { afterMemoryTurn, deleteAllMemories, facetProblem, hideMemoryConfirm, loadMemories, onFacetChange, showFacetProblem, showMemoryConfirm } from "./memory.js";
import { apiGet, credential, currentAgent, element, notice, scrollDown, setRunning, setStatus, showError, state, ui } from "./page.js";
import { highlightSession, loadSessions, refreshSessionsSoon, reloadHistory } from "./sessions.js";
import { browserTools, consentCard, isMemoryTool, toolCard } from "./tools.js";
import { PROPOSED_RATE, VoiceCall, voiceSupported } from "./voice.js";

/** A tool call without a consent message whose result does not follow within this is a client tool. */
const SERVER_RESULT_GRACE_MS = 300;
/** Rejoin attempts after a dropped connection: 150 ms, doubling to 4 s, jittered; five of them. */
const REJOIN_BACKOFF = { initialMs: 150, maxMs: 4000, attempts: 5, jitter: 0.3 };

// ------------------------------------------------------------- the socket

/** Opens a connection; `opts.resume` names a session to attach to. */
export function openSocket(opts = {}) {
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
export function closeSocket() {
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
export function offerCall() {
  ui.call.hidden = !voiceSupported() || currentAgent()?.voice === false;
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

// ------------------------------------------------------------- lifecycle

export function resetConversation() {
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

export function newChat() {
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
