// The agentcore web chat. Plain JavaScript, no build step.
//
// Safety rule of this file: text from a model, a tool or a user is only ever put on the page with
// textContent, or as `html` the server rendered and sanitised (markdown-it without raw HTML, then
// nh3). Nothing here builds markup from such text.
"use strict";

const FOLD_LINES = 12; // tool results longer than this are folded
const RENDER_EVERY_MS = 80; // a streaming answer's Markdown is rendered at most this often
const TOAST_MS = 9000; // how long a notice stays (an error stays until dismissed or replaced)
const SEND_SLOW_NOTICE =
  "Not taken yet: the conversation's worker has not answered. Is a worker running? The message waits for one.";
const NO_WORKER_NOTICE =
  "Sent, not taken: no worker is running for this conversation. The message waits, and runs when one starts.";
const NO_WORKER_STREAM_NOTICE =
  "Waiting: no worker is running for this conversation. What it does shows here once one starts.";
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
  let response;
  try {
    response = await fetch(path, init);
  } catch (failure) {
    connectionLost();
    const error = new Error("The server cannot be reached: is it running?");
    error.code = "NETWORK";
    throw error;
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(body.message || response.statusText || `HTTP ${response.status}`);
    error.code = body.error || String(response.status);
    throw error;
  }
  return body;
}

// ------------------------------------------------------------------ notices where the eye is

let toastTimer = null;
function toast(text, kind = "error") {
  // Shown just above the message box (the composer is always on screen), once: a new notice
  // replaces the previous one.
  const box = $("toast");
  clearTimeout(toastTimer);
  if (!text) {
    box.hidden = true;
    return;
  }
  $("toast-text").textContent = text;
  box.className = `toast ${kind}`;
  box.hidden = false;
  // An error, or what a sent message waits for, stays until it is dismissed or replaced.
  if (kind === "info") toastTimer = setTimeout(() => (box.hidden = true), TOAST_MS);
}

function clearToast(text) {
  // Only if that notice is still the one shown (a later one replaced it otherwise).
  if (!$("toast").hidden && $("toast-text").textContent === text) toast(null);
}

function showError(error, doing) {
  // The server's message only (no code printed beside it, no file paths: the server cuts them).
  const message = error && error.message ? error.message : String(error);
  toast(doing ? `${doing}: ${message}` : message, "error");
  if (error && error.code) $("toast").dataset.code = error.code;
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (failure) {
    const area = document.body.appendChild(el("textarea"));
    area.value = text;
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  if (button) {
    const label = button.textContent;
    button.textContent = "Copied";
    button.classList.add("done");
    setTimeout(() => {
      button.textContent = label;
      button.classList.remove("done");
    }, 1500);
  }
}

function addCodeCopyButtons(root) {
  for (const pre of root.querySelectorAll("pre")) {
    if (pre.querySelector(":scope > button.copy")) continue;
    const button = pre.appendChild(el("button", "copy", "Copy"));
    button.type = "button";
    button.title = "Copy the code";
    button.addEventListener("click", () => {
      const code = pre.querySelector("code");
      copyText((code || pre).textContent, button);
    });
  }
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

let rows = [];

function titleOf(row) {
  return row.title || row.session_id;
}

async function refreshList() {
  try {
    rows = (await api("/api/conversations")).conversations;
  } catch (error) {
    const text = `Cannot list conversations: ${error.message}`;
    $("no-matches").textContent = text;
    $("no-matches").hidden = false;
    if (!$("list-view").hidden) {
      $("no-conversations").textContent = text;
      $("no-conversations").hidden = false;
    }
    return;
  }
  renderSidebar();
  if (!$("list-view").hidden) renderRows();
}

function matches(row, needle) {
  return !needle || [titleOf(row), row.session_id, row.model, row.status].some((v) => (v || "").toLowerCase().includes(needle));
}

function statusLabel(status) {
  return status === "awaiting_approval" ? "awaiting approval" : status;
}

function renderSidebar() {
  // Newest first (the server sorts by last activity); search by title or id.
  const needle = $("search").value.trim().toLowerCase();
  const list = $("conversation-list");
  list.replaceChildren();
  const shown = rows.filter((row) => matches(row, needle));
  for (const row of shown) {
    const li = list.appendChild(el("li"));
    li.dataset.session = row.session_id;
    if (row.session_id === chat.session) li.classList.add("active");
    const link = li.appendChild(el("a"));
    link.href = `/c/${encodeURIComponent(row.session_id)}`;
    link.title = row.session_id;
    link.appendChild(el("span", "conv-title", titleOf(row)));
    const meta = link.appendChild(el("span", "conv-meta"));
    const status = row.status_badge || row.status || "-";
    meta.appendChild(el("span", `badge ${status}`, statusLabel(status)));
    meta.appendChild(el("span", "", when(row.last_activity)));
  }
  const empty = $("no-matches");
  empty.hidden = shown.length > 0;
  empty.textContent = rows.length ? "No conversation matches." : "No conversations yet.";
}

function renderRows() {
  const needle = $("filter").value.trim().toLowerCase();
  const body = $("conversations").tBodies[0];
  body.replaceChildren();
  const shown = rows.filter((row) => matches(row, needle));
  for (const row of shown) {
    const tr = body.appendChild(el("tr"));
    tr.dataset.session = row.session_id;
    const cell = tr.appendChild(el("td"));
    const name = cell.appendChild(el("a", "", titleOf(row)));
    name.href = `/c/${encodeURIComponent(row.session_id)}`;
    if (row.title) cell.appendChild(el("span", "conv-id", row.session_id));
    tr.appendChild(el("td")).appendChild(el("span", `badge ${row.status}`, statusLabel(row.status || "-")));
    tr.appendChild(el("td", "wide-only", row.model || "-"));
    tr.appendChild(el("td", "num", row.messages ?? "-"));
    tr.appendChild(el("td", "num wide-only", row.cost == null ? "-" : `$${row.cost.toFixed(4)}`));
    tr.appendChild(el("td", "muted wide-only", when(row.last_activity)));
    tr.addEventListener("click", (event) => {
      if (event.target.tagName !== "A") location.href = name.href;
    });
  }
  $("no-conversations").hidden = shown.length > 0;
  if (!rows.length) $("no-conversations").textContent = "No conversations yet: start one above.";
  else if (!shown.length) $("no-conversations").textContent = "No conversation matches the filter.";
}

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
  if (!rows.length || location.search.includes("new")) $("new-panel").open = true;
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
    $("new-problem").textContent = error.message;
    $("new-start").disabled = false;
  }
}

