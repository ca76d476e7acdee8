/* Costs page: draws the charts (ECharts) from /api/analytics/llm/* with the page's
 * filter, and keeps the URL, the totals and the export links in step with it.
 *
 * The filter is the form #costs-filter (its GET submit works without this script);
 * here a change applies at once: the URL is replaced, the totals are read again from
 * /totals and /cache, every chart is fetched and redrawn. Each drawn chart gets
 * data-state="drawn" and data-points (its number of data points). Colours, the shared
 * options and the axis style come from OpenCrabCharts (js/charts.js), read again when
 * the theme changes; a model's (provider's, agent's) series or slice has the colour
 * OpenCrabCharts.named gives its name, the same on every chart.
 */
(function () {
  "use strict";
  const API = "/api/analytics/llm/";
  const form = document.getElementById("costs-filter");
  if (!form || !window.echarts || !window.OpenCrabCharts) return;
  const bucketSel = document.getElementById("c-bucket");
  const stackSel = document.getElementById("c-stack");
  const charts = {};
  let last = {};
  let generation = 0;
  let animate = true;

  const shared = window.OpenCrabCharts;  // js/charts.js: the shared palette and styles
  const theme = shared.colours;

  function params() {
    const out = new URLSearchParams();
    for (const [key, value] of new FormData(form)) if (value !== "") out.set(key, value);
    return out;
  }

  const money = OpenCrab.money;

  function count(value) { return value.toLocaleString("en-US"); }

  async function get(path, extra) {
    const query = params();
    if (extra) for (const [k, v] of Object.entries(extra)) query.set(k, v);
    return OpenCrab.api("GET", API + path + "?" + query.toString());
  }

  function chart(id) {
    const el = document.getElementById(id);
    if (!charts[id]) charts[id] = echarts.init(el, null, { renderer: "canvas" });
    return charts[id];
  }

  function base(t) {
    const o = shared.base(t);
    o.animation = animate;
    o.tooltip.trigger = "axis";
    o.grid = { left: 8, right: 16, top: 36, bottom: 8, containLabel: true };
    return o;
  }

  const axis = shared.axis;

  function draw(id, option, points) {
    const c = chart(id);
    c.setOption(option, true);
    const el = document.getElementById(id);
    el.dataset.state = "drawn";
    el.dataset.points = String(points);
  }

  const painters = {
    cost(t, data) {
      const buckets = [...new Set(data.points.map((p) => p.bucket))].sort();
      const keys = [...new Set(data.points.map((p) => p.key))];
      const label = {};
      data.points.forEach((p) => { label[p.key] = p.label; });
      const style = shared.named(t, keys.map((key) => label[key]));
      const series = keys.map((key) => {
        const by = {};
        data.points.filter((p) => p.key === key).forEach((p) => { by[p.bucket] = p.costUsd; });
        return { name: label[key], type: "bar", stack: "cost", emphasis: { focus: "series" },
          itemStyle: style(label[key]), data: buckets.map((b) => by[b] || 0) };
      });
      const o = base(t);
      o.tooltip.valueFormatter = money;
      o.xAxis = axis(t, { type: "category", data: buckets });
      o.yAxis = axis(t, { type: "value", axisLabel: { color: t.muted, formatter: shared.axisMoney } });
      o.series = series;
      draw("chart-cost", o, data.points.length);
    },
    share(t, data) {
      const style = shared.named(t, data.shares.map((s) => s.label));
      const o = base(t);
      o.tooltip = { trigger: "item", valueFormatter: money, backgroundColor: t.surface, borderColor: t.border, textStyle: { color: t.text } };
      o.series = [{ type: "pie", radius: ["35%", "65%"], top: 24, label: { color: t.text },
        itemStyle: { borderColor: t.surface, borderWidth: 2 },
        data: data.shares.map((s) => ({ name: s.label, value: s.costUsd, itemStyle: style(s.label) })) }];
      draw("chart-share", o, data.shares.length);
    },
    quality(t, data) {
      const o = base(t);
      o.xAxis = axis(t, { type: "category", data: data.points.map((p) => p.bucket) });
      o.yAxis = axis(t, { type: "value", min: 0, max: 1 });
      o.series = [{ name: "average quality", type: "line", smooth: true, showSymbol: true,
        data: data.points.map((p) => Number(p.avgQuality.toFixed(4))) },
      // the counts in the palette's neutral colour, opaque: a faded colour turns muddy on the dark surface
      { name: "rated calls", type: "bar", yAxisIndex: 1, barMaxWidth: 24, data: data.points.map((p) => p.rated),
        itemStyle: { color: t.palette[7] } }];
      o.yAxis = [o.yAxis, axis(t, { type: "value", splitLine: { show: false } })];
      draw("chart-quality", o, data.points.length);
    },
    efficiency(t, data) {
      const models = [...new Set(data.cells.map((c) => c.model))].sort();
      const tasks = [...new Set(data.cells.map((c) => c.taskType))].sort();
      const values = data.cells.map((c) => [tasks.indexOf(c.taskType), models.indexOf(c.model),
        c.costPerCall, c.avgQuality, c.calls]);
      const high = Math.max(0, ...data.cells.map((c) => c.costPerCall));
      const o = base(t);
      o.tooltip = { trigger: "item", backgroundColor: t.surface, borderColor: t.border, textStyle: { color: t.text },
        formatter: (p) => shared.text(models[p.value[1]] + " × " + tasks[p.value[0]]) + "<br>" + money(p.value[2]) +
          " per call · " + count(p.value[4]) + " calls<br>quality " + (p.value[3] === null ? "unrated" : p.value[3].toFixed(2)) };
      o.grid = { left: 24, right: 16, top: 8, bottom: 56, containLabel: true };
      o.xAxis = axis(t, { type: "category", data: tasks, splitArea: { show: false } });
      o.yAxis = axis(t, { type: "category", data: models });
      o.visualMap = { min: 0, max: high || 1, calculable: true, orient: "horizontal", left: "center", bottom: 0,
        inRange: { color: [t.low, t.high] }, textStyle: { color: t.muted }, formatter: shared.axisMoney, dimension: 2 };
      o.series = [{ type: "heatmap", data: values,
        label: { show: true, color: t.text, backgroundColor: t.surface, padding: [1, 4], borderRadius: 3,
          formatter: (p) => (p.value[3] === null ? "–" : p.value[3].toFixed(2)) },
        itemStyle: { borderColor: t.surface, borderWidth: 1 } }];
      draw("chart-efficiency", o, data.cells.length);
    },
    speed(t, data) {
      const o = base(t);
      o.tooltip.valueFormatter = (v) => (v === null || v === undefined ? "–" : count(v) + " ms");
      o.xAxis = axis(t, { type: "category", data: data.models.map((m) => m.model), axisLabel: { color: t.muted, interval: 0, rotate: 15 } });
      o.yAxis = axis(t, { type: "value", axisLabel: { color: t.muted, formatter: "{value} ms" } });
      o.legend.type = "plain";  // six series: two lines in a narrow panel rather than pages
      o.grid.top = 60;
      o.grid.left = 32;  // room for the first rotated model name
      const keys = [["latencyP50", "latency p50"], ["latencyP90", "latency p90"], ["latencyP99", "latency p99"],
        ["ttftP50", "TTFT p50"], ["ttftP90", "TTFT p90"], ["ttftP99", "TTFT p99"]];
      o.series = keys.map(([key, name]) => ({ name: name, type: "bar", data: data.models.map((m) => m[key]) }));
      draw("chart-speed", o, data.models.length);
    },
    errors(t, data) {
      const o = base(t);
      o.tooltip.valueFormatter = (v) => v.toFixed(1) + "%";
      o.xAxis = axis(t, { type: "category", data: data.providers.map((p) => p.provider) });
      o.yAxis = axis(t, { type: "value", axisLabel: { color: t.muted, formatter: "{value}%" } });
      o.series = [{ name: "error rate", type: "bar", itemStyle: { color: t.danger },
        data: data.providers.map((p) => Number((p.errorRate * 100).toFixed(2))) }];
      draw("chart-errors", o, data.providers.length);
    },
    cache(t, data) {
      const o = base(t);
      const names = data.models.map((m) => m.model);
      o.grid.left = 32;  // room for the first rotated model name
      o.xAxis = axis(t, { type: "category", data: names, axisLabel: { color: t.muted, interval: 0, rotate: 15 } });
      o.yAxis = [axis(t, { type: "value", max: 100, axisLabel: { color: t.muted, formatter: "{value}%" } }),
        axis(t, { type: "value", splitLine: { show: false }, axisLabel: { color: t.muted, formatter: shared.axisMoney } })];
      o.series = [{ name: "cached share of input", type: "bar", tooltip: { valueFormatter: (v) => v.toFixed(1) + "%" },
        data: data.models.map((m) => Number((m.cachedShare * 100).toFixed(2))) },
      { name: "saved", type: "line", yAxisIndex: 1, tooltip: { valueFormatter: money },
        data: data.models.map((m) => m.savedUsd) }];
      draw("chart-cache", o, data.models.length);
    },
  };

  const sources = {
    cost: () => get("cost", { bucket: bucketSel.value, stack: stackSel.value }),
    share: () => get("share", { by: "model" }),
    quality: () => get("quality", { bucket: bucketSel.value }),
    efficiency: () => get("efficiency"),
    speed: () => get("speed"),
    errors: () => get("errors"),
    cache: () => get("cache"),
  };

  function paint(name) {
    if (last[name]) painters[name](theme(), last[name]);
  }

  function repaint() {
    // a theme change: the same data in the new colours, at once (no animation)
    animate = false;
    Object.keys(last).forEach(paint);
    animate = true;
  }

  async function load(names) {
    const mine = generation;
    await Promise.all(names.map(async (name) => {
      try {
        const data = await sources[name]();
        if (mine !== generation) return; // a newer filter won
        last[name] = data;
        paint(name);
      } catch (err) {
        OpenCrab.toast(err.message, true);
      }
    }));
  }

  function setData(el, value, text) { el.value = String(value); el.textContent = text; }

  async function totals() {
    const mine = generation;
    const [t, cache] = await Promise.all([get("totals"), get("cache")]);
    if (mine !== generation) return;
    const box = document.getElementById("costs-totals");
    for (const el of box.querySelectorAll("[data-total]")) {
      const value = t[el.dataset.total];
      setData(el, value, el.dataset.total === "costUsd" ? money(value) : count(value));
    }
    setData(box.querySelector("[data-cache=cachedShare]"), cache.cachedShare, (cache.cachedShare * 100).toFixed(1) + "%");
    setData(box.querySelector("[data-cache=savedUsd]"), cache.savedUsd, money(cache.savedUsd));
    const rate = box.querySelector("[data-total=errors]").parentElement.querySelector("p");
    rate.textContent = t.calls ? (t.errors / t.calls * 100).toFixed(1) + "% of calls" : "– of calls";
  }

  function evidence(e) {
    const q = e.avgQuality === null ? "unrated" : "quality " + e.avgQuality.toFixed(2);
    return e.model + ": " + q + ", " + money(e.avgCost) + "/call, " + count(e.avgLatency) + " ms, " +
      count(e.calls) + " calls, " + (e.successRate * 100).toFixed(0) + "% success";
  }

  async function suggestions() {
    const mine = generation;
    const list = document.getElementById("suggestions");
    const data = await get("suggestions");
    if (mine !== generation) return;
    list.replaceChildren();
    if (!data.suggestions.length) {
      const li = document.createElement("li");
      li.className = "muted";
      li.textContent = "No change suggested: the models in use are the best the history shows.";
      list.append(li);
    }
    for (const s of data.suggestions) {
      const li = document.createElement("li");
      const head = document.createElement("strong");
      head.textContent = s.agent + " · " + s.taskType + ": " + (s.currentModel || s.current.model) + " → " + s.suggestedModel;
      const gain = document.createElement("div");
      gain.textContent = s.expectedImprovement;
      const ev = document.createElement("p");
      ev.className = "evidence";
      ev.textContent = "Now " + evidence(s.current) + ". Suggested " + evidence(s.suggested) + ".";
      li.append(head, gain, ev);
      list.append(li);
    }
  }

  function exportLinks() {
    for (const a of document.querySelectorAll("[data-export]")) {
      const query = params();
      query.set("format", a.dataset.export);
      if (a.dataset.table) query.set("table", a.dataset.table);
      query.set("bucket", bucketSel.value);
      query.set("stack", stackSel.value);
      a.href = API + "export?" + query.toString();
    }
  }

  function refresh() {
    generation += 1;
    exportLinks();
    totals().catch((err) => OpenCrab.toast(err.message, true));
    suggestions().catch((err) => OpenCrab.toast(err.message, true));
    return load(Object.keys(sources));
  }

  form.addEventListener("change", (event) => {
    if (event.target.name === "days") {
      for (const hidden of form.querySelectorAll("input[type=hidden][name=from], input[type=hidden][name=to]")) hidden.remove();
    }
    history.replaceState(null, "", "/costs?" + params().toString());
    refresh();
  });
  form.addEventListener("submit", (event) => { event.preventDefault(); form.dispatchEvent(new Event("change")); });
  bucketSel.addEventListener("change", () => { exportLinks(); load(["cost", "quality"]); });
  stackSel.addEventListener("change", () => { exportLinks(); load(["cost"]); });

  shared.onTheme(repaint);
  window.addEventListener("resize", () => Object.values(charts).forEach((c) => c.resize()));

  refresh();
})();
