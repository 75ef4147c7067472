// The socket under a client: any WHATWG-style WebSocket constructor (the
// browser's, Node 22's global, or the `ws` package's), normalised to text
// and byte frames.

/** What the client needs of a WebSocket: the browser's API, which `ws` also has. */
export interface WebSocketLike {
  readonly readyState: number;
  binaryType: string;
  send(data: string | ArrayBufferLike | ArrayBufferView): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (event: any) => void): void;
}

/**
 * A WebSocket constructor. The third argument is passed only when the
 * client has headers to set (the `ws` package takes `{headers}` there;
 * browsers cannot set headers, so use a query credential there).
 */
export type WebSocketConstructor = new (url: string, protocols?: string | string[], options?: any) => WebSocketLike;

export interface SocketHandlers {
  onOpen(): void;
  onText(text: string): void;
  onBytes(bytes: Uint8Array): void;
  onClose(code: number, reason: string, opened: boolean): void;
}

const OPEN = 1;

/** Stands in for a socket that could not be created. */
const CLOSED_SOCKET: WebSocketLike = {
  readyState: 3,
  binaryType: "arraybuffer",
  send() {},
  close() {},
  addEventListener() {},
};

/** One socket's life: open, frames, close. Ignores events after `close()`. */
export class Socket {
  #ws: WebSocketLike;
  #opened = false;
  #done = false;

  constructor(Ctor: WebSocketConstructor, url: string, headers: Record<string, string> | null, handlers: SocketHandlers) {
    try {
      this.#ws = headers && Object.keys(headers).length ? new Ctor(url, undefined, { headers }) : new Ctor(url);
    } catch {
      // The constructor's error names the URL, and so a query credential:
      // reported as a connection that closed before it opened.
      this.#done = true;
      this.#ws = CLOSED_SOCKET;
      queueMicrotask(() => handlers.onClose(1006, "", false));
      return;
    }
    this.#ws.binaryType = "arraybuffer";
    this.#ws.addEventListener("open", () => {
      if (this.#done) return;
      this.#opened = true;
      handlers.onOpen();
    });
    this.#ws.addEventListener("message", (event: { data: unknown }) => {
      if (this.#done) return;
      const data = event.data;
      if (typeof data === "string") handlers.onText(data);
      else if (data instanceof ArrayBuffer) handlers.onBytes(new Uint8Array(data));
      else if (ArrayBuffer.isView(data)) handlers.onBytes(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    });
    this.#ws.addEventListener("close", (event: { code?: number; reason?: string }) => {
      if (this.#done) return;
      this.#done = true;
      handlers.onClose(event.code ?? 1006, event.reason ?? "", this.#opened);
    });
    // An `error` event is always followed by `close`; nothing to do here
    // (its message could name the URL, and so a query credential).
    this.#ws.addEventListener("error", () => {});
  }

  get open(): boolean {
    return !this.#done && this.#ws.readyState === OPEN;
  }

  send(data: string | Uint8Array): boolean {
    if (!this.open) return false;
    this.#ws.send(data);
    return true;
  }

  /** Closes without reporting the close to the handlers. */
  close(code = 1000, reason = ""): void {
    this.#done = true;
    try {
      this.#ws.close(code, reason);
    } catch {
      // already closing
    }
  }
}

/** The constructor to use: the option, else the global one. */
export function resolveWebSocket(option: WebSocketConstructor | undefined): WebSocketConstructor {
  const ctor = option ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (!ctor) {
    throw new Error("no WebSocket: pass the `WebSocket` option (on Node 20, the `ws` package's WebSocket)");
  }
  return ctor;
}

/** `http(s)://` or `ws(s)://` base plus path: the socket URL. */
export function socketUrl(base: string, path: string, params: URLSearchParams): string {
  const url = new URL(path, base);
  if (url.protocol === "http:") url.protocol = "ws:";
  else if (url.protocol === "https:") url.protocol = "wss:";
  url.search = params.toString();
  return url.toString();
}
