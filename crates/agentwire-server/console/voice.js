// Voice calls (README "Voice calls"): the microphone goes out as PCM16
// through the client's call object (agentwire-client.js, which frames it as
// binary OMNI frames on the console's connection), the reply's audio comes
// back through the same object and is played gaplessly through an
// AudioContext.
//
// A call: the first 20 ms frame, resampled to 16 kHz mono, opens it (its
// metadata is the format proposal); the audio captured meanwhile is held
// until `session_config` names the call's format, then everything is
// resampled to that rate and sent in 20 ms frames, sequence counting from 0.
// The reply's PCM (at the same rate) is resampled to the context's rate and
// scheduled buffer after buffer; `interrupt` (barge-in) stops and drops
// whatever is scheduled. Hang-up sends `hangup` and releases the microphone.
//
// What a call did is counted on `stats` (an element): data-sent-frames,
// data-received-frames, data-scheduled-samples, data-played-samples
// (samples whose playback ended), data-dropped-samples (scheduled, then
// flushed by an interrupt or the hang-up), data-interrupts,
// data-sample-rate (the call's, from session_config).

const WORKLET_URL = "/console/voice-worklet.js";
/** The opening frame's proposal (what voice providers commonly speak). */
export const PROPOSED_RATE = 16000;
const FRAME_MS = 20;
/** How long the server may take to answer the opening frame. */
const CONFIG_TIMEOUT_MS = 8000;
/** Captured 20 ms blocks held while `session_config` is awaited (3 s). */
const PENDING_LIMIT = 150;
/** Playback starts this far ahead after a pause, against jitter. */
const PLAYBACK_LEAD_S = 0.06;

import { fromPcm16, toPcm16 } from "./agentwire-client.js";

/** Whether this browser can take a call: a microphone API and AudioWorklet (secure contexts only). */
export function voiceSupported() {
  return Boolean(
    window.isSecureContext &&
      navigator.mediaDevices?.getUserMedia &&
      (window.AudioContext || window.webkitAudioContext) &&
      window.AudioWorkletNode,
  );
}

// ------------------------------------------------------------ the audio

/**
 * A streaming linear-interpolation resampler: blocks in at `from` Hz, blocks
 * out at `to` Hz, continuous across blocks (one input sample of delay).
 * Downsampling relies on a low-pass before it (the capture graph has one).
 */
export class Resampler {
  constructor(from, to) {
    this.step = from / to;
    /** Where the next output sample lies, in input samples from the next block's start (-1 is `prev`). */
    this.pos = 0;
    this.prev = 0;
  }

  push(input) {
    const n = input.length;
    if (!n) return new Float32Array(0);
    const step = this.step;
    let pos = this.pos;
    const out = new Float32Array(Math.max(0, Math.ceil((n - 1 - pos) / step)) + 1);
    let count = 0;
    while (pos < n - 1) {
      const i = Math.floor(pos);
      const frac = pos - i;
      const a = i < 0 ? this.prev : input[i];
      const b = input[i + 1];
      out[count] = a + (b - a) * frac;
      count += 1;
      pos += step;
    }
    this.pos = pos - n;
    this.prev = input[n - 1];
    return out.subarray(0, count);
  }
}

// -------------------------------------------------------------- the call

/**
 * One call, from the Call button to the hang-up. `options`:
 * - `link`: the client's call object (`OmniaClient.startCall`), which
 *   sends the frames and delivers `session_config`, the reply's audio and
 *   `interrupt`.
 * - `onState(state, {speaking})`: "starting" (asking for the microphone),
 *   "connecting" (the opening frame is out), "live", "idle" (over).
 * - `onFailure(code, message)`: the call ended on this side's account.
 * - `stats`: the element the counters are written on.
 */
export class VoiceCall {
  constructor(options) {
    this.options = options;
    this.link = options.link;
    this.link.on("config", (config) => this.onConfig(config));
    this.link.on("audio", () => {
      for (let chunk = this.link.playback.take(); chunk; chunk = this.link.playback.take()) this.onAudio(chunk);
    });
    this.link.on("interrupt", () => this.interrupt());
    this.state = "idle";
    this.speaking = false;
    this.ctx = null;
    this.stream = null;
    this.nodes = [];
    this.lowpass = [];
    this.output = null;
    this.opened = false;
    this.pending = [];
    this.config = null;
    this.sequence = 0;
    this.capture = null;
    this.frame = null;
    this.filled = 0;
    this.playback = null;
    this.nextFrame = 0;
    /** Scheduled buffers not yet ended → their length in the call's samples. */
    this.playing = new Map();
    this.configTimer = null;
    this.stats = {
      sentFrames: 0,
      receivedFrames: 0,
      scheduledSamples: 0,
      playedSamples: 0,
      droppedSamples: 0,
      interrupts: 0,
      sampleRate: 0,
    };
    this.publish();
  }

