// A stand-in daemon for what the real one cannot do on demand: on `run/start` it writes a
// `tools/call` and the `$/cancelRequest` for it in ONE write, so the client reads both before
// dispatching either. The `run/start` reply's `content` is the client's answer, as JSON.
// Run by client.test.ts as `node fake-daemon.js`.

let buffer = Buffer.alloc(0);
let runStartId: unknown;

function frame(message: Record<string, unknown>): string {
  const body = JSON.stringify({ jsonrpc: "2.0", ...message });
  return `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

function onMessage(message: Record<string, unknown>): void {
  const { id, method } = message;
  if (method === "initialize") {
    process.stdout.write(frame({ id, result: { capabilities: { experimental: { cleveragents: {
      protocolVersion: 1, methods: [], builtinTools: [] } } } } }));
  } else if (method === "run/start") {
    runStartId = id;
    const params = { runId: "fake", callId: "call_1_0", iteration: 1, name: "client/write",
                     arguments: {}, sandboxRoot: "/", resourceBindings: {} };
    process.stdout.write(
      frame({ id: "ca-1", method: "tools/call", params }) +
      frame({ method: "$/cancelRequest", params: { id: "ca-1", runId: "fake", callId: "call_1_0" } }),
    );
  } else if (message.id === "ca-1" && method === undefined) {
    const { jsonrpc: _, ...answer } = message;
    process.stdout.write(frame({ id: runStartId, result: {
      runId: "fake", status: "cancelled", content: JSON.stringify(answer), toolCallHistory: [],
      iterations: 1, terminatedByLimit: false, durationMs: 0 } }));
  } else if (method === "tools/register") {
    process.stdout.write(frame({ id, result: { registered: ["client/write"] } }));
  } else if (method === "shutdown") {
    process.stdout.write(frame({ id, result: null }));
  } else if (method === "exit") {
    process.exit(0);
  }
}

process.stdin.on("data", (chunk: Buffer) => {
  buffer = Buffer.concat([buffer, chunk]);
  for (;;) {
    const end = buffer.indexOf("\r\n\r\n");
    if (end < 0) return;
    const length = Number(/Content-Length: (\d+)/i.exec(buffer.subarray(0, end).toString())?.[1]);
    if (buffer.length < end + 4 + length) return;
    onMessage(JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString()));
    buffer = buffer.subarray(end + 4 + length);
  }
});
process.stdin.on("end", () => process.exit(0));
