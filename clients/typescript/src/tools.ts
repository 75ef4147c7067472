// Client tools: the agent asks with `tool_call`; the client acknowledges at
// once (within the agent's ack timeout), then answers with `tool_result`
// (a result or an error) or declines with `tool_call_nack`.
import { ToolRejection } from "./errors.js";
import type { ClientFrame, ToolCallPayload } from "./generated/omnia.js";

export type ToolCall = ToolCallPayload["tool_call"];

/** Runs a tool: its return value is the result; throw ToolRejection to decline. */
export type ToolHandler = (args: Record<string, unknown>, call: ToolCall, signal: AbortSignal) => unknown | Promise<unknown>;

/** How a call ended, as far as this client knows. */
export type ToolOutcome =
  | { kind: "result"; result: unknown }
  | { kind: "error"; error: string }
  | { kind: "rejected"; reason: string }
  /** The server ended it (its timeout, a cancelled turn) with this error. */
  | { kind: "ended"; error: string };

/**
 * One pending tool call, for an application that answers it itself (the
 * console asks the user). Every method sends at most once; after the call
 * is settled they do nothing.
 */
export class ToolCallHandle {
  readonly call: ToolCall;
  #send: (frame: ClientFrame) => void;
  #acked = false;
  #outcome: ToolOutcome | null = null;
  #abort = new AbortController();
  #listeners: Array<(outcome: ToolOutcome) => void> = [];

  constructor(call: ToolCall, send: (frame: ClientFrame) => void) {
    this.call = call;
    this.#send = send;
  }

  get settled(): boolean {
    return this.#outcome !== null;
  }

  get outcome(): ToolOutcome | null {
    return this.#outcome;
  }

  /** Aborted when the server ends the call first. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** Calls `listener` once the call is settled (at once if it is). */
  onSettled(listener: (outcome: ToolOutcome) => void): void {
    if (this.#outcome) listener(this.#outcome);
    else this.#listeners.push(listener);
  }

  ack(): void {
    if (this.#acked || this.#outcome) return;
    this.#acked = true;
    this.#send({ type: "tool_call_ack", tool_call_ack: { call_id: this.call.id } });
  }

  result(result: unknown): void {
    if (this.#settle({ kind: "result", result })) {
      this.#send({ type: "tool_result", tool_result: { call_id: this.call.id, result: result ?? null } });
    }
  }

  error(message: string): void {
    if (this.#settle({ kind: "error", error: message })) {
      this.#send({ type: "tool_result", tool_result: { call_id: this.call.id, error: message || "tool failed" } });
    }
  }

  reject(reason: string): void {
    if (this.#settle({ kind: "rejected", reason })) {
      this.#send({ type: "tool_call_nack", tool_call_nack: { call_id: this.call.id, reason: reason || "declined" } });
    }
  }

  /** @internal The server's `tool_result` for this call. */
  ended(error: string | undefined): void {
    if (this.#settle({ kind: "ended", error: error ?? "ended by the server" })) this.#abort.abort();
  }

  #settle(outcome: ToolOutcome): boolean {
    if (this.#outcome) return false;
    this.#outcome = outcome;
    for (const listener of this.#listeners.splice(0)) listener(outcome);
    return true;
  }
}

/**
 * Runs `handler` for `handle`: ack at once, then the result, an error
 * result, or a nack (ToolRejection). A handler slower than `timeoutMs` is
 * answered with an error result, before the server's own timeout denies it.
 */
export async function runTool(handle: ToolCallHandle, handler: ToolHandler, timeoutMs: number): Promise<void> {
  handle.ack();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the tool took longer than ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    const result = await Promise.race([
      Promise.resolve().then(() => handler(handle.call.arguments ?? {}, handle.call, handle.signal)),
      timeout,
    ]);
    handle.result(result);
  } catch (error) {
    if (error instanceof ToolRejection) handle.reject(error.message);
    else handle.error(error instanceof Error ? error.message : String(error));
  } finally {
    clearTimeout(timer);
  }
}
