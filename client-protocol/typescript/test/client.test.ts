// End to end against the REAL daemon: `$CLEVERAGENTS_PYTHON -m cleveragents serve`, the
// Python defaulting to the repository's .venv. Models are inline scripted ones.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import * as jsonrpc from "vscode-jsonrpc/node";
import { ResponseError } from "vscode-jsonrpc/node";
import * as index from "../src/index";
import {
  CancellationTokenSource,
  CleverAgentsClient,
  DaemonExitedError,
  type DaemonExit,
  ErrorCodes,
  type McpElicitParams,
  Methods,
  type PermissionRequestParams,
  type ProgressEvent,
  type RunEvent,
  type SpawnOptions,
  type ToolCallContext,
  type ToolCallNotification,
  type ToolDefinition,
  type WorkDoneProgress,
} from "../src/index";
import { ErrorCodes as DaemonErrorCodes } from "../src/protocol";

const PACKAGE_DIR = resolve(__dirname, "..", ".."); // dist/test -> the package
const PYTHON = pythonPath(process.env.CLEVERAGENTS_PYTHON);
const TEST_TIMEOUT_MS = 30_000;
const WAIT_MS = 10_000;

function pythonPath(fromEnv: string | undefined): string {
  if (!fromEnv) return resolve(PACKAGE_DIR, "..", "..", ".venv", "bin", "python");
  return fromEnv.includes("/") ? resolve(PACKAGE_DIR, fromEnv) : fromEnv; // bare: from PATH
}

function script(...turns: Record<string, unknown>[]): Record<string, unknown> {
  return { provider: "scripted", script: turns };
}

function call(name: string, args: Record<string, unknown> = {}): Record<string, unknown> {
  return { name, arguments: args };
}

/** `promise`, or a rejection naming `what` after `ms`. */
async function within<T>(promise: Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

interface Fixture {
  client: CleverAgentsClient;
  workspace: string;
  events: RunEvent[];
  /** Resolves with the first event (already seen or to come) matching `predicate`. */
  waitFor(predicate: (event: RunEvent) => boolean): Promise<RunEvent>;
}

/** A temp workspace and state dir, a spawned daemon, and every run event it sends;
 * the daemon is always closed and the temp dir removed. */
async function withDaemon(
  options: Partial<SpawnOptions>,
  body: (fixture: Fixture) => Promise<void>,
): Promise<void> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "cleveragents-ts-")));
  const workspace = join(root, "workspace");
  mkdirSync(workspace);
  writeFileSync(join(workspace, "hello.txt"), "hello world\n");
  let client: CleverAgentsClient | undefined;
  try {
    client = await CleverAgentsClient.spawn({
      workspace,
      command: [PYTHON, "-m", "cleveragents", "serve"],
      stateDir: join(root, "state"),
      ...options,
    });
    const events: RunEvent[] = [];
    const waiters: { predicate: (e: RunEvent) => boolean; resolve: (e: RunEvent) => void }[] = [];
    client.onEvent((event) => {
      events.push(event);
      for (const waiter of [...waiters]) {
        if (waiter.predicate(event)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(event);
        }
      }
    });
    const waitFor = (predicate: (event: RunEvent) => boolean): Promise<RunEvent> => {
      const seen = events.find(predicate);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolveEvent) => waiters.push({ predicate, resolve: resolveEvent }));
    };
    await body({ client, workspace, events, waitFor });
  } finally {
    if (client !== undefined) {
      const code = await client.close(5_000);
      assert.equal(code, 0, `the daemon exited with ${code}:\n${client.stderr}`);
    }
    rmSync(root, { recursive: true, force: true });
  }
}

/** A client tool that waits until the daemon cancels the call (bounded by a fallback). */
function hangingTool(onAbort: () => void = () => undefined, onEnter: () => void = () => undefined) {
  return (_input: Record<string, unknown>, { signal }: ToolCallContext) =>
    new Promise((resolveTool) => {
      assert.equal(signal.aborted, false); // the client does not start a cancelled call
      onEnter();
      const fallback = setTimeout(() => resolveTool("never cancelled"), 20_000).unref();
      signal.addEventListener("abort", () => {
        clearTimeout(fallback);
        onAbort();
        resolveTool("aborted");
      });
    });
}

