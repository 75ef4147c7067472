// The Gnosari dialect (`/ws/agent/{id}`, `/ws/team/{id}`,
// `/ws/team/{team}/agent/{member}`): `{message, session_id}` in, flat
// events out. Messages are answered in order, one turn at a time; each
// carries a `client_message_id` so an error or a rejection finds its turn.
// With `stream=2` events carry `seq`, and after a dropped socket the client
// rejoins with `session_id`/`after`/`epoch`, waiting as the contract's
// reconnection strategy says (exponential, at most 30 s, five attempts).
import { backoffDelay, GNOSARI_BACKOFF, type BackoffOptions } from "./backoff.js";
import { currentToken, type TokenSource } from "./credentials.js";
import { Emitter } from "./emitter.js";
import { AgentwireError } from "./errors.js";
import type { MessagePayload, ServerFrame, StreamInfoPayload } from "./generated/gnosari.js";
import { Socket, resolveWebSocket, socketUrl, type WebSocketConstructor } from "./transport.js";
import { LogPosition } from "./position.js";
import { Turn } from "./turn.js";

export interface GnosariOptions {
  url: string;
  /** One of: an agent, a team, or a team's member. */
  agent?: string;
  team?: string;
  member?: string;
  token?: TokenSource;
  /** `header` (Authorization: Bearer), or `query` (`?token=`, the contract's own client). Default as OmniaOptions. */
  credentialIn?: "header" | "query";
  WebSocket?: WebSocketConstructor;
  /** Opt into `stream=2` (positions, rejoin, cancel); default true. */
  stream?: boolean;
  reconnect?: BackoffOptions | false;
}

export type GnosariTurnEvent =
  | { type: "agent_started"; agent_name: string; session_id: string }
  | { type: "token"; content: string; agent_name: string }
  | { type: "tool_call"; tool_name: string; args: Record<string, unknown>; agent_name: string }
  | { type: "tool_result"; tool_name: string; result: unknown; agent_name: string }
  | { type: "rejoined"; replayed: boolean };

export interface GnosariTurnResult {
  full_response: string;
  agent_name: string;
  session_id: string | null;
  cancelled: boolean;
}

export type GnosariTurn = Turn<GnosariTurnEvent, GnosariTurnResult>;

export interface GnosariSendOptions {
  session_id?: string;
  metadata?: Record<string, unknown>;
  attachments?: string[];
}

export interface GnosariEvents {
  status: { state: "connecting" | "open" | "rejoining" | "closed"; attempt: number };
  frame: ServerFrame;
  stream_info: StreamInfoPayload;
  rejoin: { replayed: boolean; session_id: string };
  history_gap: { session_id: string };
  session_summary_scheduled: { session_id: string; scheduled_at: string };
  going_away: { time_left_ms: number; retry_after_ms: number };
  error: AgentwireError;
  closed: { code: number; reason: string; willRetry: boolean };
}

interface Waiting {
  turn: GnosariTurn;
  id: string;
}

let counter = 0;
const nextId = () => `c-${Date.now().toString(36)}-${(counter += 1)}`;

export class GnosariClient extends Emitter<GnosariEvents> {
  readonly options: GnosariOptions;
  sessionId: string | null = null;
  /** Where the client stands in the session's log. */
  readonly position = new LogPosition();
  state: "connecting" | "open" | "rejoining" | "closed" = "closed";

  #Ctor: WebSocketConstructor;
  #backoff: Required<BackoffOptions> | null;
  #socket: Socket | null = null;
  #open = false;
  #everOpen = false;
  #closedByUser = false;
  #attempt = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #retryHint: number | null = null;
  #rejoining = false;
  #outbox: string[] = [];
  #waiting: Waiting[] = [];
  #current: { turn: GnosariTurn; id: string | null; agent: string } | null = null;
  #first: { resolve(): void; reject(e: AgentwireError): void } | null = null;

  constructor(options: GnosariOptions) {
    super();
    this.options = options;
    this.#Ctor = resolveWebSocket(options.WebSocket);
    this.#backoff = options.reconnect === false ? null : { ...GNOSARI_BACKOFF, ...options.reconnect };
  }

