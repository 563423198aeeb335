// The agentcore web chat. Plain JavaScript, no build step.
//
// Safety rule of this file: text from a model, a tool or a user is only ever put on the page with
// textContent, or as `html` the server rendered and sanitised (markdown-it without raw HTML, then
// nh3). Nothing here builds markup from such text.
"use strict";

const FOLD_LINES = 12; // tool results longer than this are folded
const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function setSafeHtml(node, serverHtml) {
  // Only ever called with the server's sanitised rendering (see the rule above).
  node.innerHTML = serverHtml;
}

async function api(path, options = {}) {
  const init = { ...options, headers: { Accept: "application/json", ...(options.headers || {}) } };
  if (options.json !== undefined) {
    init.method = init.method || "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.json);
  }
  const response = await fetch(path, init);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(body.message || response.statusText);
    error.code = body.error || String(response.status);
    throw error;
  }
  return body;
}

function when(seconds) {
  if (!seconds) return "-";
  const age = Date.now() / 1000 - seconds;
  if (age < 60) return "just now";
  if (age < 3600) return `${Math.floor(age / 60)} min ago`;
  if (age < 86400) return `${Math.floor(age / 3600)} h ago`;
  return new Date(seconds * 1000).toLocaleString();
}

function compactArgs(args) {
  if (!args || typeof args !== "object") return args === undefined ? "" : JSON.stringify(args);
  return Object.entries(args).map(([key, value]) => `${key}=${JSON.stringify(value)}`).join(", ");
}

function newId() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID().replace(/-/g, "");
  return Math.random().toString(16).slice(2) + Date.now().toString(16);
}

let config = null;
async function loadConfig() {
  if (!config) config = await api("/api/config");
  const link = $("temporal-link");
  if (config.temporal_ui_url) {
    link.href = config.temporal_ui_url;
    link.hidden = false;
  }
  return config;
}

// ------------------------------------------------------------------------------------- the list

async function showList() {
  $("list-view").hidden = false;
  document.title = "agentcore: conversations";
  const cfg = await loadConfig();
  const models = $("model-options");
  cfg.models.forEach((name) => models.appendChild(el("option")).setAttribute("value", name));
  $("new-model").value = cfg.models[0] || "";
  const thinking = $("new-thinking");
  cfg.thinking_levels.forEach((level) => {
    const option = thinking.appendChild(el("option", "", level));
    option.value = level;
  });
  const tools = $("new-tools");
  cfg.tools.forEach((name) => {
    const label = tools.appendChild(el("label", "tool-choice"));
    const box = label.appendChild(el("input"));
    box.type = "checkbox";
    box.value = name;
    box.checked = cfg.default_tools.includes(name);
    label.appendChild(document.createTextNode(" " + name));
  });
  $("new-system").value = cfg.system_prompt;
  $("new-form").addEventListener("submit", startConversation);
  $("filter").addEventListener("input", renderRows);
  await refreshList();
  if (!rows.length) $("new-panel").open = true;
  setInterval(refreshList, 5000);
}

let rows = [];
async function refreshList() {
  try {
    rows = (await api("/api/conversations")).conversations;
  } catch (error) {
    $("no-conversations").textContent = `Cannot list conversations: ${error.message}`;
    $("no-conversations").hidden = false;
    return;
  }
  renderRows();
}

function renderRows() {
  const needle = $("filter").value.trim().toLowerCase();
  const body = $("conversations").tBodies[0];
  body.replaceChildren();
  const shown = rows.filter((row) =>
    !needle || [row.session_id, row.model, row.status].some((v) => (v || "").toLowerCase().includes(needle)));
  for (const row of shown) {
    const tr = body.appendChild(el("tr"));
    tr.dataset.session = row.session_id;
    const name = tr.appendChild(el("td")).appendChild(el("a", "", row.session_id));
    name.href = `/c/${encodeURIComponent(row.session_id)}`;
    tr.appendChild(el("td")).appendChild(el("span", `badge ${row.status}`, row.status || "-"));
    tr.appendChild(el("td", "", row.model || "-"));
    tr.appendChild(el("td", "num", row.messages ?? "-"));
    tr.appendChild(el("td", "num", row.cost == null ? "-" : `$${row.cost.toFixed(4)}`));
    tr.appendChild(el("td", "muted", when(row.last_activity)));
    tr.addEventListener("click", (event) => {
      if (event.target.tagName !== "A") location.href = name.href;
    });
  }
  $("no-conversations").hidden = shown.length > 0;
  if (!rows.length) $("no-conversations").textContent = "No conversations yet: start one above.";
  else if (!shown.length) $("no-conversations").textContent = "No conversation matches the filter.";
}

