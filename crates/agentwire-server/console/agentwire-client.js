// @agentwire/client 0.1.0, bundled from clients/typescript by scripts/build.mjs. Do not edit: run `npm run build` there.

// src/backoff.ts
var OMNIA_BACKOFF = { initialMs: 150, maxMs: 5e3, attempts: 8, jitter: 0.5 };
var GNOSARI_BACKOFF = { initialMs: 2e3, maxMs: 3e4, attempts: 5, jitter: 0.3 };
function backoffDelay(options, attempt, random = Math.random) {
  if (attempt >= options.attempts) return null;
  const ceiling = Math.min(options.maxMs, options.initialMs * 2 ** attempt);
  return Math.round(ceiling * (1 - options.jitter * random()));
}

// src/credentials.ts
async function currentToken(source) {
  if (source === void 0) return null;
  const token = typeof source === "function" ? await source() : source;
  return token || null;
}
function jwtTimes(token) {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  try {
    const json = atob(parts[1].replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(parts[1].length / 4) * 4, "="));
    const claims = JSON.parse(json);
    if (typeof claims.exp !== "number") return null;
    return { exp: claims.exp * 1e3, iat: typeof claims.iat === "number" ? claims.iat * 1e3 : null };
  } catch {
    return null;
  }
}
function refreshDelay(token, now = Date.now()) {
  const times = jwtTimes(token);
  if (!times) return null;
  const life = times.exp - (times.iat ?? now);
  const deadline = times.exp - Math.min(3e4, Math.max(0, life) / 2);
  const margin = Math.min(1e4, Math.max(0, deadline - now) / 4);
  return Math.max(0, deadline - margin - now);
}

