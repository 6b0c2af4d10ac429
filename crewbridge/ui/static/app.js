// crew ui: the runs list, a run's live page, batches, usage and approvals. Plain JavaScript shipped
// with crew: no framework, no build step, nothing fetched from elsewhere.
"use strict";

const csrf = document.querySelector('meta[name="csrf"]').content;
const main = document.getElementById("main");
const cues = new Set(); // functions called when runs start, end or write (the live stream's cue)
let leave = null; // ends the current view's streams

// -- small helpers -------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name === "class") node.className = value;
    else if (name === "style") node.style.cssText = value; // the CSSOM: the page's policy refuses inline style attributes
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }
  return node;
}

function link(url) { // an address from a forge's answer: a link only when it is a web page's
  return /^https?:\/\//i.test(url || "") ? el("a", { href: url, target: "_blank", rel: "noopener noreferrer", text: url })
    : el("span", { class: "mono", text: url || "-" });
}

async function api(path) {
  const answer = await fetch(path, { credentials: "same-origin" });
  if (answer.status === 401) signedOut();
  if (!answer.ok) throw new Error(`${path}: ${answer.status} ${await answer.text()}`);
  return answer.json();
}

function signedOut() {
  // The session ended (an hour without a request, crew ui restarted, its cookie copied and used elsewhere).
  document.getElementById("connection").textContent = "signed out: run `crew ui` for a new sign-in link";
}

async function post(path, body) {
  const answer = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body || {}),
  });
  let data = {};
  try { data = await answer.json(); } catch (e) { data = { error: await answer.text() }; }
  return { ok: answer.ok, status: answer.status, data };
}