async function startConversation(event) {
  event.preventDefault();
  $("new-problem").textContent = "";
  $("new-start").disabled = true;
  const tools = [...document.querySelectorAll("#new-tools input:checked")].map((box) => box.value);
  const request = {
    model: $("new-model").value.trim(),
    tools,
    thinking_level: $("new-thinking").value,
    system_prompt: $("new-system").value,
  };
  const sessionId = $("new-session").value.trim();
  if (sessionId) request.session_id = sessionId;
  try {
    const created = await api("/api/conversations", { json: request });
    location.href = `/c/${encodeURIComponent(created.session_id)}`;
  } catch (error) {
    $("new-problem").textContent = `${error.code}: ${error.message}`;
    $("new-start").disabled = false;
  }
}

// ------------------------------------------------------------------------------------- the chat

const chat = {
  session: null,
  lastOffset: -1, // the newest event applied: a repeat (or an older one) is ignored
  running: false,
  nextIndex: 0, // transcript index of the next message to end
  current: null, // the assistant message being streamed: {node, text, thinking, body, thinkingPre}
  tools: new Map(), // tool call id -> its block
  source: null,
  waitingSince: null, // when the page began waiting for a first token or a tool
  waitingFor: "",
  runs: 0, // runs seen ending (agent_end) since the page was opened
  applied: [], // offsets of the events applied, in order (what the page has shown, for inspection)
};
window.agentcoreChat = chat;

function transcript() {
  return $("transcript");
}

function nearBottom() {
  return window.innerHeight + window.scrollY >= document.body.scrollHeight - 120;
}

function follow(wasNearBottom) {
  if (wasNearBottom) window.scrollTo(0, document.body.scrollHeight);
}

function messageActions(node, view) {
  // A message that asked for tools is not a place to stop: its results belong with it.
  if (!view.entry_id || (view.tool_calls && view.tool_calls.length)) return;
  node.dataset.entry = view.entry_id;
  let bar = node.querySelector(":scope > .actions");
  if (bar) return;
  bar = node.insertBefore(el("div", "actions"), node.firstChild);
  const branch = bar.appendChild(el("button", "link", "Branch from here"));
  branch.title = "Continue the conversation from this message (the rest stays in the session file)";
  branch.addEventListener("click", () => branchTo(view.entry_id));
  const fork = bar.appendChild(el("button", "link", "Fork"));
  fork.title = "A new conversation with everything up to this message";
  fork.addEventListener("click", () => forkAt(view.entry_id));
  if (view.role === "user") {
    const edit = bar.appendChild(el("button", "link", "Edit"));
    edit.title = "Go back to before this message and put it in the editor";
    edit.addEventListener("click", () => editFrom(node, view));
  }
}

function renderUser(view) {
  const node = el("article", "message user");
  node.dataset.index = view.index ?? "";
  const body = node.appendChild(el("div", "body markdown"));
  setSafeHtml(body, view.html || "");
  if (view.images) body.appendChild(el("div", "muted", `(+${view.images} image${view.images > 1 ? "s" : ""})`));
  messageActions(node, view);
  return node;
}

function toolBlock(call) {
  let block = chat.tools.get(call.id);
  if (block) return block;
  block = el("div", "tool pending");
  block.dataset.toolCallId = call.id;
  const head = block.appendChild(el("div", "tool-head"));
  head.appendChild(el("span", "tool-icon", "⚙"));
  head.appendChild(el("span", "tool-name", call.name));
  head.appendChild(el("code", "tool-args", compactArgs(call.args)));
  head.appendChild(el("span", "tool-state", "queued"));
  block.appendChild(el("div", "tool-progress"));
  block.appendChild(el("div", "tool-result"));
  chat.tools.set(call.id, block);
  return block;
}

