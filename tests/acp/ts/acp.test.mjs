// The official TypeScript client (@agentclientprotocol/sdk 2.x) against the real
// `cleveragents serve --protocol acp`, with scripted models. Run by tests/acp/test_typescript_sdk.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const PYTHON = process.env.CLEVERAGENTS_PYTHON ?? "python3";

function setup(turns, ...flags) {
  const dir = mkdtempSync(join(tmpdir(), "ca-acp-"));
  const cwd = join(dir, "ws");
  mkdirSync(join(cwd, "src"), { recursive: true });
  writeFileSync(join(cwd, "src", "greet.py"), 'def greet():\n    return "hi"\n');
  const model = JSON.stringify({ provider: "scripted", script: turns });
  const child = spawn(PYTHON, ["-m", "cleveragents", "serve", "--protocol", "acp", "--model", model,
    "--state-dir", join(dir, "state"), ...flags], { stdio: ["pipe", "pipe", "inherit"] });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  return { cwd, child, stream };
}

async function drain(session) {
  const updates = [];
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === "stop") return { updates, stopReason: message.stopReason };
    updates.push(message.update);
  }
}

const call = (name, args) => ({ name, arguments: args });

test("initialize, a turn with a read and an edit: pending before the permission, a diff, text", async () => {
  const { cwd, child, stream } = setup([
    { content: "Reading.", toolCalls: [call("builtin/file-read", { path: "src/greet.py" })] },
    { content: "Editing.", toolCalls: [call("builtin/file-edit", { path: "src/greet.py", old_text: '"hi"', new_text: '"hello"' })] },
    { content: "Done." },
  ]);
  const order = [];
  try {
    await acp.client({ name: "cleveragents-tests" })
      .onRequest(acp.methods.client.session.requestPermission, (ctx) => {
        order.push(`ask ${ctx.params.toolCall.toolCallId}`);
        assert.deepEqual(ctx.params.options.map((o) => o.kind), ["allow_once", "allow_always", "reject_once", "reject_always"]);
        return { outcome: { outcome: "selected", optionId: "allow_once" } };
      })
      .connectWith(stream, async (ctx) => {
        const init = await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
        assert.equal(init.protocolVersion, 1);
        assert.equal(init.agentInfo.name, "cleveragents");
        assert.equal(init.agentCapabilities.loadSession, true);
        await ctx.buildSession(cwd).withSession(async (session) => {
          const prompt = session.prompt("make it say hello");
          const { updates, stopReason } = await drain(session);
          await prompt;
          assert.equal(stopReason, "end_turn");
          const text = updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text);
          assert.deepEqual(text, ["Reading.", "Editing.", "Done."]);
          const tools = updates.filter((u) => u.sessionUpdate.startsWith("tool_call"));
          const ids = [...new Set(tools.map((u) => u.toolCallId))];
          assert.equal(ids.length, 2);
          const [read, edit] = ids.map((id) => tools.filter((u) => u.toolCallId === id));
          assert.deepEqual(read.map((u) => u.status), ["pending", "in_progress", "completed"]);
          assert.equal(read[0].title, "Read src/greet.py");
          assert.equal(read[0].kind, "read");
          assert.equal(edit[0].kind, "edit");
          assert.deepEqual(edit.at(-1).content, [{ type: "diff", path: join(cwd, "src", "greet.py"),
            oldText: 'def greet():\n    return "hi"\n', newText: 'def greet():\n    return "hello"\n' }]);
          assert.deepEqual(order, [`ask ${edit[0].toolCallId}`]);
        });
      });
    assert.equal(readFileSync(join(cwd, "src", "greet.py"), "utf8"), 'def greet():\n    return "hello"\n');
  } finally {
    child.kill();
  }
});

test("a rejected edit fails saying the user declined; the turn ends normally", async () => {
  const { cwd, child, stream } = setup([
    { toolCalls: [call("builtin/file-write", { path: "x.txt", content: "x" })] },
    { content: "ok" },
  ]);
  try {
    await acp.client({ name: "cleveragents-tests" })
      .onRequest(acp.methods.client.session.requestPermission, () => ({ outcome: { outcome: "selected", optionId: "reject_once" } }))
      .connectWith(stream, async (ctx) => {
        await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1 });
        await ctx.buildSession(cwd).withSession(async (session) => {
          const prompt = session.prompt("write");
          const { updates, stopReason } = await drain(session);
          await prompt;
          assert.equal(stopReason, "end_turn");
          const last = updates.filter((u) => u.sessionUpdate === "tool_call_update").at(-1);
          assert.equal(last.status, "failed");
          assert.match(last.content[0].content.text, /declined/);
        });
      });
  } finally {
    child.kill();
  }
});

test("session/cancel mid-tool: the call fails, the prompt answers cancelled", async () => {
  const { cwd, child, stream } = setup([
    { toolCalls: [call("builtin/shell", { command: "sleep 20" })] },
    { content: "never" },
  ], "--profile", "full-auto");
  try {
    await acp.client({ name: "cleveragents-tests" }).connectWith(stream, async (ctx) => {
      await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1 });
      await ctx.buildSession(cwd).withSession(async (session) => {
        const prompt = session.prompt("run");
        const updates = [];
        for (;;) {
          const message = await session.nextUpdate();
          updates.push(message.update);
          if (message.update?.status === "in_progress") break;
        }
        await ctx.notify(acp.methods.agent.session.cancel, { sessionId: session.sessionId });
        const { updates: rest, stopReason } = await drain(session);
        assert.equal((await prompt).stopReason, "cancelled");
        assert.equal(stopReason, "cancelled");
        assert.equal(rest.at(-1).status, "failed");
      });
    });
  } finally {
    child.kill();
  }
});
