// Each editor snippet of docs/acp.md, started with exactly its command, through the
// official TypeScript client (@agentclientprotocol/sdk). The cases (the command, its
// environment, the workspace and what to expect) come from tests/acp/test_editor_snippets.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const cases = JSON.parse(readFileSync(process.env.SNIPPET_CASES, "utf8"));

async function drain(session) {
  const updates = [];
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === "stop") return { updates, stopReason: message.stopReason };
    updates.push(message.update);
  }
}

for (const c of cases) {
  test(`${c.name}: ${c.expect}`, { timeout: 60_000 }, async () => {
    // The command as the editor runs it: found on PATH, the snippet's own arguments.
    const child = spawn(c.command, c.args, { cwd: c.cwd, env: c.env, stdio: ["pipe", "pipe", "inherit"] });
    const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
    const asked = [];
    try {
      await acp.client({ name: "snippet-test" })
        .onRequest(acp.methods.client.session.requestPermission, (ctx) => {
          asked.push(ctx.params.toolCall.title);
          return { outcome: { outcome: "selected", optionId: "allow_once" } };
        })
        .connectWith(stream, async (ctx) => {
          const init = await ctx.request(acp.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
          assert.equal(init.agentInfo.name, "cleveragents");
          await ctx.buildSession(c.cwd).withSession(async (session) => {
            if (c.expect === "no model") {
              await assert.rejects(session.prompt("hello"), (error) => {
                const text = `${error.code} ${error.message} ${JSON.stringify(error.data ?? null)}`;
                assert.match(text, /-32020/);
                assert.ok(text.includes(c.configFile), text);
                assert.match(text, /CLEVERAGENTS_MODEL/);
                assert.match(text, /--model SPEC/);
                assert.doesNotMatch(text, /run\/start|initializationOptions/);
                return true;
              });
              return;
            }
            const prompt = session.prompt("who configured you?");
            const { updates, stopReason } = await drain(session);
            await prompt;
            assert.equal(stopReason, "end_turn");
            const text = updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text);
            assert.deepEqual(text, ["Asking the server.", "The model and the server came from config.toml."]);
            const done = updates.filter((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed");
            assert.equal(done.length, 1);
            assert.match(JSON.stringify(done[0].content), /from config\.toml/);
            assert.equal(asked.length, 1);
          });
        });
    } finally {
      child.kill();
    }
  });
}
