// The sidebar's sessions (`/api/v1/sessions`) and a session's history
// (`/api/v1/sessions/{id}/messages`), drawn as the conversation was.

import { appendItem, assistantBubble, showReply, userBubble } from "./bubbles.js";
import { closeSocket, offerCall, openSocket, resetConversation } from "./console.js";
import { HISTORY_PAGES, apiGet, credential, element, notice, scrollDown, showError, state, ui } from "./page.js";
import { toolCard } from "./tools.js";

// --------------------------------------------------------------- sessions

export let refreshTimer = null;
export function refreshSessionsSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(loadSessions, 300);
}

export function when(timestamp) {
  const date = new Date(timestamp);
  if (Number.isNaN(date.getTime())) return "";
  const same = date.toDateString() === new Date().toDateString();
  return same
    ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : date.toLocaleDateString([], { month: "short", day: "numeric" });
}

export async function loadSessions() {
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

export function highlightSession() {
  for (const li of ui.sessions.querySelectorAll("[data-session-id]")) {
    li.classList.toggle("current", li.dataset.sessionId === state.sessionId);
  }
}

export async function resumeSession(session) {
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

export async function reloadHistory(id) {
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

export function renderHistory(messages) {
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
export function drawToolStep(bubble, step, cards) {
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