  get active() {
    return this.state !== "idle";
  }

  setState(state) {
    const speaking = state === "live" && this.playing.size > 0;
    if (state === this.state && speaking === this.speaking) return;
    this.state = state;
    this.speaking = speaking;
    this.options.onState?.(state, { speaking });
  }

  publish() {
    const element = this.options.stats;
    if (!element) return;
    for (const [key, value] of Object.entries(this.stats)) element.dataset[key] = String(value);
  }

  /** Asks for the microphone and starts capturing; call it from the click itself. */
  async start() {
    this.setState("starting");
    // Made in the click's task, so it may run without another gesture.
    const Context = window.AudioContext || window.webkitAudioContext;
    const ctx = new Context({ latencyHint: "interactive" });
    this.ctx = ctx;
    try {
      const [stream] = await Promise.all([
        navigator.mediaDevices.getUserMedia({
          audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
          video: false,
        }),
        ctx.audioWorklet.addModule(WORKLET_URL),
      ]);
      if (this.ctx !== ctx) {
        // Hung up while the browser asked.
        for (const track of stream.getTracks()) track.stop();
        return;
      }
      this.stream = stream;
      await ctx.resume();
      if (this.ctx !== ctx) return;
      this.wire(ctx, stream);
      this.setState("connecting");
    } catch (error) {
      if (this.ctx !== ctx) return;
      const denied = error?.name === "NotAllowedError" || error?.name === "SecurityError";
      this.fail(
        denied ? "MIC_DENIED" : "MIC_UNAVAILABLE",
        denied ? "the microphone was not allowed" : `no microphone: ${error?.message ?? error}`,
      );
    }
  }

  /** microphone → two low-passes (against aliasing) → the worklet tap → silence. */
  wire(ctx, stream) {
    const source = ctx.createMediaStreamSource(stream);
    this.lowpass = [0, 1].map(() => {
      const filter = ctx.createBiquadFilter();
      filter.type = "lowpass";
      filter.Q.value = Math.SQRT1_2;
      return filter;
    });
    this.tuneLowpass(PROPOSED_RATE);
    const tap = new AudioWorkletNode(ctx, "agentwire-capture", {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      channelCount: 1,
      channelCountMode: "explicit",
      channelInterpretation: "speakers",
    });
    tap.port.onmessage = (event) => this.captured(event.data);
    // Nodes are pulled from the destination: the tap is connected to it
    // through a muted gain, so it runs without being heard.
    const mute = ctx.createGain();
    mute.gain.value = 0;
    source.connect(this.lowpass[0]).connect(this.lowpass[1]).connect(tap).connect(mute).connect(ctx.destination);
    this.output = ctx.createGain();
    this.output.connect(ctx.destination);
    this.nodes = [source, ...this.lowpass, tap, mute, this.output];
  }

  tuneLowpass(rate) {
    if (!this.ctx) return;
    const cutoff = Math.min(rate, this.ctx.sampleRate) * 0.45;
    for (const filter of this.lowpass) filter.frequency.value = cutoff;
  }

  /** A 20 ms block at the context's rate from the worklet. */
  captured(block) {
    if (this.state === "connecting" && !this.opened) {
      this.open(block);
    } else if (this.state === "connecting") {
      this.pending.push(block);
      if (this.pending.length > PENDING_LIMIT) this.pending.shift();
    } else if (this.state === "live") {
      this.feed(block);
    }
  }

  /** The opening frame: 20 ms at the proposed 16 kHz mono. */
  open(block) {
    this.opened = true;
    const samples = new Resampler(this.ctx.sampleRate, PROPOSED_RATE).push(block);
    this.sendAudio(samples, PROPOSED_RATE, 1);
    if (this.state === "idle") return;
    this.configTimer = setTimeout(
      () => this.fail("NO_SESSION_CONFIG", "the server did not answer the call (no session_config)"),
      CONFIG_TIMEOUT_MS,
    );
  }

