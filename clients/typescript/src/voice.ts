// Voice calls (Omnia, an agent with `voice`): the caller's PCM16 goes out
// as binary OMNI frames cut at the call's rate; the first frame opens the
// call and proposes its format; `session_config` names the format of the
// rest of the call; the reply's audio comes back (binary frames, or base64
// `media_chunk`s with media id "") into a playback queue, which `interrupt`
// (barge-in) flushes. No audio devices here: a browser app feeds captured
// samples in and plays what the queue holds.
import { fromBase64 } from "./base64.js";
import { Emitter } from "./emitter.js";
import type { ClientFrame, SessionConfigPayload } from "./generated/omnia.js";
import { encodeOmniFrame, FLAG_IS_LAST } from "./omni.js";

export type AudioFormat = SessionConfigPayload["session_config"];

export interface VoiceCallOptions {
  /** The proposed rate (the first frame's metadata); default 16000. */
  sampleRate?: number;
  /** The proposed channel count; default 1. */
  channels?: number;
  /** Frame length in milliseconds; default 20. */
  frameMs?: number;
}

export interface VoiceCallEvents {
  /** `session_config`: capture at this format from now on. */
  config: AudioFormat;
  /** A piece of the reply's audio (PCM16 at the call's rate), also queued in `playback`. */
  audio: Uint8Array;
  /** A transcript delta: what the caller said (`user`), or the reply. */
  transcript: { role: "user" | "assistant"; text: string };
  /** Barge-in: the playback queue was flushed. */
  interrupt: { dropped_bytes: number };
  /** A spoken response ended (`done{}`): its transcript. */
  response_done: { text: string };
  failed: { code: string; message: string };
  ended: Record<string, never>;
}

/** PCM16 little-endian waiting to be played; flushed on barge-in. */
export class PlaybackQueue {
  #chunks: Uint8Array[] = [];
  #bytes = 0;

  get bufferedBytes(): number {
    return this.#bytes;
  }

  push(chunk: Uint8Array): void {
    if (!chunk.length) return;
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
  }

  /** The next chunk to play, or null. */
  take(): Uint8Array | null {
    const chunk = this.#chunks.shift() ?? null;
    if (chunk) this.#bytes -= chunk.length;
    return chunk;
  }

  /** Drops everything queued; returns how many bytes went. */
  flush(): number {
    const dropped = this.#bytes;
    this.#chunks = [];
    this.#bytes = 0;
    return dropped;
  }
}

/** Float samples (mono) as PCM16 little-endian, each sample repeated on `channels`. */
export function toPcm16(samples: Float32Array, channels = 1): Uint8Array {
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

/** PCM16 little-endian (interleaved `channels`) as mono float samples. */
export function fromPcm16(bytes: Uint8Array, channels = 1): Float32Array {
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

/** What a call needs of its connection. */
export interface CallLink {
  sendBytes(bytes: Uint8Array): boolean;
  sendFrame(frame: ClientFrame): void;
  sessionId(): string | null;
  ended(): void;
}

export type CallState = "opening" | "live" | "suspended" | "ended";

export class VoiceCall extends Emitter<VoiceCallEvents> {
  readonly playback = new PlaybackQueue();
  /** The call's format once `session_config` came. */
  format: AudioFormat | null = null;
  state: CallState = "opening";
  /** Frames sent, and audio bytes received. */
  sentFrames = 0;
  receivedBytes = 0;
  #link: CallLink;
  #proposal: { rate: number; channels: number };
  #frameMs: number;
  #pending = new Uint8Array(0);
  #sequence = 0;
  #reply = "";
  #wasLive = false;

  constructor(options: VoiceCallOptions, link: CallLink) {
    super();
    this.#link = link;
    this.#proposal = { rate: options.sampleRate ?? 16000, channels: options.channels ?? 1 };
    this.#frameMs = options.frameMs ?? 20;
  }

  /** The rate and channels frames are cut at: the call's, else the proposal. */
  get rate(): number {
    return this.format?.sample_rate ?? this.#proposal.rate;
  }

  get channels(): number {
    return this.format?.channels ?? this.#proposal.channels;
  }

  /** Bytes in one frame at the current format. */
  get frameBytes(): number {
    return Math.round((this.rate * this.#frameMs) / 1000) * 2 * this.channels;
  }

  /**
   * Caller audio, PCM16 little-endian at `rate` × `channels`: sent in whole
   * frames; a partial frame waits for more (or for `end()`). Returns the
   * number of frames sent. Audio while the socket is down is dropped.
   */
  sendPcm(pcm: Uint8Array): number {
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
  sendAudioFrame(pcm: Uint8Array): boolean {
    if (this.state === "ended") return false;
    return this.#sendFrame(pcm, 0);
  }

  /** Mono float samples at `rate`, as PCM16 (repeated on each channel). */
  sendSamples(samples: Float32Array): number {
    return this.sendPcm(toPcm16(samples, this.channels));
  }

  /** Ends the call after its last utterance is answered: the rest of the audio, flagged IsLast. */
  end(): void {
    if (this.state === "ended") return;
    this.#sendFrame(this.#pending, FLAG_IS_LAST);
    this.#pending = new Uint8Array(0);
    this.#finish();
  }

  /** Ends the call at once (`hangup`). */
  hangup(): void {
    if (this.state === "ended") return;
    this.#link.sendFrame({ type: "hangup" });
    this.#finish();
  }

  #sendFrame(payload: Uint8Array, flags: number): boolean {
    const metadata = {
      session_id: this.#link.sessionId() ?? "",
      mime_type: "audio/pcm",
      sample_rate: this.rate,
      channels: this.channels,
      codec: "pcm",
    };
    if (this.#link.sendBytes(encodeOmniFrame(metadata, this.#sequence, payload, flags))) {
      this.#sequence = (this.#sequence + 1) >>> 0;
      this.sentFrames += 1;
      return true;
    }
    return false;
  }

  #finish(): void {
    this.playback.flush();
    this.state = "ended";
    this.#link.ended();
    this.emit("ended", {});
  }

  // -------------------------------------------- from the connection (internal)

  onConfig(config: AudioFormat): void {
    if (this.state === "ended") return;
    this.format = config;
    this.state = "live";
    this.#wasLive = true;
    this.emit("config", config);
  }

  onAudio(payload: Uint8Array): void {
    if (this.state === "ended") return;
    const copy = payload.slice();
    this.receivedBytes += copy.length;
    this.playback.push(copy);
    this.emit("audio", copy);
  }

  onAudioBase64(data: string): void {
    this.onAudio(fromBase64(data));
  }

  onTranscript(role: "user" | "assistant", text: string): void {
    if (role === "assistant") this.#reply += text;
    this.emit("transcript", { role, text });
  }

  onInterrupt(): void {
    this.emit("interrupt", { dropped_bytes: this.playback.flush() });
  }

  onResponseDone(): void {
    const text = this.#reply;
    this.#reply = "";
    this.emit("response_done", { text });
  }

  fail(code: string, message: string): void {
    if (this.state === "ended") return;
    this.emit("failed", { code, message });
    this.#finish();
  }

  /** The socket dropped: the server parks the call; frames are dropped meanwhile. */
  suspend(): void {
    if (this.state === "live" || this.state === "opening") this.state = "suspended";
  }

  resume(): void {
    if (this.state === "suspended") this.state = this.#wasLive ? "live" : "opening";
  }

  /** The connection closed for good, or another call replaced this one. */
  detach(): void {
    if (this.state !== "ended") this.#finish();
  }
}