function setToolState(block, state, label) {
  block.classList.remove("pending", "running", "done", "failed");
  block.classList.add(state);
  block.querySelector(".tool-state").textContent = label;
}

function setToolResult(block, text, html, isError) {
  const place = block.querySelector(".tool-result");
  place.replaceChildren();
  block.querySelector(".tool-progress").textContent = "";
  const lines = (text || "").split("\n");
  const content = el("div", "markdown");
  if (html) setSafeHtml(content, html);
  else content.textContent = text || "(no output)";
  if (lines.length > FOLD_LINES) {
    const fold = place.appendChild(el("details", "fold"));
    fold.appendChild(el("summary", "", `${lines.slice(-1)[0].slice(0, 100) || lines[0].slice(0, 100)} (${lines.length} lines)`));
    fold.appendChild(content);
  } else {
    place.appendChild(content);
  }
  setToolState(block, isError ? "failed" : "done", isError ? "error" : "done");
}

function fillAssistant(node, view) {
  // The finished message, from the server's rendering.
  for (const text of view.thinking || []) {
    const details = node.appendChild(el("details", "thinking"));
    details.appendChild(el("summary", "", "Thinking"));
    details.appendChild(el("pre", "", text));
  }
  if (view.html) {
    const body = node.appendChild(el("div", "body markdown"));
    setSafeHtml(body, view.html);
  }
  if (view.tool_calls && view.tool_calls.length) {
    const tools = node.appendChild(el("div", "tools"));
    for (const call of view.tool_calls) tools.appendChild(toolBlock(call));
  }
  if (view.stop_reason === "aborted") {
    node.appendChild(el("div", "notice stop aborted", "Aborted: the turn was stopped; the conversation goes on."));
  } else if (view.stop_reason === "error") {
    node.appendChild(el("div", "notice stop error", `Model error: ${view.error_message || "unknown"}`));
  } else if (view.stop_reason === "length") {
    node.appendChild(el("div", "notice stop", "The answer hit the model's length limit."));
  }
}

function renderAssistant(view) {
  const node = el("article", "message assistant");
  node.dataset.index = view.index ?? "";
  fillAssistant(node, view);
  messageActions(node, view);
  return node;
}

function renderToolResult(view) {
  const block = chat.tools.get(view.tool_call_id);
  if (block) {
    setToolResult(block, view.text, view.html, view.is_error);
    if (view.entry_id) block.dataset.entry = view.entry_id;
    return null;
  }
  const node = el("article", "message tool-only");
  node.dataset.index = view.index ?? "";
  const orphan = toolBlock({ id: view.tool_call_id, name: view.tool_name, args: null });
  setToolResult(orphan, view.text, view.html, view.is_error);
  node.appendChild(orphan);
  return node;
}

function appendMessage(view) {
  const node =
    view.role === "user" ? renderUser(view) : view.role === "assistant" ? renderAssistant(view) : renderToolResult(view);
  if (node) transcript().appendChild(node);
  return node;
}

// A streaming assistant message: plain text while it streams, the rendered Markdown once it ends.
function startStreaming(partial) {
  const node = el("article", "message assistant streaming");
  const thinking = node.appendChild(el("details", "thinking"));
  thinking.hidden = true;
  thinking.appendChild(el("summary", "", "Thinking…"));
  const thinkingPre = thinking.appendChild(el("pre"));
  const body = node.appendChild(el("div", "body plain"));
  transcript().appendChild(node);
  chat.current = { node, text: "", thinking: "", body, thinkingPre, thinkingBox: thinking };
  if (partial) {
    appendDelta({ type: "thinking_delta", delta: (partial.thinking || []).join("\n") });
    appendDelta({ type: "text_delta", delta: partial.text || "" });
  }
  waiting("Thinking");
  return chat.current;
}

