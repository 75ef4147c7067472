// The build: tsc into dist/ (ES modules and .d.ts), then one bundled ES
// module, dist/agentwire-client.js, which the web console serves
// (crates/agentwire-server/console/agentwire-client.js, committed).
//
//   node scripts/build.mjs           builds and copies the bundle to the console
//   node scripts/build.mjs --check   builds, and exits 1 when the console's copy differs
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const consoleCopy = resolve(pkg, "../../crates/agentwire-server/console/agentwire-client.js");
const version = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")).version;

rmSync(join(pkg, "dist"), { recursive: true, force: true });
execFileSync(process.execPath, [join(pkg, "node_modules/typescript/bin/tsc"), "-p", join(pkg, "tsconfig.json")], {
  stdio: "inherit",
});
const bundle = join(pkg, "dist/agentwire-client.js");
await build({
  entryPoints: [join(pkg, "src/index.ts")],
  bundle: true,
  format: "esm",
  target: "es2022",
  platform: "neutral",
  outfile: bundle,
  legalComments: "none",
  banner: {
    js: `// @agentwire/client ${version}, bundled from clients/typescript by scripts/build.mjs. Do not edit: run \`npm run build\` there.`,
  },
  logLevel: "warning",
});
const built = readFileSync(bundle, "utf8");
if (process.argv.includes("--check")) {
  let copy = "";
  try {
    copy = readFileSync(consoleCopy, "utf8");
  } catch {
    // missing: differs
  }
  if (copy !== built) {
    console.error(`${consoleCopy} differs from a fresh build; run npm run build in clients/typescript and commit it`);
    process.exit(1);
  }
  console.log("the console's copy of the client is up to date");
} else {
  writeFileSync(consoleCopy, built);
  console.log(`built dist/ and ${consoleCopy}`);
}
