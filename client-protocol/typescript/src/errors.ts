/**
 * The errors the client raises, and the one table of JSON-RPC error codes.
 *
 *     Error
 *     ├── ResponseError (vscode-jsonrpc)  a request failed: `code` is one of `ErrorCodes`
 *     ├── DaemonExitedError               the daemon process ended or never started
 *     └── ToolError                       thrown by a tool handler: a failed record
 *
 * The daemon's own codes come from the generated `protocol.ts`; this module only adds the
 * standard JSON-RPC / LSP codes the daemon also sends (PROTOCOL.md §18).
 */

import { ErrorCodes as DaemonErrorCodes } from "./protocol";

/** Every code a daemon reply may carry: the standard ones, then the daemon's classes
 * (-32010..-32030). Compare `ResponseError.code` against these, never the message. */
export const ErrorCodes = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** `run/start` or a waiting `run/get` cancelled with `$/cancelRequest`. */
  RequestCancelled: -32800,
  ...DaemonErrorCodes,
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** Thrown by a tool handler to fail the call with a chosen output (`isError: true`). */
export class ToolError extends Error {
  constructor(
    message: string,
    readonly output: unknown = message,
  ) {
    super(message);
    this.name = "ToolError";
  }
}

/** The daemon process ended (or could not start); `stderr` is the tail of its stderr. */
export class DaemonExitedError extends Error {
  constructor(
    message: string,
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(stderr ? `${message}\n${stderr}` : message);
    this.name = "DaemonExitedError";
  }
}