  /** `session_config`: the format of the rest of the call. */
  onConfig(config) {
    if (!this.opened || !this.ctx) return;
    clearTimeout(this.configTimer);
    const rate = Number(config?.sample_rate);
    const channels = Number(config?.channels ?? 1);
    if ((config?.codec && config.codec !== "pcm") || !(rate >= 8000 && rate <= 48000) || !(channels >= 1 && channels <= 2)) {
      this.fail("UNSATISFIABLE_FORMAT", `cannot speak ${JSON.stringify(config)}`);
      return;
    }
    const same = this.config && this.config.rate === rate && this.config.channels === channels;
    if (!same) {
      this.config = { rate, channels };
      this.capture = new Resampler(this.ctx.sampleRate, rate);
      this.frame = new Float32Array(Math.round((rate * FRAME_MS) / 1000));
      this.filled = 0;
      this.playback = new Resampler(rate, this.ctx.sampleRate);
      this.tuneLowpass(rate);
      this.stats.sampleRate = rate;
      this.publish();
    }
    this.setState("live");
    for (const block of this.pending.splice(0)) this.feed(block);
  }

  /** Captured audio, resampled to the call's rate and cut in 20 ms frames. */
  feed(block) {
    const samples = this.capture.push(block);
    let at = 0;
    while (at < samples.length && this.state === "live") {
      const take = Math.min(samples.length - at, this.frame.length - this.filled);
      this.frame.set(samples.subarray(at, at + take), this.filled);
      this.filled += take;
      at += take;
      if (this.filled === this.frame.length) {
        this.sendAudio(this.frame, this.config.rate, this.config.channels);
        this.filled = 0;
      }
    }
  }

  sendAudio(samples, rate, channels) {
    // The link names the call's format in each frame's metadata: the
    // proposal until session_config, then the call's (`rate`, `channels`).
    if (!this.link.sendAudioFrame(toPcm16(samples, channels))) {
      this.fail("NOT_CONNECTED", "the connection closed during the call");
      return;
    }
    this.stats.sentFrames += 1;
    this.publish();
  }

  /** A binary frame of the reply's audio: scheduled right after the previous one. */
  onAudio(payload) {
    if (this.state !== "live" || !this.playback) return;
    const ctx = this.ctx;
    const mono = fromPcm16(payload, this.config.channels);
    this.stats.receivedFrames += 1;
    const out = this.playback.push(mono);
    if (out.length) {
      const buffer = ctx.createBuffer(1, out.length, ctx.sampleRate);
      buffer.copyToChannel(out, 0);
      const source = ctx.createBufferSource();
      source.buffer = buffer;
      source.connect(this.output);
      // The playhead counts whole frames of the context: buffers follow
      // each other sample for sample. After a pause it restarts a little
      // ahead of now.
      const rate = ctx.sampleRate;
      if (this.nextFrame < Math.ceil((ctx.currentTime + 0.005) * rate)) {
        this.nextFrame = Math.ceil((ctx.currentTime + PLAYBACK_LEAD_S) * rate);
      }
      source.start(this.nextFrame / rate);
      this.nextFrame += out.length;
      const samples = mono.length;
      this.playing.set(source, samples);
      source.onended = () => {
        this.playing.delete(source);
        source.disconnect();
        if (this.ctx !== ctx) return;
        this.stats.playedSamples += samples;
        this.publish();
        this.setState(this.state);
      };
    }
    this.stats.scheduledSamples += mono.length;
    this.publish();
    this.setState(this.state);
  }

  /** `interrupt`: the caller spoke over the reply; what is scheduled goes. */
  interrupt() {
    this.flushPlayback();
    this.stats.interrupts += 1;
    this.publish();
    this.setState(this.state);
  }

  flushPlayback() {
    for (const [source, samples] of this.playing) {
      this.stats.droppedSamples += samples;
      source.onended = null;
      try {
        source.stop();
      } catch {
        // not started yet
      }
      source.disconnect();
    }
    this.playing.clear();
    this.nextFrame = 0;
    if (this.config && this.ctx) this.playback = new Resampler(this.config.rate, this.ctx.sampleRate);
    this.publish();
  }

  /** The user hung up: `hangup`, then the microphone and playback are released. */
  hangUp() {
    this.end(true);
  }

  /**
   * Ends the call on this side. `hangup` tells the server (when the socket
   * is open), also after a failure: frames already on the way may have
   * opened another call there.
   */
  end(hangup) {
    if (this.state === "idle") return;
    if (hangup) this.link.hangup();
    else this.link.detach();
    clearTimeout(this.configTimer);
    this.flushPlayback();
    for (const track of this.stream?.getTracks() ?? []) track.stop();
    for (const node of this.nodes) {
      if (node.port) node.port.onmessage = null;
      node.disconnect();
    }
    const ctx = this.ctx;
    this.ctx = null;
    this.stream = null;
    this.nodes = [];
    this.pending = [];
    ctx?.close().catch(() => {});
    this.setState("idle");
  }

  fail(code, message) {
    if (this.state === "idle") return;
    this.end(true);
    this.options.onFailure?.(code, message);
  }
}