  #path(): string {
    const o = this.options;
    const part = encodeURIComponent;
    if (o.team && o.member) return `/ws/team/${part(o.team)}/agent/${part(o.member)}`;
    if (o.team) return `/ws/team/${part(o.team)}`;
    if (o.agent) return `/ws/agent/${part(o.agent)}`;
    throw new Error("GnosariClient needs `agent`, `team`, or `team` and `member`");
  }

  /** Opens the socket; resolves when it is open (Gnosari sends nothing first). */
  connect(): Promise<void> {
    this.#closedByUser = false;
    return new Promise((resolve, reject) => {
      this.#first = { resolve, reject };
      void this.#connect(false);
    });
  }

  close(): void {
    this.#closedByUser = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#socket?.close(1000, "closed by the client");
    this.#socket = null;
    this.#open = false;
    this.#failAll(new AgentwireError("CLOSED", "the client was closed"));
    this.#setState("closed");
  }

  /** Sends a message; its turn runs after those sent before it. */
  send(message: string, options: GnosariSendOptions = {}): GnosariTurn {
    const turn: GnosariTurn = new Turn();
    const id = nextId();
    const frame: MessagePayload = { message, client_message_id: id };
    const session = options.session_id ?? this.sessionId;
    if (session) frame.session_id = session;
    if (options.metadata) frame.metadata = options.metadata;
    if (options.attachments) frame.attachments = options.attachments;
    this.#waiting.push({ turn, id });
    this.#send(JSON.stringify(frame));
    return turn;
  }

  /** Stops the session's running turn (`stream=2`). */
  cancel(): void {
    if (this.sessionId) this.#send(JSON.stringify({ type: "cancel", session_id: this.sessionId }));
  }

  async #connect(rejoin: boolean): Promise<void> {
    const o = this.options;
    this.#setState(rejoin ? "rejoining" : "connecting");
    let token: string | null = null;
    try {
      token = await currentToken(o.token);
    } catch {
      token = null;
    }
    if (this.#closedByUser) return;
    const params = new URLSearchParams();
    if (o.stream !== false) params.set("stream", "2");
    const rejoining = rejoin && this.sessionId !== null && this.position.epoch !== null && o.stream !== false;
    if (rejoining) {
      params.set("session_id", this.sessionId!);
      // One seq before the last: an entry's frames share its seq, and the
      // ones of the last entry not yet delivered come again (the rest are dropped).
      params.set("after", String(Math.max(0, this.position.lastSeq - 1)));
      params.set("epoch", this.position.epoch!);
    }
    const viaQuery = (o.credentialIn ?? (o.WebSocket ? "header" : "query")) === "query";
    let headers: Record<string, string> | null = null;
    if (token && viaQuery) params.set("token", token);
    else if (token) headers = { Authorization: `Bearer ${token}` };
    this.#rejoining = rejoining;
    this.#socket = new Socket(this.#Ctor, socketUrl(o.url, this.#path(), params), headers, {
      onOpen: () => this.#onOpen(),
      onText: (text) => this.#onText(text),
      onBytes: () => {},
      onClose: (code, reason) => this.#onClose(code, reason),
    });
  }

  #onOpen(): void {
    this.#open = true;
    this.#everOpen = true;
    this.#attempt = 0;
    this.#setState("open");
    this.#first?.resolve();
    this.#first = null;
    if (!this.#rejoining) this.#flush();
  }

  #flush(): void {
    for (const data of this.#outbox.splice(0)) this.#socket?.send(data);
  }

  #onClose(code: number, reason: string): void {
    this.#socket = null;
    this.#open = false;
    if (this.#closedByUser) return;
    const canRejoin = this.#backoff && this.#everOpen && this.options.stream !== false;
    const delay = canRejoin ? (this.#retryHint ?? backoffDelay(this.#backoff!, this.#attempt)) : null;
    this.#retryHint = null;
    if (delay === null) {
      const error = this.#everOpen
        ? new AgentwireError("CONNECTION_LOST", `the connection closed (${code}${reason ? ` ${reason}` : ""})`)
        : new AgentwireError("CONNECT_FAILED", "the server refused the upgrade or cannot be reached");
      this.#first?.reject(error);
      this.#first = null;
      this.#failAll(error);
      this.emit("closed", { code, reason, willRetry: false });
      this.#setState("closed");
      return;
    }
    this.#attempt += 1;
    this.emit("closed", { code, reason, willRetry: true });
    this.#setState("rejoining");
    this.#timer = setTimeout(() => void this.#connect(true), delay);
  }

  #onText(text: string): void {
    let frame: ServerFrame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (frame.type === "stream_info" && frame.epoch !== this.position.epoch) {
      this.position.reset(frame.epoch);
    }
    if ("seq" in frame && typeof frame.seq === "number") {
      if (!this.position.accept(frame.seq, frame.type)) return; // delivered already
    }
    this.emit("frame", frame);
    switch (frame.type) {
      case "stream_info":
        return this.#onStreamInfo(frame);
      case "agent_started": {
        this.sessionId = frame.session_id;
        // A handoff's agent_started continues the running turn.
        const next = this.#current ?? this.#waiting.shift() ?? { turn: new Turn(), id: null };
        this.#current = { turn: next.turn, id: next.id, agent: frame.agent_name };
        next.turn.push({ type: "agent_started", agent_name: frame.agent_name, session_id: frame.session_id });
        return;
      }
      case "token":
        this.#current?.turn.push({ type: "token", content: frame.content, agent_name: frame.agent_name });
        return;
      case "tool_call":
        this.#current?.turn.push({ type: "tool_call", tool_name: frame.tool_name, args: frame.args, agent_name: frame.agent_name });
        return;
      case "tool_result":
        this.#current?.turn.push({ type: "tool_result", tool_name: frame.tool_name, result: frame.result, agent_name: frame.agent_name });
        return;
      case "agent_completed": {
        const current = this.#current;
        this.#current = null;
        current?.turn.finish({
          full_response: frame.full_response,
          agent_name: frame.agent_name,
          session_id: this.sessionId,
          cancelled: frame.cancelled === true,
        });
        return;
      }
      case "session_summary_scheduled":
        this.emit("session_summary_scheduled", { session_id: frame.session_id, scheduled_at: frame.scheduled_at });
        return;
      case "message_rejected": {
        const turn = this.#take(frame.data.client_message_id ?? null);
        turn?.fail(new AgentwireError("REJECTED", frame.data.reason));
        return;
      }
      case "error":
        return this.#onError(frame.error, frame.client_message_id ?? null, typeof frame.seq === "number");
      case "going_away":
        this.#retryHint = frame.retry_after_ms;
        this.emit("going_away", { time_left_ms: frame.time_left_ms, retry_after_ms: frame.retry_after_ms });
        return;
    }
  }

  #onStreamInfo(frame: StreamInfoPayload): void {
    this.emit("stream_info", frame);
    if (frame.replayed === undefined) return;
    // The first event of a rejoin.
    this.#rejoining = false;
    this.emit("rejoin", { replayed: frame.replayed, session_id: frame.session_id });
    this.#current?.turn.push({ type: "rejoined", replayed: frame.replayed });
    if (!frame.replayed) this.emit("history_gap", { session_id: frame.session_id });
    this.#flush();
  }

  #onError(message: string, clientMessageId: string | null, fromLog: boolean): void {
    const error = new AgentwireError("ERROR", message);
    if (this.#rejoining && message === "session not found") {
      // A refused rejoin: the session is gone; the socket stays open.
      this.#rejoining = false;
      const lost = new AgentwireError("SESSION_LOST", "the session could not be rejoined; its reply is lost");
      const current = this.#current;
      this.#current = null;
      current?.turn.fail(lost);
      this.sessionId = null;
      this.position.reset(null);
      this.#flush();
      return;
    }
    const byId = clientMessageId ? this.#take(clientMessageId) : null;
    if (byId) {
      byId.fail(error);
      return;
    }
    if (this.#current && (fromLog || !clientMessageId || this.#current.id === clientMessageId)) {
      const current = this.#current;
      this.#current = null;
      current.turn.fail(error);
      return;
    }
    this.emit("error", error);
  }

  #take(clientMessageId: string | null): GnosariTurn | null {
    const at = this.#waiting.findIndex((w) => w.id === clientMessageId);
    if (at < 0) return null;
    return this.#waiting.splice(at, 1)[0].turn;
  }

  #send(data: string): void {
    if (this.#open && !this.#rejoining && this.#socket?.send(data)) return;
    this.#outbox.push(data);
  }

  #failAll(error: AgentwireError): void {
    const current = this.#current;
    this.#current = null;
    current?.turn.fail(error);
    for (const w of this.#waiting.splice(0)) w.turn.fail(error);
  }

  #setState(state: GnosariClient["state"]): void {
    this.state = state;
    this.emit("status", { state, attempt: this.#attempt });
  }
}
