// The official TypeScript client (@agentclientprotocol/sdk 2.x) against the real
// `cleveragents serve --protocol acp`, with scripted models. Run by tests/acp/test_typescript_sdk.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const PYTHON = process.env.CLEVERAGENTS_PYTHON ?? "python3";

function setup(turns, ...flags) {
  const dir = mkdtempSync(join(tmpdir(), "ca-acp-"));
  const cwd = join(dir, "ws");
  mkdirSync(join(cwd, "src"), { recursive: true });
  writeFileSync(join(cwd, "src", "greet.py"), 'def greet():\n    return "hi"\n');
  return { dir, ...restart(dir, turns, ...flags) };
}

// Another agent process on the same state dir (and workspace) as `setup`'s.
function restart(dir, turns, ...flags) {
  const model = JSON.stringify({ provider: "scripted", script: turns });
  const child = spawn(PYTHON, ["-m", "cleveragents", "serve", "--protocol", "acp", "--model", model,
    "--state-dir", join(dir, "state"), ...flags], { stdio: ["pipe", "pipe", "inherit"] });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  return { cwd: join(dir, "ws"), child, stream };
}

// The agent's exit, bounded: killed if it has not left within 10 s of its input closing.
async function stopped(child) {
  if (child.exitCode !== null) return child.exitCode;
  const exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
  child.stdin.end();
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
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

test("initialize, a turn with a read and an edit: pending before the permission, a diff, text", { timeout: 60_000 }, async () => {
  const { cwd, child, stream } = setup([
    { reasoning: "The greeting lives in src/greet.py.", content: "Reading.", toolCalls: [call("builtin/file-read", { path: "src/greet.py" })] },
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
          // The model's reasoning is a thought, before the text it preceded.
          const said = updates.filter((u) => u.sessionUpdate.startsWith("agent_")).map((u) => [u.sessionUpdate, u.content.text]);
          assert.deepEqual(said[0], ["agent_thought_chunk", "The greeting lives in src/greet.py."]);
          assert.deepEqual(said[1], ["agent_message_chunk", "Reading."]);
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

test("a rejected edit fails saying the user declined; the turn ends normally", { timeout: 60_000 }, async () => {
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

test("session/cancel mid-tool: the call fails, the prompt answers cancelled", { timeout: 60_000 }, async () => {
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

const SDK_SERVER = fileURLToPath(new URL("../../mcp/servers/sdk_server.py", import.meta.url));
const WRITE = [
  { content: "Writing.", toolCalls: [call("builtin/file-write", { path: "a.txt", content: "A" })] },
  { content: "Written." },
];
const allow = (optionId, asked) => (ctx) => {
  asked.push(ctx.params.toolCall.title);
  return { outcome: { outcome: "selected", optionId } };
};

test("allow_always is asked once: the same tool later in the turn and in the next turn runs unasked", { timeout: 60_000 }, async () => {
  const { cwd, child, stream } = setup([
    { toolCalls: [call("builtin/file-write", { path: "a.txt", content: "A" })] },
    { toolCalls: [call("builtin/file-write", { path: "b.txt", content: "B" })] },
    { content: "ok" },
  ]);
  const asked = [];
  try {
    await acp.client({ name: "cleveragents-tests" })
      .onRequest(acp.methods.client.session.requestPermission, allow("allow_always", asked))
      .connectWith(stream, async (ctx) => {
        await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1 });
        await ctx.buildSession(cwd).withSession(async (session) => {
          for (const text of ["one", "two"]) {
            const prompt = session.prompt(text);
            const { updates, stopReason } = await drain(session);
            await prompt;
            assert.equal(stopReason, "end_turn");
            const ends = updates.filter((u) => u.sessionUpdate === "tool_call_update" && u.status !== "in_progress");
            assert.deepEqual(ends.map((u) => u.status), ["completed", "completed"]);
          }
        });
      });
    assert.deepEqual(asked, ["Write a.txt"]);
    assert.equal(readFileSync(join(cwd, "b.txt"), "utf8"), "B");
  } finally {
    child.kill();
  }
});

test("set_mode changes what is asked, and is announced", { timeout: 60_000 }, async () => {
  const { cwd, child, stream } = setup(WRITE);
  const asked = [];
  try {
    await acp.client({ name: "cleveragents-tests" })
      .onRequest(acp.methods.client.session.requestPermission, allow("allow_once", asked))
      .connectWith(stream, async (ctx) => {
        await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1 });
        await ctx.buildSession(cwd).withSession(async (session) => {
          assert.equal(session.modes.currentModeId, "supervised");
          await session.prompt("one");
          assert.deepEqual((await drain(session)).updates.filter((u) => u.sessionUpdate === "tool_call_update").at(-1).status, "completed");
          assert.equal(asked.length, 1);
          await ctx.request(acp.methods.agent.session.setMode, { sessionId: session.sessionId, modeId: "trusted" });
          const announced = await session.nextUpdate();
          assert.equal(announced.update.sessionUpdate, "current_mode_update");
          assert.equal(announced.update.currentModeId, "trusted");
          const prompt = session.prompt("two");
          const { updates } = await drain(session);
          await prompt;
          assert.equal(updates.filter((u) => u.sessionUpdate === "tool_call_update").at(-1).status, "completed");
          assert.equal(asked.length, 1);
        });
      });
  } finally {
    child.kill();
  }
});

// One live turn (a read and an edit, allowed), then the agent stopped: the session's
// id and every update the live turn sent.
async function liveTurn() {
  const turns = [
    { content: "Reading.", toolCalls: [call("builtin/file-read", { path: "src/greet.py" })] },
    { content: "Editing.", toolCalls: [call("builtin/file-edit", { path: "src/greet.py", old_text: '"hi"', new_text: '"hello"' })] },
    { content: "Done." },
  ];
  const { dir, cwd, child, stream } = setup(turns);
  let live;
  try {
    await acp.client({ name: "cleveragents-tests" })
      .onRequest(acp.methods.client.session.requestPermission, allow("allow_once", []))
      .connectWith(stream, async (ctx) => {
        await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1 });
        await ctx.buildSession(cwd).withSession(async (session) => {
          const prompt = session.prompt("make it say hello");
          const { updates } = await drain(session);
          await prompt;
          live = { sessionId: session.sessionId, updates };
        });
      });
  } finally {
    assert.equal(await stopped(child), 0);
  }
  return { dir, cwd, turns, ...live };
}

const finalStates = (updates) => {
  const out = {};
  for (const u of updates.filter((u) => u.sessionUpdate.startsWith("tool_call"))) {
    out[u.toolCallId] = { ...(out[u.toolCallId] ?? {}), ...u, sessionUpdate: "tool_call" };
  }
  for (const state of Object.values(out)) delete state.messageId;
  return out;
};

test("session/load after a restart replays the turn to the state the live turn ended in", { timeout: 90_000 }, async () => {
  const live = await liveTurn();
  const { child, stream } = restart(live.dir, live.turns);
  const replayed = [];
  try {
    await acp.client({ name: "cleveragents-tests" })
      .onNotification(acp.methods.client.session.update, (ctx) => { replayed.push(ctx.params.update); })
      .connectWith(stream, async (ctx) => {
        const init = await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1 });
        assert.equal(init.agentCapabilities.loadSession, true);
        await ctx.request(acp.methods.agent.session.load, { sessionId: live.sessionId, cwd: live.cwd, mcpServers: [] });
      });
    assert.deepEqual(replayed[0], { sessionUpdate: "user_message_chunk", content: { type: "text", text: "make it say hello" } });
    const text = (updates) => updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text);
    assert.deepEqual(text(replayed), text(live.updates));
    assert.deepEqual(finalStates(replayed), finalStates(live.updates));
    assert.equal(Object.keys(finalStates(replayed)).length, 2);
  } finally {
    child.kill();
  }
});

