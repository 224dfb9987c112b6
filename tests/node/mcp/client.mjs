// One MCP conversation with the official TypeScript SDK over streamable HTTP, as a user's code holds one:
// `node client.mjs URL [TOOL JSON_ARGS]...` lists the tools, calls each given tool and prints
// {"tools": [...], "calls": [{"text"} or {"error"}]} as JSON. `cassette run` routes its fetch through the proxy.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, ...calls] = process.argv.slice(2);
const client = new Client({ name: 'cassette-node-test', version: '1.0.0' });
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
const tools = (await client.listTools()).tools.map(tool => tool.name).sort();
const results = [];
for (let i = 0; i < calls.length; i += 2) {
  try {
    const result = await client.callTool({ name: calls[i], arguments: JSON.parse(calls[i + 1]) });
    results.push({ text: result.content.map(block => block.text ?? '').join('') });
  } catch (error) {
    results.push({ error: `${error.name}: ${error.message}` });
  }
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify({ tools, calls: results }));
