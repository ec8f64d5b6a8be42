/**
 * `CleverAgentsClient`: spawn `cleveragents serve`, register TypeScript tools, run, stream
 * events. The TypeScript twin of the Python client (`cleveragents.client.Client`).
 *
 *     const client = await CleverAgentsClient.spawn({ workspace: "/path/to/project",
 *                                                     model: "scripted:turns.json" });
 *     await client.registerTool({ name: "client/greet", description: "Greet someone.",
 *                                 inputSchema: { type: "object" } }, (args) => `hi ${args.name}`);
 *     const subscription = client.onDidToolCall((e) => console.log(e.record.toolName));
 *     const result = await client.run("Say hello", { signal });
 *     subscription.dispose();
 *     client.dispose(); // or `await client.close()` for the exit code
 *
 * This module owns the process, the connection and the handlers of daemon requests. The
 * event types and emitters are in `events.ts`, the errors in `errors.ts`.
 */

import { type ChildProcessWithoutNullStreams, spawn as spawnProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { realpathSync } from "node:fs";
import { basename, resolve as resolvePath } from "node:path";
import { pathToFileURL } from "node:url";
import {
  CancellationToken,
  createMessageConnection,
  type Disposable,
  type Event,
  type MessageConnection,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
} from "vscode-jsonrpc/node";
import { DaemonExitedError, ErrorCodes, ToolError } from "./errors";
import {
  ClientEvents,
  type DaemonExit,
  type EventCallback,
  type ProgressEvent,
  RUN_EVENT_METHODS,
  type RunEvent,
  type WorkDoneProgress,
} from "./events";
import {
  type DaemonCapabilities,
  type ClientRequestMethod,
  type IterationNotification,
  type ListedTool,
  type LlmGenerateParams,
  type LlmGenerateResult,
  type McpElicitParams,
  type McpElicitResult,
  type McpServerEntry,
  type McpServerStatus,
  type CheckpointNotification,
  type CompactedNotification,
  type MessageDeltaNotification,
  type ReasoningDeltaNotification,
  Methods,
  type PermissionOutcome,
  type PermissionRequestParams,
  type RegisterToolsParams,
  type RequestParams,
  type RequestResults,
  type RunFinishedNotification,
  type RestoreResultWire,
  type RunDiffResult,
  type RunParams,
  type RunResult,
  type RunStartedNotification,
  type RunSummary,
  type ToolCallNotification,
  type ToolCallProgressNotification,
  type ToolCallStartedNotification,
  type ToolDefinition,
  type ToolsCallParams,
  type ToolsChangedNotification,
  type ToolsCallResult,
} from "./protocol";

/** What a client tool's handler gets besides the arguments: the whole `tools/call` params
 * and a signal that aborts when the daemon cancels the call (run cancelled, timeout). */
export interface ToolCallContext extends ToolsCallParams {
  signal: AbortSignal;
}

/** A client tool: returns the output (any JSON value). Throwing gives a failed record. */
export type ToolHandler = (
  args: Record<string, unknown>,
  context: ToolCallContext,
) => unknown;

export type PermissionHandler = (
  request: PermissionRequestParams,
  signal: AbortSignal,
) => PermissionOutcome | Promise<PermissionOutcome>;

/** Answers `mcp/elicit`: an MCP server asks the user (a form, or a URL to open). The
 * daemon checks an accepted form's `content` against the server's `requestedSchema`. */
export type ElicitationHandler = (
  request: McpElicitParams,
  signal: AbortSignal,
) => McpElicitResult | Promise<McpElicitResult>;

/** Answers `llm/generate` when a run's model is `client` (the editor lends its model). */
export type LlmHandler = (
  params: LlmGenerateParams,
  signal: AbortSignal,
) => LlmGenerateResult | Promise<LlmGenerateResult>;

/** `capabilities.experimental.cleveragents` of the `initialize` result. */
export interface SpawnOptions {
  /** The first workspace folder: the default sandbox root of every run. */
  workspace: string;
  /** More workspace folders (runs may pick a `sandboxRoot` inside any of them). */
  extraFolders?: string[];
  /** The daemon's argv. Default: `$CLEVERAGENTS_PYTHON -m cleveragents serve`, with
   * `python3` when the variable is unset. */
  command?: string[];
  /** Where transcripts go (`--state-dir`). */
  stateDir?: string;
  /** The default model spec of the daemon, e.g. `"scripted:turns.json"` or
   * `{provider: "scripted", script: [...]}`. */
  model?: string | Record<string, unknown>;
  /** The default automation profile (`supervised` when unset). */
  automationProfile?: string;
  /** Declare the `permissions` capability: the daemon then asks through
   * `permission/request` instead of refusing. Default: true when `onPermission` is given. */
  permissions?: boolean;
  /** Answers `permission/request`; without one every request is answered `reject_once`. */
  onPermission?: PermissionHandler;
  /** Answers `llm/generate` and declares the `llm` capability (the `client` model). */
  llm?: LlmHandler;
  /** Answers MCP servers' questions (`mcp/elicit`) and declares the `elicitation`
   * capability; without it the daemon declines every elicitation for this client. */
  onElicitation?: ElicitationHandler;
  /** Extra environment for the daemon, on top of `process.env`. */
  env?: Record<string, string>;
  cwd?: string;
  /** What to do with the daemon's stderr: keep its tail for error messages (`"pipe"`,
   * the default), pass it through (`"inherit"`), or hand each chunk to a function. */
  stderr?: "pipe" | "inherit" | ((text: string) => void);
  /** Bound on `initialize` (ms, default 30000). */
  initializeTimeoutMs?: number;
}

export interface RunOptions extends Omit<RunParams, "prompt"> {
  /** Notifications of this run only. */
  onEvent?: EventCallback;
  /** `$/progress` of this run. Without a `workDoneToken`, the client makes one up. */
  onProgress?: (value: WorkDoneProgress) => void;
  /** Aborting cancels the run as `cancel(runId)` does: `run()` then resolves with the
   * daemon's `RunResult`, `status: "cancelled"` (or the run's own status if it ended
   * first). An already aborted signal starts nothing: `run()` rejects with its reason. */
  signal?: AbortSignal;
  /** The same as `signal`, for a vscode-jsonrpc or VS Code `CancellationToken`. An
   * already cancelled token rejects with an `AbortError`. */
  token?: CancellationToken;
}

const STDERR_TAIL = 16 * 1024;

/** `command` as given, else `$CLEVERAGENTS_PYTHON -m cleveragents serve`. */
export function defaultCommand(env: NodeJS.ProcessEnv = process.env): string[] {
  return [env.CLEVERAGENTS_PYTHON || "python3", "-m", "cleveragents", "serve"];
}

/** A connection to one spawned daemon. Many runs may go on at once. */
export class CleverAgentsClient implements Disposable {
  /** `capabilities.experimental.cleveragents` from `initialize`. */
  capabilities: DaemonCapabilities = { protocolVersion: 0, methods: [], builtinTools: [] };
  /** Answers `permission/request`; `reject_once` when unset. */
  permissionHandler: PermissionHandler | undefined;
  /** Answers `llm/generate`. */
  llmHandler: LlmHandler | undefined;
  /** Answers `mcp/elicit`; `cancel` when unset. */
  elicitationHandler: ElicitationHandler | undefined;

  private readonly tools = new Map<string, ToolHandler>();
  private readonly events = new ClientEvents();
  private stderrTail = "";
  private exit: DaemonExit | undefined;
  private readonly exited: Promise<number | null>;
  private closing: Promise<number | null> | undefined;
  private spawnError: Error | undefined;

  readonly process: ChildProcessWithoutNullStreams;
  readonly connection: MessageConnection;

  /** Every run notification of this connection, in arrival order. */
  readonly onEvent: Event<RunEvent> = this.events.any.event;
  /** `run/started`: the daemon has started a run (also one started by `run()`). */
  readonly onDidStartRun: Event<RunStartedNotification> = this.events.runStarted.event;
  /** `run/reasoningDelta`: the model streamed reasoning (before or between its text). */
  readonly onDidReceiveReasoningDelta: Event<ReasoningDeltaNotification> =
    this.events.reasoningDelta.event;
  /** `run/messageDelta`: the model streamed text. */
  readonly onDidReceiveMessageDelta: Event<MessageDeltaNotification> =
    this.events.messageDelta.event;
  /** `run/toolCallStarted`: a tool is about to run. */
  readonly onDidStartToolCall: Event<ToolCallStartedNotification> =
    this.events.toolCallStarted.event;
  /** `run/toolCall`: a tool call ended, with its record, whatever the outcome. */
  readonly onDidToolCall: Event<ToolCallNotification> = this.events.toolCall.event;
  /** `run/toolCallProgress`: a running tool (an MCP server's) reported how far it is. */
  readonly onDidToolCallProgress: Event<ToolCallProgressNotification> =
    this.events.toolCallProgress.event;
  /** `run/iteration`: an iteration ended, its tools included. */
  readonly onDidFinishIteration: Event<IterationNotification> = this.events.iteration.event;
  /** `run/compacted`: the conversation was compacted to fit the model's context window. */
  readonly onDidCompact: Event<CompactedNotification> = this.events.compacted.event;
  /** `run/checkpoint`: the run snapshotted its workspace's files (before its first change,
   * then after each iteration that changed any); `checkpointId` is for `restoreCheckpoint`. */
  readonly onDidCheckpoint: Event<CheckpointNotification> = this.events.checkpoint.event;
  /** `run/finished`: a run ended; its `result` equals the `run/start` reply. */
  readonly onDidFinishRun: Event<RunFinishedNotification> = this.events.runFinished.event;
  /** `tools/changed`: a source's tools changed (an MCP server became ready, changed its
   * list, or was removed); refresh any view of `tools/list`. */
  readonly onDidChangeTools: Event<ToolsChangedNotification> = this.events.toolsChanged.event;
  /** `$/progress` of runs started with a `workDoneToken`. */
  readonly onDidProgress: Event<ProgressEvent> = this.events.progress.event;
  /** The daemon process exited (after `close()`, or on its own), with its code or signal. */
  readonly onDidExit: Event<DaemonExit> = this.events.exit.event;

  private constructor(child: ChildProcessWithoutNullStreams, connection: MessageConnection) {
    this.process = child;
    this.connection = connection;
    let markExit: (code: number | null, signal: NodeJS.Signals | null) => void = () => {};
    this.exited = new Promise((resolve) => {
      markExit = (code, signal) => {
        if (this.exit !== undefined) return;
        this.exit = { code, signal };
        connection.dispose(); // rejects whatever is still pending
        resolve(code);
        this.events.exit.fire({ code, signal });
      };
    });
    child.once("close", (code, signal) => markExit(code, signal));
    child.on("error", (error) => {
      this.spawnError = error;
      if (child.pid === undefined) markExit(null, null); // never started: no "close" follows
    });
    for (const method of RUN_EVENT_METHODS) {
      connection.onNotification(method, (params: unknown) => {
        this.events.fireRunEvent({ method, params } as RunEvent);
      });
    }
    connection.onNotification(Methods.TOOLS_CHANGED, (params: ToolsChangedNotification) => {
      this.events.toolsChanged.fire(params);
    });
    // vscode-jsonrpc routes `$/progress` itself: tokens nobody registered end up here.
    connection.onUnhandledProgress((params) => this.events.progress.fire(params as ProgressEvent));
    connection.onRequest(
      Methods.TOOLS_CALL,
      (params: ToolsCallParams, token: CancellationToken) => this.onToolsCall(params, token),
    );
    connection.onRequest(
      Methods.PERMISSION_REQUEST,
      (params: PermissionRequestParams, token: CancellationToken) =>
        this.onPermission(params, token),
    );
    connection.onRequest(
      Methods.MCP_ELICIT,
      (params: McpElicitParams, token: CancellationToken) => this.onElicit(params, token),
    );
    connection.onRequest(
      Methods.LLM_GENERATE,
      (params: LlmGenerateParams, token: CancellationToken) => this.onLlmGenerate(params, token),
    );
  }

  /** Start `cleveragents serve` and complete `initialize`. */
  static async spawn(options: SpawnOptions): Promise<CleverAgentsClient> {
    const argv = [...(options.command ?? defaultCommand())];
    const program = argv.shift();
    if (program === undefined) throw new Error("command must name a program");
    if (options.stateDir !== undefined) argv.push("--state-dir", resolvePath(options.stateDir));
    // Path.resolve() of the Python client: absolute, symlinks resolved, so the sandbox
    // roots the daemon reports compare equal to these.
    const folders = [options.workspace, ...(options.extraFolders ?? [])].map((p) =>
      realpathSync(resolvePath(p)),
    );
    const child = spawnProcess(program, argv, {
      stdio: ["pipe", "pipe", options.stderr === "inherit" ? "inherit" : "pipe"],
      env: { ...process.env, ...options.env },
      cwd: options.cwd,
    }) as ChildProcessWithoutNullStreams;
    const connection = createMessageConnection(
      new StreamMessageReader(child.stdout),
      new StreamMessageWriter(child.stdin),
    );
    const client = new CleverAgentsClient(child, connection);
    child.stdin.on("error", () => undefined); // EPIPE once the daemon died: seen on "close"
    child.stderr?.on("data", (chunk: Buffer) => client.onStderr(chunk, options.stderr));
    client.permissionHandler = options.onPermission;
    client.llmHandler = options.llm;
    client.elicitationHandler = options.onElicitation;

    const initializationOptions: Record<string, unknown> = {};
    if (options.model !== undefined) initializationOptions.model = options.model;
    if (options.automationProfile !== undefined) {
      initializationOptions.automationProfile = options.automationProfile;
    }
    const ours: Record<string, unknown> = {
      permissions: options.permissions ?? options.onPermission !== undefined,
    };
    if (options.llm !== undefined) ours.llm = true;
    if (options.onElicitation !== undefined) ours.elicitation = true;

    const ms = options.initializeTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const failed = new Promise<never>((_, reject) => {
      void client.exited.then(() => reject(client.startError(program)));
      timer = setTimeout(() => reject(new Error(`initialize got no answer within ${ms} ms`)), ms);
    });
    try {
      // Nothing is written before the process exists: a failed spawn only emits "error".
      await Promise.race([new Promise((resolve) => child.once("spawn", resolve)), failed]);
      connection.listen();
      const result = await Promise.race([
        connection.sendRequest<{ capabilities?: { experimental?: unknown } }>("initialize", {
          processId: process.pid,
          clientInfo: { name: "@cleveragents/client" },
          rootUri: pathToFileURL(folders[0]!).href,
          workspaceFolders: folders.map((f) => ({ uri: pathToFileURL(f).href, name: basename(f) })),
          capabilities: { experimental: { cleveragents: ours } },
          initializationOptions,
        }),
        failed,
      ]);
      const experimental = result.capabilities?.experimental as
        | { cleveragents?: DaemonCapabilities }
        | undefined;
      client.capabilities = experimental?.cleveragents ?? client.capabilities;
      await connection.sendNotification("initialized", {});
    } catch (error) {
      await client.close(2_000);
      throw client.exit !== undefined && !(error instanceof DaemonExitedError)
        ? client.startError(program)
        : error;
    } finally {
      clearTimeout(timer);
    }
    return client;
  }

  /** The last 16 KiB the daemon wrote to stderr (with `stderr: "pipe"`). */
  get stderr(): string {
    return this.stderrTail;
  }

  /** The daemon's exit code once it has exited, else `undefined`. */
  get exitCode(): number | null | undefined {
    return this.exit?.code;
  }

  /** Send any client -> daemon request, typed by the method table. */
  async request<M extends ClientRequestMethod>(
    method: M,
    params: RequestParams[M],
    token: CancellationToken = CancellationToken.None,
  ): Promise<RequestResults[M]> {
    if (this.exit !== undefined) throw this.exitedError();
    try {
      return await this.connection.sendRequest<RequestResults[M]>(method, params, token);
    } catch (error) {
      // vscode-jsonrpc's own codes (-32099..-32096): the connection failed, not the daemon
      const local =
        !(error instanceof ResponseError) || (error.code >= -32099 && error.code <= -32096);
      if (this.exit !== undefined && local) throw this.exitedError();
      throw error;
    }
  }

  // -- tools ------------------------------------------------------------------------------

  /** Register a client tool and its handler (answers `tools/call` for that name). */
  async registerTool(
    definition: ToolDefinition,
    handler: ToolHandler,
    options: { runId?: string; replace?: boolean } = {},
  ): Promise<string[]> {
    const params: RegisterToolsParams = { tools: [definition] };
    if (options.runId !== undefined) params.runId = options.runId;
    if (options.replace) params.replace = true;
    const previous = this.tools.get(definition.name);
    this.tools.set(definition.name, handler); // before the reply: a run may call it at once
    try {
      return (await this.request(Methods.TOOLS_REGISTER, params)).registered;
    } catch (error) {
      if (previous === undefined) this.tools.delete(definition.name);
      else this.tools.set(definition.name, previous);
      throw error;
    }
  }

  async unregisterTools(names: string[], runId?: string): Promise<string[]> {
    const result = await this.request(
      Methods.TOOLS_UNREGISTER,
      runId === undefined ? { names } : { names, runId },
    );
    for (const name of result.unregistered) this.tools.delete(name);
    return result.unregistered;
  }

  /** Every tool the daemon (or one run) can see, sorted by name. */
  async listTools(runId?: string): Promise<ListedTool[]> {
    return (await this.request(Methods.TOOLS_LIST, runId === undefined ? {} : { runId })).tools;
  }

  private async onToolsCall(
    params: ToolsCallParams,
    token: CancellationToken,
  ): Promise<ToolsCallResult | ResponseError> {
    const handler = this.tools.get(params.name);
    if (handler === undefined) {
      return new ResponseError(ErrorCodes.MethodNotFound,
                               `no client tool ${JSON.stringify(params.name)}`);
    }
    if (token.isCancellationRequested) return cancelledError(); // never start a cancelled call
    const { signal, dispose } = abortSignalOf(token);
    try {
      const output = await handler({ ...(params.arguments ?? {}) }, { ...params, signal });
      return { output: output === undefined ? null : output };
    } catch (error) {
      if (error instanceof ToolError) return { output: error.output ?? null, isError: true };
      const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      return { output: text, isError: true };
    } finally {
      dispose();
    }
  }

  private async onPermission(
    params: PermissionRequestParams,
    token: CancellationToken,
  ): Promise<{ outcome: PermissionOutcome } | ResponseError> {
    const handler = this.permissionHandler;
    if (handler === undefined) return { outcome: "reject_once" };
    if (token.isCancellationRequested) return cancelledError();
    const { signal, dispose } = abortSignalOf(token);
    try {
      return { outcome: await handler(params, signal) };
    } catch {
      return { outcome: "reject_once" }; // never run a tool on a failed answer
    } finally {
      dispose();
    }
  }

  private async onElicit(
    params: McpElicitParams,
    token: CancellationToken,
  ): Promise<McpElicitResult | ResponseError> {
    const handler = this.elicitationHandler;
    if (handler === undefined) return { action: "cancel" };
    if (token.isCancellationRequested) return cancelledError();
    const { signal, dispose } = abortSignalOf(token);
    try {
      return await handler(params, signal);
    } catch {
      return { action: "cancel" }; // never answer for the user on a failed handler
    } finally {
      dispose();
    }
  }

  private async onLlmGenerate(
    params: LlmGenerateParams,
    token: CancellationToken,
  ): Promise<LlmGenerateResult | ResponseError> {
    const handler = this.llmHandler;
    if (handler === undefined) {
      return new ResponseError(ErrorCodes.MethodNotFound, "this client lends no model");
    }
    if (token.isCancellationRequested) return cancelledError();
    const { signal, dispose } = abortSignalOf(token);
    try {
      return await handler(params, signal);
    } catch (error) {
      return new ResponseError(ErrorCodes.InternalError,
                               error instanceof Error ? error.message : String(error));
    } finally {
      dispose();
    }
  }

  /** Text the lent model streamed during `llm/generate` (optional). */
  async sendLlmDelta(runId: string, iteration: number, text: string): Promise<void> {
    await this.connection.sendNotification(Methods.LLM_DELTA, { runId, iteration, text });
  }

  // -- runs -------------------------------------------------------------------------------

  /** Start a run and wait for its `RunResult` (the `run/start` reply comes when the run
   * ends). A `runId` is made up when `options` has none.
   *
   * An abort (`signal` or `token`) sends `run/cancel` for this run, not `$/cancelRequest`
   * for `run/start`: that way the reply is the cancelled `RunResult` rather than -32800.
   * The daemon knows the run only once it announces it (`run/started`), so an abort
   * before then is held and sent at that moment. */
  async run(prompt: string, options: RunOptions = {}): Promise<RunResult> {
    const { onEvent, onProgress, signal, token, ...rest } = options;
    signal?.throwIfAborted();
    if (token?.isCancellationRequested) throw abortError();
    const runId = rest.runId ?? randomBytes(8).toString("hex");
    const params: RunParams = { ...rest, prompt, runId };
    if (onProgress !== undefined) params.workDoneToken ??= `cleveragents-run-${runId}`;

    const subscriptions: Disposable[] = [];
    if (onEvent !== undefined) {
      subscriptions.push(this.onEvent((event) => {
        if (event.params.runId === runId) onEvent(event);
      }));
    }
    if (onProgress !== undefined) {
      subscriptions.push(this.onDidProgress((progress) => {
        if (progress.token === params.workDoneToken) onProgress(progress.value);
      }));
    }
    let announced = false;
    let aborted = false;
    const sendCancel = (): void => {
      // -32023 (it finished first) or a dead daemon: the run/start reply says what happened.
      this.cancel(runId).catch(() => undefined);
    };
    subscriptions.push(this.onDidStartRun((started) => {
      if (started.runId !== runId) return;
      announced = true;
      if (aborted) sendCancel();
    }));
    const abort = (): void => {
      if (aborted) return;
      aborted = true;
      if (announced) sendCancel();
    };
    if (signal !== undefined) {
      signal.addEventListener("abort", abort, { once: true });
      subscriptions.push({ dispose: () => signal.removeEventListener("abort", abort) });
    }
    if (token !== undefined) subscriptions.push(token.onCancellationRequested(abort));
    try {
      return await this.request(Methods.RUN_START, params);
    } finally {
      for (const subscription of subscriptions) subscription.dispose();
    }
  }

  /** Cancel a run: its pending `run()` then resolves with `status: "cancelled"`. */
  async cancel(runId: string): Promise<void> {
    await this.request(Methods.RUN_CANCEL, { runId });
  }

  async get(runId: string): Promise<RunResult> {
    return this.request(Methods.RUN_GET, { runId });
  }

  async listRuns(): Promise<RunSummary[]> {
    return (await this.request(Methods.RUN_LIST, {})).runs;
  }

  // -- MCP servers ------------------------------------------------------------------------

  /** `mcp/add`: mount MCP servers daemon-wide. All or none: one bad entry refuses the call
   * (-32602 naming its field) and nothing starts. Resolves with their names at once; each
   * starts in the background: `mcpServers()` says when it is `ready` (or why it `failed`),
   * and `onDidChangeTools` fires when its tools appear. */
  async addMcpServers(servers: McpServerEntry[]): Promise<string[]> {
    return (await this.request(Methods.MCP_ADD, { servers })).added;
  }

  /** `mcp/remove`: stop daemon-wide MCP servers and take their tools away (an unknown
   * name is -32012 and removes nothing). */
  async removeMcpServers(names: string[]): Promise<string[]> {
    return (await this.request(Methods.MCP_REMOVE, { names })).removed;
  }

  /** `mcp/servers`: how each daemon-wide MCP server is doing (and with `runId`, that active
   * run's own): `starting`, `ready`, `failed` with `error` and `stderrTail`, or `stopped`. */
  async mcpServers(runId?: string): Promise<McpServerStatus[]> {
    return (await this.request(Methods.MCP_SERVERS, runId === undefined ? {} : { runId })).servers;
  }

  // -- checkpoints ------------------------------------------------------------------------

  /** `run/diff`: what a run changed in its workspace's files (with `iteration`, what that
   * iteration alone changed), as files with line counts and a unified diff. */
  async diff(runId: string, iteration?: number): Promise<RunDiffResult> {
    return this.request(Methods.RUN_DIFF, iteration === undefined ? { runId } : { runId, iteration });
  }

  /** `run/revert`: put the files a run changed back as they were before it (or after
   * `toIteration`). With conflicts (files changed since the run's last checkpoint) and
   * without `force`, nothing changes and `applied` is false. `restoreCheckpointId` undoes it
   * through `restoreCheckpoint`. */
  async revert(
    runId: string,
    options: { toIteration?: number; dryRun?: boolean; force?: boolean } = {},
  ): Promise<RestoreResultWire> {
    return this.request(Methods.RUN_REVERT, { runId, ...options });
  }

  /** `checkpoint/restore`: put a workspace back as it was at a checkpoint, under the same
   * conflict rules as `revert`. */
  async restoreCheckpoint(
    checkpointId: string,
    options: { dryRun?: boolean; force?: boolean } = {},
  ): Promise<RestoreResultWire> {
    return this.request(Methods.CHECKPOINT_RESTORE, { checkpointId, ...options });
  }

  // -- lifecycle --------------------------------------------------------------------------

  /** `shutdown` + `exit` when possible, then wait for the process (each step bounded by
   * `timeoutMs`), killing it if it lingers. Resolves with the exit code, after
   * `onDidExit` has fired; then every event is disposed. Idempotent. */
  close(timeoutMs = 5_000): Promise<number | null> {
    this.closing ??= this.doClose(timeoutMs);
    return this.closing;
  }

  /** `close()` without waiting, for `context.subscriptions` and the like. */
  dispose(): void {
    void this.close();
  }

  private async doClose(timeoutMs: number): Promise<number | null> {
    if (this.exit === undefined) {
      try {
        await withTimeout(this.connection.sendRequest("shutdown"), timeoutMs);
        await withTimeout(this.connection.sendNotification("exit"), timeoutMs);
      } catch {
        // the daemon is gone or stuck: waiting below, then the kill, settle it
      }
      this.process.stdin.end();
    }
    if (this.exit === undefined) {
      await withTimeout(this.exited, timeoutMs).catch(() => undefined);
    }
    if (this.exit === undefined) {
      this.process.kill("SIGKILL");
      await this.exited;
    }
    this.connection.dispose();
    this.events.dispose();
    return this.exit?.code ?? null;
  }

  private onStderr(chunk: Buffer, mode: SpawnOptions["stderr"]): void {
    const text = chunk.toString("utf8");
    if (typeof mode === "function") mode(text);
    this.stderrTail = (this.stderrTail + text).slice(-STDERR_TAIL);
  }

  private startError(program: string): DaemonExitedError {
    if (this.spawnError !== undefined) {
      return new DaemonExitedError(`could not start ${program}: ${this.spawnError.message}`,
                                   null, this.stderrTail);
    }
    return new DaemonExitedError(`the daemon exited (code ${this.exit?.code}) during initialize`,
                                 this.exit?.code ?? null, this.stderrTail);
  }

  private exitedError(): DaemonExitedError {
    const how = this.exit?.signal ? `signal ${this.exit.signal}` : `code ${this.exit?.code}`;
    return new DaemonExitedError(`the daemon exited (${how})`, this.exit?.code ?? null,
                                 this.stderrTail);
  }
}

/** The answer to a daemon request it cancelled before its handler could start: vscode-jsonrpc
 * queues a request and its `$/cancelRequest` together when they arrive in one read. */
function cancelledError(): ResponseError {
  return new ResponseError(ErrorCodes.RequestCancelled, "request cancelled");
}

/** What an aborted `fetch` rejects with; `signal.reason` has the same shape by default. */
function abortError(): Error {
  return new DOMException("This operation was aborted", "AbortError");
}

function abortSignalOf(token: CancellationToken): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  if (token.isCancellationRequested) controller.abort();
  const subscription = token.onCancellationRequested(() => controller.abort());
  return { signal: controller.signal, dispose: () => subscription.dispose() };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