const ECHO: ToolDefinition = {
  name: "client/echo",
  description: "Echo the arguments back.",
  inputSchema: { type: "object" },
  annotations: { readOnly: true },
};

test("a run calls a client tool and builtin tools, streaming gap-free notifications",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    const asked: PermissionRequestParams[] = [];
    const args = { text: "hi", nested: { list: [1, 2.5, null, "x"], flag: false }, sandbox_root: "/" };
    const model = script(
      { content: "looking", toolCalls: [
        call("client/echo", args),
        call("builtin/file-read", { path: "hello.txt" }),
        call("builtin/file-write", { path: "new.txt", content: "written" }),
      ] },
      { content: "all done" },
    );
    await withDaemon({
      model,
      onPermission: async (request) => {
        asked.push(request);
        return "allow_once" as const;
      },
    }, async ({ client, workspace, events }) => {
      assert.equal(client.capabilities.protocolVersion, 1);
      assert.ok(client.capabilities.builtinTools.includes("builtin/file-read"));

      const calls: ToolCallContext[] = [];
      assert.deepEqual(await client.registerTool(ECHO, (input, context) => {
        calls.push(context);
        return { echoed: input };
      }), ["client/echo"]);
      const tools = await client.listTools();
      assert.equal(tools.find((t) => t.name === "client/echo")?.source, "client");
      assert.equal(tools.find((t) => t.name === "builtin/file-read")?.source, "builtin");

      const own: RunEvent[] = [];
      const result = await within(
        client.run("go", { runId: "ts-run", resourceBindings: { db: "main" },
                           onEvent: (event) => own.push(event) }),
        "run/start",
      );

      assert.equal(result.status, "completed");
      assert.equal(result.content, "all done");
      assert.equal(result.iterations, 2);
      const [echo, read, write] = result.toolCallHistory;
      assert.ok(echo && read && write);
      assert.deepEqual([echo.success, read.success, write.success], [true, true, true]);
      assert.deepEqual(echo.output, { echoed: args });
      assert.match(String(JSON.stringify(read.output)), /hello world/);
      assert.equal(readFileSync(join(workspace, "new.txt"), "utf8"), "written");

      assert.equal(calls.length, 1);
      const [context] = calls;
      assert.ok(context);
      assert.equal(context.sandboxRoot, workspace);
      assert.deepEqual(context.arguments, args); // exactly what the model sent
      assert.deepEqual(context.resourceBindings, { db: "main" });
      assert.deepEqual([context.runId, context.name, context.iteration], ["ts-run", "client/echo", 1]);
      assert.equal(context.callId, echo.callId);
      assert.equal(context.signal.aborted, false);

      assert.deepEqual(asked.map((r) => [r.runId, r.toolName]), [["ts-run", "builtin/file-write"]]);
      // What the tool will receive: the model's arguments plus the run's reserved values.
      assert.deepEqual(asked[0]?.inputs, {
        path: "new.txt", content: "written", sandbox_root: workspace, resource_bindings: { db: "main" },
      });
      assert.equal(asked[0]?.callId, write.callId);

      const mine = events.filter((e) => e.params.runId === "ts-run");
      assert.deepEqual(own, mine);
      assert.deepEqual(mine.map((e) => e.params.seq), mine.map((_, i) => i + 1));
      assert.equal(mine[0]?.method, Methods.RUN_STARTED);
      const last = mine[mine.length - 1];
      assert.ok(last?.method === Methods.RUN_FINISHED);
      assert.deepEqual(last.params.result, result);
      const started = mine[0];
      assert.ok(started?.method === Methods.RUN_STARTED);
      assert.equal(started.params.sandboxRoot, workspace);
      assert.ok(started.params.tools.includes("client/echo"));
      assert.deepEqual(
        mine.filter((e) => e.method === Methods.RUN_TOOL_CALL_STARTED).map((e) =>
          e.method === Methods.RUN_TOOL_CALL_STARTED ? e.params.toolName : ""),
        ["client/echo", "builtin/file-read", "builtin/file-write"],
      );
      assert.deepEqual((await client.get("ts-run")).status, "completed");
      assert.ok((await client.listRuns()).some((r) => r.runId === "ts-run" && !r.active));
    });
  });

