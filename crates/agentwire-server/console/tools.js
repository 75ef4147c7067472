// Tool calls as the console shows them: server tool calls and results as
// collapsible cards, client tool calls as a consent card (Approve / Reject),
// and the tools the browser runs itself. A memory tool's card (memory__*)
// also says in a line what it did ("Remembered: …", "Recalled 2 memories").
// Every text here is set as textContent: nothing becomes markup.

/** Tools the console can run when the user approves: name → async (args) → result. */
export const browserTools = {
  async get_timezone() {
    const options = Intl.DateTimeFormat().resolvedOptions();
    return {
      timezone: options.timeZone,
      utc_offset_minutes: -new Date().getTimezoneOffset(),
      locale: options.locale || navigator.language,
    };
  },
  get_location(args) {
    return new Promise((resolve, reject) => {
      if (!navigator.geolocation) {
        reject(new Error("geolocation is not available in this browser"));
        return;
      }
      navigator.geolocation.getCurrentPosition(
        (position) =>
          resolve({
            latitude: position.coords.latitude,
            longitude: position.coords.longitude,
            accuracy_m: position.coords.accuracy,
          }),
        (error) => reject(new Error(error.message || "location unavailable")),
        {
          enableHighAccuracy: args?.precision === "high" || args?.accuracy === "high",
          timeout: 10000,
          maximumAge: 60000,
        },
      );
    });
  },
};

