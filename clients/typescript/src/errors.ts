/**
 * An error the server sent (`code` is the dialect's error code, such as
 * `TURN_IN_PROGRESS`), or one of the client's own:
 *
 * - `CONNECTION_LOST`: the socket closed and could not be rejoined;
 * - `SESSION_LOST`: a rejoin found the session gone (a fresh one was opened);
 * - `CREDENTIAL_EXPIRED`: the server closed with 4401;
 * - `CLOSED`: the application closed the client;
 * - `TIMEOUT`: the server did not answer in time;
 * - `REJECTED`: Gnosari's prompt-injection screening refused the message.
 *
 * Messages never carry a credential.
 */
export class AgentwireError extends Error {
  readonly code: string;
  /** The message without the code (the server's `error.message`). */
  readonly reason: string;
  readonly details: unknown;

  constructor(code: string, message: string, details?: unknown) {
    super(message ? `${code}: ${message}` : code);
    this.name = "AgentwireError";
    this.code = code;
    this.reason = message;
    this.details = details;
  }
}

/** Thrown by a tool handler to decline the call (sent as `tool_call_nack`). */
export class ToolRejection extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = "ToolRejection";
  }
}
