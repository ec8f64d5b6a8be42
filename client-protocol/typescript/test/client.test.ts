// End to end against the REAL daemon: `$CLEVERAGENTS_PYTHON -m cleveragents serve`, the
// Python defaulting to the repository's .venv. Models are inline scripted ones.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { ResponseError } from "vscode-jsonrpc/node";
import {
  CleverAgentsClient,
  DaemonExitedError,
  ErrorCodes,
  Methods,
  type PermissionRequestParams,
  type RunEvent,
  type SpawnOptions,
  type ToolCallContext,
  type ToolDefinition,
} from "../src/index";

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
      let aborted!: () => void;
      const abortSeen = new Promise<void>((resolveAbort) => (aborted = resolveAbort));
      await client.registerTool({ ...ECHO, name: "client/hang" }, (_input, { signal }) =>
        new Promise((resolveTool) => {
          const fallback = setTimeout(() => resolveTool("never cancelled"), 20_000);
          signal.addEventListener("abort", () => {
            clearTimeout(fallback);
            aborted(); // the daemon sent $/cancelRequest for tools/call
            resolveTool("aborted");
          });
        }));
      const pending = client.run("go", {
        runId: "ts-cancel",
        model: script({ toolCalls: [call("client/hang")] }, { content: "unreachable" }),
      });
      pending.catch(() => undefined); // awaited below; no unhandled rejection meanwhile
      await within(waitFor((e) => e.method === Methods.RUN_TOOL_CALL_STARTED &&
                                  e.params.runId === "ts-cancel"), "run/toolCallStarted");
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
        (error: unknown) => error instanceof ResponseError && error.code === -32602,
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
