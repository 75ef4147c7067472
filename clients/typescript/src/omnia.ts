// The Omnia dialect (`/ws?agent=…`): one connection, turns as async
// iterators, and agentwire's `stream=2` additions: every frame from the
// session's log carries `seq`, so after a dropped socket the client rejoins
// with `resume`/`after`/`epoch` and delivers each frame to the application
// exactly once.
import { backoffDelay, OMNIA_BACKOFF, type BackoffOptions } from "./backoff.js";
import { currentToken, refreshDelay, type TokenSource } from "./credentials.js";
import { Emitter } from "./emitter.js";
import { AgentwireError } from "./errors.js";
import type {
  ClientFrame,
  ConnectedPayload,
  ContentPart,
  DonePayload,
  ErrorPayload,
  GoingAwayPayload,
  MessagePayload,
  Metadata,
  ServerFrame,
  SessionConfigPayload,
} from "./generated/omnia.js";
import { MediaAssembler, type MediaItem } from "./media.js";
import { decodeOmniFrame, type OmniFrame } from "./omni.js";
import { ToolCallHandle, runTool, type ToolCall, type ToolHandler } from "./tools.js";
import { Socket, resolveWebSocket, socketUrl, type WebSocketConstructor } from "./transport.js";
import { LogPosition } from "./position.js";
import { Turn } from "./turn.js";
import { Uploads, type UploadedMedia, type UploadSource } from "./upload.js";
import { VoiceCall, type VoiceCallOptions } from "./voice.js";

export interface OmniaOptions {
  /** The server: `http://host:port` (or `ws://`, `https://`, `wss://`). */
  url: string;
  /** The agent's name (`agents[].name`). */
  agent: string;
  /** An API key or JWT; a function is asked again before a JWT expires and on every reconnection. */
  token?: TokenSource;
  /**
   * Where the credential goes: `header` (`Authorization: Bearer`, Node's
   * `ws`), or `query` (browsers: `/console/ws?access_token=`). Default:
   * `header` when a `WebSocket` constructor is given, else `query`.
   */
  credentialIn?: "header" | "query";
  /** A WebSocket constructor; default the global one (on Node 20 pass the `ws` package's). */
  WebSocket?: WebSocketConstructor;
  /** Ask for binary OMNI frames (media and call audio); default true. */
  binary?: boolean;
  memoryFacet?: string;
  /** A session to attach to on the first connection (`resume=`). */
  resume?: string;
  /** How to wait between rejoin attempts; `false`: never rejoin. */
  reconnect?: BackoffOptions | false;
  /** Registered client tools, by name. */
  tools?: Record<string, ToolHandler>;
  /** The longest a registered tool may run before it is answered with an error; default 30 s. */
  toolTimeoutMs?: number;
  /** After SESSION_EXPIRED, send the message again on the connection's own session (the contract's advice); default true. */
  resendOnSessionExpired?: boolean;
  /** The fetch used for uploads; default the global one. */
  fetch?: typeof fetch;
}

/** What a turn delivers, in order. */
export type OmniaTurnEvent =
  | { type: "started"; turn_id: number; agent: string }
  | { type: "text"; delta: string }
  | { type: "tool_call"; call: ToolCall; handle: ToolCallHandle }
  | { type: "tool_result"; id: string; result?: unknown; error?: string }
  | { type: "media"; media: MediaItem }
  | { type: "interrupt" }
  | { type: "session_config"; config: SessionConfigPayload["session_config"] }
  /** The socket dropped and the turn's stream was rejoined; `replayed: false`: part of it was missed, reload the history. */
  | { type: "rejoined"; replayed: boolean };

export interface OmniaTurnResult {
  /** The reply's text (as far as it was streamed, when cancelled). */
  content: string;
  parts?: ContentPart[];
  cancelled: boolean;
  session_id: string;
  /** Set when the message named a session that had expired and was sent again on the connection's own. */
  expired_session?: string;
}

export type OmniaTurn = Turn<OmniaTurnEvent, OmniaTurnResult>;

export interface MessageInput {
  content?: string;
  parts?: ContentPart[];
  metadata?: Metadata;
  /** Resume this session by id (omitted: the connection's session). */
  session_id?: string;
  declare?: unknown;
}

