// The public surface of @cleveragents/client (pinned by a test in test/client.test.ts).
// vscode-jsonrpc is a peer dependency: `ResponseError` and `CancellationToken` here are the
// very classes of the extension's own copy, so `instanceof` holds either way.

export {
  CancellationToken,
  CancellationTokenSource,
  Disposable,
  type Event,
  ResponseError,
} from "vscode-jsonrpc/node";
export * from "./protocol";
// Shadows the generated, daemon-only `ErrorCodes` of ./protocol (explicit beats `export *`).
export { type ErrorCode, ErrorCodes, DaemonExitedError, ToolError } from "./errors";
export type {
  DaemonExit,
  EventCallback,
  ProgressEvent,
  RunEvent,
  WorkDoneProgress,
  WorkDoneProgressBegin,
  WorkDoneProgressEnd,
  WorkDoneProgressReport,
} from "./events";
export {
  CleverAgentsClient,
  defaultCommand,
  type LlmHandler,
  type ElicitationHandler,
  type PermissionHandler,
  type RunOptions,
  type SpawnOptions,
  type ToolCallContext,
  type ToolHandler,
} from "./client";