// src/emitter.ts
var Emitter = class {
  #listeners = /* @__PURE__ */ new Map();
  /** Calls `listener` for every `event`; returns a function that removes it. */
  on(event, listener) {
    let set = this.#listeners.get(event);
    if (!set) {
      set = /* @__PURE__ */ new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener);
    return () => this.off(event, listener);
  }
  /** Calls `listener` for the next `event` only. */
  once(event, listener) {
    const off = this.on(event, (value) => {
      off();
      listener(value);
    });
    return off;
  }
  off(event, listener) {
    this.#listeners.get(event)?.delete(listener);
  }
  /** Whether anything listens for `event`. */
  listens(event) {
    return (this.#listeners.get(event)?.size ?? 0) > 0;
  }
  emit(event, value) {
    for (const listener of [...this.#listeners.get(event) ?? []]) {
      try {
        listener(value);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
};

// src/errors.ts
var AgentwireError = class extends Error {
  code;
  /** The message without the code (the server's `error.message`). */
  reason;
  details;
  constructor(code, message, details) {
    super(message ? `${code}: ${message}` : code);
    this.name = "AgentwireError";
    this.code = code;
    this.reason = message;
    this.details = details;
  }
};
var ToolRejection = class extends Error {
  constructor(reason) {
    super(reason);
    this.name = "ToolRejection";
  }
};

// src/base64.ts
function fromBase64(data) {
  const binary = atob(data);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
function concatBytes(parts) {
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

// src/omni.ts
var OMNI_HEADER_LEN = 32;
var OMNI_VERSION = 1;
var OMNI_MEDIA_CHUNK = 1;
var FLAG_CHUNKED = 2;
var FLAG_IS_LAST = 4;
var MAGIC = [79, 77, 78, 73];
var encoder = new TextEncoder();
var decoder = new TextDecoder();
function encodeOmniFrame(metadata, sequence, payload, flags = 0, mediaId = "") {
  const meta = encoder.encode(JSON.stringify(metadata));
  const frame = new Uint8Array(OMNI_HEADER_LEN + meta.length + payload.length);
  const view = new DataView(frame.buffer);
  frame.set(MAGIC, 0);
  view.setUint8(4, OMNI_VERSION);
  view.setUint8(5, flags);
  view.setUint16(6, OMNI_MEDIA_CHUNK);
  view.setUint32(8, meta.length);
  view.setUint32(12, payload.length);
  view.setUint32(16, sequence >>> 0);
  frame.set(encoder.encode(mediaId).subarray(0, 12), 20);
  frame.set(meta, OMNI_HEADER_LEN);
  frame.set(payload, OMNI_HEADER_LEN + meta.length);
  return frame;
}
function decodeOmniFrame(data) {
  const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
  if (bytes.length < OMNI_HEADER_LEN) return null;
  for (let i = 0; i < 4; i += 1) if (bytes[i] !== MAGIC[i]) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const metadataLen = view.getUint32(8);
  const payloadLen = view.getUint32(12);
  if (OMNI_HEADER_LEN + metadataLen + payloadLen > bytes.length) return null;
  let metadata = {};
  if (metadataLen > 0) {
    try {
      metadata = JSON.parse(decoder.decode(bytes.subarray(OMNI_HEADER_LEN, OMNI_HEADER_LEN + metadataLen)));
    } catch {
      return null;
    }
  }
  let idEnd = 20;
  while (idEnd < 32 && bytes[idEnd] !== 0) idEnd += 1;
  const start = OMNI_HEADER_LEN + metadataLen;
  return {
    flags: view.getUint8(5),
    messageType: view.getUint16(6),
    sequence: view.getUint32(16),
    mediaId: decoder.decode(bytes.subarray(20, idEnd)),
    metadata,
    payload: bytes.subarray(start, start + payloadLen)
  };
}

// src/media.ts
var MediaAssembler = class {
  #streams = /* @__PURE__ */ new Map();
  #stream(id, mime) {
    let stream = this.#streams.get(id);
    if (!stream) {
      stream = { mime, pieces: [], received: 0, total: null };
      this.#streams.set(id, stream);
    }
    return stream;
  }
  #finish(id, stream) {
    this.#streams.delete(id);
    return { media_id: id, mime_type: stream.mime, bytes: concatBytes(stream.pieces.filter(Boolean)) };
  }
  /** A JSON `media_chunk`; the item when this was its last chunk. */
  pushChunk(chunk) {
    const stream = this.#stream(chunk.media_id, chunk.mime_type);
    stream.pieces[chunk.sequence] = fromBase64(chunk.data);
    stream.received += 1;
    return chunk.is_last ? this.#finish(chunk.media_id, stream) : null;
  }
  /**
   * A binary frame of a media stream; the item when it is complete (an
   * unchunked frame is complete by itself; a chunked transfer when all
   * `total_chunks` came or the IsLast one did).
   */
  pushFrame(frame) {
    const mime = String(frame.metadata.mime_type ?? "application/octet-stream");
    const chunked = (frame.flags & FLAG_CHUNKED) !== 0;
    const stream = this.#stream(frame.mediaId, mime);
    if (!chunked) {
      stream.pieces.push(frame.payload.slice());
      return this.#finish(frame.mediaId, stream);
    }
    stream.pieces[frame.sequence] = frame.payload.slice();
    stream.received += 1;
    if (typeof frame.metadata.total_chunks === "number") stream.total = frame.metadata.total_chunks;
    const complete = stream.total !== null ? stream.received >= stream.total : (frame.flags & FLAG_IS_LAST) !== 0;
    return complete ? this.#finish(frame.mediaId, stream) : null;
  }
  /** Drops what is half-assembled (a turn ended, a socket was replaced). */
  clear() {
    this.#streams.clear();
  }
};

// src/tools.ts
var ToolCallHandle = class {
  call;
  #send;
  #acked = false;
  #outcome = null;
  #abort = new AbortController();
  #listeners = [];
  constructor(call, send) {
    this.call = call;
    this.#send = send;
  }
  get settled() {
    return this.#outcome !== null;
  }
  get outcome() {
    return this.#outcome;
  }
  /** Aborted when the server ends the call first. */
  get signal() {
    return this.#abort.signal;
  }
  /** Calls `listener` once the call is settled (at once if it is). */
  onSettled(listener) {
    if (this.#outcome) listener(this.#outcome);
    else this.#listeners.push(listener);
  }
  ack() {
    if (this.#acked || this.#outcome) return;
    this.#acked = true;
    this.#send({ type: "tool_call_ack", tool_call_ack: { call_id: this.call.id } });
  }
  result(result) {
    if (this.#settle({ kind: "result", result })) {
      this.#send({ type: "tool_result", tool_result: { call_id: this.call.id, result: result ?? null } });
    }
  }
  error(message) {
    if (this.#settle({ kind: "error", error: message })) {
      this.#send({ type: "tool_result", tool_result: { call_id: this.call.id, error: message || "tool failed" } });
    }
  }
  reject(reason) {
    if (this.#settle({ kind: "rejected", reason })) {
      this.#send({ type: "tool_call_nack", tool_call_nack: { call_id: this.call.id, reason: reason || "declined" } });
    }
  }
  /** @internal The server's `tool_result` for this call. */
  ended(error) {
    if (this.#settle({ kind: "ended", error: error ?? "ended by the server" })) this.#abort.abort();
  }
  #settle(outcome) {
    if (this.#outcome) return false;
    this.#outcome = outcome;
    for (const listener of this.#listeners.splice(0)) listener(outcome);
    return true;
  }
};
async function runTool(handle, handler, timeoutMs) {
  handle.ack();
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the tool took longer than ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    const result = await Promise.race([
      Promise.resolve().then(() => handler(handle.call.arguments ?? {}, handle.call, handle.signal)),
      timeout
    ]);
    handle.result(result);
  } catch (error) {
    if (error instanceof ToolRejection) handle.reject(error.message);
    else handle.error(error instanceof Error ? error.message : String(error));
  } finally {
    clearTimeout(timer);
  }
}

// src/transport.ts
var OPEN = 1;
var CLOSED_SOCKET = {
  readyState: 3,
  binaryType: "arraybuffer",
  send() {
  },
  close() {
  },
  addEventListener() {
  }
};
var Socket = class {
  #ws;
  #opened = false;
  #done = false;
  constructor(Ctor, url, headers, handlers) {
    try {
      this.#ws = headers && Object.keys(headers).length ? new Ctor(url, void 0, { headers }) : new Ctor(url);
    } catch {
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
    this.#ws.addEventListener("message", (event) => {
      if (this.#done) return;
      const data = event.data;
      if (typeof data === "string") handlers.onText(data);
      else if (data instanceof ArrayBuffer) handlers.onBytes(new Uint8Array(data));
      else if (ArrayBuffer.isView(data)) handlers.onBytes(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    });
    this.#ws.addEventListener("close", (event) => {
      if (this.#done) return;
      this.#done = true;
      handlers.onClose(event.code ?? 1006, event.reason ?? "", this.#opened);
    });
    this.#ws.addEventListener("error", () => {
    });
  }
  get open() {
    return !this.#done && this.#ws.readyState === OPEN;
  }
  send(data) {
    if (!this.open) return false;
    this.#ws.send(data);
    return true;
  }
  /** Closes without reporting the close to the handlers. */
  close(code = 1e3, reason = "") {
    this.#done = true;
    try {
      this.#ws.close(code, reason);
    } catch {
    }
  }
};
function resolveWebSocket(option) {
  const ctor = option ?? globalThis.WebSocket;
  if (!ctor) {
    throw new Error("no WebSocket: pass the `WebSocket` option (on Node 20, the `ws` package's WebSocket)");
  }
  return ctor;
}
function socketUrl(base, path, params) {
  const url = new URL(path, base);
  if (url.protocol === "http:") url.protocol = "ws:";
  else if (url.protocol === "https:") url.protocol = "wss:";
  url.search = params.toString();
  return url.toString();
}

// src/position.ts
var LogPosition = class {
  epoch = null;
  lastSeq = 0;
  #typesAtLast = /* @__PURE__ */ new Set();
  /** Whether the frame is new (and records it); false for one delivered already. */
  accept(seq, type) {
    if (seq < this.lastSeq) return false;
    if (seq === this.lastSeq) {
      if (this.#typesAtLast.has(type)) return false;
      this.#typesAtLast.add(type);
      return true;
    }
    this.lastSeq = seq;
    this.#typesAtLast = /* @__PURE__ */ new Set([type]);
    return true;
  }
  /** A log of another epoch: positions start again. */
  reset(epoch) {
    this.epoch = epoch;
    this.lastSeq = 0;
    this.#typesAtLast.clear();
  }
};

// src/turn.ts
var Turn = class {
  /** Resolves with the turn's result; rejects with an AgentwireError. */
  result;
  #events = [];
  #waiters = [];
  #settled = false;
  #failure = null;
  #resolve;
  #reject;
  constructor() {
    this.result = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.result.catch(() => {
    });
  }
  get settled() {
    return this.#settled;
  }
  /** @internal */
  push(event) {
    if (this.#settled) return;
    this.#events.push(event);
    this.#wake();
  }
  /** @internal */
  finish(result) {
    if (this.#settled) return;
    this.#settled = true;
    this.#resolve(result);
    this.#wake();
  }
  /** @internal */
  fail(error) {
    if (this.#settled) return;
    this.#settled = true;
    this.#failure = error;
    this.#reject(error);
    this.#wake();
  }
  #wake() {
    for (const wake of this.#waiters.splice(0)) wake();
  }
  /** The events in order; ends when the turn ends, throws when it failed. */
  async *[Symbol.asyncIterator]() {
    let next = 0;
    for (; ; ) {
      if (next < this.#events.length) {
        yield this.#events[next];
        next += 1;
        continue;
      }
      if (this.#settled) {
        if (this.#failure) throw this.#failure;
        return;
      }
      await new Promise((wake) => this.#waiters.push(wake));
    }
  }
};

// src/upload.ts
var READY_TIMEOUT_MS = 1e4;
function partKind(mime) {
  const top = mime.split("/")[0];
  return top === "image" || top === "audio" || top === "video" ? top : "file";
}
var Uploads = class {
  #waiters = [];
  #deps;
  constructor(deps) {
    this.#deps = deps;
  }
  async upload(data, file, onProgress) {
    const size = data instanceof Uint8Array || data instanceof ArrayBuffer ? data.byteLength : data.size;
    const ready = await this.#request({ filename: file.filename, mime_type: file.mime_type, size_bytes: size });
    const headers = { ...ready.headers ?? {} };
    const token = this.#deps.token();
    if (token) headers.Authorization = `Bearer ${token}`;
    const body = data instanceof Uint8Array ? data : data instanceof ArrayBuffer ? new Uint8Array(data) : data;
    onProgress?.(0);
    const status = await this.#put(ready.upload_url, ready.method ?? "PUT", headers, body, onProgress);
    if (status < 200 || status > 299) {
      throw new AgentwireError("UPLOAD_FAILED", `the upload was answered ${status}`);
    }
    if (new URL(ready.upload_url).pathname !== `/media/upload/${encodeURIComponent(ready.upload_id)}`) {
      const confirm = new URL(`/media/confirm-upload/${encodeURIComponent(ready.upload_id)}`, this.#deps.httpBase());
      const doFetch = this.#deps.fetch ?? globalThis.fetch;
      const response = await doFetch(confirm, { method: "POST", headers: token ? { Authorization: `Bearer ${token}` } : {} });
      if (!response.ok) throw new AgentwireError("UPLOAD_FAILED", `the upload's confirmation was answered ${response.status}`);
    }
    onProgress?.(1);
    return {
      storage_ref: ready.storage_ref,
      upload_id: ready.upload_id,
      part: {
        type: partKind(file.mime_type),
        media: { storage_ref: ready.storage_ref, mime_type: file.mime_type, filename: file.filename, size_bytes: size }
      }
    };
  }
  /** The HTTP upload: XMLHttpRequest in a browser (progress as bytes leave), else fetch. Resolves with the status. */
  #put(url, method, headers, body, onProgress) {
    const XHR = globalThis.XMLHttpRequest;
    if (XHR && !this.#deps.fetch) {
      return new Promise((resolve, reject) => {
        const xhr = new XHR();
        xhr.open(method, url);
        for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value);
        xhr.upload.addEventListener("progress", (event) => {
          if (event.lengthComputable) onProgress?.(event.loaded / event.total);
        });
        xhr.addEventListener("load", () => resolve(xhr.status));
        xhr.addEventListener("error", () => reject(new AgentwireError("UPLOAD_FAILED", "the upload failed (network)")));
        xhr.send(body);
      });
    }
    const doFetch = this.#deps.fetch ?? globalThis.fetch;
    return doFetch(url, { method, headers, body }).then((response) => response.status);
  }
  #request(request) {
    return new Promise((resolve, reject) => {
      const waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          const at = this.#waiters.indexOf(waiter);
          if (at >= 0) this.#waiters.splice(at, 1);
          reject(new AgentwireError("TIMEOUT", "the server did not answer the upload request"));
        }, READY_TIMEOUT_MS)
      };
      this.#waiters.push(waiter);
      this.#deps.send({ type: "upload_request", upload_request: request });
    });
  }
  /** @internal */
  ready(ready) {
    const waiter = this.#waiters.shift();
    if (!waiter) return;
    clearTimeout(waiter.timer);
    waiter.resolve(ready);
  }
  /** Whether an error (without `seq`) answers an upload request. */
  takesError(code, message) {
    if (!this.#waiters.length) return false;
    return code === "UPLOAD_FAILED" || code === "MEDIA_NOT_ENABLED" && /storage/.test(message) || code === "RATE_LIMITED" && /upload/.test(message) || code === "INVALID_MESSAGE" && /upload_request|filename|mime_type|size_bytes/.test(message);
  }
  /** @internal */
  fail(error) {
    const waiter = this.#waiters.shift();
    if (!waiter) return;
    clearTimeout(waiter.timer);
    waiter.reject(error);
  }
  failAll(error) {
    while (this.#waiters.length) this.fail(error);
  }
};

// src/voice.ts
var PlaybackQueue = class {
  #chunks = [];
  #bytes = 0;
  get bufferedBytes() {
    return this.#bytes;
  }
  push(chunk) {
    if (!chunk.length) return;
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
  }
  /** The next chunk to play, or null. */
  take() {
    const chunk = this.#chunks.shift() ?? null;
    if (chunk) this.#bytes -= chunk.length;
    return chunk;
  }
  /** Drops everything queued; returns how many bytes went. */
  flush() {
    const dropped = this.#bytes;
    this.#chunks = [];
    this.#bytes = 0;
    return dropped;
  }
};
function toPcm16(samples, channels = 1) {
  const bytes = new Uint8Array(samples.length * 2 * channels);
  const view = new DataView(bytes.buffer);
  let at = 0;
  for (let i = 0; i < samples.length; i += 1) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    const value = s < 0 ? Math.round(s * 32768) : Math.round(s * 32767);
    for (let c = 0; c < channels; c += 1) {
      view.setInt16(at, value, true);
      at += 2;
    }
  }
  return bytes;
}
function fromPcm16(bytes, channels = 1) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const frames = Math.floor(bytes.byteLength / (2 * channels));
  const out = new Float32Array(frames);
  for (let f = 0; f < frames; f += 1) {
    let sum = 0;
    for (let c = 0; c < channels; c += 1) sum += view.getInt16((f * channels + c) * 2, true);
    out[f] = sum / channels / 32768;
  }
  return out;
}
var VoiceCall = class extends Emitter {
  playback = new PlaybackQueue();
  /** The call's format once `session_config` came. */
  format = null;
  state = "opening";
  /** Frames sent, and audio bytes received. */
  sentFrames = 0;
  receivedBytes = 0;
  #link;
  #proposal;
  #frameMs;
  #pending = new Uint8Array(0);
  #sequence = 0;
  #reply = "";
  #wasLive = false;
  constructor(options, link) {
    super();
    this.#link = link;
    this.#proposal = { rate: options.sampleRate ?? 16e3, channels: options.channels ?? 1 };
    this.#frameMs = options.frameMs ?? 20;
  }
  /** The rate and channels frames are cut at: the call's, else the proposal. */
  get rate() {
    return this.format?.sample_rate ?? this.#proposal.rate;
  }
  get channels() {
    return this.format?.channels ?? this.#proposal.channels;
  }
  /** Bytes in one frame at the current format. */
  get frameBytes() {
    return Math.round(this.rate * this.#frameMs / 1e3) * 2 * this.channels;
  }
  /**
   * Caller audio, PCM16 little-endian at `rate` × `channels`: sent in whole
   * frames; a partial frame waits for more (or for `end()`). Returns the
   * number of frames sent. Audio while the socket is down is dropped.
   */
  sendPcm(pcm) {
    if (this.state === "ended") return 0;
    const size = this.frameBytes;
    let data = pcm;
    if (this.#pending.length) {
      data = new Uint8Array(this.#pending.length + pcm.length);
      data.set(this.#pending);
      data.set(pcm, this.#pending.length);
    }
    let at = 0;
    let sent = 0;
    while (data.length - at >= size) {
      this.#sendFrame(data.subarray(at, at + size), 0);
      at += size;
      sent += 1;
    }
    this.#pending = data.slice(at);
    return sent;
  }
  /**
   * One frame of exactly these bytes, now (no framing): for an app that
   * cuts its own frames. False when the socket is down (the frame is dropped).
   */
  sendAudioFrame(pcm) {
    if (this.state === "ended") return false;
    return this.#sendFrame(pcm, 0);
  }
  /** Mono float samples at `rate`, as PCM16 (repeated on each channel). */
  sendSamples(samples) {
    return this.sendPcm(toPcm16(samples, this.channels));
  }
  /** Ends the call after its last utterance is answered: the rest of the audio, flagged IsLast. */
  end() {
    if (this.state === "ended") return;
    this.#sendFrame(this.#pending, FLAG_IS_LAST);
    this.#pending = new Uint8Array(0);
    this.#finish();
  }
  /** Ends the call at once (`hangup`). */
  hangup() {
    if (this.state === "ended") return;
    this.#link.sendFrame({ type: "hangup" });
    this.#finish();
  }
  #sendFrame(payload, flags) {
    const metadata = {
      session_id: this.#link.sessionId() ?? "",
      mime_type: "audio/pcm",
      sample_rate: this.rate,
      channels: this.channels,
      codec: "pcm"
    };
    if (this.#link.sendBytes(encodeOmniFrame(metadata, this.#sequence, payload, flags))) {
      this.#sequence = this.#sequence + 1 >>> 0;
      this.sentFrames += 1;
      return true;
    }
    return false;
  }
  #finish() {
    this.playback.flush();
    this.state = "ended";
    this.#link.ended();
    this.emit("ended", {});
  }
  // -------------------------------------------- from the connection (internal)
  onConfig(config) {
    if (this.state === "ended") return;
    this.format = config;
    this.state = "live";
    this.#wasLive = true;
    this.emit("config", config);
  }
  onAudio(payload) {
    if (this.state === "ended") return;
    const copy = payload.slice();
    this.receivedBytes += copy.length;
    this.playback.push(copy);
    this.emit("audio", copy);
  }
  onAudioBase64(data) {
    this.onAudio(fromBase64(data));
  }
  onTranscript(role, text) {
    if (role === "assistant") this.#reply += text;
    this.emit("transcript", { role, text });
  }
  onInterrupt() {
    this.emit("interrupt", { dropped_bytes: this.playback.flush() });
  }
  onResponseDone() {
    const text = this.#reply;
    this.#reply = "";
    this.emit("response_done", { text });
  }
  fail(code, message) {
    if (this.state === "ended") return;
    this.emit("failed", { code, message });
    this.#finish();
  }
  /** The socket dropped: the server parks the call; frames are dropped meanwhile. */
  suspend() {
    if (this.state === "live" || this.state === "opening") this.state = "suspended";
  }
  resume() {
    if (this.state === "suspended") this.state = this.#wasLive ? "live" : "opening";
  }
  /** The connection closed for good, or another call replaced this one. */
  detach() {
    if (this.state !== "ended") this.#finish();
  }
};

// src/omnia.ts
var CALL_ERRORS = /* @__PURE__ */ new Map([
  ["DUPLEX_ERROR", null],
  ["UNSATISFIABLE_FORMAT", null],
  ["MEDIA_NOT_ENABLED", /audio/],
  ["RATE_LIMITED", /audio session/]
]);
var OmniaClient = class extends Emitter {
  options;
  /** The connection's session. */
  sessionId = null;
  /** The log position of the last frame delivered. */
  /** Where the client stands in the session's log. */
  position = new LogPosition();
  capabilities = null;
  state = "closed";
  #Ctor;
  #backoff;
  #socket = null;
  #connected = false;
  #everConnected = false;
  #closedByUser = false;
  #attempt = 0;
  #retryTimer = null;
  #retryHint = null;
  #rejoining = false;
  #hadPosition = false;
  #outbox = [];
  #pending = null;
  #current = null;
  #tools = /* @__PURE__ */ new Map();
  #calls = /* @__PURE__ */ new Map();
  #media = new MediaAssembler();
  #uploads;
  #voice = null;
  #firstConnect = null;
  #token = null;
  #refreshTimer = null;
  constructor(options) {
    super();
    this.options = options;
    this.#Ctor = resolveWebSocket(options.WebSocket);
    this.#backoff = options.reconnect === false ? null : { ...OMNIA_BACKOFF, ...options.reconnect };
    for (const [name, handler] of Object.entries(options.tools ?? {})) this.#tools.set(name, handler);
    this.#uploads = new Uploads({
      send: (frame) => this.#sendFrame(frame),
      fetch: options.fetch,
      token: () => this.#token,
      httpBase: () => options.url.replace(/^ws(s?):/, "http$1:")
    });
  }
  /** Registers (or replaces) the handler of client tool `name`. */
  registerTool(name, handler) {
    this.#tools.set(name, handler);
  }
  unregisterTool(name) {
    this.#tools.delete(name);
  }
  /** Opens the connection; resolves with `connected`. */
  connect() {
    this.#closedByUser = false;
    return new Promise((resolve, reject) => {
      this.#firstConnect = { resolve, reject };
      void this.#open(false);
    });
  }
  /** Closes the connection on the application's behalf: no rejoin follows. */
  close(code = 1e3, reason = "closed by the client") {
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
  send(input) {
    const turn = new Turn();
    const message = typeof input === "string" ? { content: input } : input;
    if (this.state === "closed") {
      turn.fail(new AgentwireError("CLOSED", "not connected: call connect() first"));
      return turn;
    }
    if (this.#pending) {
      turn.fail(new AgentwireError("TURN_IN_PROGRESS", "a message of this client is still waiting for its turn to start"));
      return turn;
    }
    const frame = { type: "message" };
    if (message.content !== void 0) frame.content = message.content;
    if (message.parts) frame.parts = message.parts;
    if (message.session_id) frame.session_id = message.session_id;
    if (message.metadata) frame.metadata = message.metadata;
    if (message.declare !== void 0) frame.declare = message.declare;
    this.#pending = { turn, frame };
    this.#sendFrame(frame);
    return turn;
  }
  /** Stops the running turn (`stream=2`): it ends with `cancelled: true`. */
  cancel() {
    this.#sendFrame({ type: "cancel" });
  }
  /** Uploads `data` through `upload_request`; the result names it in a message part. */
  upload(data, file, onProgress) {
    return this.#uploads.upload(data, file, onProgress);
  }
  /** Sends a fresher credential (`credential_refresh`); it also serves later reconnections. */
  refreshCredential(token) {
    this.#token = token;
    this.#sendFrame({ type: "credential_refresh", token });
    this.#scheduleRefresh(token);
  }
  /** Records that the AI disclosure was shown (`disclosure_ack`). */
  acknowledgeDisclosure() {
    this.#sendFrame({ type: "disclosure_ack" });
  }
  /** Opens a voice call on this connection (the agent needs `voice`). */
  startCall(options = {}) {
    this.#voice?.detach();
    const call = new VoiceCall(options, {
      sendBytes: (bytes) => this.#sendRaw(bytes),
      sendFrame: (frame) => this.#sendFrame(frame),
      sessionId: () => this.sessionId,
      ended: () => {
        if (this.#voice === call) this.#voice = null;
      }
    });
    this.#voice = call;
    return call;
  }
  get call() {
    return this.#voice;
  }
  // ------------------------------------------------------------ the socket
  async #open(rejoin) {
    const o = this.options;
    this.#setState(rejoin ? "rejoining" : "connecting");
    try {
      this.#token = await currentToken(o.token) ?? this.#token;
    } catch {
    }
    if (this.#closedByUser) return;
    const params = new URLSearchParams({ agent: o.agent, stream: "2" });
    if (o.binary !== false) params.set("binary", "true");
    if (o.memoryFacet) params.set("memory_facet", o.memoryFacet);
    const resume = rejoin ? this.sessionId : o.resume ?? null;
    if (resume) {
      params.set("resume", resume);
      if (rejoin && this.position.epoch) {
        params.set("after", String(this.position.lastSeq));
        params.set("epoch", this.position.epoch);
      }
    }
    const viaQuery = (o.credentialIn ?? (o.WebSocket ? "header" : "query")) === "query";
    let headers = null;
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
      onOpen: () => {
      },
      onText: (text) => this.#onText(text),
      onBytes: (bytes) => this.#onBytes(bytes),
      onClose: (code, reason, opened) => this.#onClose(code, reason, opened)
    });
  }
  #onClose(code, reason, opened) {
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
    const delay = canRejoin ? this.#retryHint ?? backoffDelay(this.#backoff, this.#attempt) : null;
    this.#retryHint = null;
    if (delay === null) {
      const error = this.#everConnected ? new AgentwireError("CONNECTION_LOST", `the connection closed (${code}${reason ? ` ${reason}` : ""})`) : new AgentwireError("CONNECT_FAILED", opened ? `the server closed the connection (${code})` : "the server refused the upgrade or cannot be reached");
      this.#giveUp(code, reason, error);
      return;
    }
    this.#attempt += 1;
    this.emit("closed", { code, reason, willRetry: true });
    this.#setState("rejoining");
    this.#retryTimer = setTimeout(() => void this.#open(true), delay);
  }
  #giveUp(code, reason, error) {
    this.#clearTimers();
    this.#failTurns(error);
    this.#uploads.failAll(error);
    this.#voice?.fail(error.code, error.message);
    this.#firstConnect?.reject(error);
    this.#firstConnect = null;
    this.emit("closed", { code, reason, willRetry: false });
    this.#setState("closed");
  }
  #onText(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (frame.type === "turn_started" && frame.turn_started.epoch !== this.position.epoch) {
      this.position.reset(frame.turn_started.epoch);
    }
    if ("seq" in frame && typeof frame.seq === "number") {
      if (!this.position.accept(frame.seq, frame.type)) return;
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
  #onBytes(bytes) {
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
  #deliverMedia(item) {
    this.emit("media", item);
    this.#active().turn.push({ type: "media", media: item });
  }
  #onConnected(frame) {
    const connected = frame.connected;
    this.capabilities = connected.capabilities;
    const log = connected.capabilities.event_log;
    const rejoin = this.#rejoining;
    this.#connected = true;
    this.#everConnected = true;
    this.#attempt = 0;
    if (rejoin) {
      const previous = this.sessionId;
      if (connected.resumed) {
        const replayed = log?.replayed !== false || !this.#hadPosition;
        if (log?.epoch && log.epoch !== this.position.epoch) this.position.reset(log.epoch);
        this.emit("rejoin", { replayed, session_id: previous });
        this.#current?.turn.push({ type: "rejoined", replayed });
        if (!replayed) this.emit("history_gap", { session_id: previous });
      } else {
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
  #active() {
    if (this.#current) return this.#current;
    if (this.#pending) {
      this.#current = { turn: this.#pending.turn, expired: this.#pending.expired };
      this.#pending = null;
      return this.#current;
    }
    const turn = new Turn();
    this.#current = { turn };
    this.emit("turn", turn);
    return this.#current;
  }
  #onDone(frame) {
    const active = this.#active();
    this.#current = null;
    this.#media.clear();
    this.#settleCalls("the turn ended");
    const result = {
      content: frame.content ?? "",
      cancelled: frame.cancelled === true,
      session_id: frame.session_id
    };
    if (frame.parts) result.parts = frame.parts;
    if (active.expired) result.expired_session = active.expired;
    active.turn.finish(result);
  }
  #onError(frame) {
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
      const expired = pending.frame.session_id;
      this.emit("session_expired", { session_id: expired });
      delete pending.frame.session_id;
      pending.expired = expired;
      this.#sendFrame(pending.frame);
      return;
    }
    const aboutMessage = code !== "INVALID_MESSAGE" || !/tool call|binary/.test(message);
    if (pending && aboutMessage && !/media rate/.test(message)) {
      this.#pending = null;
      pending.turn.fail(error);
      return;
    }
    this.emit("error", error);
  }
  #failTurns(error) {
    const pending = this.#pending;
    const current = this.#current;
    this.#pending = null;
    this.#current = null;
    this.#settleCalls(error.message);
    pending?.turn.fail(error);
    current?.turn.fail(error);
  }
  // ------------------------------------------------------------- tools
  #onToolCall(call) {
    const active = this.#active();
    const handle = this.#calls.get(call.id) ?? new ToolCallHandle(call, (frame) => this.#sendFrame(frame));
    this.#calls.set(call.id, handle);
    handle.onSettled(() => {
      if (this.#calls.get(call.id) === handle && handle.outcome?.kind !== "ended") this.#calls.delete(call.id);
    });
    active.turn.push({ type: "tool_call", call, handle });
    const handler = this.#tools.get(call.name);
    if (handler) {
      void runTool(handle, handler, this.options.toolTimeoutMs ?? 3e4);
    } else {
      this.emit("tool_call", handle);
    }
  }
  #settleCalls(reason) {
    for (const handle of this.#calls.values()) handle.ended(reason);
    this.#calls.clear();
  }
  // ------------------------------------------------------------- voice
  /** A frame without `seq` that belongs to the voice call; true when taken. */
  #callFrame(frame) {
    if (frame.type === "session_config" && !this.#voice) {
      this.#sendFrame({ type: "hangup" });
      return true;
    }
    const call = this.#voice;
    if (!call) {
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
        if (pattern === void 0 || pattern && !pattern.test(frame.error.message)) return false;
        call.fail(frame.error.code, frame.error.message);
        return true;
      }
      default:
        return false;
    }
  }
  // ------------------------------------------------------------- sending
  #sendFrame(frame) {
    this.#sendRaw(JSON.stringify(frame));
  }
  /** Sends at once when connected, else after the next `connected`. */
  #sendRaw(data) {
    if (this.#connected && this.#socket?.send(data)) return true;
    if (typeof data === "string") this.#outbox.push(data);
    return false;
  }
  #scheduleRefresh(token) {
    if (this.#refreshTimer) clearTimeout(this.#refreshTimer);
    this.#refreshTimer = null;
    if (typeof this.options.token !== "function") return;
    const delay = refreshDelay(token);
    if (delay === null) return;
    this.#refreshTimer = setTimeout(async () => {
      this.#refreshTimer = null;
      let fresh = null;
      try {
        fresh = await currentToken(this.options.token);
      } catch {
        return;
      }
      if (fresh && fresh !== this.#token) this.refreshCredential(fresh);
    }, delay);
  }
  #clearTimers() {
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    if (this.#refreshTimer) clearTimeout(this.#refreshTimer);
    this.#retryTimer = null;
    this.#refreshTimer = null;
  }
  #setState(state) {
    this.state = state;
    this.emit("status", { state, attempt: this.#attempt });
  }
};

