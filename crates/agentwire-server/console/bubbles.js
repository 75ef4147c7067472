// Drawing a conversation: the user's bubbles and the assistant's, whose
// body holds a turn's text runs, tool cards and media in the order they came.

import { renderMarkdown } from "./markdown.js";
import { renderParts } from "./media.js";
import { element, scrollDown, ui } from "./page.js";
import { when } from "./sessions.js";

// ------------------------------------------------------------------ turns

export function userBubble(text, attachments = []) {
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
export function assistantBubble(stateName) {
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
export function textRun(bubble) {
  if (!bubble.run) {
    bubble.run = { el: element("div", "text", "msg-text"), text: "" };
    bubble.body.append(bubble.run.el);
  }
  return bubble.run;
}

/** Streamed text, at the end of the bubble's open text run. */
export function appendText(bubble, text) {
  setRunText(bubble, textRun(bubble).text + text);
}

/** The open text run's text becomes `text`. */
export function setRunText(bubble, text) {
  const before = shownBefore(bubble);
  const run = textRun(bubble);
  run.text = text;
  bubble.streamed = before + text;
  run.el.replaceChildren(renderMarkdown(text));
  scrollDown();
}

/** The text the bubble shows before its open text run. */
export function shownBefore(bubble) {
  return bubble.streamed.slice(0, bubble.streamed.length - (bubble.run?.text.length ?? 0));
}

/** A tool card or a media element, after what came before it; text after it starts a new run. */
export function appendItem(bubble, item) {
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
export function showReply(bubble, reply) {
  const before = shownBefore(bubble);
  if (Array.isArray(reply.parts) && reply.parts.length) {
    textRun(bubble).el.replaceChildren(renderParts(withoutLead(reply.parts, before)));
  } else if (typeof reply.content === "string" && reply.content) {
    const rest = reply.content.startsWith(before) ? reply.content.slice(before.length) : reply.content;
    if (rest) setRunText(bubble, rest);
  }
}

/** `parts` without `lead` at the start of their text, when their text starts with it. */
export function withoutLead(parts, lead) {
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