export type ConnectionState = "connecting" | "open" | "rejoining" | "closed";

export interface OmniaEvents {
  status: { state: ConnectionState; attempt: number };
  connected: { frame: ConnectedPayload; rejoin: boolean };
  /** Every JSON frame, once (replayed duplicates are dropped before this). */
  frame: ServerFrame;
  /** Every binary OMNI frame. */
  binary: OmniFrame;
  /** A turn this client did not start (replayed after a rejoin, or started by another connection on the session). */
  turn: OmniaTurn;
  /** A tool call no registered handler takes: the application answers it through the handle. */
  tool_call: ToolCallHandle;
  media: MediaItem;
  rejoin: { replayed: boolean; session_id: string };
  /** A rejoin whose log no longer reached back (`replayed: false`): reload the history of `session_id`. */
  history_gap: { session_id: string };
  /** A rejoin found the session gone; the connection is on the fresh session `current`. */
  session_lost: { previous: string; current: string };
  session_expired: { session_id: string };
  going_away: GoingAwayPayload["going_away"];
  /** A server error about no turn of this client (a late tool answer, a rate limit). */
  error: AgentwireError;
  closed: { code: number; reason: string; willRetry: boolean };
  credential_expired: Record<string, never>;
}

/** Errors (without `seq`) that end a voice call: the code, and what its message must say where the code has other uses. */
const CALL_ERRORS = new Map<string, RegExp | null>([
  ["DUPLEX_ERROR", null],
  ["UNSATISFIABLE_FORMAT", null],
  ["MEDIA_NOT_ENABLED", /audio/],
  ["RATE_LIMITED", /audio session/],
]);

export class OmniaClient extends Emitter<OmniaEvents> {
  readonly options: OmniaOptions;
  /** The connection's session. */
  sessionId: string | null = null;
  /** The log position of the last frame delivered. */
  /** Where the client stands in the session's log. */
  readonly position = new LogPosition();
  capabilities: ConnectedPayload["connected"]["capabilities"] | null = null;
  state: ConnectionState = "closed";

