/* Transcripts pages (pages/transcripts.py, templates/transcripts.html, transcript.html).
 *
 * - Import form: sends { path, source } to POST /api/imports, then polls
 *   GET /api/imports/jobs/{id} (every POLL_MS) and shows files done of the total,
 *   messages, problems and cost until the job is done or failed.
 * - Cost chart: [data-cost-chart] draws GET /api/imports/costs (cost per day, stacked by
 *   model, each model in the colour OpenCrabCharts.named gives it on every page) through
 *   OpenCrabCharts (js/charts.js); the table beside it has the same figures.
 * - JSON: <code data-highlight-json> is highlighted with highlight.js (vendored); the
 *   a11y light or dark stylesheet follows the page's theme (dashboard.js switches it).
 */
(function () {
  "use strict";
  const POLL_MS = 400;

  /* ---- JSON blocks (dashboard.js gives highlight.js the page's theme) ---- */
  if (window.hljs) {
    document.querySelectorAll("code[data-highlight-json]").forEach((code) => window.hljs.highlightElement(code));
  }

  /* ---- the import form and its job ---- */
  const form = document.querySelector("form[data-import-form]");
  const box = document.querySelector("[data-import-job]");
  function show(job) {
    const set = (name, value) => { box.querySelector("[data-job-" + name + "]").textContent = value; };
    box.hidden = false;
    set("status", job.status);
    set("path", job.path);
    set("files", job.filesDone);
    set("total", job.filesTotal);
    set("messages", job.messages.toLocaleString("en-US"));
    set("problems", job.problems.toLocaleString("en-US"));
    set("cost", OpenCrab.money(job.costUsd));
    const bar = box.querySelector("[data-job-progress]");
    bar.max = Math.max(job.filesTotal, 1);
    bar.value = job.filesDone;
    const status = box.querySelector("[data-job-status]");
    status.className = "badge" + (job.status === "done" ? " ok" : job.status === "failed" ? " danger" : " busy");
    const list = box.querySelector("[data-job-problem-list]");
    list.replaceChildren(...job.problemLines.map((p) => {
      const item = document.createElement("li");
      item.textContent = p.file + (p.line ? ":" + p.line : "") + " — " + p.reason;
      return item;
    }));
    if (job.error) {
      const item = document.createElement("li");
      item.textContent = job.error;
      list.append(item);
    }
    box.querySelector("[data-job-done]").hidden = job.status !== "done";
  }
  async function follow(id) {
    for (;;) {
      const job = await OpenCrab.api("GET", "/api/imports/jobs/" + encodeURIComponent(id));
      show(job);
      if (job.status !== "running" && job.status !== "cancelling") return job;
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }
  if (form && box) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      OpenCrab.clearErrors(form);
      const button = form.querySelector("button[type=submit]");
      button.disabled = true;
      try {
        const job = await OpenCrab.api("POST", "/api/imports", OpenCrab.formBody(form));
        show(job);
        const done = await follow(job.id);
        OpenCrab.toast(done.status === "done" ? "Import finished: " + done.filesDone + " files" : "Import failed", done.status !== "done");
      } catch (err) {
        OpenCrab.showError(form, err);
      } finally {
        button.disabled = false;
      }
    });
  }

  /* ---- the cost chart (js/charts.js: the shared palette, redrawn on a theme change) ---- */
  const chartBox = document.querySelector("[data-cost-chart]");
  async function drawCosts() {
    if (!chartBox || !window.OpenCrabCharts) return;
    const rows = await OpenCrab.api("GET", chartBox.dataset.url);
    const days = [...new Set(rows.map((r) => r.day))].sort();
    const models = [...new Set(rows.map((r) => r.model))].sort();
    const series = models.map((model) => ({
      name: model,
      type: "bar",
      stack: "cost",
      data: days.map((day) => {
        const found = rows.find((r) => r.day === day && r.model === model);
        return found ? Number(found.costUsd.toFixed(4)) : 0;
      }),
    }));
    const charts = window.OpenCrabCharts;
    const drawn = charts.mount(chartBox, (c) => (series.length ? {
      tooltip: Object.assign(charts.base(c).tooltip, { trigger: "axis", valueFormatter: (v) => OpenCrab.money(v) }),
      grid: { left: 8, right: 12, top: 48, bottom: 8, containLabel: true },
      xAxis: charts.axis(c, { type: "category", data: days }),
      yAxis: charts.axis(c, { type: "value", axisLabel: { color: c.muted, fontFamily: c.font, formatter: charts.axisMoney } }),
      series: series.map((s) => Object.assign({ itemStyle: charts.named(c, models)(s.name) }, s)),
    } : null), { renderer: "svg" });
    if (drawn) chartBox.dataset.drawn = String(series.length);
  }
  if (chartBox) drawCosts().catch((err) => OpenCrab.toast(err.message, true));
})();
