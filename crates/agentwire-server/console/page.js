// The console's page: its elements, its state, and the helpers every part
// of it uses (messages in the transcript, the status line, the HTTP API).

export const HISTORY_PAGES = 20;
/** Omnia's `memory_facet`: 1 to 128 of `A-Z a-z 0-9 . _ : / -`, starting with a letter or digit. */
export const MEMORY_FACET = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;
/** Memories per page of the memory panel. */
export const MEMORY_PAGE = 50;
const $ = (id) => document.getElementById(id);
export const ui = {
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

export const state = {
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

export function credential() {
  return ui.credential.value.trim();
}

export function authHeaders() {
  const token = credential();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

export function setStatus(name, text) {
  ui.status.dataset.state = name;
  ui.status.textContent = text;
}

export function scrollDown() {
  ui.transcript.scrollTop = ui.transcript.scrollHeight;
}

export function element(tag, className, testid, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (testid) el.dataset.testid = testid;
  if (text !== undefined) el.textContent = text;
  return el;
}

export function showError(code, message) {
  const box = element("div", "error", "error");
  box.dataset.code = code ?? "";
  box.append(element("span", "error-code", "error-code", code ?? "ERROR"));
  box.append(element("span", "error-message", "error-message", message ?? ""));
  ui.transcript.append(box);
  scrollDown();
}

export function notice(text) {
  ui.transcript.append(element("div", "notice", "notice", text));
  scrollDown();
}

export function setRunning(running) {
  state.running = running;
  ui.stop.hidden = !running || !state.canCancel;
  ui.stop.disabled = false;
  ui.send.disabled = running;
}

export function currentAgent() {
  return state.agents.find((a) => a.name === ui.agent.value);
}

/** `METHOD path` on the API with the caller's credential: the JSON answer (null for a 204). */
export async function apiRequest(method, path) {
  const response = await fetch(path, { method, headers: authHeaders(), cache: "no-store" });
  if (response.status === 204) return null;
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw Object.assign(new Error(body.error ?? response.statusText), { status: response.status });
  }
  return body;
}

export function apiGet(path) {
  return apiRequest("GET", path);
}

