// The package as published: `npm pack`, installed into a clean directory,
// imported there (ESM, declarations, no runtime dependencies).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { PKG } from "./support.mjs";

test("npm pack gives a tarball that installs and imports in a clean directory", () => {
  const dir = mkdtempSync(join(tmpdir(), "agentwire-pack-"));
  try {
    const out = execFileSync("npm", ["pack", "--pack-destination", dir, "--ignore-scripts", "--json"], { cwd: PKG, encoding: "utf8" });
    const [info] = JSON.parse(out);
    const files = info.files.map((f) => f.path);
    assert.ok(files.includes("dist/index.js") && files.includes("dist/index.d.ts"), files.join(" "));
    assert.ok(!files.some((f) => f.startsWith("src/") || f.startsWith("test/")), "only the build ships");
    const app = join(dir, "app");
    execFileSync("mkdir", ["-p", app]);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", version: "1.0.0", type: "module", private: true }));
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--offline", join(dir, info.filename)], { cwd: app, encoding: "utf8" });
    const installed = join(app, "node_modules/@agentwire/client");
    assert.ok(existsSync(join(installed, "dist/index.d.ts")));
    const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
    assert.equal(manifest.dependencies, undefined, "no runtime dependencies");
    writeFileSync(
      join(app, "main.mjs"),
      `import { OmniaClient, GnosariClient, encodeOmniFrame, decodeOmniFrame } from "@agentwire/client";
const f = decodeOmniFrame(encodeOmniFrame({ mime_type: "audio/pcm" }, 3, new Uint8Array([9])));
console.log(JSON.stringify({ omnia: typeof OmniaClient, gnosari: typeof GnosariClient, seq: f.sequence }));`,
    );
    const printed = execFileSync(process.execPath, ["main.mjs"], { cwd: app, encoding: "utf8" });
    assert.deepEqual(JSON.parse(printed), { omnia: "function", gnosari: "function", seq: 3 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
