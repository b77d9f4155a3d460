// The official MCP TypeScript client calls `babel serve`'s graphs over
// streamable HTTP. Usage: node mcp-http.mjs BASE_URL TOKEN
// Prints one JSON object with what the client saw; serve/interop_test.go checks it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [base, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(base + "/mcp"), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "babel-interop", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const call = await client.callTool({ name: "pipeline", arguments: { input: "  from typescript  " } });
const leaky = await client.callTool({ name: "leaky", arguments: { input: "x" } });
let bad;
try {
  bad = await client.callTool({ name: "pipeline", arguments: { nope: 1 } });
} catch (e) {
  bad = { thrown: String(e.message ?? e) };
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify({ tools: tools.tools, call, leaky, bad }));
