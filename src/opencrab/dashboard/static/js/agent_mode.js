/* Agent mode's pages (/agent-mode, /agent-mode/{id}).
 *
 * - The list: shows the "Plan a session" form (it needs this script; dashboard.js sends it).
 * - A session: draws the task DAG as an ECharts graph (layered left to right by
 *   dependency depth, each node coloured by its state and labelled with it; clicking a
 *   node selects that task's section), follows the session over the WebSocket /api/ws
 *   (`subscribe` with the session id; every `agentMode` notice refetches
 *   GET /api/agent-mode/sessions/{id}/run, then …/disk, and a finished task's …/diff),
 *   and polls each Running task's pane output (…/tasks/{task}/output) into its <pre>,
 *   kept scrolled to the bottom unless the reader scrolled up. A dropped socket
 *   reconnects (backing off up to 5 s) and catches up with one refetch.
 * - The root element carries data-status and data-refreshes (tests read them);
 *   window.OpenCrabAgentMode exposes the chart and the session last read.
 */
(function () {
  "use strict";
  document.querySelectorAll("[data-am-plan]").forEach((form) => {
    form.hidden = false;
    document.querySelectorAll("[data-needs-script]").forEach((el) => { el.hidden = true; });
  });
  const root = document.querySelector("[data-am-session]");
  if (!root) return;
  const sessionId = root.dataset.sessionId;
  const base = "/api/agent-mode/sessions/" + sessionId;
  const dagEl = document.getElementById("am-dag");
  let tasks = JSON.parse(dagEl.dataset.dag).tasks;
  let selected = null;
  const STATES = {
    Pending: "muted", Ready: "link", Running: "accent", Completed: "ok",
    Failed: "danger", Cancelled: "border",
  };

  function shownState(t) {
    return t.subAgentStatus === "WaitingInput" && t.status === "Running" ? "WaitingInput" : t.status;
  }

  /* ---- the graph ---- */
  /* Nodes on a hidden value grid (x: dependency depth, y: place in its layer), so each
     node keeps its size in pixels whatever the box's shape. */
  function layers() {
    const count = new Map();
    tasks.forEach((t) => { count.set(t.depth, (count.get(t.depth) || 0) + 1); });
    return { count, depth: Math.max(0, ...count.keys()), rows: Math.max(1, ...count.values()) };
  }
  function build(c) {
    if (!tasks.length) return null;
    const { count, depth, rows } = layers();
    const placed = new Map();
    const data = tasks.map((t) => {
      const row = placed.get(t.depth) || 0;
      placed.set(t.depth, row + 1);
      const state = shownState(t);
      const colour = state === "WaitingInput" ? c.warn : c[STATES[t.status] || "muted"];
      return {
        id: t.id, name: t.id, value: [t.depth, row + (rows - count.get(t.depth)) / 2],
        status: state,
        symbolSize: [184, 52],
        itemStyle: {
          color: c.surface, borderColor: colour, borderWidth: t.id === selected ? 4 : 2,
        },
        label: {
          show: true, color: c.text, fontFamily: c.font, width: 168, overflow: "truncate",
          formatter: "{id|" + t.id + "} {state|" + state + "}\n" + t.name.replace(/[{}|]/g, " "),
          rich: {
            id: { color: c.muted, fontSize: 11 },
            state: { color: colour, fontWeight: "bold", fontSize: 11 },
          },
        },
      };
    });
    const links = [];
    tasks.forEach((t) => t.dependencies.forEach((d) => links.push({ source: d, target: t.id })));
    const hidden = { show: false, splitLine: { show: false } };
    return {
      tooltip: { formatter: (p) => p.dataType === "node" ? OpenCrabCharts.text(p.data.id + ": " + p.data.status) : "" },
      grid: { left: 100, right: 100, top: 36, bottom: 36 },
      xAxis: Object.assign({ type: "value", min: depth ? 0 : -1, max: depth || 1 }, hidden),
      yAxis: Object.assign({ type: "value", min: -0.5, max: rows - 0.5, inverse: true }, hidden),
      series: [{
        type: "graph", coordinateSystem: "cartesian2d", symbol: "roundRect",
        data: data, links: links, edgeSymbol: ["none", "arrow"], edgeSymbolSize: 9,
        lineStyle: { color: c.muted, width: 1.5, opacity: 0.9 },
      }],
    };
  }
  dagEl.style.height = Math.max(220, layers().rows * 80 + 72) + "px";
  dagEl.hidden = false;
  const chart = OpenCrabCharts.mount(dagEl, build);
  function redraw() {
    if (!chart) return;
    const c = OpenCrabCharts.colours();
    chart.setOption(Object.assign(OpenCrabCharts.base(c), build(c)), { notMerge: true });
  }
  function select(taskId) {
    selected = taskId;
    dagEl.dataset.selected = taskId;
    document.querySelectorAll("[data-task]").forEach((s) => {
      s.classList.toggle("selected", s.dataset.task === taskId);
    });
    const section = document.getElementById(taskId);
    if (section) section.scrollIntoView({ block: "start" });
    redraw();
  }
  if (chart) chart.on("click", (p) => { if (p.dataType === "node") select(p.data.id); });

  /* ---- the session's state ---- */
  function setText(el, text) { if (el && el.textContent !== text) el.textContent = text; }
  const STATE_CLASSES = ["pending", "ready", "running", "completed", "failed", "cancelled",
    "active", "paused"].map((s) => "am-" + s);
  function badge(el, status) {
    if (!el) return;
    setText(el, status);
    el.classList.remove(...STATE_CLASSES);
    el.classList.add("am-" + status.toLowerCase());
  }
  function humanBytes(n) {
    const units = ["B", "KiB", "MiB", "GiB"];
    let v = n, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return i === 0 ? v + " B" : v.toFixed(1) + " " + units[i];
  }

  /* The seed has no cancelled session (its file says Failed): shown as Cancelled when
     tasks were cancelled and none failed (as the server renders it). */
  function shownStatus(s) {
    const statuses = s.tasks.map((t) => t.status);
    return s.status === "Failed" && statuses.includes("Cancelled") && !statuses.includes("Failed")
      ? "Cancelled" : s.status;
  }

  function applySession(s) {
    root.dataset.status = s.status;
    const shown = shownStatus(s);
    badge(root.querySelector("[data-session-status]"), shown);
    const show = { pause: ["Active"], resume: ["Paused", "Failed"], cancel: ["Active", "Paused"] };
    root.querySelectorAll("[data-control]").forEach((b) => {
      const allowed = show[b.dataset.control];
      if (allowed) b.hidden = !allowed.includes(shown);
    });
    const run = s.run || { questions: {}, outcomes: {} };
    tasks = s.tasks.map((t) => ({
      id: t.id, name: t.name, status: t.status,
      subAgentStatus: t.subAgent ? t.subAgent.status : null,
      dependencies: t.dependencies,
      depth: (tasks.find((old) => old.id === t.id) || { depth: 0 }).depth,
    }));
    s.tasks.forEach((t) => applyTask(t, run));
    redraw();
  }

  function applyTask(t, run) {
    const row = document.querySelector('[data-task-row="' + t.id + '"]');
    const section = document.querySelector('[data-task="' + t.id + '"]');
    if (!row || !section) return;
    const waiting = t.subAgent && t.subAgent.status === "WaitingInput";
    badge(row.querySelector('[data-cell="status"]'), t.status);
    row.querySelector('[data-cell="waiting"]').hidden = !waiting;
    section.dataset.status = t.status;
    badge(section.querySelector('[data-field="status"]'), t.status);
    setText(section.querySelector('[data-field="agent"]'),
      t.subAgent ? t.subAgent.agentType + " · " + t.subAgent.status : "");
    section.querySelector("[data-retry]").hidden = t.status !== "Failed";
    const question = t.status === "Running" ? run.questions[t.id] : null;  // ended: none
    const box = section.querySelector("[data-question]");
    box.hidden = !question;
    if (question) setText(box.querySelector("[data-question-text]"), question);
    const result = section.querySelector("[data-result]");
    result.hidden = !t.result;
    if (t.result) setText(result.querySelector("[data-result-text]"), t.result.error || t.result.summary);
    const outputBox = section.querySelector("[data-output-box]");
    if (t.subAgent && outputBox.hidden) { outputBox.hidden = false; outputBox.open = true; }
    const diff = section.querySelector("[data-diff]");
    if (run.outcomes[t.id] && diff.dataset.loaded !== "yes") loadDiff(t.id, diff);
    section.dataset.polling = t.status === "Running" && t.subAgent ? "yes" : "no";
    if (t.subAgent && section.dataset.polling === "no" && section.dataset.outputFinal !== "yes") {
      section.dataset.outputFinal = "yes";  // its last words, once (even if never seen running)
      pollOutput(section);
    }
  }

  async function loadDiff(taskId, diff) {
    diff.dataset.loaded = "yes";
    try {
      const d = await OpenCrab.api("GET", base + "/tasks/" + taskId + "/diff");
      const delivery = diff.querySelector("[data-delivery]");
      delivery.textContent = "";
      if (d.pullRequestUrl) {
        const a = document.createElement("a");
        a.href = d.pullRequestUrl; a.rel = "noopener"; a.textContent = d.pullRequestUrl;
        delivery.append(a);
      } else {
        delivery.textContent = d.delivery;
      }
      setText(diff.querySelector("[data-stat]"), d.stat);
      setText(diff.querySelector("[data-patch]"), d.patch);
      diff.hidden = false;
    } catch (err) {
      diff.dataset.loaded = "no";
      OpenCrab.toast(err.message, true);
    }
  }

  async function loadDisk() {
    const d = await OpenCrab.api("GET", base + "/disk");
    setText(document.querySelector("[data-disk-session]"), humanBytes(d.sessionBytes));
    setText(document.querySelector("[data-disk-repo]"), humanBytes(d.repositoryWorktreesBytes));
    const list = document.querySelector("[data-disk-list]");
    let empty = list.parentElement.querySelector(".empty");
    if (!d.worktrees.length) {  // none yet, or all cleaned up
      list.replaceChildren();
      list.hidden = true;
      if (!empty) {
        empty = document.createElement("p");
        empty.className = "empty";
        empty.textContent = "No worktree.";
        list.after(empty);
      }
      empty.hidden = false;
      return;
    }
    list.replaceChildren(...d.worktrees.map((w) => {
      const li = document.createElement("li");
      const code = document.createElement("code");
      code.textContent = w.branch;
      li.append(code, " " + humanBytes(w.bytes) + (w.exists ? "" : " (removed)"));
      return li;
    }));
    list.hidden = false;
    if (empty) empty.hidden = true;
  }

  let refreshing = null;
  let again = false;
  let refreshes = 0;
  async function refresh() {
    if (refreshing) { again = true; return refreshing; }
    refreshing = (async () => {
      do {
        again = false;
        try {
          applySession(await OpenCrab.api("GET", base + "/run"));
          await loadDisk();
        } catch (err) {
          OpenCrab.toast(err.message, true);
        }
      } while (again);
      refreshes += 1;
      root.dataset.refreshes = String(refreshes);
    })();
    try { await refreshing; } finally { refreshing = null; }
  }

  /* ---- pane output ---- */
  /* A pane's capture without the terminal's unused rows (as the server renders it). */
  function tidy(text) {
    return text.replace(/[ \t]+$/gm, "").replace(/\n{3,}/g, "\n\n").replace(/^\n+|\n+$/g, "");
  }
  async function pollOutput(section) {
    const pre = section.querySelector("[data-output]");
    try {
      const out = await OpenCrab.api("GET", base + "/tasks/" + section.dataset.task + "/output");
      const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
      setText(pre, tidy(out.text));
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    } catch (err) {
      /* the pane is gone (cleaned up): keep what was shown */
    }
  }
  function pollOutputs() {
    document.querySelectorAll('[data-task][data-polling="yes"]').forEach(pollOutput);
  }
  document.querySelectorAll("[data-output]").forEach((pre) => { pre.scrollTop = pre.scrollHeight; });
  document.querySelectorAll("[data-task]").forEach((section) => {
    section.dataset.polling = section.dataset.status === "Running" ? "yes" : "no";
  });
  setInterval(pollOutputs, 1000);

  /* ---- the WebSocket ---- */
  const live = root.querySelector("[data-live-state]");
  live.hidden = false;
  let attempt = 0;
  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/api/ws");
    ws.addEventListener("open", () => ws.send(JSON.stringify({ type: "subscribe", sessionId: sessionId })));
    ws.addEventListener("message", (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "subscribed") {
        attempt = 0;
        setText(live, "live");
        live.className = "badge ok";
        refresh();
      } else if (message.type === "agentMode") {
        refresh();
      } else if (message.type === "error") {
        OpenCrab.toast(message.message, true);
      }
    });
    ws.addEventListener("close", () => {
      setText(live, "reconnecting…");
      live.className = "badge warn";
      attempt += 1;
      setTimeout(connect, Math.min(5000, 250 * 2 ** attempt));
    });
  }
  connect();

  /* ---- actions ---- */
  document.body.addEventListener("am-changed", () => refresh());
  document.body.addEventListener("am-cleaned", (event) => {
    const report = event.detail || {};
    const box = document.querySelector("[data-cleanup-report]");
    const removed = (report.removed || []).length;
    const refused = Object.keys(report.refused || {});
    box.textContent = "Cleanup: " + removed + " worktree(s) removed" +
      (refused.length ? "; kept (unmerged, unpushed work): " + refused.join(", ") : "") + ".";
    box.hidden = false;
    refresh();
  });
  document.addEventListener("api:done", (event) => {
    if (event.target.matches("[data-answer]")) event.target.reset();
  });

  window.OpenCrabAgentMode = { chart, select, refresh, get tasks() { return tasks; } };
})();
