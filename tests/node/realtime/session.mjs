// One OpenAI Realtime conversation with the openai npm SDK's WebSocket client (`ws`), as an app's test would run
// it: the SDK reads OPENAI_BASE_URL. Prints {"events": every server event, "closed": {code, reason}}.
//   node tests/node/realtime/session.mjs TEXT [MODEL]
import OpenAI from "openai";
import { OpenAIRealtimeWS } from "openai/realtime/ws";

const [text, model = "gpt-realtime"] = process.argv.slice(2);
const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY ?? "sk-fake-openai-DO-NOT-STORE-0123456789abcdef" });
const rt = new OpenAIRealtimeWS({ model }, client);
const events = [];

rt.socket.on("open", () => {
  rt.send({ type: "session.update", session: { type: "realtime", instructions: "Be brief.", output_modalities: ["text"] } });
  rt.send({ type: "conversation.item.create", item: { type: "message", role: "user", content: [{ type: "input_text", text }] } });
  rt.send({ type: "response.create" });
});
rt.on("event", (event) => {
  events.push(event);
  if (event.type === "response.done") rt.close();
});
rt.on("error", () => {}); // an `error` event is in `events` too; the close that follows ends the run
rt.socket.on("close", (code, reason) => {
  console.log(JSON.stringify({ events, closed: { code, reason: reason.toString() } }));
});