function appendDelta(delta) {
  const current = chat.current || startStreaming(null);
  if (delta.type === "text_delta" && delta.delta) {
    current.node.classList.add("has-content");
    current.text += delta.delta;
    current.body.textContent = current.text;
    waiting(null);
  } else if (delta.type === "thinking_delta" && delta.delta) {
    current.node.classList.add("has-content");
    current.thinking += delta.delta;
    current.thinkingPre.textContent = current.thinking;
    current.thinkingBox.hidden = false;
  } else if (delta.type === "toolcall_start") {
    waiting("Preparing a tool call");
  }
}

function endStreaming(view) {
  const current = chat.current;
  chat.current = null;
  const node = current ? current.node : transcript().appendChild(el("article", "message assistant"));
  node.classList.remove("streaming");
  node.classList.add("has-content");
  node.replaceChildren(...node.querySelectorAll(":scope > .retry"));
  fillAssistant(node, view);
  return node;
}

// ----------------------------------------------------------------- activity line (spinner + elapsed)

function waiting(what) {
  chat.waitingFor = what || "";
  chat.waitingSince = what ? chat.waitingSince || Date.now() : null;
  tickActivity();
}

function tickActivity() {
  const box = $("activity");
  const runningTools = [...chat.tools.values()].filter((block) => block.classList.contains("running"));
  let label = chat.waitingFor;
  if (!label && runningTools.length) {
    label = `Running ${runningTools.map((b) => b.querySelector(".tool-name").textContent).join(", ")}`;
    chat.waitingSince = chat.waitingSince || Date.now();
  }
  if (!chat.running || !label) {
    box.hidden = true;
    if (!label) chat.waitingSince = null;
    return;
  }
  const seconds = ((Date.now() - (chat.waitingSince || Date.now())) / 1000).toFixed(1);
  $("activity-text").textContent = `${label}… ${seconds}s`;
  box.hidden = false;
}

function setRunning(running, status) {
  chat.running = running;
  const badge = $("chat-status");
  badge.textContent = status || (running ? "running" : "idle");
  badge.className = `badge ${badge.textContent}`;
  $("send").textContent = running ? "Steer" : "Send";
  $("send").title = running ? "Steer: taken after the current tool batch" : "";
  $("follow-up").hidden = !running;
  $("abort").hidden = !running;
  if (!running) waiting(null);
  tickActivity();
}

function banner(text, kind) {
  const box = $("banner");
  box.textContent = text || "";
  box.className = `banner ${kind || ""}`;
  box.hidden = !text;
}

// ------------------------------------------------------------------------------------- events

function applyEvent(offset, event) {
  if (offset <= chat.lastOffset) return; // already applied (a resent event)
  chat.lastOffset = offset;
  chat.applied.push(offset);
  const stick = nearBottom();
  switch (event.type) {
    case "agent_start":
      setRunning(true);
      waiting("Thinking");
      break;
    case "message_start":
      if (event.message.role === "assistant") startStreaming(null);
      else if (event.message.role === "user") {
        appendMessage(event.message);
        refreshQueues();
      }
      break;
    case "message_update":
      appendDelta(event.delta || {});
      break;
    case "message_end": {
      const view = { ...event.message, index: chat.nextIndex++ };
      let node;
      if (view.role === "assistant") {
        node = endStreaming(view);
        if (!view.tool_calls.length) waiting(null);
      } else if (view.role === "user") {
        node = transcript().lastElementChild;
      } else {
        node = appendMessage(view);
      }
      if (node) node.dataset.index = view.index;
      break;
    }
    case "tool_execution_start": {
      const block = toolBlock({ id: event.tool_call_id, name: event.tool_name, args: event.args });
      if (!block.isConnected) {
        const holder = (chat.current && chat.current.node) || transcript().lastElementChild || transcript();
        holder.appendChild(block);
        if (holder.classList) holder.classList.add("has-content");
      }
      setToolState(block, "running", "running");
      waiting(null);
      break;
    }
    case "tool_execution_update": {
      const block = toolBlock({ id: event.tool_call_id, name: event.tool_name, args: null });
      block.querySelector(".tool-progress").textContent = event.text;
      break;
    }
    case "tool_execution_end": {
      const block = toolBlock({ id: event.tool_call_id, name: event.tool_name, args: null });
      setToolResult(block, event.text, event.html, event.is_error);
      if (![...chat.tools.values()].some((b) => b.classList.contains("running"))) waiting("Thinking");
      break;
    }
    case "llm_retry": {
      // The failed attempt's text is void: the retry streams the message afresh.
      const current = chat.current || startStreaming(null);
      current.text = "";
      current.thinking = "";
      current.body.textContent = "";
      current.thinkingPre.textContent = "";
      const note = current.node.insertBefore(el("div", "notice retry"), current.node.firstChild);
      current.node.classList.add("has-content");
      note.textContent = `The model call failed and is being retried (attempt ${event.attempt})${
        event.error_message ? `: ${event.error_message}` : ""}`;
      waiting("Retrying");
      break;
    }
    case "compaction_start":
      transcript().appendChild(el("div", "notice compaction", `Compacting the conversation (${event.reason})…`));
      break;
    case "compaction_end":
      transcript().appendChild(el("div", "notice compaction",
        event.error_message ? `Compaction failed: ${event.error_message}`
          : event.aborted ? "Compaction aborted." : `Compacted: ${event.tokens_before} tokens summarised.`));
      break;
    case "agent_end":
      chat.runs += 1;
      setRunning(false);
      refreshAfterRun();
      break;
  }
  tickActivity();
  follow(stick);
}