test("run/cancel while a client tool is pending gives status cancelled",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    await withDaemon({ automationProfile: "trusted" }, async ({ client, waitFor }) => {
      let entered!: () => void;
      const handlerRunning = new Promise<void>((resolveEnter) => (entered = resolveEnter));
      let aborted!: () => void;
      const abortSeen = new Promise<void>((resolveAbort) => (aborted = resolveAbort));
      // aborted: the daemon sent $/cancelRequest for tools/call
      await client.registerTool({ ...ECHO, name: "client/hang" }, hangingTool(aborted, entered));
      const pending = client.run("go", {
        runId: "ts-cancel",
        model: script({ toolCalls: [call("client/hang")] }, { content: "unreachable" }),
      });
      pending.catch(() => undefined); // awaited below; no unhandled rejection meanwhile
      await within(handlerRunning, "tools/call");
      await within(client.cancel("ts-cancel"), "run/cancel");
      const result = await within(pending, "the cancelled run/start");
      assert.equal(result.status, "cancelled");
      const [record] = result.toolCallHistory;
      assert.ok(record);
      assert.equal(record.success, false);
      assert.match(record.error ?? "", /^cancelled/);
      await within(abortSeen, "$/cancelRequest for tools/call");
      const finished = await within(waitFor((e) => e.method === Methods.RUN_FINISHED &&
                                                   e.params.runId === "ts-cancel"), "run/finished");
      assert.ok(finished.method === Methods.RUN_FINISHED);
      assert.equal(finished.params.result.status, "cancelled");
    });
  });

test("errors: daemon error codes, a throwing tool, a lent model, a bad command",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    await withDaemon({
      automationProfile: "trusted",
      llm: async (params) => {
        const tool = params.tools.find((t) => t.name === "client/boom");
        return params.iteration === 1 && tool
          ? { content: "trying", toolCalls: [{ id: "c1", name: "client/boom", arguments: {} }] }
          : { content: `lent model, ${params.messages.length} messages`, toolCalls: [] };
      },
    }, async ({ client }) => {
      await client.registerTool({ ...ECHO, name: "client/boom" }, () => {
        throw new TypeError("kaput");
      });
      await assert.rejects(
        client.registerTool({ ...ECHO, name: "client/boom" }, () => null),
        (error: unknown) =>
          error instanceof ResponseError && error.code === ErrorCodes.DuplicateToolError,
      );
      await assert.rejects(
        client.run("", { model: script({ content: "x" }) }),
        (error: unknown) => error instanceof ResponseError && error.code === ErrorCodes.InvalidParams,
      );
      await assert.rejects(
        client.get("no-such-run"),
        (error: unknown) =>
          error instanceof index.ResponseError && error.code === ErrorCodes.RunNotFoundError,
      );
      const result = await within(client.run("go", { model: { provider: "client" } }), "run");
      assert.equal(result.status, "completed");
      assert.match(result.content, /^lent model, \d+ messages$/);
      const [record] = result.toolCallHistory;
      assert.deepEqual([record?.success, record?.error], [false, "TypeError: kaput"]);
    });
    await assert.rejects(
      CleverAgentsClient.spawn({ workspace: tmpdir(), command: ["/nonexistent/python"] }),
      (error: unknown) => error instanceof DaemonExitedError && /could not start/.test(error.message),
    );
  });

