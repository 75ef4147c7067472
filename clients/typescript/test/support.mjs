// The tests' harness: the real agentwire binary on 127.0.0.1:0 with a
// config written here, a TCP proxy a test can cut, and the client built in
// dist/ (test.sh builds it first).
import { spawn } from "node:child_process";
import { createHash, createHmac } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";

export { WebSocket };
export const PKG = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const REPO = resolve(PKG, "../..");
export const BIN = process.env.AGENTWIRE_BIN ? resolve(process.env.AGENTWIRE_BIN) : join(REPO, "target/debug/agentwire");

export const ALICE_KEY = "ak_alice_ts_client_0123456789";
const sha256 = (text) => createHash("sha256").update(text).digest("hex");
const JWT_SECRET = "a-jwt-secret-for-the-ts-client-tests";

/** An HS256 JWT for alice that expires `lifeSeconds` from now. */
export function aliceJwt(lifeSeconds) {
  const b64 = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const body = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ iss: "https://issuer.test", aud: "agentwire", sub: "alice", iat: now, exp: now + lifeSeconds })}`;
  return `${body}.${createHmac("sha256", JWT_SECRET).update(body).digest("base64url")}`;
}

/** The agents every test server has. */
const AGENTS = `
voice_providers:
  - {name: echo-voice, type: mock, output: echo}
agents:
  - {name: test-agent, handler: test}
  - {name: short-lived, handler: test, context_ttl: 300ms}
  - {name: quick-tools, handler: test, ack_timeout: 300ms, client_tool_timeout: 600ms}
  - {name: voice-demo, handler: echo, voice: echo-voice}
teams:
  - {name: desk, orchestrator: test-agent, agents: [quick-tools]}
`;

/**
 * `agentwire serve` on a config of its own: an API key for alice (sessions
 * have an owner, so they can be rejoined), local media storage, the test
 * agents. Resolves once it logs its address.
 */
export async function startServer({ media } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "agentwire-ts-"));
  const config = join(dir, "agentwire.yaml");
  writeFileSync(
    config,
    `server:
  listen: 127.0.0.1:0
storage:
  sessions: sqlite://${join(dir, "agentwire.db")}
  media:
${media ?? `    backend: local\n    path: ${join(dir, "media")}`}
auth:
  pseudonym_key: "a-pseudonym-key-for-the-ts-client"
  api_keys:
    - id: alice-key
      sha256: "${sha256(ALICE_KEY)}"
      subject: alice
  jwt:
    issuer: https://issuer.test
    audience: agentwire
    hs256_secret: "${JWT_SECRET}"
    leeway: 0s
${AGENTS}`,
  );
  const child = spawn(BIN, ["serve", "--config", config], {
    env: { AWS_ACCESS_KEY_ID: "testing", AWS_SECRET_ACCESS_KEY: "testing", ...process.env, RUST_LOG: "info" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  // A test run that ends early (a timeout) takes its server with it.
  const killChild = () => child.kill("SIGKILL");
  process.once("exit", killChild);
  const log = [];
  const lines = createInterface({ input: child.stderr });
  const port = await new Promise((resolvePort, reject) => {
    const timer = setTimeout(() => reject(new Error(`agentwire did not listen within 20 s:\n${log.join("\n")}`)), 20_000);
    lines.on("line", (line) => {
      log.push(line);
      if (log.length > 200) log.shift();
      const match = /agentwire listening.*?127\.0\.0\.1:(\d+)/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolvePort(Number(match[1]));
      }
    });
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot start ${BIN}: ${error.message}`));
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`agentwire exited (${code}) before listening:\n${log.join("\n")}`));
    });
  }).catch((error) => {
    killChild();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  });
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    log,
    async stop() {
      process.off("exit", killChild);
      child.kill("SIGKILL");
      await new Promise((r) => (child.exitCode !== null ? r() : child.once("exit", r)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A TCP proxy to 127.0.0.1:`port`; `cut()` drops every connection through it, as a network change would. */
export async function startProxy(port) {
  const sockets = new Set();
  let connections = 0;
  const server = net.createServer((client) => {
    connections += 1;
    const upstream = net.connect(port, "127.0.0.1");
    sockets.add(client);
    sockets.add(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop);
    upstream.on("error", drop);
    client.on("close", drop);
    upstream.on("close", drop);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    get connections() {
      return connections;
    },
    cut() {
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((r) => server.close(r));
    },
  };
}

/** Rejects after `ms` with `what`, unless `promise` settles first. */
export function within(ms, promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The events of a turn, collected until it ends (its result or error as `outcome`). */
export async function collect(turn) {
  const events = [];
  let outcome;
  try {
    for await (const event of turn) events.push(event);
    outcome = { result: await turn.result };
  } catch (error) {
    outcome = { error };
  }
  return { events, ...outcome, text: events.filter((e) => e.type === "text").map((e) => e.delta).join("") };
}