// One formatter each, made once: toLocaleString makes a new one at every call (most of a long list's time).
const numbers = new Intl.NumberFormat("en-US");
const dates = new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium" });
const number = (n) => (n === null || n === undefined ? "-" : numbers.format(Number(n)));
const dollars = (c) => (c === null || c === undefined ? "-" : "$" + Number(c).toFixed(4));
const toolName = (name) => String(name || "").split(":").pop();

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  const m = Math.floor(seconds / 60);
  return m < 60 ? `${m} min ${Math.round(seconds % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

function when(iso) {
  const date = new Date(iso);
  return isNaN(date) ? iso : dates.format(date);
}

function status(text) {
  return el("span", { class: `status ${text}`, "data-status": text, text });
}

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function json(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function cut(text, limit) {
  text = String(text ?? "");
  return text.length > limit ? text.slice(0, limit) + `… (${number(text.length - limit)} more characters)` : text;
}

// -- the diff of a write, highlighted ------------------------------------------------------------

function diffLines(lines) {
  return el("div", { class: "diff" }, lines.map(([kind, text]) => el("div", { class: kind, text })));
}

function writeDiff(name, input) {
  if (!input || typeof input !== "object") return null;
  const path = input.path || "";
  if (name === "edit_file" && typeof input.old_string === "string") {
    const lines = [["file", path]];
    for (const line of input.old_string.split("\n")) lines.push(["del", "- " + line]);
    for (const line of String(input.new_string ?? "").split("\n")) lines.push(["add", "+ " + line]);
    return diffLines(lines);
  }
  if (name === "write_file" && typeof input.content === "string") {
    return diffLines([["file", path + " (whole file)"], ...input.content.split("\n").map((l) => ["add", "+ " + l])]);
  }
  return null;
}

function patch(text) {
  return diffLines(
    text.split("\n").map((line) => [
      line.startsWith("diff --git") ? "file" : line.startsWith("@@") ? "hunk"
        : line.startsWith("+") && !line.startsWith("+++") ? "add"
        : line.startsWith("-") && !line.startsWith("---") ? "del" : "",
      line,
    ]),
  );
}

// -- approvals, on every page ----------------------------------------------------------------------

const seen = new Set();
const said = { yes: "allowed", always: "always allowed", no: "denied" };

const SHOWN_AFTER = 120_000; // ms an answered or withdrawn question stays on the page

function showQuestions(questions) {
  const panel = document.getElementById("approvals");
  const recent = questions.filter((q) => q.state === "open" || Date.now() - Date.parse(q.ended) < SHOWN_AFTER);
  panel.replaceChildren(
    ...recent.map((q) => {
      // Every string here was drawn by the run (crewbridge.base.visible): nothing in it can hide a part.
      const box = el(
        "div",
        { class: "question", "data-approval-id": q.id, "data-state": q.state },
        el("div", { class: "head" },
          el("strong", { text: `@${q.agent} wants to run ${q.tool}` }), " ",
          el("a", { href: `/runs/${q.run}`, class: "dim", text: `run ${q.run}` })),
        q.note ? el("div", { class: "decision no", text: q.note }) : null,
        writeDiff(toolName(q.tool), q.input) || el("pre", { class: "shown", text: q.shown }),
      );
      if (q.state === "open") {
        const actions = el("div", { class: "actions" });
        for (const [action, verdict, label] of [["allow", "yes", "Allow"], ["always", "always", "Always allow"], ["deny", "no", "Deny"]]) {
          actions.append(el("button", { type: "button", "data-action": action, text: label, onclick: () => answer(q.id, verdict, actions) }));
        }
        box.append(actions);
        if (!seen.has(q.id)) notify(q);
      } else {
        const where = q.source ? ` on the ${q.source}` : "";
        const text = q.state === "answered" ? `${said[q.verdict] || q.verdict}${where}` : "withdrawn: the run no longer asks";
        box.append(el("div", { class: "actions dim", "data-answer": q.verdict || q.state, text }));
      }
      seen.add(q.id);
      return box;
    }),
  );
}

async function answer(id, verdict, actions) {
  for (const button of actions.querySelectorAll("button")) button.disabled = true;
  const done = await post(`/api/questions/${id}`, { verdict });
  if (!done.ok) actions.append(el("span", { class: "decision no", text: done.data.error || `refused (${done.status})` }));
}

function notify(q) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  try {
    new Notification("crew: approval needed", { body: `@${q.agent} wants to run ${q.tool}`, tag: q.id });
  } catch (e) { /* a browser that shows notifications only from a service worker */ }
}

function offerNotifications() {
  const button = document.getElementById("notify");
  if (!("Notification" in window) || Notification.permission !== "default") return;
  button.hidden = false;
  button.onclick = () => Notification.requestPermission().then(() => { button.hidden = true; });
}

function listen() {
  const live = new EventSource("/api/live");
  const shown = document.getElementById("connection");
  live.addEventListener("questions", (e) => showQuestions(JSON.parse(e.data)));
  live.addEventListener("runs", () => cues.forEach((cue) => cue()));
  live.onopen = () => { shown.textContent = ""; };
  live.onerror = () => {
    if (live.readyState === EventSource.CLOSED) signedOut(); // refused, not dropped: it does not reconnect
    else shown.textContent = "reconnecting…";
  };
}

// -- the runs list -------------------------------------------------------------------------------

function runsView() {
  const params = new URLSearchParams(location.search);
  const agent = el("select", { name: "agent", "aria-label": "agent" }, el("option", { value: "", text: "every agent" }));
  const state = el("select", { name: "status", "aria-label": "status" },
    el("option", { value: "", text: "every status" }),
    ["running", "done", "failed", "cancelled"].map((s) => el("option", { value: s, text: s })));
  const text = el("input", { type: "search", name: "q", placeholder: "task, run id, folder…", "aria-label": "text" });
  state.value = params.get("status") || "";
  text.value = params.get("q") || "";
  const body = el("div", { class: "rows", role: "rowgroup" });
  const cells = ["Started", "Status", "Agents", "Mode", "Task", "Time", "Tokens", "Cost", "Folder"];
  const narrow = new Set(["Mode", "Time", "Cost"]);
  const table = el("div", { class: "runs", role: "table" },
    el("div", { class: "row head", role: "row" },
      cells.map((name) => el("span", { role: "columnheader", class: narrow.has(name) ? "hide-narrow" : null, text: name }))),
    body);
  let agents = new Set();
  let pending = null;

  async function load() {
    const query = new URLSearchParams();
    if (agent.value) query.set("agent", agent.value);
    if (state.value) query.set("status", state.value);
    if (text.value) query.set("q", text.value);
    history.replaceState(null, "", query.toString() ? `/?${query}` : "/");
    const runs = await api(`/api/runs?${query}`);
    for (const run of runs) for (const name of run.agents) agents.add(name);
    const chosen = agent.value || params.get("agent") || "";
    agent.replaceChildren(el("option", { value: "", text: "every agent" }),
      [...agents].sort().map((name) => el("option", { value: name, text: "@" + name })));
    agent.value = chosen;
    body.innerHTML = runs.length ? runs.map(row).join("") : "";
    if (!runs.length) body.append(noRuns(query.toString() !== ""));
  }

  // A thousand rows are written as one piece of HTML (every value escaped), and the browser lays out
  // only those on screen (content-visibility): made node by node, and laid out whole, they took
  // most of a long list's load.
  function row(run) {
    const mode = run.command === run.mode ? run.mode : `${run.command} (${run.mode})`;
    const agents = run.agents.map((a) => "@" + a + (run.models[a] ? ":" + run.models[a] : "")).join(" ");
    const id = escape(run.run_id);
    const state = escape(run.status);
    return `<a class="row" role="row" href="/runs/${id}" data-run-id="${id}"><span class="mono" title="${id}">` +
      `${escape(when(run.started))}</span><span><span class="status ${state}" data-status="${state}">${state}</span></span>` +
      `<span>${escape(agents)}</span><span class="hide-narrow">${escape(mode)}</span>` +
      `<span class="task" title="${escape(run.task)}">${escape(run.task.split("\n")[0] || "(no task)")}</span>` +
      `<span class="num hide-narrow">${duration(run.seconds)}</span><span class="num">${number(run.tokens)}</span>` +
      `<span class="num hide-narrow">${dollars(run.cost)}</span>` +
      `<span class="folder" title="${escape(run.cwd)}">${escape(folder(run))}</span></a>`;
  }

  const again = () => { clearTimeout(pending); pending = setTimeout(load, 150); };
  agent.onchange = state.onchange = load;
  text.oninput = again;
  main.replaceChildren(el("h1", { text: "Runs" }), el("div", { class: "filters" }, agent, state, text), table);
  agent.value = params.get("agent") || "";
  cues.add(again);
  load();
  return () => cues.delete(again);
}

// Where a run worked, in a word: a batch's repository (and the batch), else its folder's name.
function folder(run) {
  const name = (path) => String(path || "").replace(/\/+$/, "").split("/").pop() || path || "";
  const parent = run.parent || {};
  if (parent.batch) return `${name(parent.repo || run.cwd)} (batch ${parent.batch})`;
  return name(run.cwd);
}

// What the runs list says when it lists none: what to run, or that the filters match none.
function noRuns(filtered) {
  if (filtered) return el("p", { class: "empty", "data-empty": "filtered", text: "No runs match these filters." });
  return el("div", { class: "empty", "data-empty": "none" },
    el("p", { text: "No runs yet. Run a task and it shows here, live:" }),
    el("pre", { class: "command", text: 'crew query "@claude what does README.md say?"\ncrew query "@demo what is in README.md?"   # offline, no account' }),
    el("p", { text: "Runs from an editor (crew acp), an MCP client (crew mcp) and crew batch show here too." }));
}

// -- a run's page --------------------------------------------------------------------------------

// The run's record, read from its start and then as it is written: the model's text, each tool call
// (by the id the record gives it: its decision, approval and result find it), usage, the end.
const INTERRUPTED = 130; // the exit code of an agent stopped by a cancel (not an error of its own)

function runView(id) {
  const title = el("h1", { text: `Run ${id}` });
  const meta = el("div", { class: "meta" });
  const cancel = el("button", { type: "button", "data-action": "cancel", text: "Cancel run", hidden: true });
  const note = el("span", { class: "dim" });
  const log = el("div", { class: "log" });
  const calls = new Map(); // the record's call id → its item
  const writing = {}; // agent → the item its reply streams into, while it does
  const reviewing = new Set(); // agents whose part is a review's: their words are their verdict
  const live = { tokens: 0, cost: null, status: null, errors: 0 }; // summed from the record as it comes
  main.replaceChildren(title, el("div", { class: "actions" }, cancel, " ", note), meta, log);

  cancel.onclick = async () => {
    cancel.disabled = true;
    const done = await post(`/api/runs/${id}/cancel`);
    note.textContent = done.ok ? "cancelling…" : done.data.error || `refused (${done.status})`;
    if (!done.ok) cancel.disabled = false;
  };

  let row = null;
  async function header() {
    try {
      row = await api(`/api/runs/${id}`);
    } catch (e) {
      source.close();
      return main.replaceChildren(el("h1", { text: "No such run" }), el("div", { class: "empty", "data-empty": "run" },
        el("p", { text: `crew has no record of run ${id} here (its transcript was removed, or it ran as another user).` }),
        el("p", {}, el("a", { href: "/", text: "Back to the runs" }))));
    }
    title.textContent = row.task ? row.task.split("\n")[0] : `Run ${id}`;
    draw();
  }

  let batching = false, dirty = false; // while a frame's events are shown, the header is drawn once, after
  function draw() {
    if (batching) { dirty = true; return; }
    if (!row) return;
    const state = live.status || row.status;
    const tokens = row.status === "running" || row.status === "waiting" || live.status ? live.tokens : row.tokens;
    const cost = live.status || row.status === "running" || row.status === "waiting" ? live.cost : row.cost;
    meta.replaceChildren(
      status(state),
      el("span", { class: "mono", text: id }),
      el("span", { text: row.agents.map((a) => "@" + a + (row.models[a] ? ":" + row.models[a] : "")).join(" ") }),
      el("span", { text: row.command === row.mode ? row.mode : `${row.command} (${row.mode})` }),
      el("span", { class: "mono", text: row.cwd }),
      el("span", { "data-tokens": tokens, text: `${number(tokens)} tokens, ${dollars(cost)}` }),
      el("span", { text: duration(row.seconds) }));
    cancel.hidden = !["running", "waiting"].includes(state) || live.ended;
  }

  let added = null; // the last item added since the page last looked at where it is scrolled
  function add(node) {
    log.append(node);
    added = node;
    return node;
  }

  function item(kind, agent, ...body) {
    return el("div", { class: `item ${kind}`, "data-kind": kind, "data-agent": agent || null }, ...body);
  }

  function head(agent, what, extra) {
    return el("div", { class: "head" }, agent ? el("span", { class: "who", text: "@" + agent }) : null,
      el("span", { class: "dim", "data-what": "", text: what }), extra || null);
  }

  function stopWriting(agent, as) { // the reply that streamed is over: it stays where it was, named
    const block = writing[agent];
    if (!block) return;
    delete writing[agent];
    if (!block.querySelector(".text").textContent.trim()) { block.remove(); return; }
    block.querySelector("[data-what]").textContent = as;
    block.classList.remove("streaming");
    block.dataset.kind = as === "answer" ? "answer" : "reply";
    block.classList.add(block.dataset.kind);
  }

  function outcome(call, kind, text) {
    const line = call.querySelector('[data-result="pending"]') || call.appendChild(el("div"));
    line.setAttribute("data-result", kind);
    line.className = `decision ${kind === "ok" || kind === "allowed" ? "yes" : kind === "pending" ? "dim" : "no"}`;
    line.textContent = text;
  }

  function show(event) {
    const agent = event.agent;
    switch (event.kind) {
      case "start":
      case "session":
      case "reply":
        return;
      case "part":
        if (event.role === "reviewer") reviewing.add(agent); else reviewing.delete(agent);
        if (event.role) add(item("turn", agent, `@${agent} ${event.role === "reviewer" ? "reviews" : "writes"}, round ${event.round}`));
        return;
      case "turn":
        stopWriting(agent, "said");
        return add(item("turn", agent, `turn ${event.turn} → @${agent} `,
          el("details", {}, el("summary", { text: "message sent" }), el("pre", { text: cut(event.prompt, 20000) }))));
      case "text": {
        const text = event.shown ?? event.text;
        if (!text || reviewing.has(agent)) return;
        if (!writing[agent]) writing[agent] = add(item("streaming", agent, head(agent, "is writing…"), el("div", { class: "text" })));
        writing[agent].querySelector(".text").append(text);
        return;
      }
      case "answer":
        if (reviewing.has(agent)) return;
        if (writing[agent]) return stopWriting(agent, "answer");
        return add(item("answer", agent, head(agent, "answer"), el("div", { class: "text", text: event.text })));
      case "call": {
        stopWriting(agent, "said"); // its lead-in stays above the call it made
        const own = event.via === "own";
        const name = toolName(event.name);
        const node = add(item("call", agent,
          head(agent, own ? "its own tool" : "calls", el("strong", { class: "mono", text: event.name })),
          writeDiff(name, event.input) || el("pre", { text: cut(json(event.input), 4000) }),
          el("div", { class: "decision dim", "data-result": "pending", text: "running…" })));
        node.setAttribute("data-tool-call", name);
        node.setAttribute("data-call", event.call);
        if (own) node.dataset.own = "1";
        calls.set(event.call, node);
        return;
      }
      case "decision": {
        const call = calls.get(event.call);
        if (!call) return;
        const by = event.by || "policy"; // the record leaves out its default
        if (event.decision === "refused") {
          call.classList.add("refused");
          return outcome(call, "refused", `refused (${by}): ${event.reason}`);
        }
        if (call.dataset.own) { // the CLI runs it itself: its result, when it reports one, follows
          outcome(call, "allowed", by === "cli" ? "run by the CLI (crew was not asked)" : `allowed (${by})`);
        }
        return;
      }
      case "ask": {
        const call = calls.get(event.call);
        live.status = "waiting"; draw();
        if (call) outcome(call, "pending", "waiting for your answer…");
        return;
      }
      case "approval": {
        const call = calls.get(event.call);
        if (live.status === "waiting") { live.status = "running"; draw(); }
        const verdict = event.answer ? `${said[event.answer] || event.answer} on the ${event.source}` : "nobody answered";
        const line = el("div", { class: `decision ${event.answer === "no" || !event.answer ? "no" : "yes"}`,
          "data-approval": event.answer || "none", text: `approval: ${verdict}` });
        if (call) call.insertBefore(line, call.querySelector("[data-result]"));
        else add(item("notice", agent, line));
        if (call && event.answer && event.answer !== "no") outcome(call, "pending", "running…");
        return;
      }
      case "result": {
        const call = calls.get(event.call) || add(item("call", agent, head(agent, "result of", event.name)));
        calls.delete(event.call);
        const refused = call.classList.contains("refused");
        call.classList.add(event.success ? "ok" : refused ? "refused" : "failed");
        if (!refused) {
          outcome(call, event.success ? "ok" : "failed",
            event.success ? `✓ ${cut(json(event.data), 160).split("\n").join(" ")}` : `✗ ${event.error}`);
        }
        if (event.success && event.data !== undefined && event.data !== null) {
          call.append(el("details", {}, el("summary", { text: "result" }), el("pre", { text: cut(json(event.data), 20000) })));
        }
        return;
      }
      case "usage": {
        const tokens = (event.input_tokens || 0) + (event.output_tokens || 0);
        live.tokens += tokens;
        if (event.cost_usd !== undefined && event.cost_usd !== null) live.cost = (live.cost || 0) + event.cost_usd;
        draw();
        return add(item("turn", agent, `@${agent} turn ${event.turn ?? ""}: ${number(tokens)} tokens` +
          ` (${number(event.input_tokens || 0)} in, ${number(event.output_tokens || 0)} out)` +
          (event.cost_usd !== undefined && event.cost_usd !== null ? `, ${dollars(event.cost_usd)}` : "")));
      }
      case "review":
        return add(item(event.verdict === "approve" ? "answer" : "reply", agent,
          head(agent, `review round ${event.round}/${event.rounds}: ${event.verdict}`),
          event.findings && event.findings.length
            ? el("ul", { class: "findings" }, event.findings.map((f) => el("li", { class: `sev-${f.severity}` },
              `[${f.severity}] ${f.path ? f.path + (f.line ? ":" + f.line : "") + ": " : ""}${f.message}`)))
            : el("div", { class: "dim", text: "no findings" })));
      case "check": {
        const node = add(item(event.passed ? "answer" : "error", agent,
          head(agent, `check ${event.round}/${event.rounds} ${event.passed ? "passed" : `failed, exit status ${event.exit_code}`}`,
            el("code", { text: event.command })),
          event.output ? el("details", { open: !event.passed || null }, el("summary", { text: "output" }), el("pre", { text: event.output })) : null));
        node.dataset.check = event.passed ? "passed" : "failed";
        return node;
      }
      case "pull":
        return add(item("notice", agent, head(agent, `${event.forge === "gitlab" ? "merge" : "pull"} request ${event.opened ? "opened" : "updated"}`),
          link(event.url)));
      case "worktree": {
        const output = el("div");
        const apply = `crew apply ${id} ${agent}`;
        const button = el("button", { type: "button", text: "Show the worktree's diff", onclick: async () => {
          button.disabled = true;
          const data = await api(`/api/runs/${id}/diff?agent=${encodeURIComponent(agent)}`);
          output.replaceChildren(data.diff ? patch(data.diff) : el("div", { class: "dim",
            text: data.gone ? "the worktree is gone (applied or cleaned)" : data.error || "no changes" }));
          if (data.cut) output.append(el("div", { class: "dim", text: "(cut: the diff is longer)" }));
        } });
        const changed = (event.changes || []).map((f) => `${f.status} ${f.path} ${f.added === null ? "binary" : `+${f.added} -${f.removed}`}`);
        return add(item("notice", agent, head(agent, `worked in ${event.worktree} on ${event.branch}`),
          el("pre", { text: event.changes === null || event.changes === undefined ? "its changes are unknown" : changed.join("\n") || "no changes" }),
          el("div", {}, "apply its change with ", el("code", { text: apply })), button, output));
      }
      case "error":
        stopWriting(agent, "said");
        if (event.exit_code === INTERRUPTED) return add(item("notice", agent, head(agent, "stopped"), el("div", { class: "dim", text: event.message })));
        live.errors += 1;
        return add(item("error", agent, head(agent, "error"), el("div", { class: "text", text: event.message })));
      case "cancel":
        note.textContent = "";
        return add(item("notice", agent, `cancelled from the ${event.source}`));
      case "end":
        for (const name of Object.keys(writing)) stopWriting(name, "said");
        live.status = event.status; live.ended = true; note.textContent = "";
        draw();
        return add(item("notice", null, `ended: ${event.status}`, ` — ${number(event.calls)} tool call${event.calls === 1 ? "" : "s"}, ${number(live.errors)} error${live.errors === 1 ? "" : "s"}`));
      default:
        return add(item("notice", agent, head(agent, event.kind), event.text || event.message || event.reason
          ? el("div", { class: "text", text: event.text || event.message || event.reason }) : null));
    }
  }

  // The record's events are shown a frame's worth at a time: where the page is scrolled is read once
  // a frame, not once an event (each read lays the whole log out again: a long run's page took
  // seconds), and a page scrolled to its end stays there.
  const queued = [];
  function shown(event) {
    if (!queued.length) requestAnimationFrame(flush);
    queued.push(event);
  }
  function flush() {
    const bottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    batching = true;
    try {
      for (const event of queued.splice(0)) show(event);
    } finally {
      batching = false;
    }
    if (dirty) { dirty = false; draw(); }
    if (bottom && added) added.scrollIntoView({ block: "end" });
    added = null;
  }

  const source = new EventSource(`/api/runs/${id}/events`);
  source.addEventListener("event", (e) => shown(JSON.parse(e.data)));
  source.addEventListener("end", (e) => {
    source.close();
    if (queued.length) flush(); // the record's own end comes first, if it has one
    const ended = JSON.parse(e.data || "{}");
    if (!live.ended && ended.status) { // its process died: no `end` in its record
      for (const name of Object.keys(writing)) stopWriting(name, "said");
      live.status = ended.status; live.ended = true; note.textContent = "";
      add(item("notice", null, `ended: ${ended.status} (its process ended without a word)`));
    }
    header();
  });
  header();
  return () => source.close();
}

// -- batches -------------------------------------------------------------------------------------

function batchesView() {
  const list = el("div");
  main.replaceChildren(el("h1", { text: "Batches" }), list);
  async function load() {
    let data;
    try { data = await api("/api/batches"); } catch (e) { list.replaceChildren(el("p", { class: "decision no", text: String(e.message) })); return; }
    list.replaceChildren(...data.batches.map(batchSection));
    if (!data.batches.length) list.append(noBatches(data.missing));
  }
  cues.add(load);
  load();
  return () => cues.delete(load);
}

// The order a batch's states are said and drawn in: the good ones, those still to come, the bad ones.
const BATCH_STATES = ["done", "unchanged", "running", "queued", "held", "interrupted", "failed", "cancelled", "skipped"];

function batchSection(batch) {
  const said = BATCH_STATES.filter((s) => batch.counts[s]).map((s) => `${batch.counts[s]} ${s}`).join(", ");
  const outcome = batch.incomplete ? "failed" : batch.finished === batch.total ? "done" : "running";
  return el("section", { "data-batch-id": batch.id, "data-outcome": outcome },
    el("h2", {}, `${batch.id} `, status(outcome), " ",
      el("span", { class: "dim", "data-summary": "", text: `${said} — ${batch.finished} of ${batch.total} ended` })),
    el("div", { class: "dim", text: batch.task }),
    batchBar(batch),
    el("div", { class: "scroll" }, el("table", {},
      el("thead", {}, el("tr", {}, ["Repository", "Status", "Run", "Branch", "Pull request", "Error"].map((h) => el("th", { text: h })))),
      el("tbody", {}, batch.repos.map(repoRow)))));
}

// The batch's progress: one segment per state, in its colour (a failed repository shows red).
function batchBar(batch) {
  return el("div", { class: "bar", role: "progressbar", "aria-valuenow": batch.finished, "aria-valuemax": batch.total,
    "aria-valuetext": `${batch.finished} of ${batch.total} ended, ${batch.incomplete} not done` },
  BATCH_STATES.filter((s) => batch.counts[s]).map((s) => el("div", { class: `part ${s}`, "data-part": s,
    style: `width: ${(100 * batch.counts[s]) / Math.max(batch.total, 1)}%` })));
}

function repoRow(repo) {
  return el("tr", { "data-repo": repo.repo },
    el("td", { class: "mono wrap", text: repo.repo }), el("td", {}, status(repo.status)),
    el("td", { class: "mono" }, repo.run ? el("a", { href: `/runs/${repo.run}`, "data-run-link": repo.run, text: repo.run }) : "-"),
    el("td", { class: "mono wrap", text: repo.branch || "-" }), el("td", { class: "wrap", "data-pull": "" }, link(repo.pull)),
    el("td", { class: "dim wrap", text: repo.error || "" }));
}

function noBatches(missing) {
  return el("div", { class: "empty", "data-empty": "batches" },
    el("p", { text: "No batches yet. crew batch runs one task across many repositories, each on a branch of its own:" }),
    el("pre", { class: "command", text: 'crew batch "@claude bump ruff and fix what it finds" ../api ../web' }),
    missing ? el("p", { class: "decision no", "data-missing": "batch", text: missing }) : null);
}

// -- usage ---------------------------------------------------------------------------------------

const palette = ["#2f6fdb", "#1d7f45", "#c0392b", "#b7791f", "#7d3cc8", "#0e8a8a", "#c2417b", "#5b6770"];

function usageView() {
  const measure = el("select", { "aria-label": "measure" }, el("option", { value: "tokens", text: "tokens" }), el("option", { value: "cost_usd", text: "cost" }));
  const by = el("select", { "aria-label": "group" }, el("option", { value: "agent", text: "per agent" }), el("option", { value: "model", text: "per agent and model" }));
  const chart = el("div", { class: "chart" });
  const totals = el("div");
  main.replaceChildren(el("h1", { text: "Usage" }), el("div", { class: "controls" }, measure, by), chart,
    el("h2", { text: "Per agent (as crew log --by agent)" }), totals);
  let data = null;

  function draw() {
    const field = measure.value;
    const key = (s) => (by.value === "agent" ? "@" + s.agent : `@${s.agent}:${s.model}`);
    const days = [...new Set(data.series.map((s) => s.day))].sort();
    const keys = [...new Set(data.series.map(key))].sort();
    const sums = days.map((day) => Object.fromEntries(keys.map((k) => [k, 0])));
    for (const s of data.series) sums[days.indexOf(s.day)][key(s)] += Number(s[field] || 0);
    const most = Math.max(0, ...sums.map((d) => Object.values(d).reduce((a, b) => a + b, 0)));
    const label = (v) => (field === "tokens" ? number(v) : "$" + trimmed(v));
    const ticks = roundTicks(most, field === "tokens");
    const top = ticks[ticks.length - 1];
    // Drawn at the width it is shown at: its text stays its size on a phone, nothing is scaled down.
    const W = Math.max(280, Math.round(chart.clientWidth - 18)), H = W < 600 ? 220 : 300;
    const left = 12 + 7 * Math.max(...ticks.map((t) => label(t).length)), bottom = 28;
    const width = W - left - 10, height = H - bottom - 10;
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", `${field === "tokens" ? "tokens" : "cost"} per day`);
    const shape = (tag, attrs, text) => {
      const node = document.createElementNS(ns, tag);
      for (const [n, v] of Object.entries(attrs)) node.setAttribute(n, v);
      if (text !== undefined) node.textContent = text;
      svg.append(node);
      return node;
    };
    for (const tick of ticks) {
      const y = 10 + height - (height * tick) / top;
      shape("line", { x1: left, x2: W - 10, y1: y, y2: y, class: "grid" });
      shape("text", { x: left - 6, y: y + 4, "text-anchor": "end", "data-tick": tick }, label(tick));
    }
    const step = width / Math.max(days.length, 1);
    days.forEach((day, i) => {
      let y = 10 + height;
      keys.forEach((k, j) => {
        const h = (height * sums[i][k]) / top;
        if (h > 0) {
          const wide = Math.min(step * 0.7, 56);
          const bar = shape("rect", { x: left + i * step + (step - wide) / 2, y: y - h, width: wide, height: h, fill: palette[j % palette.length], "data-key": k, "data-day": day });
          const tip = document.createElementNS(ns, "title");
          tip.textContent = `${day} ${k}: ${label(sums[i][k])}`;
          bar.append(tip);
        }
        y -= h;
      });
      const shown = Math.max(1, Math.floor(width / 48)); // day labels that fit side by side
      if (days.length <= shown || i % Math.ceil(days.length / shown) === 0) {
        shape("text", { x: left + i * step + step / 2, y: H - 8, "text-anchor": "middle" }, day.slice(5));
      }
    });
    chart.replaceChildren(svg, el("div", { class: "legend" }, keys.map((k, j) => el("span", {}, el("i", { style: `background: ${palette[j % palette.length]}` }), k))));
    if (!days.length) {
      chart.replaceChildren(el("p", { class: "empty", "data-empty": "usage",
        text: "No usage recorded yet: each run of claude, gemini or codex adds the tokens (and cost) its CLI reports, per day." }));
    }
  }

  function table() {
    const rows = data.agents;
    const total = { agent: "total", runs: 0, turns: 0, input_tokens: 0, cached_tokens: 0, output_tokens: 0, cost_usd: null };
    for (const r of rows) {
      for (const f of ["runs", "turns", "input_tokens", "cached_tokens", "output_tokens"]) total[f] += r[f];
      if (r.cost_usd !== null) total.cost_usd = (total.cost_usd || 0) + r.cost_usd;
    }
    totals.replaceChildren(el("div", { class: "scroll" }, el("table", { class: "usage" },
      el("thead", {}, el("tr", {}, ["Agent", "Runs", "Turns", "Input", "Cached", "Output", "Cost"].map((h, i) => el("th", { class: i ? "num" : null, text: h })))),
      el("tbody", {}, [...rows, total].map((r) => el("tr", { "data-agent": r.agent },
        el("td", { text: r === total ? "total" : "@" + r.agent }),
        ["runs", "turns", "input_tokens", "cached_tokens", "output_tokens"].map((f) => el("td", { class: "num", text: number(r[f]) })),
        el("td", { class: "num", text: dollars(r.cost_usd) })))))));
  }

  async function load() {
    data = await api("/api/usage");
    draw();
    table();
  }
  measure.onchange = by.onchange = draw;
  let resized = null;
  const resize = () => { clearTimeout(resized); resized = setTimeout(() => data && draw(), 100); };
  window.addEventListener("resize", resize);
  cues.add(load);
  load();
  return () => { cues.delete(load); window.removeEventListener("resize", resize); };
}

// A chart's ticks from 0: four or so, each a round number (1, 2, 2.5 or 5 × 10^n; whole ones for
// counts), the last at or above `most`.
function roundTicks(most, whole) {
  if (!(most > 0)) return [0, 1];
  const rough = most / 4;
  const power = Math.pow(10, Math.floor(Math.log10(rough)));
  let step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= rough);
  if (whole && !Number.isInteger(step)) step = step < 1 ? 1 : 5; // no "2.5 tokens"
  const ticks = [];
  for (let i = 0; ticks.length === 0 || ticks[ticks.length - 1] < most; i++) ticks.push(Number((i * step).toPrecision(12)));
  return ticks;
}

function trimmed(v) {
  return v === 0 ? "0" : v < 0.01 ? v.toPrecision(2) : String(Number(v.toFixed(v < 1 ? 4 : 2)));
}

// -- routing -------------------------------------------------------------------------------------

function go(path) {
  history.pushState(null, "", path);
  route();
}

function route() {
  if (leave) leave();
  const path = location.pathname;
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("here", link.getAttribute("href") === path || (path.startsWith("/runs/") && link.dataset.nav === "runs"));
  }
  const run = path.match(/^\/runs\/([0-9]{8}-[0-9]{6}-[0-9a-f]{6})$/);
  leave = run ? runView(run[1]) : path === "/batches" ? batchesView() : path === "/usage" ? usageView() : runsView();
  window.scrollTo(0, 0);
}

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[href^='/']");
  if (!link || event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  if (link.getAttribute("href") !== location.pathname + location.search) go(link.getAttribute("href"));
});
window.addEventListener("popstate", route);

offerNotifications();
listen();
route();