  #Ctor: WebSocketConstructor;
  #backoff: Required<BackoffOptions> | null;
  #socket: Socket | null = null;
  #connected = false;
  #everConnected = false;
  #closedByUser = false;
  #attempt = 0;
  #retryTimer: ReturnType<typeof setTimeout> | null = null;
  #retryHint: number | null = null;
  #rejoining = false;
  #hadPosition = false;
  #outbox: Array<string | Uint8Array> = [];
  #pending: { turn: OmniaTurn; frame: MessagePayload; expired?: string } | null = null;
  #current: { turn: OmniaTurn; expired?: string } | null = null;
  #tools = new Map<string, ToolHandler>();
  #calls = new Map<string, ToolCallHandle>();
  #media = new MediaAssembler();
  #uploads: Uploads;
  #voice: VoiceCall | null = null;
  #firstConnect: { resolve: (f: ConnectedPayload) => void; reject: (e: AgentwireError) => void } | null = null;
  #token: string | null = null;
  #refreshTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(options: OmniaOptions) {
    super();
    this.options = options;
    this.#Ctor = resolveWebSocket(options.WebSocket);
    this.#backoff = options.reconnect === false ? null : { ...OMNIA_BACKOFF, ...options.reconnect };
    for (const [name, handler] of Object.entries(options.tools ?? {})) this.#tools.set(name, handler);
    this.#uploads = new Uploads({
      send: (frame) => this.#sendFrame(frame),
      fetch: options.fetch,
      token: () => this.#token,
      httpBase: () => options.url.replace(/^ws(s?):/, "http$1:"),
    });
  }

  /** Registers (or replaces) the handler of client tool `name`. */
  registerTool(name: string, handler: ToolHandler): void {
    this.#tools.set(name, handler);
  }

  unregisterTool(name: string): void {
    this.#tools.delete(name);
  }

  /** Opens the connection; resolves with `connected`. */
  connect(): Promise<ConnectedPayload> {
    this.#closedByUser = false;
    return new Promise((resolve, reject) => {
      this.#firstConnect = { resolve, reject };
      void this.#open(false);
    });
  }

  /** Closes the connection on the application's behalf: no rejoin follows. */
  close(code = 1000, reason = "closed by the client"): void {
    this.#closedByUser = true;
    this.#clearTimers();
    this.#voice?.detach();
    this.#socket?.close(code, reason);
    this.#socket = null;
    this.#connected = false;
    const error = new AgentwireError("CLOSED", "the client was closed");
    this.#failTurns(error);
    this.#uploads.failAll(error);
    this.#setState("closed");
  }

  /** Starts a turn. */
  send(input: string | MessageInput): OmniaTurn {
    const turn: OmniaTurn = new Turn();
    const message = typeof input === "string" ? { content: input } : input;
    if (this.state === "closed") {
      turn.fail(new AgentwireError("CLOSED", "not connected: call connect() first"));
      return turn;
    }
    if (this.#pending) {
      turn.fail(new AgentwireError("TURN_IN_PROGRESS", "a message of this client is still waiting for its turn to start"));
      return turn;
    }
    const frame: MessagePayload = { type: "message" };
    if (message.content !== undefined) frame.content = message.content;
    if (message.parts) frame.parts = message.parts;
    if (message.session_id) frame.session_id = message.session_id;
    if (message.metadata) frame.metadata = message.metadata;
    if (message.declare !== undefined) frame.declare = message.declare;
    this.#pending = { turn, frame };
    this.#sendFrame(frame);
    return turn;
  }

  /** Stops the running turn (`stream=2`): it ends with `cancelled: true`. */
  cancel(): void {
    this.#sendFrame({ type: "cancel" });
  }

  /** Uploads `data` through `upload_request`; the result names it in a message part. */
  upload(data: UploadSource, file: { filename: string; mime_type: string }, onProgress?: (fraction: number) => void): Promise<UploadedMedia> {
    return this.#uploads.upload(data, file, onProgress);
  }

  /** Sends a fresher credential (`credential_refresh`); it also serves later reconnections. */
  refreshCredential(token: string): void {
    this.#token = token;
    this.#sendFrame({ type: "credential_refresh", token });
    this.#scheduleRefresh(token);
  }

  /** Records that the AI disclosure was shown (`disclosure_ack`). */
  acknowledgeDisclosure(): void {
    this.#sendFrame({ type: "disclosure_ack" });
  }

  /** Opens a voice call on this connection (the agent needs `voice`). */
  startCall(options: VoiceCallOptions = {}): VoiceCall {
    this.#voice?.detach();
    const call = new VoiceCall(options, {
      sendBytes: (bytes) => this.#sendRaw(bytes),
      sendFrame: (frame) => this.#sendFrame(frame),
      sessionId: () => this.sessionId,
      ended: () => {
        if (this.#voice === call) this.#voice = null;
      },
    });
    this.#voice = call;
    return call;
  }

  get call(): VoiceCall | null {
    return this.#voice;
  }

  // ------------------------------------------------------------ the socket

  async #open(rejoin: boolean): Promise<void> {
    const o = this.options;
    this.#setState(rejoin ? "rejoining" : "connecting");
    try {
      this.#token = (await currentToken(o.token)) ?? this.#token;
    } catch {
      // The token source failed: go on with the last token.
    }
    if (this.#closedByUser) return;
    const params = new URLSearchParams({ agent: o.agent, stream: "2" });
    if (o.binary !== false) params.set("binary", "true");
    if (o.memoryFacet) params.set("memory_facet", o.memoryFacet);
    const resume = rejoin ? this.sessionId : (o.resume ?? null);
    if (resume) {
      params.set("resume", resume);
      if (rejoin && this.position.epoch) {
        params.set("after", String(this.position.lastSeq));
        params.set("epoch", this.position.epoch);
      }
    }
    const viaQuery = (o.credentialIn ?? (o.WebSocket ? "header" : "query")) === "query";
    let headers: Record<string, string> | null = null;
    let path = "/ws";
    if (this.#token && viaQuery) {
      params.set("access_token", this.#token);
      path = "/console/ws";
    } else if (this.#token) {
      headers = { Authorization: `Bearer ${this.#token}` };
    }
    this.#rejoining = rejoin;
    this.#hadPosition = this.position.epoch !== null;
    this.#connected = false;
    this.#socket = new Socket(this.#Ctor, socketUrl(o.url, path, params), headers, {
      onOpen: () => {},
      onText: (text) => this.#onText(text),
      onBytes: (bytes) => this.#onBytes(bytes),
      onClose: (code, reason, opened) => this.#onClose(code, reason, opened),
    });
  }

  #onClose(code: number, reason: string, opened: boolean): void {
    this.#socket = null;
    this.#connected = false;
    if (this.#closedByUser) return;
    this.#voice?.suspend();
    if (code === 4401) {
      const error = new AgentwireError("CREDENTIAL_EXPIRED", "the credential expired");
      this.emit("credential_expired", {});
      this.#giveUp(code, reason, error);
      return;
    }
    const canRejoin = this.#backoff && this.#everConnected && this.sessionId !== null;
    const delay = canRejoin ? (this.#retryHint ?? backoffDelay(this.#backoff!, this.#attempt)) : null;
    this.#retryHint = null;
    if (delay === null) {
      const error = this.#everConnected
        ? new AgentwireError("CONNECTION_LOST", `the connection closed (${code}${reason ? ` ${reason}` : ""})`)
        : new AgentwireError("CONNECT_FAILED", opened ? `the server closed the connection (${code})` : "the server refused the upgrade or cannot be reached");
      this.#giveUp(code, reason, error);
      return;
    }
    this.#attempt += 1;
    this.emit("closed", { code, reason, willRetry: true });
    this.#setState("rejoining");
    this.#retryTimer = setTimeout(() => void this.#open(true), delay);
  }

  #giveUp(code: number, reason: string, error: AgentwireError): void {
    this.#clearTimers();
    this.#failTurns(error);
    this.#uploads.failAll(error);
    this.#voice?.fail(error.code, error.message);
    this.#firstConnect?.reject(error);
    this.#firstConnect = null;
    this.emit("closed", { code, reason, willRetry: false });
    this.#setState("closed");
  }

  #onText(text: string): void {
    let frame: ServerFrame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (frame.type === "turn_started" && frame.turn_started.epoch !== this.position.epoch) {
      this.position.reset(frame.turn_started.epoch);
    }
    if ("seq" in frame && typeof frame.seq === "number") {
      if (!this.position.accept(frame.seq, frame.type)) return; // delivered already
    } else if (this.#callFrame(frame)) {
      this.emit("frame", frame);
      return;
    }
    this.emit("frame", frame);
    switch (frame.type) {
      case "connected":
        return this.#onConnected(frame);
      case "turn_started":
        this.#active().turn.push({ type: "started", turn_id: frame.turn_started.turn_id, agent: frame.turn_started.agent });
        return;
      case "chunk":
        if (frame.content) this.#active().turn.push({ type: "text", delta: frame.content });
        return;
      case "tool_call":
        return this.#onToolCall(frame.tool_call);
      case "tool_result": {
        const { id, result, error } = frame.tool_result;
        this.#calls.get(id)?.ended(error);
        this.#calls.delete(id);
        this.#active().turn.push({ type: "tool_result", id, result, error });
        return;
      }
      case "media_chunk": {
        const item = this.#media.pushChunk(frame.media_chunk);
        if (item) this.#deliverMedia(item);
        return;
      }
      case "interrupt":
        this.#active().turn.push({ type: "interrupt" });
        return;
      case "session_config":
        this.#active().turn.push({ type: "session_config", config: frame.session_config });
        return;
      case "done":
        return this.#onDone(frame);
      case "error":
        return this.#onError(frame);
      case "upload_ready":
        this.#uploads.ready(frame.upload_ready);
        return;
      case "going_away":
        this.#retryHint = frame.going_away.retry_after_ms;
        this.emit("going_away", frame.going_away);
        return;
    }
  }

  #onBytes(bytes: Uint8Array): void {
    const frame = decodeOmniFrame(bytes);
    if (!frame) return;
    this.emit("binary", frame);
    const mime = String(frame.metadata.mime_type ?? "");
    if (frame.mediaId === "" && mime.startsWith("audio/pcm")) {
      this.#voice?.onAudio(frame.payload);
      return;
    }
    const item = this.#media.pushFrame(frame);
    if (item) this.#deliverMedia(item);
  }

  #deliverMedia(item: MediaItem): void {
    this.emit("media", item);
    this.#active().turn.push({ type: "media", media: item });
  }

  #onConnected(frame: ConnectedPayload): void {
    const connected = frame.connected;
    this.capabilities = connected.capabilities;
    const log = connected.capabilities.event_log;
    const rejoin = this.#rejoining;
    this.#connected = true;
    this.#everConnected = true;
    this.#attempt = 0;
    if (rejoin) {
      const previous = this.sessionId!;
      if (connected.resumed) {
        // Without a position (nothing delivered from the log yet) there is nothing to have missed.
        const replayed = log?.replayed !== false || !this.#hadPosition;
        if (log?.epoch && log.epoch !== this.position.epoch) this.position.reset(log.epoch);
        this.emit("rejoin", { replayed, session_id: previous });
        this.#current?.turn.push({ type: "rejoined", replayed });
        if (!replayed) this.emit("history_gap", { session_id: previous });
      } else {
        // The session is gone (expired, or a restart lost it): a fresh one.
        this.sessionId = frame.session_id;
        this.position.reset(null);
        this.#media.clear();
        this.#failTurns(new AgentwireError("SESSION_LOST", "the session could not be rejoined; its reply is lost"));
        this.emit("session_lost", { previous, current: frame.session_id });
      }
    } else {
      this.sessionId = frame.session_id;
      if (!this.options.resume || !connected.resumed) {
        this.position.reset(null);
      } else if (log?.epoch) {
        this.position.reset(log.epoch);
      }
    }
    this.#setState("open");
    this.emit("connected", { frame, rejoin });
    this.#firstConnect?.resolve(frame);
    this.#firstConnect = null;
    for (const data of this.#outbox.splice(0)) this.#socket?.send(data);
    this.#voice?.resume();
    if (this.#token) this.#scheduleRefresh(this.#token);
  }

  // ------------------------------------------------------------- turns

  /** The running turn: the one this client's message started, else one it did not start. */
  #active(): { turn: OmniaTurn; expired?: string } {
    if (this.#current) return this.#current;
    if (this.#pending) {
      this.#current = { turn: this.#pending.turn, expired: this.#pending.expired };
      this.#pending = null;
      return this.#current;
    }
    const turn: OmniaTurn = new Turn();
    this.#current = { turn };
    this.emit("turn", turn);
    return this.#current;
  }

  #onDone(frame: DonePayload): void {
    const active = this.#active();
    this.#current = null;
    this.#media.clear();
    this.#settleCalls("the turn ended");
    const result: OmniaTurnResult = {
      content: frame.content ?? "",
      cancelled: frame.cancelled === true,
      session_id: frame.session_id,
    };
    if (frame.parts) result.parts = frame.parts;
    if (active.expired) result.expired_session = active.expired;
    active.turn.finish(result);
  }

  #onError(frame: ErrorPayload): void {
    const { code, message, details } = frame.error;
    const error = new AgentwireError(code, message, details);
    if (this.#uploads.takesError(code, message)) {
      this.#uploads.fail(error);
      return;
    }
    const fromLog = typeof frame.seq === "number";
    if (fromLog) {
      const active = this.#active();
      this.#current = null;
      this.#settleCalls("the turn failed");
      active.turn.fail(error);
      return;
    }
    const pending = this.#pending;
    if (pending && code === "SESSION_EXPIRED" && pending.frame.session_id && this.options.resendOnSessionExpired !== false) {
      // The contract's advice: send it again without session_id, on the connection's own session.
      const expired = pending.frame.session_id;
      this.emit("session_expired", { session_id: expired });
      delete pending.frame.session_id;
      pending.expired = expired;
      this.#sendFrame(pending.frame);
      return;
    }
    const aboutMessage = code !== "INVALID_MESSAGE" || !/tool call|binary/.test(message);
    if (pending && aboutMessage && !/media rate/.test(message)) {
      // The refusal of the message that would have started a turn.
      this.#pending = null;
      pending.turn.fail(error);
      return;
    }
    this.emit("error", error);
  }

  #failTurns(error: AgentwireError): void {
    const pending = this.#pending;
    const current = this.#current;
    this.#pending = null;
    this.#current = null;
    this.#settleCalls(error.message);
    pending?.turn.fail(error);
    current?.turn.fail(error);
  }

  // ------------------------------------------------------------- tools

  #onToolCall(call: ToolCall): void {
    const active = this.#active();
    const handle = this.#calls.get(call.id) ?? new ToolCallHandle(call, (frame) => this.#sendFrame(frame));
    this.#calls.set(call.id, handle);
    handle.onSettled(() => {
      if (this.#calls.get(call.id) === handle && handle.outcome?.kind !== "ended") this.#calls.delete(call.id);
    });
    active.turn.push({ type: "tool_call", call, handle });
    const handler = this.#tools.get(call.name);
    if (handler) {
      void runTool(handle, handler, this.options.toolTimeoutMs ?? 30_000);
    } else {
      this.emit("tool_call", handle);
    }
  }

  #settleCalls(reason: string): void {
    for (const handle of this.#calls.values()) handle.ended(reason);
    this.#calls.clear();
  }

  // ------------------------------------------------------------- voice

  /** A frame without `seq` that belongs to the voice call; true when taken. */
  #callFrame(frame: ServerFrame): boolean {
    if (frame.type === "session_config" && !this.#voice) {
      // A call parked on the session and handed to this connection, which has none: end it.
      this.#sendFrame({ type: "hangup" });
      return true;
    }
    const call = this.#voice;
    if (!call) {
      // With stream=2 a turn's frames carry seq: these are the frames of a call that ended here.
      const callOnly = frame.type === "chunk" || frame.type === "done" || frame.type === "interrupt";
      const callAudio = frame.type === "media_chunk" && frame.media_chunk.media_id === "";
      return this.capabilities?.cancel === true && (callOnly || callAudio);
    }
    switch (frame.type) {
      case "session_config":
        call.onConfig(frame.session_config);
        return true;
      case "chunk":
        call.onTranscript(frame.role === "user" ? "user" : "assistant", frame.content ?? "");
        return true;
      case "interrupt":
        call.onInterrupt();
        return true;
      case "done":
        call.onResponseDone();
        return true;
      case "media_chunk":
        if (frame.media_chunk.media_id !== "") return false;
        call.onAudioBase64(frame.media_chunk.data);
        return true;
      case "error": {
        const pattern = CALL_ERRORS.get(frame.error.code);
        if (pattern === undefined || (pattern && !pattern.test(frame.error.message))) return false;
        call.fail(frame.error.code, frame.error.message);
        return true;
      }
      default:
        return false;
    }
  }

  // ------------------------------------------------------------- sending

  #sendFrame(frame: ClientFrame): void {
    this.#sendRaw(JSON.stringify(frame));
  }

  /** Sends at once when connected, else after the next `connected`. */
  #sendRaw(data: string | Uint8Array): boolean {
    if (this.#connected && this.#socket?.send(data)) return true;
    if (typeof data === "string") this.#outbox.push(data);
    return false;
  }

  #scheduleRefresh(token: string): void {
    if (this.#refreshTimer) clearTimeout(this.#refreshTimer);
    this.#refreshTimer = null;
    if (typeof this.options.token !== "function") return;
    const delay = refreshDelay(token);
    if (delay === null) return;
    this.#refreshTimer = setTimeout(async () => {
      this.#refreshTimer = null;
      let fresh: string | null = null;
      try {
        fresh = await currentToken(this.options.token);
      } catch {
        return; // the source failed; the server will close with 4401
      }
      if (fresh && fresh !== this.#token) this.refreshCredential(fresh);
    }, delay);
  }

  #clearTimers(): void {
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    if (this.#refreshTimer) clearTimeout(this.#refreshTimer);
    this.#retryTimer = null;
    this.#refreshTimer = null;
  }

  #setState(state: ConnectionState): void {
    this.state = state;
    this.emit("status", { state, attempt: this.#attempt });
  }
}