test("session/list and session/resume after a restart; the conversation goes on", { timeout: 90_000 }, async () => {
  const live = await liveTurn();
  const { child, stream } = restart(live.dir, [{ content: "Still here." }]);
  try {
    await acp.client({ name: "cleveragents-tests" })
      .onNotification(acp.methods.client.session.update, () => {})
      .connectWith(stream, async (ctx) => {
        await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1 });
        const { sessions } = await ctx.request(acp.methods.agent.session.list, {});
        assert.deepEqual(sessions.map((s) => [s.sessionId, s.cwd, s.title]), [[live.sessionId, live.cwd, "make it say hello"]]);
        assert.ok(sessions[0].updatedAt);
        const resumed = await ctx.request(acp.methods.agent.session.resume, { sessionId: live.sessionId, cwd: live.cwd, mcpServers: [] });
        assert.equal(resumed.modes.currentModeId, "supervised");
        const answer = await ctx.request(acp.methods.agent.session.prompt, { sessionId: live.sessionId, prompt: [{ type: "text", text: "still there?" }] });
        assert.equal(answer.stopReason, "end_turn");
      });
  } finally {
    child.kill();
  }
});

test("with fs.writeTextFile advertised, an edit goes out as fs/write_text_file and the disk is untouched", { timeout: 60_000 }, async () => {
  const { cwd, child, stream } = setup([
    { toolCalls: [call("builtin/file-edit", { path: "src/greet.py", old_text: '"hi"', new_text: '"hello"' })] },
    { content: "ok" },
  ], "--profile", "full-auto");
  const writes = [];
  try {
    await acp.client({ name: "cleveragents-tests" })
      .onRequest(acp.methods.client.fs.writeTextFile, (ctx) => { writes.push(ctx.params); return {}; })
      .connectWith(stream, async (ctx) => {
        await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: { fs: { writeTextFile: true } } });
        await ctx.buildSession(cwd).withSession(async (session) => {
          const prompt = session.prompt("edit");
          const { updates } = await drain(session);
          await prompt;
          const last = updates.filter((u) => u.sessionUpdate === "tool_call_update").at(-1);
          assert.equal(last.status, "completed");
          assert.equal(last.content[0].type, "diff");
          assert.deepEqual(writes, [{ sessionId: session.sessionId, path: join(cwd, "src", "greet.py"), content: 'def greet():\n    return "hello"\n' }]);
        });
      });
    assert.equal(readFileSync(join(cwd, "src", "greet.py"), "utf8"), 'def greet():\n    return "hi"\n');
  } finally {
    child.kill();
  }
});

