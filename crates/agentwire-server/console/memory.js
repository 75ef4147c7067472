// Agent memory: the memory facet of the top bar, the sidebar's memory panel
// (`/api/v1/memories`), and a memory agent's turn drawn again from its
// stored steps.

import { showReply } from "./bubbles.js";
import { newChat } from "./console.js";
import { HISTORY_PAGES, MEMORY_FACET, MEMORY_PAGE, apiGet, apiRequest, credential, currentAgent, element, scrollDown, state, ui } from "./page.js";
import { drawToolStep, when } from "./sessions.js";
import { isMemoryTool } from "./tools.js";

// ----------------------------------------------------------------- memory

/** What is wrong with `facet` as a `memory_facet` (null: nothing; "" is none). */
export function facetProblem(facet) {
  if (!facet || MEMORY_FACET.test(facet)) return null;
  if (facet.length > 128) return `the memory facet is ${facet.length} characters long; at most 128`;
  if (!/^[A-Za-z0-9]/.test(facet)) return "the memory facet must start with a letter or a digit";
  return "the memory facet may hold only letters, digits and . _ : / -";
}

/** Shows beside the field what is wrong with `facet` (nothing when it is valid); true when something is. */
export function showFacetProblem(facet) {
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
export function onFacetChange() {
  state.facet = ui.memoryFacet.value.trim();
  if (!facetProblem(state.facet)) localStorage.setItem("agentwire.memory_facet", state.facet);
  newChat();
  loadMemories();
}

/** The facet the panel lists: the connection's (as the server echoed it), else the top bar's. */
export function panelFacet() {
  return state.connectedFacet ?? state.facet;
}

export function memoryError(text) {
  ui.memoryError.textContent = text ?? "";
  ui.memoryError.hidden = !text;
}

export function memoryStatus(text) {
  ui.memoryStatus.textContent = text ?? "";
}

/** An API failure as the panel says it. */
export function failure(what, error) {
  return `${what}: ${error.status ? `${error.status} ` : ""}${error.message}`;
}

/** The `/api/v1/memories` query of the panel: the agent (none for the `caller` tier) and facet. */
export function memoryQuery(agent, offset) {
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
export async function loadMemories({ more = false, keepStatus = false } = {}) {
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
export function memoryItem(memory) {
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

export async function forgetMemory(memory, li, button) {
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

export function showMemoryConfirm() {
  ui.memoryConfirm.hidden = false;
  ui.memoryDeleteAll.setAttribute("aria-expanded", "true");
  ui.memoryConfirmCancel.focus();
}

export function hideMemoryConfirm() {
  if (ui.memoryConfirm.hidden) return;
  ui.memoryConfirm.hidden = true;
  ui.memoryDeleteAll.setAttribute("aria-expanded", "false");
}

export async function deleteAllMemories() {
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
export async function storedMessages(id, after) {
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
export async function afterMemoryTurn(bubble) {
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
export function redrawTurn(bubble, steps) {
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

