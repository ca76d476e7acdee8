/* Live view of one session (/sessions/{id}): the events the server rendered, then every
 * new one as it is written, over the WebSocket /api/ws.
 *
 * - Subscribes with afterSeq = the last event shown (the feed's data-last-seq), so the
 *   server sends what came since; every event message carries its seq, kept as the
 *   cursor. A dropped socket reconnects (backing off up to 5 s) and resubscribes after
 *   the last seq received: nothing is missed, nothing shown twice (seq <= cursor is
 *   skipped). "Pause" closes the socket on purpose; "Resume" catches up the same way.
 * - Rows are built from <template id="ev-template"> (templates/_event.html) by the rules
 *   of dashboard/event_rows.py: a tool_result joins its call's row, a token_usage the
 *   row of the call that cost it. Arriving events are queued and drawn once per frame
 *   (requestAnimationFrame, or a timer when the tab is hidden); at most MAX_ROWS rows
 *   stay, older ones give way to a "Show earlier events" link.
 * - The feed element carries data-last-seq, data-last-event-id and data-event-count,
 *   updated as events are drawn (benchmarks and tests read them); window.OpenCrabLive
 *   exposes the socket and pause/resume.
 * - A discussion's turn counter and end come from discussion.turn / discussion.ended;
 *   the intervention form (dashboard.js sends it; shown only with JavaScript, for an
 *   active session) is cleared once the API took it.
 */