test("MCP servers from session/new are started and their tools called; a failed start is reported", { timeout: 60_000 }, async () => {
  const { cwd, child, stream } = setup([
    { toolCalls: [call("mcp:calc/add", { a: 2, b: 3 })] },
    { content: "five" },
  ], "--profile", "full-auto");
  try {
    await acp.client({ name: "cleveragents-tests" }).connectWith(stream, async (ctx) => {
      await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1 });
      const request = ctx.buildSession(cwd)
        .withMcpServer({ name: "calc", command: PYTHON, args: [SDK_SERVER], env: [] })
        .withMcpServer({ name: "broken", command: "/nonexistent/server", args: [], env: [] });
      await request.withSession(async (session) => {
        const report = await session.nextUpdate();
        assert.equal(report.update.sessionUpdate, "agent_message_chunk");
        assert.match(report.update.content.text, /broken/);
        const prompt = session.prompt("add");
        const { updates, stopReason } = await drain(session);
        await prompt;
        assert.equal(stopReason, "end_turn");
        const add = updates.filter((u) => u.sessionUpdate.startsWith("tool_call"));
        assert.equal(add[0].status, "pending");
        assert.equal(add.at(-1).status, "completed");
        assert.match(add.at(-1).content[0].content.text, /5/);
      });
    });
  } finally {
    child.kill();
  }
});

test("bad lines (not JSON, an array, a 40 MB line) are answered or skipped; the agent stays up", { timeout: 90_000 }, async () => {
  const { cwd, child, stream } = setup([{ content: "still up" }]);
  const raw = (data) => new Promise((resolve, reject) => child.stdin.write(data, (error) => (error ? reject(error) : resolve())));
  try {
    await acp.client({ name: "cleveragents-tests" }).connectWith(stream, async (ctx) => {
      await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1 });
      await raw("this is not json\n");
      await raw("[1, 2]\n");
      await raw(`{"jsonrpc":"2.0","id":"big","method":"x","params":"${"a".repeat(40 << 20)}"}\n`);
      await ctx.buildSession(cwd).withSession(async (session) => {
        const prompt = session.prompt("are you there?");
        assert.equal(await session.readText(), "still up");
        assert.equal((await prompt).stopReason, "end_turn");
      });
    });
    assert.equal(child.exitCode, null);
  } finally {
    child.kill();
  }
});

