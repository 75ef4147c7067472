// A voice call against voice-demo (the mock provider with `output: echo`):
// the caller's audio comes back byte for byte.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { OmniaClient } from "../dist/index.js";
import { ALICE_KEY, REPO, startProxy, startServer, WebSocket, within } from "./support.mjs";

const WEATHER_16K = new Uint8Array(readFileSync(join(REPO, "crates/agentwire/tests/fixtures/audio/weather-16k.pcm")));

let server;
before(async () => {
  server = await startServer();
});
after(() => server?.stop());

/** Where `needle` starts in `hay`, at a multiple of `step`; -1 when it is not there. */
function findAligned(hay, needle, step) {
  outer: for (let at = 0; at + needle.length <= hay.length; at += step) {
    for (let i = 0; i < needle.length; i += 1) if (hay[at + i] !== needle[i]) continue outer;
    return at;
  }
  return -1;
}

/** Sends `pcm` in 20 ms frames, two every 20 ms; resolves with the spoken response and the audio echoed meanwhile. */
async function speak(call, pcm) {
  const audio = [];
  const collect = (a) => audio.push(a);
  call.on("audio", collect);
  const responded = new Promise((r) => call.once("response_done", r));
  for (let at = 0; at < pcm.length; at += call.frameBytes * 2) {
    call.sendPcm(pcm.subarray(at, at + call.frameBytes * 2));
    await new Promise((r) => setTimeout(r, 20));
  }
  const done = await within(15_000, responded, "the spoken response");
  call.off("audio", collect);
  const echoed = new Uint8Array(audio.reduce((n, a) => n + a.length, 0));
  audio.reduce((at, a) => (echoed.set(a, at), at + a.length), 0);
  return { done, echoed };
}

test("a voice call relays the format, echoes the caller's audio byte for byte and transcribes both sides", async () => {
  const c = new OmniaClient({ url: server.url, agent: "voice-demo", token: ALICE_KEY, WebSocket });
  await c.connect();
  const call = c.startCall({ sampleRate: 16000 });
  const configs = [];
  const transcripts = [];
  const audio = [];
  call.on("config", (f) => configs.push(f));
  call.on("transcript", (t) => transcripts.push(t));
  call.on("audio", (a) => audio.push(a));
  const responded = new Promise((r) => call.once("response_done", r));
  // 20 ms frames, two per 20 ms (a little faster than real time).
  const frame = call.frameBytes;
  assert.equal(frame, 640);
  for (let at = 0; at < WEATHER_16K.length; at += frame * 2) {
    call.sendPcm(WEATHER_16K.subarray(at, at + frame * 2));
    await new Promise((r) => setTimeout(r, 20));
  }
  const done = await within(15_000, responded, "the spoken response");
  assert.deepEqual(configs, [{ codec: "pcm", sample_rate: 16000, channels: 1 }]);
  assert.equal(transcripts[0].role, "user");
  assert.match(transcripts[0].text, /^utterance 1 \(/);
  assert.equal(done.text, "I heard you.");
  const echoed = new Uint8Array(audio.reduce((n, a) => n + a.length, 0));
  audio.reduce((at, a) => (echoed.set(a, at), at + a.length), 0);
  assert.ok(echoed.length >= 16_000, `at least half a second echoed: ${echoed.length}`);
  const start = findAligned(WEATHER_16K, echoed, 640);
  assert.ok(start >= 0, "the echo is a run of the caller's own bytes, in order");
  assert.equal(call.playback.bufferedBytes, echoed.length, "queued for playback");
  call.hangup();
  assert.equal(call.state, "ended");
  assert.equal(call.playback.bufferedBytes, 0);
  // Text on the same socket still runs as a turn.
  assert.equal((await within(5000, c.send("typed").result, "text turn")).content, "Echo: typed");
  c.close();
});

test("a call goes on across a dropped socket: the rejoined connection takes the parked call back", async () => {
  const proxy = await startProxy(server.port);
  const c = new OmniaClient({ url: proxy.url, agent: "voice-demo", token: ALICE_KEY, WebSocket, reconnect: { initialMs: 50, maxMs: 200, attempts: 5, jitter: 0.5 } });
  await c.connect();
  const call = c.startCall();
  const users = [];
  call.on("transcript", (t) => t.role === "user" && users.push(t.text));
  const first = await speak(call, WEATHER_16K);
  assert.equal(first.done.text, "I heard you.");
  const configs = [];
  call.on("config", (f) => configs.push(f));
  const rejoined = new Promise((r) => c.once("rejoin", r));
  proxy.cut();
  await within(5000, rejoined, "the rejoin");
  for (let i = 0; i < 100 && !configs.length; i += 1) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(configs, [{ codec: "pcm", sample_rate: 16000, channels: 1 }], "session_config again on the new socket");
  assert.equal(call.state, "live");
  const second = await speak(call, WEATHER_16K);
  assert.equal(second.done.text, "I heard you.");
  assert.match(users[1], /^utterance 2 \(/, "the same call: its second utterance");
  // The first call's last partial frame went out ahead of this audio: a run of it, sample-aligned.
  const sent = new Uint8Array(WEATHER_16K.length * 2);
  sent.set(WEATHER_16K);
  sent.set(WEATHER_16K, WEATHER_16K.length);
  assert.ok(second.echoed.length >= 16_000, `half a second echoed: ${second.echoed.length}`);
  assert.ok(findAligned(sent, second.echoed, 2) >= 0, "echoed byte for byte");
  call.hangup();
  c.close();
  await proxy.close();
});