test("a daemon that dies mid-run rejects the pending run with DaemonExitedError",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    const root = realpathSync(mkdtempSync(join(tmpdir(), "cleveragents-ts-")));
    const client = await CleverAgentsClient.spawn({
      workspace: root, command: [PYTHON, "-m", "cleveragents", "serve"],
      stateDir: join(root, "state"), automationProfile: "trusted",
    });
    try {
      let called!: () => void;
      const toolCalled = new Promise<void>((resolveCall) => (called = resolveCall));
      await client.registerTool({ ...ECHO, name: "client/wait" }, () => {
        called();
        return new Promise(() => undefined); // never answers
      });
      const pending = client.run("go", { model: script({ toolCalls: [call("client/wait")] }) });
      pending.catch(() => undefined);
      await within(toolCalled, "tools/call");
      client.process.kill("SIGKILL");
      await assert.rejects(within(pending, "the orphaned run/start"), DaemonExitedError);
      await assert.rejects(client.listTools(), DaemonExitedError);
      assert.equal(await within(client.close(), "close"), null);
      assert.equal(client.exitCode, null);
    } finally {
      await client.close();
      rmSync(root, { recursive: true, force: true });
    }
  });

test("an AbortSignal resolves run() with the cancelled RunResult, as run/cancel does",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    await withDaemon({ automationProfile: "trusted" }, async ({ client, waitFor }) => {
      await client.registerTool({ ...ECHO, name: "client/hang" }, hangingTool());
      const controller = new AbortController();
      const pending = client.run("go", {
        runId: "ts-abort", signal: controller.signal,
        model: script({ toolCalls: [call("client/hang")] }, { content: "unreachable" }),
      });
      pending.catch(() => undefined);
      await within(waitFor((e) => e.method === Methods.RUN_TOOL_CALL_STARTED &&
                                  e.params.runId === "ts-abort"), "run/toolCallStarted");
      controller.abort();
      const result = await within(pending, "the aborted run()");
      assert.equal(result.status, "cancelled");
      assert.match(result.toolCallHistory[0]?.error ?? "", /^cancelled/);
      assert.deepEqual(await within(client.get("ts-abort"), "run/get"), result);
    });
  });

test("a CancellationToken cancelled before run/started is held until the run exists",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    await withDaemon({ automationProfile: "trusted" }, async ({ client }) => {
      await client.registerTool({ ...ECHO, name: "client/hang" }, hangingTool());
      const source = new CancellationTokenSource();
      const pending = client.run("go", {
        runId: "ts-early", token: source.token,
        model: script({ toolCalls: [call("client/hang")] }, { content: "unreachable" }),
      });
      source.cancel(); // the daemon has not even read run/start yet
      const result = await within(pending, "the cancelled run()");
      assert.equal(result.status, "cancelled");
      assert.equal(result.runId, "ts-early");
    });
  });

test("an already aborted signal starts nothing and rejects with AbortError",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    await withDaemon({ model: script({ content: "x" }) }, async ({ client }) => {
      await assert.rejects(
        client.run("go", { runId: "ts-never", signal: AbortSignal.abort() }),
        (error: unknown) => error instanceof Error && error.name === "AbortError",
      );
      const source = new CancellationTokenSource();
      source.cancel();
      await assert.rejects(
        client.run("go", { runId: "ts-never", token: source.token }),
        (error: unknown) => error instanceof Error && error.name === "AbortError",
      );
      assert.deepEqual((await client.listRuns()).map((r) => r.runId), []);
    });
  });