test("tool calls of every kind reach a final status, with titles and kinds naming what they work on", { timeout: 60_000 }, async () => {
  const { cwd, child, stream } = setup([
    { toolCalls: [
      call("builtin/file-read", { path: "src/greet.py" }),
      call("builtin/file-list", { pattern: "**/*.py" }),
      call("builtin/file-search", { pattern: "greet" }),
      call("builtin/shell", { command: "echo hi" }),
      call("builtin/file-write", { path: "new.txt", content: "x" }),
      call("builtin/file-edit", { path: "src/greet.py", old_text: "nowhere", new_text: "x" }),
    ] },
    { content: "ok" },
  ], "--profile", "full-auto");
  try {
    await acp.client({ name: "cleveragents-tests" })
      .connectWith(stream, async (ctx) => {
        await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1 });
        await ctx.buildSession(cwd).withSession(async (session) => {
          const prompt = session.prompt("every kind");
          const { updates, stopReason } = await drain(session);
          await prompt;
          assert.equal(stopReason, "end_turn");
          const tools = updates.filter((u) => u.sessionUpdate.startsWith("tool_call"));
          const ids = [...new Set(tools.map((u) => u.toolCallId))];
          const calls = ids.map((id) => tools.filter((u) => u.toolCallId === id));
          assert.deepEqual(calls.map((c) => [c[0].title, c[0].kind, c[0].status]), [
            ["Read src/greet.py", "read", "pending"],
            ["List **/*.py", "search", "pending"],
            ["Search for greet", "search", "pending"],
            ["Run `echo hi`", "execute", "pending"],
            ["Write new.txt", "edit", "pending"],
            ["Edit src/greet.py", "edit", "pending"],
          ]);
          // Every call ends completed, but the edit whose old text is not in the file.
          assert.deepEqual(calls.map((c) => c.at(-1).status),
            ["completed", "completed", "completed", "completed", "completed", "failed"]);
          assert.deepEqual(calls[0][0].rawInput, { path: "src/greet.py" });
          assert.match(calls[3].at(-1).content[0].content.text, /hi/);
          assert.ok(calls[5].at(-1).content[0].content.text.length > 0); // the error text
        });
      });
  } finally {
    child.kill();
  }
});

test("slash commands: advertised after session/new; /diff, /undo refused then forced, /restore undoes it", { timeout: 90_000 }, async () => {
  const { cwd, child, stream } = setup([
    { content: "Writing.", toolCalls: [call("builtin/file-write", { path: "notes.md", content: "one\n" }),
      call("builtin/file-edit", { path: "src/greet.py", old_text: '"hi"', new_text: '"hello"' })] },
    { content: "Done." },
  ]);
  const greet = join(cwd, "src", "greet.py");
  try {
    await acp.client({ name: "cleveragents-tests" })
      .onRequest(acp.methods.client.session.requestPermission, () => ({ outcome: { outcome: "selected", optionId: "allow_always" } }))
      .connectWith(stream, async (ctx) => {
        await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1 });
        await ctx.buildSession(cwd).withSession(async (session) => {
          const turn = async (text) => {
            const prompt = session.prompt(text);
            const { updates, stopReason } = await drain(session);
            await prompt;
            assert.equal(stopReason, "end_turn");
            return updates;
          };
          const said = (updates) => updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
          const first = await turn("write the notes");
          const advertised = first.find((u) => u.sessionUpdate === "available_commands_update");
          assert.deepEqual(advertised.availableCommands.map((c) => c.name), ["diff", "undo", "restore"]);
          assert.equal(said(first), "Writing.Done.");

          const diff = said(await turn("/diff"));
          assert.match(diff, / notes\.md {5}\| 1 \+ \(new\)/);
          assert.match(diff, /```diff\ndiff --git a\/notes\.md b\/notes\.md\n/);

          writeFileSync(greet, "the user's edit\n");
          const refused = await turn("/undo");
          assert.equal(refused.filter((u) => u.sessionUpdate.startsWith("tool_call")).length, 0); // not the model
          assert.match(said(refused), /^Nothing was changed: 1 file changed since the last checkpoint/);
          assert.match(said(refused), /`src\/greet\.py`: changed after checkpoint [0-9a-f]{16}/);
          assert.equal(readFileSync(greet, "utf8"), "the user's edit\n");
          assert.equal(readFileSync(join(cwd, "notes.md"), "utf8"), "one\n");

          const forced = said(await turn("/undo force"));
          assert.equal(readFileSync(greet, "utf8"), 'def greet():\n    return "hi"\n');
          assert.throws(() => readFileSync(join(cwd, "notes.md")), { code: "ENOENT" });
          const [, checkpoint] = forced.match(/To undo this: `\/restore ([0-9a-f]{16})`/);

          assert.match(said(await turn(`/restore ${checkpoint}`)), /^Put back 2 files of checkpoint/);
          assert.equal(readFileSync(greet, "utf8"), "the user's edit\n");
          assert.equal(readFileSync(join(cwd, "notes.md"), "utf8"), "one\n");
        });
      });
  } finally {
    child.kill();
  }
});