function openEvents(fromOffset) {
  if (chat.source) chat.source.close();
  const url = `/api/conversations/${encodeURIComponent(chat.session)}/events?from=${fromOffset}`;
  const source = new EventSource(url);
  chat.source = source;
  source.addEventListener("agent", (message) => {
    applyEvent(Number(message.lastEventId), JSON.parse(message.data));
  });
  source.addEventListener("open", () => banner(null));
  source.addEventListener("error", () => {
    // The browser reconnects by itself and sends Last-Event-ID: the stream goes on where it broke.
    if (source.readyState === EventSource.CONNECTING) banner("Connection lost: reconnecting…", "warn");
  });
  source.addEventListener("failure", (message) => {
    const failure = JSON.parse(message.data);
    banner(`${failure.error}: ${failure.message}`, "error");
    source.close();
  });
  source.addEventListener("closed", () => {
    banner("This conversation's workflow has ended.", "warn");
    setRunning(false, "closed");
    source.close();
  });
}

// ------------------------------------------------------------------------------------- snapshot

async function loadSnapshot() {
  const state = await api(`/api/conversations/${encodeURIComponent(chat.session)}`);
  chat.tools.clear();
  chat.current = null;
  transcript().replaceChildren();
  if (state.first_message_index > 0) {
    transcript().appendChild(el("div", "notice", `${state.first_message_index} earlier messages are not shown.`));
  }
  for (const view of state.messages) appendMessage(view);
  chat.nextIndex = state.first_message_index + state.messages.length;
  for (const id of state.pending_tool_calls) {
    const block = chat.tools.get(id);
    if (block) setToolState(block, "running", "running");
  }
  $("chat-title").textContent = state.session_id;
  $("chat-model").textContent = state.model + (state.thinking_level !== "off" ? ` · thinking ${state.thinking_level}` : "");
  $("chat-tools").textContent = state.tools.length ? `tools: ${state.tools.join(", ")}` : "no tools";
  const link = $("workflow-link");
  if (state.workflow_url) {
    link.href = state.workflow_url;
    link.hidden = false;
  }
  setRunning(state.status !== "idle", state.status);
  if (state.streaming_message) startStreaming(state.streaming_message);
  if (state.error_message) banner(state.error_message, "error");
  renderQueued(state.queued);
  chat.lastOffset = state.event_offset - 1;
  chat.snapshotOffset = state.event_offset;
  window.scrollTo(0, document.body.scrollHeight);
  return state;
}

async function refreshAfterRun() {
  // Messages streamed in get their session entry ids (for branch and fork) once the run is over.
  try {
    const state = await api(`/api/conversations/${encodeURIComponent(chat.session)}`);
    for (const view of state.messages) {
      const node = transcript().querySelector(`[data-index="${view.index}"]`);
      if (node && view.entry_id && view.role !== "toolResult") messageActions(node, view);
    }
    renderQueued(state.queued);
    if (state.status !== "idle" && !chat.running) setRunning(true, state.status);
  } catch (error) {
    banner(`${error.code}: ${error.message}`, "error");
  }
}

