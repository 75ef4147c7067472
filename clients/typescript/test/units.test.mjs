// The client's pieces without a server: OMNI frames, media assembly, the
// voice call's framing and playback queue, backoff, the refresh schedule.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  MediaAssembler,
  OMNIA_BACKOFF,
  VoiceCall,
  backoffDelay,
  decodeOmniFrame,
  encodeOmniFrame,
  FLAG_CHUNKED,
  FLAG_IS_LAST,
  refreshDelay,
} from "../dist/index.js";

test("an OMNI frame round-trips, and a malformed one is refused", () => {
  const payload = new Uint8Array([1, 2, 3, 250]);
  const frame = encodeOmniFrame({ session_id: "s", mime_type: "audio/pcm" }, 7, payload, FLAG_IS_LAST, "media-1");
  assert.deepEqual([...frame.subarray(0, 4)], [0x4f, 0x4d, 0x4e, 0x49]);
  const decoded = decodeOmniFrame(frame);
  assert.equal(decoded.sequence, 7);
  assert.equal(decoded.flags, FLAG_IS_LAST);
  assert.equal(decoded.mediaId, "media-1");
  assert.deepEqual(decoded.metadata, { session_id: "s", mime_type: "audio/pcm" });
  assert.deepEqual([...decoded.payload], [...payload]);
  assert.equal(decodeOmniFrame(frame.subarray(0, frame.length - 1)), null, "truncated");
  assert.equal(decodeOmniFrame(new Uint8Array(40)), null, "no magic");
});

test("chunked binary media is assembled in chunk order", () => {
  const media = new MediaAssembler();
  const parts = [new Uint8Array([0, 1]), new Uint8Array([2, 3]), new Uint8Array([4])];
  const frame = (i, flags) =>
    decodeOmniFrame(encodeOmniFrame({ mime_type: "video/mp4", total_chunks: 3 }, i, parts[i], flags, "vid"));
  assert.equal(media.pushFrame(frame(1, FLAG_CHUNKED)), null);
  assert.equal(media.pushFrame(frame(0, FLAG_CHUNKED)), null);
  const item = media.pushFrame(frame(2, FLAG_CHUNKED | FLAG_IS_LAST));
  assert.deepEqual([...item.bytes], [0, 1, 2, 3, 4]);
  assert.equal(item.mime_type, "video/mp4");
});

function fakeCall() {
  const sent = [];
  const json = [];
  const call = new VoiceCall(
    { sampleRate: 16000 },
    { sendBytes: (b) => (sent.push(decodeOmniFrame(b)), true), sendFrame: (f) => json.push(f), sessionId: () => "sess", ended: () => {} },
  );
  return { call, sent, json };
}

test("a call cuts PCM16 into 20 ms frames at the proposed rate, then at session_config's", () => {
  const { call, sent, json } = fakeCall();
  assert.equal(call.sendPcm(new Uint8Array(1000)), 1, "640 bytes make a frame; 360 wait");
  assert.equal(sent[0].payload.length, 640);
  assert.equal(sent[0].metadata.sample_rate, 16000);
  assert.equal(sent[0].metadata.session_id, "sess");
  call.onConfig({ codec: "pcm", sample_rate: 24000, channels: 1 });
  assert.equal(call.frameBytes, 960);
  assert.equal(call.sendPcm(new Uint8Array(600)), 1, "360 + 600 = one 960-byte frame");
  assert.equal(sent[1].payload.length, 960);
  assert.equal(sent[1].metadata.sample_rate, 24000);
  assert.deepEqual(sent.map((f) => f.sequence), [0, 1]);
  call.sendPcm(new Uint8Array(10));
  call.end();
  assert.equal(sent[2].flags, FLAG_IS_LAST, "the last frame ends the call");
  assert.equal(sent[2].payload.length, 10);
  assert.equal(call.state, "ended");
  assert.deepEqual(json, []);
});

test("the playback queue holds the reply's audio until an interrupt flushes it", () => {
  const { call } = fakeCall();
  call.onConfig({ codec: "pcm", sample_rate: 16000, channels: 1 });
  call.onAudio(new Uint8Array(100));
  call.onAudio(new Uint8Array(60));
  assert.equal(call.playback.bufferedBytes, 160);
  let dropped = null;
  call.on("interrupt", (e) => (dropped = e.dropped_bytes));
  call.onInterrupt();
  assert.equal(dropped, 160);
  assert.equal(call.playback.bufferedBytes, 0);
  assert.equal(call.playback.take(), null);
});

test("backoff grows, is jittered within its bounds, and ends", () => {
  const opts = { ...OMNIA_BACKOFF, initialMs: 100, maxMs: 1000, attempts: 5, jitter: 0.5 };
  assert.equal(backoffDelay(opts, 0, () => 0), 100);
  assert.equal(backoffDelay(opts, 0, () => 1), 50);
  assert.equal(backoffDelay(opts, 3, () => 0), 800);
  assert.equal(backoffDelay(opts, 4, () => 0), 1000, "capped");
  assert.equal(backoffDelay(opts, 5), null, "no attempts left");
});

test("a JWT is refreshed before the server's deadline; an API key never", () => {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const now = 1_000_000_000_000;
  const jwt = (iat, exp) => `${b64({ alg: "HS256" })}.${b64({ iat, exp })}.sig`;
  // A 10-minute token: the server closes 30 s before expiry.
  const delay = refreshDelay(jwt(now / 1000, now / 1000 + 600), now);
  assert.ok(delay > 540_000 && delay < 570_000, String(delay));
  // A 20-second token: the deadline is half its life.
  const short = refreshDelay(jwt(now / 1000, now / 1000 + 20), now);
  assert.ok(short > 0 && short < 10_000, String(short));
  assert.equal(refreshDelay("ak_alice_0123456789", now), null);
});

test("a URL the WebSocket constructor refuses is a failed connection whose error does not carry the credential", async () => {
  const { OmniaClient } = await import("../dist/index.js");
  class Refusing {
    constructor(url) {
      throw new SyntaxError(`bad URL ${url}`);
    }
  }
  const c = new OmniaClient({ url: "http://127.0.0.1:1", agent: "a", token: "secret-token-1234", credentialIn: "query", WebSocket: Refusing, reconnect: false });
  await assert.rejects(c.connect(), (error) => {
    assert.equal(error.code, "CONNECT_FAILED");
    assert.ok(!error.message.includes("secret-token-1234"), error.message);
    return true;
  });
  assert.equal(c.state, "closed");
});
