// The microphone's tap for a voice call (an AudioWorklet, loaded by
// voice.js): it hands the main thread the first input channel in blocks of
// 20 ms at the AudioContext's rate, where they are resampled, framed and
// sent. It makes no sound (its output stays silent).

const BLOCKS_PER_SECOND = 50;

class AgentwireCapture extends AudioWorkletProcessor {
  constructor() {
    super();
    // `sampleRate` is the AudioContext's, a global of the worklet scope.
    this.size = Math.max(128, Math.round(sampleRate / BLOCKS_PER_SECOND));
    this.block = new Float32Array(this.size);
    this.filled = 0;
  }

  process(inputs) {
    const channel = inputs[0]?.[0];
    if (!channel) return true;
    let at = 0;
    while (at < channel.length) {
      const take = Math.min(channel.length - at, this.size - this.filled);
      this.block.set(channel.subarray(at, at + take), this.filled);
      this.filled += take;
      at += take;
      if (this.filled === this.size) {
        this.port.postMessage(this.block, [this.block.buffer]);
        this.block = new Float32Array(this.size);
        this.filled = 0;
      }
    }
    return true;
  }
}

registerProcessor("agentwire-capture", AgentwireCapture);