test("typed events and $/progress are subscriptions that dispose; onDidExit reports the exit",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    const model = script(
      { content: "one", toolCalls: [call("client/echo", { n: 1 }), call("client/echo", { n: 2 })] },
      { content: "done" },
    );
    await withDaemon({ model, automationProfile: "trusted" }, async ({ client }) => {
      await client.registerTool(ECHO, (input) => input);
      const seen: string[] = [];
      const toolCalls: ToolCallNotification[] = [];
      const progress: ProgressEvent[] = [];
      const subscriptions = [
        client.onDidStartRun((e) => seen.push(`started ${e.runId}`)),
        client.onDidStartToolCall((e) => seen.push(`tool ${e.toolName}`)),
        client.onDidToolCall((e) => toolCalls.push(e)),
        client.onDidFinishIteration((e) => seen.push(`iteration ${e.iteration}`)),
        client.onDidReceiveMessageDelta(() => undefined),
        client.onDidFinishRun((e) => seen.push(`finished ${e.result.status}`)),
        client.onDidProgress((e) => progress.push(e)),
      ];
      const disposed: ToolCallNotification[] = [];
      client.onDidToolCall((e) => disposed.push(e)).dispose();

      const values: WorkDoneProgress[] = [];
      const result = await within(
        client.run("go", { runId: "ts-events", maxIterations: 4, onProgress: (v) => values.push(v) }),
        "run",
      );
      assert.equal(result.status, "completed");
      assert.deepEqual(seen, [
        "started ts-events", "tool client/echo", "tool client/echo", "iteration 1",
        "iteration 2", "finished completed",
      ]);
      assert.deepEqual(toolCalls.map((e) => e.record), result.toolCallHistory);
      assert.deepEqual(disposed, []);
      assert.deepEqual(values.map((v) => [v.kind, v.message]), [
        ["begin", "go"], ["report", "iteration 1 done"], ["report", "iteration 2 done"],
        ["end", "completed"],
      ]);
      assert.deepEqual(progress.map((e) => e.value), values);
      assert.ok(progress.every((e) => e.token === "cleveragents-run-ts-events"));

      for (const subscription of subscriptions) subscription.dispose();
      await within(client.run("again", { runId: "ts-quiet" }), "run");
      assert.equal(seen.length, 6);
      assert.equal(toolCalls.length, 2);
    });

    const root = realpathSync(mkdtempSync(join(tmpdir(), "cleveragents-ts-")));
    try {
      const client = await CleverAgentsClient.spawn({
        workspace: root, command: [PYTHON, "-m", "cleveragents", "serve"],
        stateDir: join(root, "state"),
      });
      const exit = new Promise<DaemonExit>((resolveExit) => client.onDidExit(resolveExit));
      client.dispose(); // as `context.subscriptions` would: shutdown + exit, not awaited
      assert.deepEqual(await within(exit, "onDidExit"), { code: 0, signal: null });
      assert.equal(await within(client.close(), "close"), 0);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

test("onDidReceiveReasoningDelta hears the model's reasoning before the text it preceded",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    const model = script(
      { reasoning: "The echo tool answers this.", content: "Echoing.", toolCalls: [call("client/echo")] },
      { reasoning: "It answered.", content: "done" },
    );
    await withDaemon({ model, automationProfile: "trusted" }, async ({ client }) => {
      await client.registerTool(ECHO, (input) => input);
      const heard: string[] = [];
      const subscriptions = [
        client.onDidReceiveReasoningDelta((e) => heard.push(`${e.iteration} reasoning ${e.text}`)),
        client.onDidReceiveMessageDelta((e) => heard.push(`${e.iteration} text ${e.text}`)),
      ];
      const result = await within(client.run("go", { runId: "ts-reasoning" }), "run");
      assert.equal(result.status, "completed");
      assert.deepEqual(heard, [
        "1 reasoning The echo tool answers this.", "1 text Echoing.",
        "2 reasoning It answered.", "2 text done",
      ]);
      assert.equal(result.content, "done"); // reasoning is never part of the answer
      for (const subscription of subscriptions) subscription.dispose();
    });
  });

test("the public surface: exports, one vscode-jsonrpc, and every error code",
  { timeout: TEST_TIMEOUT_MS }, () => {
    assert.deepEqual(Object.keys(index).sort(), [
      "CancellationToken", "CancellationTokenSource", "CleverAgentsClient", "DaemonExitedError",
      "Disposable", "ErrorCodes", "Methods", "PROTOCOL_VERSION", "RUN_NOTIFICATION_METHODS",
      "ResponseError", "ToolError",
      "defaultCommand",
    ]);
    assert.equal(index.ResponseError, jsonrpc.ResponseError);
    assert.equal(index.CancellationToken, jsonrpc.CancellationToken);
    assert.equal(index.CancellationTokenSource, jsonrpc.CancellationTokenSource);
    assert.deepEqual(ErrorCodes, {
      ParseError: -32700, InvalidRequest: -32600, MethodNotFound: -32601, InvalidParams: -32602,
      InternalError: -32603, RequestCancelled: -32800, ...DaemonErrorCodes,
    });
    assert.deepEqual(Object.values(DaemonErrorCodes).sort((a, b) => a - b),
                     Array.from({ length: 23 }, (_, i) => -32032 + i));
  });

test("a daemon request cancelled before its handler starts never reaches the handler",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    const client = await CleverAgentsClient.spawn({
      workspace: tmpdir(), command: [process.execPath, join(__dirname, "fake-daemon.js")],
    });
    try {
      let called = false;
      await client.registerTool({ ...ECHO, name: "client/write" }, () => {
        called = true;
      });
      const result = await within(client.run("go", { runId: "fake" }), "the fake run/start");
      assert.deepEqual(JSON.parse(result.content),
                       { id: "ca-1", error: { code: ErrorCodes.RequestCancelled, message: "request cancelled" } });
      assert.equal(called, false);
    } finally {
      await client.close(2_000);
    }
  });

