// The official MCP TypeScript client starts an MCP server over stdio (what
// `babel mcp FILE...` is) and calls a graph.
// Usage: node mcp-stdio.mjs COMMAND [ARG...]; the environment is passed on.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "babel-interop", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const call = await client.callTool({ name: "pipeline", arguments: { input: "  over stdio  " } });
await client.close();
console.log(JSON.stringify({ tools: tools.tools.map((t) => t.name), call }));