(function () {
  "use strict";
  const intervene = document.querySelector("[data-intervene]");
  if (intervene && intervene.dataset.open === "yes") {
    intervene.hidden = false;
    document.querySelectorAll("[data-needs-script]").forEach((el) => { el.hidden = true; });
  }
  const feed = document.getElementById("feed");
  if (!feed || feed.dataset.liveFeed !== "on") return;
  const template = document.getElementById("ev-template");
  const sessionId = feed.dataset.sessionId;
  const sessionKind = feed.dataset.kind;
  const chatAgent = feed.dataset.agentId || null;
  const language = feed.dataset.language || "en";
  const speakers = JSON.parse(feed.dataset.speakers || "{}");
  const MAX_ROWS = 1000;

  const rows = new Map(); /* event id -> the row showing it */
  feed.querySelectorAll("li[data-event-id]").forEach((li) => remember(li.dataset.eventId, li));
  let cursor = Number(feed.dataset.lastSeq || 0); /* the last seq received */
  let count = Number(feed.dataset.eventCount || 0);
  const totals = {
    input: numberOf("[data-total-in]"),
    output: numberOf("[data-total-out]"),
    cost: numberOf("[data-total-cost]"),
  };
  let queue = [];
  let drawing = false;
  let socket = null;
  let attempt = 0;
  let retry = 0;
  let paused = false;

  function numberOf(selector) {
    const el = document.querySelector(selector);
    return el ? Number(el.dataset.value || 0) : 0;
  }

  function remember(id, li) {
    rows.set(id, li);
    (li._ids = li._ids || []).push(id);
  }

  /* ---- formatting shared with the server (render.py money/count, event_rows.py) ---- */
  const money = window.OpenCrab.money; /* the same text the server renders */
  function count_(value) { return Number(value).toLocaleString("en-US"); }
  function usageText(usage) {
    const parts = [count_(usage.input) + " in · " + count_(usage.output) + " out tokens"];
    if (usage.cost !== null && usage.cost !== undefined) parts.push(money(usage.cost));
    if (usage.model) parts.push(usage.model);
    return parts.join(" · ");
  }
  function pretty(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }
  function utcText(iso) {
    return iso.slice(0, 10) + " " + iso.slice(11, 16) + " UTC";
  }

  /* ---- one event -> a row (the rules of dashboard/event_rows.py) ---- */
  function describe(message) {
    const ev = message.event;
    const content = ev.content || {};
    const meta = ev.metadata && typeof ev.metadata === "object" ? ev.metadata : {};
    const agentId = message.agentId || (sessionKind === "discussion" ? null : chatAgent);
    const speaker = agentId ? speakers[agentId] || { name: agentId.slice(0, 8), lang: language } : null;
    const row = {
      seq: message.seq, id: ev.id, kind: "speech", label: "Speech", timestamp: ev.timestamp,
      who: speaker ? speaker.name : null, lang: speaker ? speaker.lang : language,
      text: "", name: "", arguments: "", result: null, failed: false, interrupted: false,
    };
    if (ev.type === "user") {
      row.text = String(content.text || "");
      if (meta.source === "internal") {
        row.kind = "prompt"; row.label = "Prompt to";
      } else if (meta.source === "discussion") {
        row.kind = "mentor"; row.label = "Mentor"; row.who = String(meta.sender_name || meta.sender || "");
      } else {
        const sender = String(meta.sender || "user");
        row.kind = "user"; row.label = sender === "operator" ? "Operator" : "User";
        row.who = sender === "user" || sender === "operator" ? null : sender;
      }
    } else if (ev.type === "reasoning") {
      row.kind = "inner"; row.label = "Inner voice"; row.text = String(content.text || "");
    } else if (ev.type === "tool_call" && content.name === "generate_inner_voice") {
      const args = content.arguments;
      const said = args && typeof args === "object" ? args.content : args;
      row.kind = "inner"; row.label = "Inner voice"; row.text = String(said || ""); row.result = "";
    } else if (ev.type === "tool_call" || ev.type === "tool_result") {
      row.kind = "action"; row.label = "Action";
      if (ev.type === "tool_call") {
        row.name = String(content.name || ""); row.arguments = pretty(content.arguments);
      } else {
        row.name = String(meta.name || ""); row.result = String(content.output || ""); row.failed = !!content.is_error;
      }
    } else if (ev.type === "message") {
      row.text = String(content.text || "");
      row.interrupted = !!meta.interrupted;
      if (meta.kind === "error") { row.kind = "error"; row.label = "Error"; }
      else if (meta.via === "broadcast_guidance") { row.label = "Guidance"; }
    } else {
      return null;
    }
    return row;
  }

  function part(li, selector) { return li.querySelector(selector); }

  function setState(li, result, failed) {
    const badge = part(li, ".ev-state");
    const state = result === null ? "running" : failed ? "failed" : "ok";
    badge.className = "badge ev-state " + { running: "busy", ok: "ok", failed: "danger" }[state];
    badge.textContent = state;
    part(li, ".ev-result").textContent = result === null ? "(running…)" : result;
  }

  function build(row) {
    const li = template.content.firstElementChild.cloneNode(true);
    li.className = "ev ev-" + row.kind;
    li.id = "ev-" + row.id;
    li.dataset.eventId = row.id;
    li.dataset.seq = row.seq;
    part(li, ".ev-label").textContent = row.label;
    const who = part(li, ".ev-who");
    if (row.who) { who.textContent = row.who; who.lang = row.lang; who.hidden = false; }
    const time = part(li, "time");
    time.setAttribute("datetime", row.timestamp);
    time.textContent = utcText(row.timestamp);
    const details = row.kind === "action" || row.kind === "prompt";
    if (row.interrupted) part(li, ".ev-interrupted").hidden = false;
    if (!details) {
      const text = part(li, ".ev-text");
      text.textContent = row.text; text.lang = row.lang; text.hidden = false;
    } else {
      part(li, ".ev-details").hidden = false;
      if (row.kind === "prompt") {
        part(li, "summary").textContent = "Show the prompt";
        part(li, ".ev-sub-args").hidden = true;
        part(li, ".ev-sub-result").hidden = true;
        part(li, ".ev-result").hidden = true;
        const args = part(li, ".ev-args");
        args.textContent = row.text; args.lang = row.lang;
      } else {
        part(li, ".ev-name").textContent = row.name;
        part(li, ".ev-name").hidden = false;
        part(li, ".ev-state").hidden = false;
        part(li, ".ev-args").textContent = row.arguments;
        setState(li, row.result, row.failed);
      }
    }
    return li;
  }

  function apply(message, fragment) {
    const ev = message.event;
    const content = ev.content || {};
    const meta = ev.metadata && typeof ev.metadata === "object" ? ev.metadata : {};
    if (ev.type === "token_usage") {
      const usage = {
        input: Number(content.input_tokens || 0), output: Number(content.output_tokens || 0),
        cost: typeof meta.cost_usd === "number" ? meta.cost_usd : null, model: meta.model || null,
      };
      totals.input += usage.input; totals.output += usage.output;
      if (usage.cost !== null) totals.cost += usage.cost;
      const parent = rows.get(ev.parent_id);
      if (parent) { const line = part(parent, ".ev-usage"); line.textContent = usageText(usage); line.hidden = false; }
      return;
    }
    if (ev.type === "tool_result") {
      const call = rows.get(content.tool_call_id);
      if (call) {
        if (!call.classList.contains("ev-inner")) setState(call, String(content.output || ""), !!content.is_error);
        remember(ev.id, call);
        return;
      }
    }
    const row = describe(message);
    if (!row) return;
    const li = build(row);
    remember(row.id, li);
    fragment.append(li);
  }

  /* ---- drawing, once per frame ---- */
  function schedule() {
    if (drawing) return;
    drawing = true;
    requestAnimationFrame(draw);
    setTimeout(draw, 250); /* a hidden tab gets no frames */
  }

  function draw() {
    if (!drawing) return;
    drawing = false;
    const batch = queue;
    queue = [];
    if (!batch.length) return;
    const root = document.documentElement;
    const atBottom = window.innerHeight + window.scrollY >= root.scrollHeight - 120;
    const fragment = document.createDocumentFragment();
    let last = null;
    for (const message of batch) {
      apply(message, fragment);
      last = message;
    }
    if (window.OpenCrab) OpenCrab.localTimes(fragment);
    feed.append(fragment);
    count += batch.length;
    trim();
    feed.dataset.lastSeq = last.seq;
    feed.dataset.lastEventId = last.event.id;
    feed.dataset.eventCount = count;
    showTotals();
    const empty = document.querySelector("[data-feed-empty]");
    if (empty && feed.firstElementChild) empty.hidden = true;
    if (atBottom) window.scrollTo(0, root.scrollHeight);
  }

  function trim() {
    let extra = feed.children.length - MAX_ROWS;
    if (extra <= 0) return;
    while (extra-- > 0) {
      const li = feed.firstElementChild;
      (li._ids || [li.dataset.eventId]).forEach((id) => rows.delete(id));
      li.remove();
    }
    const link = document.querySelector("[data-feed-earlier]");
    if (link) {
      link.href = "/sessions/" + sessionId + "?before=" + feed.firstElementChild.dataset.seq;
      link.parentElement.hidden = false;
    }
  }

  function showTotals() {
    const set = (selector, text, value) => {
      const el = document.querySelector(selector);
      if (el) { el.textContent = text; el.dataset.value = value; }
    };
    set("[data-total-in]", count_(totals.input), totals.input);
    set("[data-total-out]", count_(totals.output), totals.output);
    set("[data-total-cost]", money(totals.cost), totals.cost);
    set("[data-live-count]", count_(count), count);
  }

  /* ---- the socket ---- */
  function setLive(text, tone) {
    const el = document.querySelector("[data-live-state]");
    if (!el) return;
    el.textContent = text;
    el.className = "badge" + (tone ? " " + tone : "");
    feed.dataset.connection = text;
  }

  function receive(message) {
    switch (message.type) {
      case "event":
        if (message.seq <= cursor) return; /* shown already */
        cursor = message.seq;
        queue.push(message);
        schedule();
        break;
      case "subscribed":
        (message.participants || []).forEach((p) => {
          if (!speakers[p.agentId]) speakers[p.agentId] = { name: p.name, lang: language };
        });
        setLive("live", "ok");
        break;
      case "discussion.turn": {
        const turn = document.querySelector("[data-live-turn]");
        if (turn) turn.textContent = message.turn;
        if (message.agentId && !speakers[message.agentId]) speakers[message.agentId] = { name: message.agent, lang: language };
        break;
      }
      case "discussion.ended":
        ended(message.endedBy || "");
        break;
      case "error":
        setLive("not live: " + message.message, "danger");
        break;
    }
  }

  function ended(reason) {
    const status = document.querySelector("[data-live-status]");
    if (status) { status.textContent = "completed"; status.className = "badge"; }
    const by = document.querySelector("[data-live-ended]");
    if (by) by.textContent = reason;
    const form = document.querySelector("[data-intervene]");
    if (form) form.hidden = true;
    const closed = document.querySelector("[data-intervene-closed]");
    if (closed) { closed.textContent = "This discussion has ended (" + reason + "): it takes no more messages."; closed.hidden = false; }
  }

  function connect() {
    clearTimeout(retry);
    if (paused || socket) return;
    setLive(attempt ? "reconnecting…" : "connecting…", "warn");
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/api/ws");
    socket = ws;
    ws.addEventListener("open", () => {
      attempt = 0;
      ws.send(JSON.stringify({ type: "subscribe", sessionId: sessionId, afterSeq: cursor }));
    });
    ws.addEventListener("message", (m) => {
      let message;
      try { message = JSON.parse(m.data); } catch (err) { return; }
      receive(message);
    });
    ws.addEventListener("close", () => {
      if (socket === ws) socket = null;
      if (paused) { setLive("paused", ""); return; }
      setLive("reconnecting…", "warn");
      retry = setTimeout(connect, Math.min(5000, 250 * 2 ** attempt++));
    });
  }

  function pause() {
    paused = true;
    if (socket) socket.close(1000, "paused");
    else setLive("paused", "");
  }

  function resume() {
    paused = false;
    attempt = 0;
    connect();
  }

  const toggle = document.querySelector("[data-live-toggle]");
  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener("click", () => {
      const pausing = toggle.getAttribute("aria-pressed") !== "true";
      toggle.setAttribute("aria-pressed", pausing ? "true" : "false");
      toggle.textContent = pausing ? "Resume live updates" : "Pause live updates";
      if (pausing) pause(); else resume();
    });
  }

  /* the operator's message went in: clear the box (the feed shows the message) */
  document.addEventListener("api:done", (event) => {
    const form = event.target.closest && event.target.closest("[data-intervene]");
    if (!form) return;
    form.reset();
    if (window.OpenCrab) OpenCrab.toast("Sent.");
  });

  window.OpenCrabLive = {
    get socket() { return socket; },
    get cursor() { return cursor; },
    pause: pause,
    resume: resume,
  };
  connect();
})();
