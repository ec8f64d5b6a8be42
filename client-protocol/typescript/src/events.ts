/**
 * What the client announces: the six run notifications, `tools/changed`, LSP `$/progress`,
 * and the daemon's exit, each as a VS Code-style `Event` whose subscriptions are
 * `Disposable`s.
 *
 * This module owns the event types and the emitters behind them. It knows nothing of the
 * connection or the process: the client feeds it what arrives.
 */

import { type Disposable, Emitter } from "vscode-jsonrpc/node";
import {
  type IterationNotification,
  type CheckpointNotification,
  type CompactedNotification,
  type MessageDeltaNotification,
  type ReasoningDeltaNotification,
  Methods,
  type NotificationParams,
  type RunFinishedNotification,
  RUN_NOTIFICATION_METHODS,
  type RunNotificationMethod,
  type RunStartedNotification,
  type ToolCallNotification,
  type ToolCallProgressNotification,
  type ToolCallStartedNotification,
  type ToolsChangedNotification,
} from "./protocol";

/** One run notification, discriminated by `method`: `event.params` is typed accordingly. */
export type RunEvent = {
  [M in RunNotificationMethod]: { method: M; params: NotificationParams[M] };
}[RunNotificationMethod];

export type EventCallback = (event: RunEvent) => void;

/** `$/progress` values the daemon reports under a run's `workDoneToken` (LSP work-done
 * progress; PROTOCOL.md §7.4). */
export interface WorkDoneProgressBegin {
  kind: "begin";
  title: string;
  cancellable?: boolean;
  message?: string;
  percentage?: number;
}

export interface WorkDoneProgressReport {
  kind: "report";
  cancellable?: boolean;
  message?: string;
  percentage?: number;
}

export interface WorkDoneProgressEnd {
  kind: "end";
  /** The run's status. */
  message?: string;
}

export type WorkDoneProgress = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

/** The params of one `$/progress` notification. */
export interface ProgressEvent {
  token: string | number;
  value: WorkDoneProgress;
}

/** How the daemon process ended: an exit code, or the signal that killed it. Both are
 * null when it never started. */
export interface DaemonExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** The emitters of one client. Listeners that throw are logged by vscode-jsonrpc; the
 * others still hear the event. */
export class ClientEvents implements Disposable {
  readonly any = new Emitter<RunEvent>();
  readonly runStarted = new Emitter<RunStartedNotification>();
  readonly reasoningDelta = new Emitter<ReasoningDeltaNotification>();
  readonly messageDelta = new Emitter<MessageDeltaNotification>();
  readonly toolCallStarted = new Emitter<ToolCallStartedNotification>();
  readonly toolCall = new Emitter<ToolCallNotification>();
  readonly toolCallProgress = new Emitter<ToolCallProgressNotification>();
  readonly iteration = new Emitter<IterationNotification>();
  readonly compacted = new Emitter<CompactedNotification>();
  readonly checkpoint = new Emitter<CheckpointNotification>();
  readonly runFinished = new Emitter<RunFinishedNotification>();
  readonly toolsChanged = new Emitter<ToolsChangedNotification>();
  readonly progress = new Emitter<ProgressEvent>();
  readonly exit = new Emitter<DaemonExit>();

  /** The typed event first, then every `onEvent` listener. */
  fireRunEvent(event: RunEvent): void {
    switch (event.method) {
      case Methods.RUN_STARTED:
        this.runStarted.fire(event.params);
        break;
      case Methods.RUN_REASONING_DELTA:
        this.reasoningDelta.fire(event.params);
        break;
      case Methods.RUN_MESSAGE_DELTA:
        this.messageDelta.fire(event.params);
        break;
      case Methods.RUN_TOOL_CALL_STARTED:
        this.toolCallStarted.fire(event.params);
        break;
      case Methods.RUN_TOOL_CALL:
        this.toolCall.fire(event.params);
        break;
      case Methods.RUN_ITERATION:
        this.iteration.fire(event.params);
        break;
      case Methods.RUN_COMPACTED:
        this.compacted.fire(event.params);
        break;
      case Methods.RUN_TOOL_CALL_PROGRESS:
        this.toolCallProgress.fire(event.params);
        break;
      case Methods.RUN_CHECKPOINT:
        this.checkpoint.fire(event.params);
        break;
      case Methods.RUN_FINISHED:
        this.runFinished.fire(event.params);
        break;
      default:
        return assertNever(event);
    }
    this.any.fire(event);
  }

  dispose(): void {
    for (const emitter of [
      this.any, this.runStarted, this.reasoningDelta, this.messageDelta, this.toolCallStarted, this.toolCall,
      this.toolCallProgress, this.iteration, this.compacted, this.checkpoint, this.runFinished,
      this.toolsChanged, this.progress, this.exit,
    ]) {
      emitter.dispose();
    }
  }
}

/** The notification methods `ClientEvents` routes, for subscribing on the connection: the
 * generated list of run notifications (one per core run event). */
export const RUN_EVENT_METHODS: readonly RunNotificationMethod[] = RUN_NOTIFICATION_METHODS;

function assertNever(value: never): never {
  throw new Error(`unhandled run notification ${(value as RunEvent).method}`);
}