test("checkpoints: onDidCheckpoint, diff, a refused then forced revert, its undo, and a fork",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    const write = (content: string) => call("builtin/file-write", { path: "hello.txt", content });
    const model = script(
      { content: "first", toolCalls: [write("hello there\n")] },
      { content: "second", toolCalls: [write("hello again\n")] },
      { content: "done" },
    );
    await withDaemon({ model, automationProfile: "trusted" }, async ({ client, workspace }) => {
      const heard: [number, number][] = [];
      const subscription = client.onDidCheckpoint((e) => heard.push([e.iteration, e.filesChanged]));
      const result = await within(client.run("edit", { runId: "ts-edit" }), "run");
      assert.equal(result.status, "completed");
      subscription.dispose();
      assert.deepEqual(heard, [[0, 0], [1, 1], [2, 1]]); // before the first write, after each

      const diff = await client.diff("ts-edit");
      assert.deepEqual(diff.files, [
        { path: "hello.txt", status: "modified", additions: 1, deletions: 1, binary: false },
      ]);
      assert.match(diff.patch, /^-hello world$/m);
      assert.match(diff.patch, /^\+hello again$/m);
      assert.match((await client.diff("ts-edit", 2)).patch, /^-hello there$/m);

      writeFileSync(join(workspace, "hello.txt"), "the user's own\n");
      const refused = await client.revert("ts-edit");
      assert.equal(refused.applied, false);
      assert.deepEqual(refused.conflicts.map((c) => c.path), ["hello.txt"]);
      const dry = await client.revert("ts-edit", { force: true, dryRun: true });
      assert.equal(dry.applied, false);
      assert.equal(readFileSync(join(workspace, "hello.txt"), "utf8"), "the user's own\n");
      const forced = await client.revert("ts-edit", { force: true });
      assert.equal(forced.applied, true);
      assert.equal(readFileSync(join(workspace, "hello.txt"), "utf8"), "hello world\n");
      assert.ok(forced.restoreCheckpointId);
      const undo = await client.restoreCheckpoint(forced.restoreCheckpointId);
      assert.equal(undo.applied, true);
      assert.equal(readFileSync(join(workspace, "hello.txt"), "utf8"), "the user's own\n");

      const forkFrom = { runId: "ts-edit", iteration: 1, restoreFiles: true };
      await assert.rejects( // the user's file differs from the run's last checkpoint
        client.run("again", { runId: "ts-fork-refused", model: script({ content: "x" }), forkFrom }),
        (error: unknown) => error instanceof ResponseError && error.code === ErrorCodes.CheckpointError,
      );
      assert.equal(readFileSync(join(workspace, "hello.txt"), "utf8"), "the user's own\n");
      writeFileSync(join(workspace, "hello.txt"), "hello again\n"); // as the run left it
      const fork = await within(
        client.run("again", { runId: "ts-fork", model: script({ content: "forked" }), forkFrom }),
        "fork",
      );
      assert.equal(fork.status, "completed");
      assert.equal(readFileSync(join(workspace, "hello.txt"), "utf8"), "hello there\n");
      await assert.rejects(
        client.restoreCheckpoint("0123456789abcdef"),
        (error: unknown) =>
          error instanceof ResponseError && error.code === ErrorCodes.CheckpointNotFoundError,
      );
    });
  });

