/* Chat: send a message over the public WebSocket (/api/ws) and show the turn as it runs.
 *
 * Each message is {"type": "chat", "agent", "content", "sessionId"?, "requestId"}; what
 * comes back for that request (see server/api/ws.py) is drawn into the transcript:
 * - chat.started: the session's id goes into the address (?session=), so a reload shows
 *   the conversation again, rendered by the server;
 * - token: the model's text as it streams, into the agent's reply;
 * - action: text the model wrote alongside its actions was thinking, so it moves into a
 *   compact inner-voice line; generate_inner_voice shows its thought; other actions a
 *   one-line summary that opens to their arguments and output;
 * - reply: the agent's answer, whole; chat.done or error end the turn.
 * - approval.waiting: a call held for a person's approval, shown with Approve / Deny
 *   (POST /api/approvals/{id}/approve or /deny); once decided, the turn that continues
 *   the chat arrives on the same socket (followUp: true, the same requestId) and is
 *   drawn as the agent's next message.
 * These are the engine's steps in their one JSON form (opencrab.core.steps.step_json);
 * the other step types (compacted, llm.replied, turn.failed) are not drawn here.
 */
(function () {
  "use strict";

  const root = document.getElementById("chat");
  if (!root) return;
  const transcript = root.querySelector("[data-transcript]");
  const form = root.querySelector("[data-chat-form]");
  const input = form ? form.querySelector("textarea") : null;
  const send = form ? form.querySelector("[type=submit]") : null;
  const errorBox = root.querySelector("[data-chat-error]");
  const agent = root.dataset.agent;
  const agentName = root.dataset.agentName;
  const lang = root.dataset.lang;
  const SPEECH = ["send_speech", "broadcast_guidance"];
  let sessionId = root.dataset.session || null;
  let socket = null;
  let opening = null;
  let turn = null;
  const held = new Set();  // requests whose turn held a call: their follow-up is drawn

  function make(tag, className, text) {
    const el = document.createElement(tag);
    if (className) el.className = className;
    if (text !== undefined) el.textContent = text;
    return el;
  }

  function now() {
    const time = make("time");
    time.dateTime = new Date().toISOString();
    time.dataset.style = "time";
    time.textContent = "now";
    return time;
  }

  function who(name) {
    const line = make("div", "msg-who", name + " · ");
    line.appendChild(now());
    return line;
  }

  function scrollDown() {
    transcript.scrollTop = transcript.scrollHeight;
  }

  function showError(message) {
    if (!errorBox) return;
    errorBox.textContent = message;
    errorBox.hidden = false;
  }

  /* A message over the server's limit is refused here, saying so: never cut (a textarea's
   * maxlength would drop the end of a pasted text without a word). Characters are counted
   * as the server counts them (code points). */
  const maxChars = input ? Number(input.dataset.maxChars || 0) : 0;
  function tooLong(text) {
    const length = Array.from(text).length;
    if (!maxChars || length <= maxChars) return null;
    const n = (v) => v.toLocaleString("en-US");
    return "This message is " + n(length) + " characters; the limit is " + n(maxChars) +
      ". Shorten it to send it (nothing was cut).";
  }
  function checkLength() {
    const problem = tooLong(input.value);
    input.setAttribute("aria-invalid", problem ? "true" : "false");
    if (problem) showError(problem);
    else if (errorBox && input.dataset.tooLong) errorBox.hidden = true;
    if (problem) input.dataset.tooLong = "1"; else delete input.dataset.tooLong;
    return problem;
  }

  function requestId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return "r" + Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  function short(value, limit) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return text.length > limit ? text.slice(0, limit - 1) + "…" : text;
  }

  /* ---- the socket ---- */
  function connect() {
    if (socket && socket.readyState === WebSocket.OPEN) return Promise.resolve(socket);
    if (opening) return opening;
    opening = new Promise((resolve, reject) => {
      const scheme = location.protocol === "https:" ? "wss://" : "ws://";
      const ws = new WebSocket(scheme + location.host + "/api/ws");
      ws.addEventListener("open", () => { socket = ws; opening = null; resolve(ws); });
      ws.addEventListener("message", (event) => {
        let message;
        try { message = JSON.parse(event.data); } catch (err) { return; }
        receive(message);
      });
      ws.addEventListener("close", () => {
        if (socket === ws) socket = null;
        opening = null;
        reject(new Error("closed"));
        if (turn) lost();
      });
    });
    return opening;
  }

  /* ---- a turn ---- */
  function start(text) {
    const empty = root.querySelector("[data-chat-empty]");
    if (empty) empty.remove();
    const mine = make("li", "msg user");
    mine.appendChild(who("You"));
    mine.appendChild(make("div", "msg-text", text)).lang = lang;
    transcript.appendChild(mine);

    const bubble = make("li", "msg agent streaming");
    bubble.setAttribute("aria-busy", "true");
    bubble.appendChild(who(agentName));
    const steps = bubble.appendChild(make("div", "msg-steps"));
    const reply = bubble.appendChild(make("div", "msg-text"));
    reply.lang = lang;
    transcript.appendChild(bubble);
    OpenCrab.localTimes(transcript);
    turn = { id: requestId(), bubble: bubble, steps: steps, reply: reply, draft: "", replied: false };
    if (send) send.setAttribute("aria-busy", "true");
    scrollDown();
    return turn.id;
  }

  /* the agent's message continuing a chat after a held call was decided */
  function followUp(id) {
    const bubble = make("li", "msg agent streaming");
    bubble.setAttribute("aria-busy", "true");
    bubble.appendChild(who(agentName));
    const steps = bubble.appendChild(make("div", "msg-steps"));
    const reply = bubble.appendChild(make("div", "msg-text"));
    reply.lang = lang;
    transcript.appendChild(bubble);
    OpenCrab.localTimes(transcript);
    turn = { id: id, bubble: bubble, steps: steps, reply: reply, draft: "", replied: false };
  }

  function approval(message) {
    const box = make("div", "approval");
    box.dataset.approval = message.approvalId;
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Waiting for your approval");
    const head = box.appendChild(make("p", "turn-note"));
    head.appendChild(make("code", "", message.toolName));
    head.appendChild(make("span", "", " waits for your approval."));
    box.appendChild(make("pre", "", JSON.stringify(message.arguments, null, 2)));
    const row = box.appendChild(make("div", "row"));
    const approve = row.appendChild(make("button", "button primary small", "Approve and run"));
    const deny = row.appendChild(make("button", "button danger small", "Deny"));
    approve.type = deny.type = "button";
    held.add(message.requestId);
    async function decide(verdict) {
      approve.disabled = deny.disabled = true;
      try {
        await OpenCrab.api("POST", "/api/approvals/" + encodeURIComponent(message.approvalId) + "/" + verdict, {});
        row.replaceWith(make("p", "turn-note", verdict === "approve" ? "Approved: it runs, the answer follows." : "Denied: the agent is told."));
      } catch (err) {
        approve.disabled = deny.disabled = false;
        showError(err.message || String(err));
      }
    }
    approve.addEventListener("click", () => decide("approve"));
    deny.addEventListener("click", () => decide("deny"));
    turn.bubble.appendChild(box);
  }

  function thought(text) {
    const line = make("p", "thought");
    line.appendChild(make("span", "thought-label", "inner voice"));
    line.appendChild(make("span", "", text)).lang = lang;
    turn.steps.appendChild(line);
  }

  function action(message) {
    const box = make("details", "action " + (message.success ? "ok" : "failed"));
    const summary = box.appendChild(make("summary"));
    summary.appendChild(make("code", "", message.name));
    summary.appendChild(make("span", "action-mark", message.success ? " ✓ " : " ✗ "));
    summary.appendChild(make("span", "muted", short(message.output || "", 80)));
    box.appendChild(make("div", "action-label", "arguments"));
    box.appendChild(make("pre", "", JSON.stringify(message.arguments, null, 2)));
    box.appendChild(make("div", "action-label", "result"));
    box.appendChild(make("pre", "", message.output || ""));
    turn.steps.appendChild(box);
  }

  function note(text, className) {
    const line = make("p", "turn-note " + (className || ""), text);
    if (className === "error") line.setAttribute("role", "alert");
    turn.bubble.appendChild(line);
  }

  function finish() {
    if (!turn) return;
    const bubble = turn.bubble;
    if (!turn.reply.textContent) turn.reply.remove();
    bubble.classList.remove("streaming");
    bubble.removeAttribute("aria-busy");
    turn = null;
    if (send) send.removeAttribute("aria-busy");
    if (input) input.focus();
    scrollDown();
  }

  function lost() {
    note("The connection closed before the turn ended. The turn goes on on the server: reload to see its reply.", "error");
    finish();
  }

  /* a new session: into the address, the page's header and the list of chats */
  function opened(id) {
    sessionId = id;
    root.dataset.session = id;
    const address = location.pathname + "?session=" + encodeURIComponent(id);
    history.replaceState(null, "", address);
    const meta = root.querySelector("[data-chat-meta]");
    if (meta) {
      meta.textContent = "Session ";
      meta.appendChild(make("code", "", id));
    }
    let list = document.querySelector("[data-chat-sessions]");
    if (!list) {
      const none = document.querySelector("[data-no-chats]");
      list = make("ul", "chat-sessions");
      list.dataset.chatSessions = "";
      if (none) none.replaceWith(list);
    }
    list.querySelectorAll("[aria-current]").forEach((a) => a.removeAttribute("aria-current"));
    const link = make("a");
    link.href = address;
    link.setAttribute("aria-current", "page");
    link.appendChild(make("span", "", "This chat"));
    link.appendChild(make("span", "muted", "just started"));
    const item = make("li");
    item.appendChild(link);
    list.prepend(item);
  }

  function receive(message) {
    if (!turn && message.followUp && held.has(message.requestId)) {
      held.delete(message.requestId);
      followUp(message.requestId);
    }
    if (!turn || message.requestId !== turn.id) {
      if (message.type === "error" && !message.requestId) showError(message.message);
      return;
    }
    switch (message.type) {
      case "chat.started":
        if (sessionId !== message.sessionId) opened(message.sessionId);
        break;
      case "token":
        turn.draft += message.text;
        turn.reply.textContent = turn.draft;
        break;
      case "action":
        if (turn.draft.trim()) thought(turn.draft);  // written alongside actions: thinking
        turn.draft = "";
        turn.reply.textContent = "";
        if (message.name === "generate_inner_voice" && message.success && message.arguments) {
          thought(String(message.arguments.content || ""));
        } else if (!(SPEECH.includes(message.name) && message.success)) {
          action(message);
        }
        break;
      case "approval.waiting":
        approval(message);
        break;
      case "reply":
        turn.replied = true;
        turn.reply.textContent = message.text;
        break;
      case "chat.done":
        if (!turn.replied && message.reply) turn.reply.textContent = message.reply;
        if (message.error) note(message.error, "error");
        else if (message.stoppedBy === "approval") note("The answer follows once the call above is decided.");
        else if (!turn.replied && !message.reply) note(agentName + " did not answer (" + (message.stoppedBy || "no reply") + ").");
        finish();
        return;
      case "error":
        note(message.message, "error");
        finish();
        return;
    }
    scrollDown();
  }

  /* ---- the form ---- */
  if (form && input) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (turn) return;
      const text = input.value;
      if (!text.trim()) { showError("Write a message first."); input.focus(); return; }
      if (checkLength()) { input.focus(); return; }
      if (errorBox) errorBox.hidden = true;
      let ws;
      try { ws = await connect(); } catch (err) {
        showError("Could not open the WebSocket to the server (/api/ws). Is it still running?");
        return;
      }
      input.value = "";
      const id = start(text);
      const body = { type: "chat", agent: agent, content: text, requestId: id };
      if (sessionId) body.sessionId = sessionId;
      ws.send(JSON.stringify(body));
    });
    input.addEventListener("input", checkLength);
    input.addEventListener("keydown", (event) => {
      if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.keyCode === 229) return;
      event.preventDefault();
      form.requestSubmit();
    });
  }

  scrollDown();
})();