function renderQueued(items) {
  const list = $("queued");
  list.replaceChildren();
  for (const item of items || []) {
    const li = list.appendChild(el("li", `queued ${item.kind}`));
    li.dataset.id = item.id;
    li.appendChild(el("span", "queued-kind", item.kind === "steer" ? "steering" : "follow-up"));
    li.appendChild(el("span", "", item.text));
  }
  if (list.children.length) {
    // Queued messages go with the next turn unless cleared (a steer sent while idle waits too).
    const clear = list.appendChild(el("li", "queued-actions")).appendChild(el("button", "secondary", "Clear queued"));
    clear.type = "button";
    clear.id = "clear-queued";
    clear.title = "Drop the queued messages: they will not be sent";
    clear.addEventListener("click", clearQueued);
  }
  list.hidden = !list.children.length;
}

async function clearQueued() {
  try {
    const cleared = await api(`/api/conversations/${encodeURIComponent(chat.session)}/queues/clear`, {
      json: { queue: "all" },
    });
    renderQueued(cleared.queued);
  } catch (error) {
    banner(`${error.code}: ${error.message}`, "error");
  }
}

async function refreshQueues() {
  try {
    renderQueued((await api(`/api/conversations/${encodeURIComponent(chat.session)}/queues`)).queued);
  } catch (error) {
    /* the next refresh will tell */
  }
}

// ------------------------------------------------------------------------------------- commands

async function send(mode) {
  const box = $("message");
  const text = box.value.trim();
  if (!text) return;
  box.value = "";
  try {
    const sent = await api(`/api/conversations/${encodeURIComponent(chat.session)}/messages`, {
      json: { text, mode, id: newId() },
    });
    if (sent.delivered_as !== "prompt") await refreshQueues();
    else {
      setRunning(true);
      waiting("Thinking");
    }
  } catch (error) {
    box.value = text;
    banner(`${error.code}: ${error.message}`, "error");
  }
}

async function abortTurn() {
  try {
    await api(`/api/conversations/${encodeURIComponent(chat.session)}/abort`, { json: {} });
    $("activity-text").textContent = "Aborting…";
  } catch (error) {
    banner(`${error.code}: ${error.message}`, "error");
  }
}

async function branchTo(entryId) {
  try {
    await api(`/api/conversations/${encodeURIComponent(chat.session)}/branch`, { json: { entry_id: entryId } });
    const state = await loadSnapshot();
    openEvents(state.event_offset);
  } catch (error) {
    banner(`${error.code}: ${error.message}`, "error");
  }
}

async function editFrom(node, view) {
  let previous = node.previousElementSibling;
  while (previous && !previous.dataset.entry) previous = previous.previousElementSibling;
  await branchTo(previous ? previous.dataset.entry : null);
  $("message").value = view.text || "";
  $("message").focus();
}

async function forkAt(entryId) {
  banner("Forking (waits for the current run to end)…", "warn");
  try {
    const forked = await api(`/api/conversations/${encodeURIComponent(chat.session)}/fork`, {
      json: { entry_id: entryId },
    });
    location.href = `/c/${encodeURIComponent(forked.session_id)}`;
  } catch (error) {
    banner(`${error.code}: ${error.message}`, "error");
  }
}

async function showChat(session) {
  chat.session = session;
  $("chat-view").hidden = false;
  document.title = `agentcore: ${session}`;
  loadConfig().catch(() => {});
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    send("auto");
  });
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send("auto");
    }
  });
  $("follow-up").addEventListener("click", () => send("follow_up"));
  $("abort").addEventListener("click", abortTurn);
  setInterval(tickActivity, 100);
  try {
    const state = await loadSnapshot();
    openEvents(state.event_offset);
    $("message").focus();
  } catch (error) {
    banner(`${error.code}: ${error.message}`, "error");
    $("composer").hidden = true;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const match = location.pathname.match(/^\/c\/(.+)$/);
  if (match) showChat(decodeURIComponent(match[1]));
  else showList();
});
