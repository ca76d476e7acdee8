/* The LLM settings page: connection tests and the alias form (both through the REST API),
 * and the monitoring chart (median and p95 response time and error rate per provider,
 * from GET /api/llm/monitoring, drawn with OpenCrabCharts: js/charts.js).
 * Provider forms, the fallback chain and removals are plain data-api forms (dashboard.js). */
(function () {
  "use strict";

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("[data-test-provider]");
    if (!button) return;
    const name = button.dataset.testProvider;
    const out = document.querySelector('[data-test-result="' + CSS.escape(name) + '"]');
    out.className = "test-result";
    out.textContent = "Testing…";
    button.setAttribute("aria-busy", "true");
    try {
      const result = await OpenCrab.api("POST", "/api/llm/providers/" + encodeURIComponent(name) + "/test");
      out.classList.add(result.ok ? "ok" : "failed");
      out.textContent = result.ok
        ? "Connected: " + (result.model || "default model") + " answered in " + result.latencyMs + " ms."
        : "Failed after " + result.latencyMs + " ms: " + result.error;
    } catch (err) {
      out.classList.add("failed");
      out.textContent = err.message;
    } finally {
      button.removeAttribute("aria-busy");
    }
  });

  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form[data-alias-form]");
    if (!form) return;
    event.preventDefault();
    OpenCrab.clearErrors(form);
    const alias = form.elements.alias.value.trim();
    try {
      await OpenCrab.api("PUT", "/api/llm/aliases/" + encodeURIComponent(alias), {
        provider: form.elements.provider.value,
        model: form.elements.model.value.trim(),
      });
      location.reload();
    } catch (err) {
      OpenCrab.showError(form, err);
    }
  });

  async function drawMonitoring(el) {
    const data = await OpenCrabCharts.load(el);
    if (data === null) return;
    const rows = data.providers;
    const ms = (v) => (v === null ? "–" : Math.round(v).toLocaleString("en-US") + " ms");
    const percent = (v) => (v === null ? "–" : (v * 100).toFixed(1) + "%");
    OpenCrabCharts.mount(el, (c) => rows.length === 0 ? null : ({
      color: [c.palette[0], c.palette[1], c.danger],
      legend: Object.assign(OpenCrabCharts.base(c).legend, { data: ["median", "p95", "error rate"] }),
      grid: { top: 36, left: 56, right: 56, bottom: 28 },
      tooltip: Object.assign(OpenCrabCharts.base(c).tooltip, { trigger: "axis" }),
      xAxis: OpenCrabCharts.axis(c, { type: "category", data: rows.map((r) => r.provider) }),
      yAxis: [
        OpenCrabCharts.axis(c, { type: "value", name: "ms", axisLabel: { color: c.muted, formatter: (v) => v.toLocaleString("en-US") } }),
        OpenCrabCharts.axis(c, { type: "value", name: "errors", min: 0, max: 1, splitLine: { show: false },
          axisLabel: { color: c.muted, formatter: (v) => Math.round(v * 100) + "%" } }),
      ],
      series: [
        { name: "median", type: "bar", data: rows.map((r) => r.p50LatencyMs), tooltip: { valueFormatter: ms } },
        { name: "p95", type: "bar", data: rows.map((r) => r.p95LatencyMs), tooltip: { valueFormatter: ms } },
        { name: "error rate", type: "line", yAxisIndex: 1, symbolSize: 8, data: rows.map((r) => r.errorRate),
          tooltip: { valueFormatter: percent } },
      ],
    }));
    el.dataset.points = String(rows.length);
  }
  const monitoring = document.getElementById("monitoring-chart");
  if (monitoring) drawMonitoring(monitoring);
})();
