// An independent MCP client: the official TypeScript SDK, talking to arizukod's socket
// through socat exactly as Claude Code's settings.json entry does. Prints one JSON object.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const socket = process.argv[2];
const transport = new StdioClientTransport({
  command: "socat",
  args: ["STDIO", `UNIX-CONNECT:${socket}`],
  stderr: "inherit",
});
const client = new Client({ name: "arizuko-sdk-test", version: "1.0.0" });
await client.connect(transport);

const listed = await client.listTools();
const sent = await client.callTool({
  name: "send_message",
  arguments: { chat_jid: "tg:7", text: "from the official SDK" },
});
const denied = await client.callTool({ name: "spawn_group", arguments: { folder: "x", name: "x" } });
const bad = await client.callTool({ name: "send_message", arguments: { chat_jid: "tg:7" } });
let unknown = null;
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
} catch (e) {
  unknown = String(e.message);
}
console.log(JSON.stringify({
  server: client.getServerVersion(),
  tools: listed.tools.map((t) => ({ name: t.name, required: t.inputSchema.required ?? [] })),
  sent,
  denied,
  bad,
  unknown,
}));
await client.close();
