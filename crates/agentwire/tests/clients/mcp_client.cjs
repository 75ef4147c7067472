// Drives agentwire's /mcp with the official TypeScript MCP client
// (@modelcontextprotocol/sdk 1.32.2; NODE_PATH names its node_modules).
//
// Usage: node mcp_client.cjs URL TOKEN COMMAND [ARGS...]; TOKEN "-" is none.
// Prints one JSON object on stdout.
//
//   list                                  the tools' names
//   call TOOL ARGS_JSON [META_JSON]       one call: isError, text, structured
//   progress TOOL ARGS_JSON META_JSON TIMEOUT_MS RESET(yes|no)
//                                         a call with a request timeout, which
//                                         progress resets or not: the progress
//                                         seen, then the result or the error
//   cancel TOOL ARGS_JSON META_JSON AFTER_MS
//                                         a call aborted after AFTER_MS: the
//                                         client sends notifications/cancelled
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

function resultJson(result) {
  const text = result.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
  return { isError: Boolean(result.isError), text, structured: result.structuredContent ?? null };
}

async function main([url, token, command, ...args]) {
  const headers = token === '-' ? {} : { Authorization: `Bearer ${token}` };
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'agentwire-e2e', version: '1.0.0' });
  await client.connect(transport);
  const out = { protocol: transport.protocolVersion ?? null };
  if (command === 'list') {
    out.tools = (await client.listTools()).tools.map((t) => t.name);
  } else if (command === 'call') {
    const params = { name: args[0], arguments: JSON.parse(args[1]) };
    if (args[2]) params._meta = JSON.parse(args[2]);
    Object.assign(out, resultJson(await client.callTool(params)));
  } else if (command === 'progress') {
    const seen = [];
    const params = { name: args[0], arguments: JSON.parse(args[1]), _meta: JSON.parse(args[2]) };
    try {
      const result = await client.callTool(params, undefined, {
        timeout: Number(args[3]),
        resetTimeoutOnProgress: args[4] === 'yes',
        onprogress: (p) => seen.push({ progress: p.progress, message: p.message ?? null }),
      });
      Object.assign(out, resultJson(result));
    } catch (error) {
      out.error = String(error.code ?? error.name);
    }
    out.progress = seen;
  } else if (command === 'cancel') {
    const controller = new AbortController();
    const params = { name: args[0], arguments: JSON.parse(args[1]), _meta: JSON.parse(args[2]) };
    setTimeout(() => controller.abort('the test cancels'), Number(args[3]));
    try {
      await client.callTool(params, undefined, { signal: controller.signal });
      out.aborted = false;
    } catch (error) {
      out.aborted = true;
    }
    // Give the cancel notification time to be sent before closing.
    await new Promise((resolve) => setTimeout(resolve, 200));
  } else {
    throw new Error(`unknown command ${command}`);
  }
  await client.close();
  console.log(JSON.stringify(out));
}

main(process.argv.slice(2)).catch((error) => {
  console.error(String(error && error.stack ? error.stack : error));
  process.exit(1);
});