function pretty(value) {
  if (value === undefined) return "";
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

function labelled(label, value, testid) {
  const section = document.createElement("div");
  section.className = "tool-section";
  const title = document.createElement("div");
  title.className = "tool-label";
  title.textContent = label;
  const pre = document.createElement("pre");
  pre.dataset.testid = testid;
  pre.textContent = pretty(value);
  section.append(title, pre);
  return section;
}

/** The prefix of the agent memory tools' names. */
export const MEMORY_TOOL_PREFIX = "memory__";

/** Whether `name` is one of the agent memory tools. */
export function isMemoryTool(name) {
  return typeof name === "string" && name.startsWith(MEMORY_TOOL_PREFIX);
}

/** `text` on one line, at most `max` characters. */
function clip(text, max = 80) {
  const line = String(text ?? "").replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

function count(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

/** A tool result as an object when it is one (a JSON text too), else null. */
function resultObject(result) {
  if (result && typeof result === "object" && !Array.isArray(result)) return result;
  if (typeof result === "string" && result.trim().startsWith("{")) {
    try {
      return JSON.parse(result);
    } catch {
      return null;
    }
  }
  return null;
}

const MEMORY_VERBS = {
  remember: ["Remembering", "remember"],
  recall: ["Recalling", "recall"],
  list: ["Listing memories", "list memories"],
  forget: ["Forgetting", "forget"],
  open: ["Opening", "open"],
};

/**
 * What a memory tool call did, in words: while it runs (`outcome`
 * undefined), then from its `{result}` or `{error}`. Null for another tool.
 */
export function memorySummary(call, outcome) {
  if (!isMemoryTool(call?.name)) return null;
  const tool = call.name.slice(MEMORY_TOOL_PREFIX.length);
  const args = call.arguments && typeof call.arguments === "object" ? call.arguments : {};
  const [running, infinitive] = MEMORY_VERBS[tool] ?? [`Running ${tool}`, tool];
  if (!outcome) {
    if (tool === "remember") return `${running}: ${clip(args.content)}`;
    if (tool === "recall") return args.query ? `${running} “${clip(args.query, 60)}”` : running;
    if (tool === "forget" || tool === "open") return `${running} ${clip(args.memory_id, 40)}`;
    return running;
  }
  if (outcome.error !== undefined && outcome.error !== null) {
    return `Could not ${infinitive}: ${clip(outcome.error)}`;
  }
  // The memory tools answer objects; anything else (a turn that ended
  // before the result was shown) says nothing about what was done.
  const result = resultObject(outcome.result);
  if (!result) return `${running}: no result shown`;
  const found = Number.isInteger(result.count)
    ? result.count
    : Array.isArray(result.memories)
      ? result.memories.length
      : null;
  switch (tool) {
    case "remember":
      return `Remembered: ${clip(args.content)}`;
    case "recall":
      return found === null ? "Recalled" : `Recalled ${count(found, "memory", "memories")}`;
    case "list":
      return found === null ? "Listed memories" : `Listed ${count(found, "memory", "memories")}`;
    case "forget":
      return `Forgot ${clip(result.memory_id ?? args.memory_id, 40)}`;
    case "open":
      return `Opened: ${clip(result.content ?? result.content_preview ?? result.title ?? args.memory_id)}`;
    default:
      return `Ran ${tool}`;
  }
}

/**
 * A collapsible card for a tool call: `<details>` whose summary names the
 * tool and its state. Returns an object to fill in the result later.
 */
export function toolCard(call, side = "server") {
  const details = document.createElement("details");
  details.className = `tool-card ${side}`;
  details.dataset.testid = "tool-card";
  details.dataset.toolName = call.name ?? "";
  details.dataset.callId = call.id ?? "";
  details.dataset.state = "running";
  const summary = document.createElement("summary");
  const icon = document.createElement("span");
  icon.className = "tool-icon";
  icon.textContent = side === "client" ? "⇄" : "⚙";
  const name = document.createElement("span");
  name.className = "tool-name";
  name.textContent = call.name ?? "tool";
  const state = document.createElement("span");
  state.className = "tool-state";
  state.dataset.testid = "tool-state";
  state.textContent = "running…";
  summary.append(icon, name);
  // A memory tool says what it did, beside its name.
  let line = null;
  if (isMemoryTool(call.name)) {
    details.classList.add("memory");
    line = document.createElement("span");
    line.className = "tool-summary";
    line.dataset.testid = "tool-summary";
    line.textContent = memorySummary(call);
    summary.append(line);
  }
  summary.append(state);
  details.append(summary, labelled("arguments", call.arguments ?? {}, "tool-args"));
  return {
    element: details,
    /** Shows the outcome: `{result}` or `{error}`. */
    finish(outcome) {
      details.querySelector("[data-testid=tool-result]")?.parentElement.remove();
      const failed = outcome.error !== undefined && outcome.error !== null;
      details.dataset.state = failed ? "error" : "ok";
      state.textContent = failed ? "failed" : "done";
      if (line) line.textContent = memorySummary(call, outcome);
      details.append(
        labelled(failed ? "error" : "result", failed ? outcome.error : outcome.result, "tool-result"),
      );
    },
  };
}

/**
 * The consent card of a client tool call: the consent message, the
 * arguments, and Approve / Reject. `onDecision(approved)` is called once;
 * `settle(outcome)` turns it into a plain tool card with the outcome.
 */
export function consentCard(call, onDecision) {
  const card = toolCard(call, "client");
  const details = card.element;
  details.open = true;
  details.classList.add("consent");
  details.dataset.state = "asking";
  details.querySelector(".tool-state").textContent = "waiting for you";
  const box = document.createElement("div");
  box.className = "consent-box";
  box.dataset.testid = "consent";
  const message = document.createElement("p");
  message.className = "consent-message";
  message.dataset.testid = "consent-message";
  message.textContent = call.consent_message || `The agent wants to run ${call.name} in your browser.`;
  const categories = document.createElement("p");
  categories.className = "consent-categories";
  if (Array.isArray(call.categories) && call.categories.length) {
    categories.textContent = `Categories: ${call.categories.join(", ")}`;
  }
  const buttons = document.createElement("div");
  buttons.className = "consent-buttons";
  const approve = document.createElement("button");
  approve.type = "button";
  approve.className = "approve";
  approve.dataset.testid = "approve";
  approve.textContent = "Approve";
  const reject = document.createElement("button");
  reject.type = "button";
  reject.className = "reject";
  reject.dataset.testid = "reject";
  reject.textContent = "Reject";
  buttons.append(approve, reject);
  box.append(message, categories, buttons);
  details.insertBefore(box, details.children[1]);
  let decided = false;
  const decide = (approved) => {
    if (decided) return;
    decided = true;
    approve.disabled = true;
    reject.disabled = true;
    details.dataset.state = approved ? "running" : "rejected";
    details.querySelector(".tool-state").textContent = approved ? "running…" : "rejected";
    onDecision(approved);
  };
  approve.addEventListener("click", () => decide(true));
  reject.addEventListener("click", () => decide(false));
  return {
    element: details,
    settle(outcome) {
      decided = true;
      approve.disabled = true;
      reject.disabled = true;
      box.classList.add("settled");
      card.finish(outcome);
      if (outcome.rejected) {
        details.dataset.state = "rejected";
        details.querySelector(".tool-state").textContent = "rejected";
      }
    },
  };
}