// src/gnosari.ts
var counter = 0;
var nextId = () => `c-${Date.now().toString(36)}-${counter += 1}`;
var GnosariClient = class extends Emitter {
  options;
  sessionId = null;
  /** Where the client stands in the session's log. */
  position = new LogPosition();
  state = "closed";
  #Ctor;
  #backoff;
  #socket = null;
  #open = false;
  #everOpen = false;
  #closedByUser = false;
  #attempt = 0;
  #timer = null;
  #retryHint = null;
  #rejoining = false;
  #outbox = [];
  #waiting = [];
  #current = null;
  #first = null;
  constructor(options) {
    super();
    this.options = options;
    this.#Ctor = resolveWebSocket(options.WebSocket);
    this.#backoff = options.reconnect === false ? null : { ...GNOSARI_BACKOFF, ...options.reconnect };
  }
  #path() {
    const o = this.options;
    const part = encodeURIComponent;
    if (o.team && o.member) return `/ws/team/${part(o.team)}/agent/${part(o.member)}`;
    if (o.team) return `/ws/team/${part(o.team)}`;
    if (o.agent) return `/ws/agent/${part(o.agent)}`;
    throw new Error("GnosariClient needs `agent`, `team`, or `team` and `member`");
  }
  /** Opens the socket; resolves when it is open (Gnosari sends nothing first). */
  connect() {
    this.#closedByUser = false;
    return new Promise((resolve, reject) => {
      this.#first = { resolve, reject };
      void this.#connect(false);
    });
  }
  close() {
    this.#closedByUser = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#socket?.close(1e3, "closed by the client");
    this.#socket = null;
    this.#open = false;
    this.#failAll(new AgentwireError("CLOSED", "the client was closed"));
    this.#setState("closed");
  }
  /** Sends a message; its turn runs after those sent before it. */
  send(message, options = {}) {
    const turn = new Turn();
    const id = nextId();
    const frame = { message, client_message_id: id };
    const session = options.session_id ?? this.sessionId;
    if (session) frame.session_id = session;
    if (options.metadata) frame.metadata = options.metadata;
    if (options.attachments) frame.attachments = options.attachments;
    this.#waiting.push({ turn, id });
    this.#send(JSON.stringify(frame));
    return turn;
  }
  /** Stops the session's running turn (`stream=2`). */
  cancel() {
    if (this.sessionId) this.#send(JSON.stringify({ type: "cancel", session_id: this.sessionId }));
  }
  async #connect(rejoin) {
    const o = this.options;
    this.#setState(rejoin ? "rejoining" : "connecting");
    let token = null;
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
      params.set("session_id", this.sessionId);
      params.set("after", String(Math.max(0, this.position.lastSeq - 1)));
      params.set("epoch", this.position.epoch);
    }
    const viaQuery = (o.credentialIn ?? (o.WebSocket ? "header" : "query")) === "query";
    let headers = null;
    if (token && viaQuery) params.set("token", token);
    else if (token) headers = { Authorization: `Bearer ${token}` };
    this.#rejoining = rejoining;
    this.#socket = new Socket(this.#Ctor, socketUrl(o.url, this.#path(), params), headers, {
      onOpen: () => this.#onOpen(),
      onText: (text) => this.#onText(text),
      onBytes: () => {
      },
      onClose: (code, reason) => this.#onClose(code, reason)
    });
  }
  #onOpen() {
    this.#open = true;
    this.#everOpen = true;
    this.#attempt = 0;
    this.#setState("open");
    this.#first?.resolve();
    this.#first = null;
    if (!this.#rejoining) this.#flush();
  }
  #flush() {
    for (const data of this.#outbox.splice(0)) this.#socket?.send(data);
  }
  #onClose(code, reason) {
    this.#socket = null;
    this.#open = false;
    if (this.#closedByUser) return;
    const canRejoin = this.#backoff && this.#everOpen && this.options.stream !== false;
    const delay = canRejoin ? this.#retryHint ?? backoffDelay(this.#backoff, this.#attempt) : null;
    this.#retryHint = null;
    if (delay === null) {
      const error = this.#everOpen ? new AgentwireError("CONNECTION_LOST", `the connection closed (${code}${reason ? ` ${reason}` : ""})`) : new AgentwireError("CONNECT_FAILED", "the server refused the upgrade or cannot be reached");
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
  #onText(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (frame.type === "stream_info" && frame.epoch !== this.position.epoch) {
      this.position.reset(frame.epoch);
    }
    if ("seq" in frame && typeof frame.seq === "number") {
      if (!this.position.accept(frame.seq, frame.type)) return;
    }
    this.emit("frame", frame);
    switch (frame.type) {
      case "stream_info":
        return this.#onStreamInfo(frame);
      case "agent_started": {
        this.sessionId = frame.session_id;
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
          cancelled: frame.cancelled === true
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
  #onStreamInfo(frame) {
    this.emit("stream_info", frame);
    if (frame.replayed === void 0) return;
    this.#rejoining = false;
    this.emit("rejoin", { replayed: frame.replayed, session_id: frame.session_id });
    this.#current?.turn.push({ type: "rejoined", replayed: frame.replayed });
    if (!frame.replayed) this.emit("history_gap", { session_id: frame.session_id });
    this.#flush();
  }
  #onError(message, clientMessageId, fromLog) {
    const error = new AgentwireError("ERROR", message);
    if (this.#rejoining && message === "session not found") {
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
  #take(clientMessageId) {
    const at = this.#waiting.findIndex((w) => w.id === clientMessageId);
    if (at < 0) return null;
    return this.#waiting.splice(at, 1)[0].turn;
  }
  #send(data) {
    if (this.#open && !this.#rejoining && this.#socket?.send(data)) return;
    this.#outbox.push(data);
  }
  #failAll(error) {
    const current = this.#current;
    this.#current = null;
    current?.turn.fail(error);
    for (const w of this.#waiting.splice(0)) w.turn.fail(error);
  }
  #setState(state) {
    this.state = state;
    this.emit("status", { state, attempt: this.#attempt });
  }
};

// src/generated/omnia.ts
var ERROR_CODES = ["INVALID_MESSAGE", "SESSION_EXPIRED", "INTERNAL_ERROR", "UPLOAD_FAILED", "MEDIA_NOT_ENABLED", "RATE_LIMITED", "TURN_IN_PROGRESS", "MAX_ROUNDS_EXCEEDED", "PROVIDER_RATE_LIMITED", "PROVIDER_UNAVAILABLE", "PROVIDER_STALLED", "PROVIDER_TIMEOUT", "PROVIDER_AUTH_FAILED", "CREDENTIAL_EXPIRED", "DUPLEX_ERROR", "UNSATISFIABLE_FORMAT", "SESSION_DECLARATION_REFUSED", "pack_compile_failed", "TEST_ERROR"];
export {
  AgentwireError,
  ERROR_CODES,
  FLAG_CHUNKED,
  FLAG_IS_LAST,
  GNOSARI_BACKOFF,
  GnosariClient,
  MediaAssembler,
  OMNIA_BACKOFF,
  OmniaClient,
  PlaybackQueue,
  ToolCallHandle,
  ToolRejection,
  Turn,
  VoiceCall,
  backoffDelay,
  decodeOmniFrame,
  encodeOmniFrame,
  fromPcm16,
  jwtTimes,
  refreshDelay,
  toPcm16
};
