// The official A2A JavaScript client reads `babel serve`'s agent card,
// sends a message to a graph, reads the task back and streams a second one.
// Usage: node a2a.mjs BASE_URL TOKEN
// Prints one JSON object (A2A wire JSON) that serve/interop_test.go checks.
import { Role, StreamResponse, Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";

const [base, token] = process.argv.slice(2);
const authFetch = (input, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
  }),
);
const client = await factory.createFromUrl(base);

const message = (text, graph) => ({
  messageId: crypto.randomUUID(),
  contextId: "",
  taskId: "",
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
  metadata: { graph },
  extensions: [],
  referenceTaskIds: [],
});
const request = (msg) => ({ tenant: "", message: msg, configuration: undefined, metadata: undefined });

const sent = await client.sendMessage(request(message("  from javascript  ", "pipeline")));
const task = await client.getTask({ tenant: "", id: sent.id });
const events = [];
// nap sleeps 300 ms first, so the stream sees the run working, not only its end.
for await (const ev of client.sendMessageStream(request(message("streamed", "nap")))) {
  events.push(StreamResponse.toJSON(ev));
}
let missing = null;
try {
  await client.getTask({ tenant: "", id: "0123456789abcdef01234567" });
} catch (e) {
  missing = String(e.message ?? e);
}
console.log(JSON.stringify({ sent: Task.toJSON(sent), task: Task.toJSON(task), events, missing }));