async function newChat() {
  // The defaults (model, tools, system prompt) in one click; the list page's form has the options.
  const button = $("new-chat");
  button.disabled = true;
  try {
    const created = await api("/api/conversations", { json: {} });
    location.href = `/c/${encodeURIComponent(created.session_id)}`;
  } catch (error) {
    button.disabled = false;
    if (!$("chat-view").hidden) showError(error, "No new chat");
    else $("new-problem").textContent = error.message;
  }
}

function setSidebar(open) {
  document.body.classList.toggle("sidebar-open", open);
  $("scrim").hidden = !open;
  $("menu").setAttribute("aria-expanded", String(open));
}

function startSidebar() {
  $("search").addEventListener("input", renderSidebar);
  $("new-chat").addEventListener("click", newChat);
  $("menu").addEventListener("click", () => setSidebar(!document.body.classList.contains("sidebar-open")));
  $("scrim").addEventListener("click", () => setSidebar(false));
  refreshList();
  setInterval(refreshList, 5000);
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
  starts: 0, // and starting (agent_start)
  sendSlowMs: 5000, // a send not answered by then says what it waits for
  applied: [], // offsets of the events applied, in order (what the page has shown, for inspection)
  connected: true, // the event stream is open (the controls that need the server follow it)
  workerless: false, // the event stream found no worker for the conversation, and waits for one
  status: "idle",
  lastUser: null, // the newest user message {node, view}: Up edits it
  wakeups: new Map(), // pending wake-ups: id -> {id, note, due_at}
  retries: {}, // entry id -> {attempt, error_message}: messages whose model call was retried
  branches: null, // the server's list of other branches ({branches, continuations})
  leftBranch: null, // the branch an edit or a regeneration just left, until the server lists it
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

function actionBar(node) {
  let bar = node.querySelector(":scope > .actions");
  if (!bar) bar = node.insertBefore(el("div", "actions"), node.firstChild);
  return bar;
}

function copyAction(node, view) {
  if (!view.text || node.querySelector(":scope > .actions > .copy-message")) return;
  const copy = actionBar(node).appendChild(el("button", "link copy-message", "Copy"));
  copy.type = "button";
  copy.title = "Copy the message's text (Markdown)";
  copy.addEventListener("click", () => copyText(view.text, copy));
}

function messageActions(node, view) {
  copyAction(node, view);
  // A message that asked for tools is not a place to stop: its results belong with it.
  if (!view.entry_id || (view.tool_calls && view.tool_calls.length)) return;
  node.dataset.entry = view.entry_id;
  const bar = actionBar(node);
  if (bar.querySelector(".branch")) return;
  const branch = bar.insertBefore(el("button", "link branch", "Branch from here"), bar.firstChild);
  branch.title = "Continue the conversation from this message (the rest stays in the session file)";
  branch.addEventListener("click", () => branchTo(view.entry_id));
  const fork = bar.insertBefore(el("button", "link fork", "Fork"), branch.nextSibling);
  fork.title = "A new conversation with everything up to this message";
  fork.addEventListener("click", () => forkAt(view.entry_id));
  if (view.role === "user") {
    const edit = bar.appendChild(el("button", "link edit", "Edit"));
    edit.title = "Go back to before this message and put it in the editor";
    edit.addEventListener("click", () => editFrom(node, view));
  } else if (view.role === "assistant") {
    const again = bar.appendChild(el("button", "link regenerate", "Regenerate"));
    again.title = "Ask the question before this answer again (a new branch; the old one stays)";
    again.addEventListener("click", () => regenerate(node));
  }
}

// The other branches of the user messages (a regeneration, an edit): "‹ 1/2 ›" on each message
// that has them, built from the server's list (the session file's tree), so it is there after a
// reload and in every tab. A switch moves the conversation to where that branch ends.
let branchesAsked = 0;
async function refreshBranches() {
  const asked = ++branchesAsked;
  let listed;
  try {
    listed = await api(`/api/conversations/${encodeURIComponent(chat.session)}/branches`);
  } catch (error) {
    return; // an ended conversation, or the server away: no switches
  }
  if (asked !== branchesAsked) return; // a newer answer is coming
  chat.branches = listed;
  if (listed.branches.length) chat.leftBranch = null; // the server knows the versions now
  for (const old of transcript().querySelectorAll(".branch-switch")) old.remove();
  for (const branch of listed.branches) {
    const node = transcript().querySelector(`.message.user[data-entry="${CSS.escape(branch.entry_id)}"]`);
    if (node) node.appendChild(branchSwitch(branch));
  }
  showOtherBranch();
}

function branchSwitch(branch) {
  const box = el("div", "branch-switch");
  const count = branch.siblings.length;
  const go = (to) => branchTo(branch.siblings[to].leaf_id);
  const prev = box.appendChild(el("button", "link branch-prev", "‹"));
  prev.type = "button";
  prev.disabled = branch.position === 0;
  prev.setAttribute("aria-label", "Previous version");
  if (!prev.disabled) prev.title = `Previous version: ${branch.siblings[branch.position - 1].text}`;
  prev.addEventListener("click", () => go(branch.position - 1));
  box.appendChild(el("span", "branch-count", `${branch.position + 1}/${count}`));
  const next = box.appendChild(el("button", "link branch-next", "›"));
  next.type = "button";
  next.disabled = branch.position === count - 1;
  next.setAttribute("aria-label", "Next version");
  if (!next.disabled) next.title = `Next version: ${branch.siblings[branch.position + 1].text}`;
  next.addEventListener("click", () => go(branch.position + 1));
  return box;
}

function otherBranch() {
  // The branch an edit or a regeneration left: beside the newest message that has one, the version
  // before this one (or the newest, from the first); else, until the server lists the new version,
  // the one this tab just left; else one the conversation was moved back from.
  const listed = chat.branches || { branches: [], continuations: [] };
  const branch = listed.branches[listed.branches.length - 1];
  if (branch) {
    const other = branch.position > 0 ? branch.position - 1 : branch.siblings.length - 1;
    return branch.siblings[other];
  }
  return chat.leftBranch || listed.continuations[listed.continuations.length - 1] || null;
}

function leaveBranch() {
  // An edit or a regeneration is about to move the conversation back: where it was, to return to.
  const entries = transcript().querySelectorAll("[data-entry]");
  const last = entries.length ? entries[entries.length - 1] : null;
  if (last) chat.leftBranch = { leaf_id: last.dataset.entry, text: last.innerText.trim().slice(0, 120) };
  showOtherBranch();
}

function showOtherBranch() {
  const other = otherBranch();
  let link = $("other-branch");
  if (!other) {
    if (link) link.remove();
    return;
  }
  if (!link) {
    link = el("button", "link", "↩ Back to the other branch");
    link.id = "other-branch";
    link.type = "button";
    $("queue-box").before(link);
    link.addEventListener("click", () => {
      const target = otherBranch();
      if (target) branchTo(target.leaf_id);
    });
  }
  link.title = `Return to the other version (this one stays too): ${other.text}`;
}

async function regenerate(node) {
  // The user message this answer replied to: branch to before it and ask it again.
  let user = node.previousElementSibling;
  while (user && !user.classList.contains("user")) user = user.previousElementSibling;
  if (!user || !user.dataset.entry || chat.running) return;
  const text = user.dataset.text || user.querySelector(".body").innerText.trim();
  let previous = user.previousElementSibling;
  while (previous && !previous.dataset.entry) previous = previous.previousElementSibling;
  leaveBranch();
  await branchTo(previous ? previous.dataset.entry : null);
  $("message").value = text;
  await send("auto");
}

function renderUser(view) {
  const node = el("article", "message user");
  node.dataset.index = view.index ?? "";
  node.dataset.text = view.text || "";
  const body = node.appendChild(el("div", "body markdown"));
  setSafeHtml(body, view.html || "");
  addCodeCopyButtons(body);
  if (view.images) body.appendChild(el("div", "muted", `(+${view.images} image${view.images > 1 ? "s" : ""})`));
  messageActions(node, view);
  chat.lastUser = { node, view };
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
  block.classList.remove("pending", "running", "done", "failed", "awaiting");
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
  addCodeCopyButtons(content);
  if (lines.length > FOLD_LINES) {
    const fold = place.appendChild(el("details", "fold"));
    fold.appendChild(el("summary", "", `${lines.slice(-1)[0].slice(0, 100) || lines[0].slice(0, 100)} (${lines.length} lines)`));
    fold.appendChild(content);
  } else {
    place.appendChild(content);
  }
  setToolState(block, isError ? "failed" : "done", isError ? "error" : "done");
}

// ---------------------------------------------------------------------------------- approvals

// A tool call waiting for a person: Approve, Edit (the arguments, as JSON) or Deny (with a reason),
// on its card. The decision goes to the conversation; the card changes when its events arrive.
function askApproval(pending) {
  const block = toolBlock({ id: pending.tool_call_id, name: pending.tool_name, args: pending.arguments });
  if (!block.isConnected) {
    const holder = (chat.current && chat.current.node) || transcript().lastElementChild || transcript();
    holder.appendChild(block);
  }
  setToolState(block, "awaiting", "awaiting approval");
  if (block.querySelector(".approval")) return block;
  const box = block.appendChild(el("div", "approval"));
  const editor = box.appendChild(el("textarea", "approval-args"));
  editor.value = JSON.stringify(pending.arguments ?? {}, null, 2);
  editor.hidden = true;
  editor.setAttribute("aria-label", "Arguments (JSON)");
  const reason = box.appendChild(el("input", "approval-reason"));
  reason.placeholder = "Why not? (the model reads it)";
  reason.hidden = true;
  const buttons = box.appendChild(el("div", "approval-buttons"));
  const approve = buttons.appendChild(el("button", "approve", "Approve"));
  const edit = buttons.appendChild(el("button", "secondary edit", "Edit"));
  const deny = buttons.appendChild(el("button", "danger deny", "Deny"));
  const problem = box.appendChild(el("div", "approval-problem"));
  const call = `/api/conversations/${encodeURIComponent(chat.session)}/approvals/${encodeURIComponent(pending.tool_call_id)}`;
  async function decide(path, body) {
    problem.textContent = "";
    for (const button of buttons.children) button.disabled = true;
    try {
      await api(`${call}/${path}`, { json: body });
    } catch (error) {
      problem.textContent = `${error.code}: ${error.message}`;
      for (const button of buttons.children) button.disabled = false;
    }
  }
  approve.addEventListener("click", () => {
    if (editor.hidden) return decide("approve", {});
    let args;
    try {
      args = JSON.parse(editor.value);
    } catch (error) {
      problem.textContent = `Not JSON: ${error.message}`;
      return;
    }
    return decide("approve", { args });
  });
  edit.addEventListener("click", () => {
    editor.hidden = !editor.hidden;
    approve.textContent = editor.hidden ? "Approve" : "Approve edited";
    if (!editor.hidden) editor.focus();
  });
  deny.addEventListener("click", () => {
    if (reason.hidden) {
      reason.hidden = false;
      deny.textContent = "Deny now";
      reason.focus();
      return;
    }
    return decide("deny", { reason: reason.value.trim() });
  });
  return block;
}

function approvalResolved(event) {
  const block = chat.tools.get(event.tool_call_id);
  if (!block) return;
  const box = block.querySelector(".approval");
  if (box) box.remove();
  const labels = { approved: "approved", edited: "approved (edited)", denied: "denied", expired: "expired", aborted: "aborted" };
  const note = block.appendChild(el("div", `approval-decision ${event.decision}`,
    labels[event.decision] + (event.reason ? `: ${event.reason}` : "")));
  note.dataset.decision = event.decision;
  if (event.decision === "approved" || event.decision === "edited") setToolState(block, "running", "running");
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
    addCodeCopyButtons(body);
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

// One line for all the retries of a model call, with the attempt count: shown live while the
// call is retried, and again for the finished message on a page loaded later (the snapshot's
// ``retries``, by entry id).
function retryNotice(node, attempt, errorMessage, finished) {
  let note = node.querySelector(":scope > .notice.retry");
  if (!note) note = node.insertBefore(el("div", "notice retry"), node.firstChild);
  note.dataset.attempts = String(attempt);
  note.dataset.error = errorMessage || "";
  note.textContent = `The model call failed and ${finished ? "was" : "is being"} retried (attempt ${attempt})${
    errorMessage ? `: ${errorMessage}` : ""}`;
  return note;
}

function renderAssistant(view) {
  const node = el("article", "message assistant");
  node.dataset.index = view.index ?? "";
  const retry = view.entry_id && chat.retries[view.entry_id];
  if (retry) retryNotice(node, retry.attempt, retry.error_message, true);
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

// A streaming assistant message, rendered as it streams: the server renders the text so far (at
// most every RENDER_EVERY_MS, one request at a time) and the text that came after it is shown as
// plain text at the end of the last block until the next rendering takes it in. The rendered part
// only ever grows, so nothing flickers; the finished message gets the server's final rendering.
function startStreaming(partial) {
  const node = el("article", "message assistant streaming");
  const thinking = node.appendChild(el("details", "thinking"));
  thinking.hidden = true;
  thinking.appendChild(el("summary", "", "Thinking…"));
  const thinkingPre = thinking.appendChild(el("pre"));
  const body = node.appendChild(el("div", "body markdown"));
  transcript().appendChild(node);
  chat.current = {
    node, text: "", thinking: "", body, thinkingPre, thinkingBox: thinking,
    rendered: 0, html: "", renderAt: 0, rendering: false, timer: null,
  };
  if (partial) {
    appendDelta({ type: "thinking_delta", delta: (partial.thinking || []).join("\n") });
    if (partial.text) {
      chat.current.text = partial.text;
      chat.current.html = partial.html || "";
      chat.current.rendered = partial.html ? partial.text.trimEnd().length : 0;
      chat.current.node.classList.add("has-content");
      paintStreaming(chat.current);
    }
  }
  waiting("Thinking");
  return chat.current;
}

function paintStreaming(current) {
  // The rendered HTML (the server's, sanitised) and, inside its last block, the newer plain text.
  const tail = current.text.slice(current.rendered);
  if (current.painted !== current.html) {
    setSafeHtml(current.body, current.html);
    current.painted = current.html;
    addCodeCopyButtons(current.body);
  }
  let span = current.body.querySelector(".tail");
  if (!span) {
    let place = current.body;
    while (place.lastElementChild && !place.lastElementChild.matches("button, table, hr, br")) {
      place = place.lastElementChild;
    }
    span = place.appendChild(el("span", "tail"));
  }
  span.textContent = tail;
}

function scheduleRender(current) {
  if (current.rendering || current.timer || current.rendered === current.text.trimEnd().length) return;
  // Always from a timer, even when due now: the delta's handler ends, and its text is painted, before
  // the request is made (the first text of an answer is on screen a few milliseconds sooner).
  const wait = current.rendered > 0 ? Math.max(0, current.renderAt + RENDER_EVERY_MS - Date.now()) : 0;
  current.timer = setTimeout(() => {
    current.timer = null;
    if (chat.current === current && !current.rendering && current.rendered !== current.text.trimEnd().length) {
      renderStreaming(current);
    }
  }, wait);
}

async function renderStreaming(current) {
  const text = current.text;
  current.rendering = true;
  current.renderAt = Date.now();
  try {
    const rendered = await api("/api/render", { json: { text } });
    // Still this message and still a prefix of its text (a retry starts it afresh)?
    if (chat.current === current && current.text.startsWith(text)) {
      current.html = rendered.html;
      // A rendering drops the text's trailing spaces and newlines: they stay in the plain tail.
      current.rendered = text.trimEnd().length;
      const span = current.body.querySelector(".tail");
      if (span) span.remove();
      paintStreaming(current);
    }
  } catch (error) {
    /* plain text stays; the finished message is rendered anyway */
  } finally {
    current.rendering = false;
  }
  if (chat.current === current) scheduleRender(current);
}

function appendDelta(delta) {
  const current = chat.current || startStreaming(null);
  if (delta.type === "text_delta" && delta.delta) {
    current.node.classList.add("has-content");
    current.text += delta.delta;
    paintStreaming(current);
    scheduleRender(current);
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
  if (current && current.timer) clearTimeout(current.timer);
  const node = current ? current.node : transcript().appendChild(el("article", "message assistant"));
  node.classList.remove("streaming");
  node.classList.add("has-content");
  const retried = [...node.querySelectorAll(":scope > .retry")];
  node.replaceChildren(...retried);
  for (const note of retried) retryNotice(node, Number(note.dataset.attempts), note.dataset.error, true);
  fillAssistant(node, view);
  copyAction(node, view); // branch and fork come with the entry id, once the run is over
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
  chat.status = status || (running ? "running" : "idle");
  const badge = $("chat-status");
  badge.textContent = chat.status;
  badge.className = `badge ${badge.textContent}`;
  $("send").textContent = running ? "Steer" : "Send";
  $("send").title = running ? "Steer: taken after the current tool batch" : "";
  $("follow-up").hidden = !running;
  $("abort").hidden = !running;
  if (!running) waiting(null);
  updateControls();
  tickActivity();
}

function updateControls() {
  // What needs the server is disabled while it cannot be reached; what was typed stays.
  const ended = ["closed", "terminated", "failed", "timed_out", "completed", "canceled"].includes(chat.status);
  const usable = chat.connected && !ended;
  for (const id of ["send", "follow-up", "abort"]) $(id).disabled = !usable;
  $("message").disabled = ended;
  $("message").placeholder = ended
    ? "This conversation has ended: fork it from a message to go on"
    : "Message (Enter sends, Shift+Enter new line, Esc aborts, ↑ edits the last)";
}

function setConnected(connected, text) {
  chat.connected = connected;
  const line = $("connection");
  line.textContent = text || "";
  line.hidden = connected || !text;
  updateControls();
}

let probing = null;
function connectionLost() {
  // A request found no server: say so by the message box and look for it every second; once it
  // answers, the event stream is opened again from the last event shown.
  if (!chat.session || probing) return;
  setConnected(false, "Connection lost: reconnecting…");
  probing = setInterval(async () => {
    try {
      const response = await fetch("/api/config", { headers: { Accept: "application/json" } });
      if (!response.ok) return;
    } catch (failure) {
      return;
    }
    clearInterval(probing);
    probing = null;
    openEvents(chat.lastOffset + 1);
  }, 1000);
}

function banner(text, kind) {
  const box = $("banner");
  box.textContent = text || "";
  box.className = `banner ${kind || ""}`;
  box.hidden = !text;
}

// ------------------------------------------------------------------------------------- events

function applyEvent(offset, event) {
  if (chat.workerless) {
    chat.workerless = false; // a worker answers again
    clearToast(NO_WORKER_STREAM_NOTICE);
  }
  if (offset <= chat.lastOffset) return; // already applied (a resent event)
  chat.lastOffset = offset;
  chat.applied.push(offset);
  const stick = nearBottom();
  switch (event.type) {
    case "agent_start":
      chat.starts += 1;
      clearToast(NO_WORKER_NOTICE);
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
    case "wakeup_scheduled":
      chat.wakeups.set(event.id, { id: event.id, note: event.note, due_at: event.due_at });
      renderWakeups();
      break;
    case "wakeup_fired":
    case "wakeup_cancelled":
      chat.wakeups.delete(event.id);
      renderWakeups();
      break;
    case "tool_approval_requested":
      askApproval({ tool_call_id: event.tool_call_id, tool_name: event.tool_name, arguments: event.args });
      waiting(null);
      break;
    case "tool_approval_resolved":
      approvalResolved(event);
      break;
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
      current.body.replaceChildren();
      current.thinkingPre.textContent = "";
      current.html = "";
      current.painted = null;
      current.rendered = 0;
      current.node.classList.add("has-content");
      retryNotice(current.node, event.attempt, event.error_message, false);
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
  source.addEventListener("open", () => {
    if (!chat.connected) refreshAfterRun();
    setConnected(true);
  });
  source.addEventListener("error", () => {
    // The browser reconnects by itself and sends Last-Event-ID: the stream goes on where it broke.
    if (source.readyState === EventSource.CONNECTING) setConnected(false, "Connection lost: reconnecting…");
    else if (source.readyState === EventSource.CLOSED) {
      setConnected(false, "Connection lost. Reload the page to reconnect.");
    }
  });
  source.addEventListener("waiting", () => {
    // No worker polls the conversation's queue: the stream stays open and goes on when one does.
    chat.workerless = true;
    if ($("toast").hidden || $("toast-text").textContent !== NO_WORKER_NOTICE) toast(NO_WORKER_STREAM_NOTICE, "wait");
  });
  source.addEventListener("failure", (message) => {
    const failure = JSON.parse(message.data);
    setConnected(false, `The event stream stopped: ${failure.message}`);
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
  chat.lastUser = null;
  chat.retries = state.retries || {};
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
  for (const pending of state.pending_approvals || []) askApproval(pending);
  $("chat-title").textContent = state.title || state.session_id;
  $("chat-title").title = state.session_id;
  $("chat-meta").hidden = false;
  $("chat-model").textContent = state.model + (state.thinking_level !== "off" ? ` · thinking ${state.thinking_level}` : "");
  $("chat-tools").textContent = state.tools.length ? `tools: ${state.tools.join(", ")}` : "no tools";
  const link = $("workflow-link");
  if (state.workflow_url) {
    link.href = state.workflow_url;
    link.hidden = false;
  }
  if (state.ended) {
    // The workflow ended (terminated, failed, timed out): the transcript stays readable, with why.
    const why = state.end_reason ? `: ${state.end_reason}` : ".";
    banner(`This conversation's workflow has ${state.status === "timed_out" ? "timed out" : state.status}${why}`, "error");
    setRunning(false, state.status);
  } else setRunning(state.status !== "idle", state.status);
  if (state.streaming_message) startStreaming(state.streaming_message);
  if (state.error_message) toast(`The last run failed: ${state.error_message}`, "error");
  renderQueued(state.queued);
  chat.wakeups = new Map((state.wakeups || []).map((wakeup) => [wakeup.id, wakeup]));
  renderWakeups();
  chat.lastOffset = state.event_offset - 1;
  chat.snapshotOffset = state.event_offset;
  window.scrollTo(0, document.body.scrollHeight);
  if (!state.ended) refreshBranches();
  return state;
}

async function refreshAfterRun() {
  // Messages streamed in get their session entry ids (for branch and fork) once the run is over.
  try {
    const state = await api(`/api/conversations/${encodeURIComponent(chat.session)}`);
    for (const view of state.messages) {
      const node = transcript().querySelector(`[data-index="${view.index}"]`);
      if (node && view.entry_id && view.role !== "toolResult") messageActions(node, view);
      if (node && view.role === "user") chat.lastUser = { node, view };
    }
    renderQueued(state.queued);
    refreshBranches();
    if (state.title) $("chat-title").textContent = state.title;
    if (state.status !== "idle" && !chat.running) setRunning(true, state.status);
  } catch (error) {
    showError(error);
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

function renderWakeups() {
  // One small line under the conversation: how many wake-ups are pending, soonest first.
  const line = $("wakeups");
  const pending = [...chat.wakeups.values()].sort((a, b) => Date.parse(a.due_at) - Date.parse(b.due_at));
  line.replaceChildren();
  if (pending.length) {
    line.appendChild(el("span", "wakeups-count", `${pending.length} wake-up${pending.length === 1 ? "" : "s"} pending`));
    for (const wakeup of pending) {
      const item = line.appendChild(el("span", "wakeup", ` · ${new Date(wakeup.due_at).toLocaleString()} ${wakeup.note}`));
      item.title = `wake-up ${wakeup.id}`;
    }
  }
  line.hidden = !pending.length;
}

async function clearQueued() {
  try {
    const cleared = await api(`/api/conversations/${encodeURIComponent(chat.session)}/queues/clear`, {
      json: { queue: "all" },
    });
    renderQueued(cleared.queued);
  } catch (error) {
    showError(error, "Not cleared");
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
  if (!chat.connected) {
    toast("Not sent: the server cannot be reached; your message stays in the box.", "error");
    return;
  }
  box.value = "";
  const startsBefore = chat.starts;
  // A send waits for the conversation's worker to take it: with none running, it waits on. Say so.
  const slow = setTimeout(() => toast(SEND_SLOW_NOTICE, "info"), chat.sendSlowMs);
  let noWorker = false;
  try {
    const sent = await api(`/api/conversations/${encodeURIComponent(chat.session)}/messages`, {
      json: { text, mode, id: newId() },
    });
    if (sent.delivered_as === "waiting") noWorker = true;
    else if (sent.delivered_as !== "prompt") await refreshQueues();
    else if (chat.starts === startsBefore) {
      // Shown running until the run's own events say more. A quick run's events (its end
      // included) can come before this reply: they have then said it all.
      setRunning(true);
      waiting("Thinking");
    }
  } catch (error) {
    if (!box.value) box.value = text;
    showError(error, "Not sent");
  } finally {
    clearTimeout(slow);
    clearToast(SEND_SLOW_NOTICE);
    // No worker runs the conversation: the message stays with it (not put back in the box, where a
    // second send would make it twice) until one starts; its run's own events follow then.
    if (noWorker) toast(NO_WORKER_NOTICE, "wait");
  }
}

async function abortTurn() {
  try {
    await api(`/api/conversations/${encodeURIComponent(chat.session)}/abort`, { json: {} });
    $("activity-text").textContent = "Aborting…";
  } catch (error) {
    showError(error, "Not aborted");
  }
}

async function branchTo(entryId) {
  try {
    await api(`/api/conversations/${encodeURIComponent(chat.session)}/branch`, { json: { entry_id: entryId } });
    const state = await loadSnapshot();
    openEvents(state.event_offset);
  } catch (error) {
    showError(error, "No branch");
  }
}

async function editFrom(node, view) {
  let previous = node.previousElementSibling;
  while (previous && !previous.dataset.entry) previous = previous.previousElementSibling;
  leaveBranch();
  await branchTo(previous ? previous.dataset.entry : null);
  $("message").value = view.text || "";
  $("message").focus();
}

async function forkAt(entryId) {
  toast(chat.running ? "Forking when the current run ends…" : "Forking…", "info");
  try {
    const forked = await api(`/api/conversations/${encodeURIComponent(chat.session)}/fork`, {
      json: { entry_id: entryId },
    });
    location.href = `/c/${encodeURIComponent(forked.session_id)}`;
  } catch (error) {
    showError(error, "Fork failed");
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
  $("message").addEventListener("keydown", onComposerKey);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && chat.running && event.target.id !== "message") {
      event.preventDefault();
      abortTurn();
    }
  });
  $("toast-close").addEventListener("click", () => toast(null));
  $("follow-up").addEventListener("click", () => send("follow_up"));
  $("abort").addEventListener("click", abortTurn);
  setInterval(tickActivity, 100);
  try {
    const state = await loadSnapshot();
    if (state.ended) return;
    openEvents(state.event_offset);
    $("message").focus();
  } catch (error) {
    showError(error, "Cannot open this conversation");
    $("message").disabled = true;
    chat.connected = false;
    updateControls();
  }
}

function onComposerKey(event) {
  // Enter sends (steers while a run goes), Shift+Enter is a new line, Esc aborts the run, Up in an
  // empty box edits the last message (a branch from before it).
  const box = $("message");
  if (event.isComposing) return;
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    send("auto");
  } else if (event.key === "Escape" && chat.running) {
    event.preventDefault();
    abortTurn();
  } else if (event.key === "ArrowUp" && !box.value && !chat.running && chat.lastUser && chat.lastUser.view.entry_id) {
    event.preventDefault();
    editFrom(chat.lastUser.node, chat.lastUser.view);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const match = location.pathname.match(/^\/c\/(.+)$/);
  if (match) chat.session = decodeURIComponent(match[1]);
  startSidebar();
  if (match) showChat(chat.session);
  else showList();
});
