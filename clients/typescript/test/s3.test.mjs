// An upload to S3-compatible storage: the bytes go to the presigned URL,
// then POST /media/confirm-upload. Runs when AGENTWIRE_TEST_S3_ENDPOINT
// names an S3-compatible server (scripts/moto.sh start prints it), else
// it is skipped.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { OmniaClient } from "../dist/index.js";
import { ALICE_KEY, startServer, WebSocket, within } from "./support.mjs";

const endpoint = process.env.AGENTWIRE_TEST_S3_ENDPOINT;

test("an upload to S3 is confirmed, and the agent gets it by storage_ref", { skip: !endpoint && "AGENTWIRE_TEST_S3_ENDPOINT is not set" }, async () => {
  const bucket = `ts-client-${randomUUID().slice(0, 8)}`;
  assert.equal((await fetch(`${endpoint}/${bucket}`, { method: "PUT" })).status, 200, "the bucket is made");
  const server = await startServer({ media: `    backend: s3\n    endpoint: ${endpoint}\n    bucket: ${bucket}\n    region: us-east-1` });
  try {
    const c = new OmniaClient({ url: server.url, agent: "test-agent", token: ALICE_KEY, WebSocket });
    await c.connect();
    const bytes = new Uint8Array(5000).map((_, i) => (i * 7) % 256);
    const upload = await within(10_000, c.upload(bytes, { filename: "scan.png", mime_type: "image/png" }), "the upload");
    const result = await within(
      5000,
      c.send({ parts: [{ type: "text", text: "look" }, upload.part], metadata: { mock_scenario: "parts" } }).result,
      "the turn",
    );
    assert.deepEqual(result.parts, [{ type: "text", text: "I see your image" }]);
    // Confirmed: the server knows the item, and its download is the bytes sent.
    const [, session, , media] = upload.storage_ref.replace("omnia://", "").split("/");
    const info = await fetch(`${server.url}/media/info/${session}/${media}`, { headers: { Authorization: `Bearer ${ALICE_KEY}` } });
    assert.equal(info.status, 200);
    assert.equal((await info.json()).size_bytes, bytes.length);
    const download = await fetch(`${server.url}/media/download/${session}/${media}`, { headers: { Authorization: `Bearer ${ALICE_KEY}` } });
    assert.deepEqual(new Uint8Array(await download.arrayBuffer()), bytes);
    c.close();
  } finally {
    await server.stop();
  }
});
