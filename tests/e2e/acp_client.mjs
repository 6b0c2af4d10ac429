// A small ACP client on the official TypeScript SDK's ClientSideConnection (@agentclientprotocol/sdk,
// pinned in package.json), for the end-to-end tests of `crew acp` (tests/e2e/test_acp_real.py).
// argv[2]: a JSON plan {command: [...], cwd, load?: sessionId, resume?: sessionId, close?: true,
// additionalDirectories?: [...], mcpServers?: [...], options?: {id: value},
// prompts: [{text, images?: [{mimeType, data}], cancel?: true, meta?: {…} (the prompt's _meta)}], answers: [optionId, ...]}.
// Prints one JSON object: the initialize answer, the session id, every update, the permission requests, each prompt's
// stop reason and, for a cancelled one, the milliseconds from the cancel to its answer; with close, what a prompt
// after it got.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const plan = JSON.parse(process.argv[2]);
const updates = [];
const asked = [];
const answers = [...(plan.answers ?? [])];
let onUpdate = () => {};

const agent = spawn(plan.command[0], plan.command.slice(1), { cwd: plan.cwd, stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const connection = new acp.ClientSideConnection(
  () => ({
    async sessionUpdate(params) {
      updates.push(params.update);
      onUpdate(params.update);
    },
    async requestPermission(params) {
      asked.push(params);
      return { outcome: { outcome: "selected", optionId: answers.shift() } };
    },
  }),
  stream,
);

const out = { updates, asked, stops: [], cancelMs: null };
try {
  const init = await connection.initialize({ protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  out.protocolVersion = init.protocolVersion;
  out.initialize = init;
  const directories = plan.additionalDirectories ? { additionalDirectories: plan.additionalDirectories } : {};
  let sessionId = plan.load ?? plan.resume;
  if (plan.load) {
    await connection.loadSession({ sessionId, cwd: plan.cwd, mcpServers: [], ...directories });
    out.replayed = updates.length;
  } else if (plan.resume) {
    await connection.resumeSession({ sessionId, cwd: plan.cwd, mcpServers: [], ...directories });
    out.replayed = updates.length;
  } else {
    const made = { cwd: plan.cwd, mcpServers: plan.mcpServers ?? [], ...directories };
    sessionId = (await connection.newSession(made)).sessionId;
  }
  out.sessionId = sessionId;
  for (const [configId, value] of Object.entries(plan.options ?? {})) {
    await connection.setSessionConfigOption({ sessionId, configId, value });
  }
  for (const prompt of plan.prompts ?? []) {
    const images = (prompt.images ?? []).map((image) => ({ type: "image", ...image }));
    const answer = connection.prompt({
      sessionId,
      prompt: [{ type: "text", text: prompt.text }, ...images],
      ...(prompt.meta ? { _meta: prompt.meta } : {}),
    });
    if (prompt.cancel) {
      await new Promise((resolve) => {
        onUpdate = (update) => update.sessionUpdate === "agent_message_chunk" && resolve();
      });
      const cancelled = Date.now();
      await connection.cancel({ sessionId });
      out.stops.push((await answer).stopReason);
      out.cancelMs = Date.now() - cancelled;
      onUpdate = () => {};
    } else {
      out.stops.push((await answer).stopReason);
    }
  }
  if (plan.close) {
    await connection.closeSession({ sessionId });
    try {
      await connection.prompt({ sessionId, prompt: [{ type: "text", text: "after close" }] });
      out.afterClose = "answered";
    } catch (error) {
      out.afterClose = String(error?.message ?? error) + (error?.data ? ` ${JSON.stringify(error.data)}` : "");
    }
  }
} catch (error) {
  out.error = String(error?.message ?? error) + (error?.data ? ` ${JSON.stringify(error.data)}` : "");
} finally {
  agent.stdin.end(); // crew acp ends what it started when its stdin closes
  await new Promise((resolve) => agent.on("exit", resolve));
  process.stdout.write(JSON.stringify(out) + "\n");
}