test("MCP servers: addMcpServers mounts one, mcpServers says when it is ready, a run calls it, removeMcpServers takes it away",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    const server = resolve(PACKAGE_DIR, "..", "..", "tests", "mcp", "servers", "sdk_server.py");
    const model = script({ content: "Adding.", toolCalls: [call("mcp:calc/add", { a: 2, b: 3 })] }, { content: "5" });
    await withDaemon({ model, automationProfile: "trusted" }, async ({ client }) => {
      const changed = new Promise((resolveChange) => {
        const subscription = client.onDidChangeTools((e) => {
          if (e.source === "mcp" && e.server === "calc") { subscription.dispose(); resolveChange(e); }
        });
      });
      assert.deepEqual(await client.addMcpServers([{ name: "calc", command: PYTHON, args: [server] }]), ["calc"]);
      await within(changed, "tools/changed for calc");
      const [status] = await client.mcpServers();
      assert.ok(status !== undefined);
      assert.equal(status.name, "calc");
      assert.equal(status.status, "ready", status.error);
      assert.ok(status.toolCount > 0);
      assert.ok((await client.listTools()).some((tool) => tool.name === "mcp:calc/add"));
      const result = await within(client.run("add"), "run");
      assert.equal(result.status, "completed");
      assert.deepEqual(result.toolCallHistory.map((r) => [r.toolName, r.output]), [["mcp:calc/add", { result: 5 }]]);
      // One bad entry refuses the whole call, naming its field; an unknown name removes nothing.
      await assert.rejects(client.addMcpServers([{ name: "bad", command: PYTHON, args: "one string" as unknown as string[] }]),
        (error: unknown) => error instanceof ResponseError && error.code === ErrorCodes.InvalidParams && /servers\[0\]\.args/.test(error.message));
      await assert.rejects(client.removeMcpServers(["nope"]), (error: unknown) => error instanceof ResponseError && error.code === -32012);
      assert.deepEqual(await client.removeMcpServers(["calc"]), ["calc"]);
      assert.deepEqual(await client.mcpServers(), []);
      assert.ok(!(await client.listTools()).some((tool) => tool.name.startsWith("mcp:")));
    });
  });

test("MCP elicitation: onElicitation answers an MCP server's question with the run it is about",
  { timeout: TEST_TIMEOUT_MS }, async () => {
    const server = resolve(PACKAGE_DIR, "..", "..", "tests", "mcp", "servers", "asking_server.py");
    const model = script({ toolCalls: [call("mcp:ask/ask_name")] }, { content: "done" });
    const asked: McpElicitParams[] = [];
    const onElicitation = async (request: McpElicitParams) => {
      asked.push(request);
      return { action: "accept" as const, content: { name: "Ada", age: 36 } };
    };
    await withDaemon({ model, automationProfile: "trusted", onElicitation }, async ({ client }) => {
      await client.addMcpServers([{ name: "ask", command: PYTHON, args: [server] }]);
      const result = await within(client.run("ask me", { runId: "e1" }), "run");
      assert.equal(result.status, "completed");
      assert.deepEqual(result.toolCallHistory.map((r) => r.output), ["accept:Ada:36"]);
      const [request] = asked;
      assert.ok(request !== undefined);
      assert.equal(request.server, "ask");
      assert.equal(request.runId, "e1");
      assert.equal(request.mode, "form");
      assert.equal(request.message, "What is your name?");
    });
  });
