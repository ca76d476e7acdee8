/* OpenCrab dashboard: the analytics charts (fleet page and an agent's tab).
 *
 * Every <div class="chart" data-chart="KIND" data-src="/api/..."> is drawn from the JSON
 * route it names (the same figures as the table under it), with charts.js:
 * - daily:  a DailySeries (days, series[{key,label,counts}]) as stacked bars per day;
 * - skills: skills[{name, usageCount, effectiveness}] as bars of use and points of
 *           effectiveness (0-1, right axis);
 * - graph:  Relationships: agents as nodes (size by lines spoken), an edge per pair with
 *           impressions, coloured by affinity; clicking an edge opens that pair's
 *           impressions (<details id="pair-A-B"> under the graph) and moves focus there;
 * - talks:  Relationships.talks as bars "speaker → answered".
 */
(function () {
  "use strict";
  const C = window.OpenCrabCharts;

  const KIND_COLOURS = {
    speak: "accent", learn: "ok", idle: "muted", skip: "warn",
    created: "ok", refined: "link", edited: "inner", file: "muted", recorded: "warn", reflections: "accent",
  };

  function daily(data, el) {
    const series = data.series.filter((s) => s.total > 0);
    if (!series.length) return null;
    const byAgent = el.id === "messages-chart";
    return (c) => {
      const agentStyle = C.named(c, series.map((s) => s.label));  // an agent's colour on every chart
      return {
        grid: { left: 40, right: 16, top: 36, bottom: 28, containLabel: true },
        tooltip: { trigger: "axis", axisPointer: { type: "shadow" } },
        xAxis: Object.assign({ type: "category", data: data.days.map((d) => d.slice(5)) }, C.axis(c)),
        yAxis: Object.assign({ type: "value", minInterval: 1 }, C.axis(c)),
        series: series.map((s) => ({
          type: "bar", stack: "total", name: s.label, data: s.counts, barMaxWidth: 28,
          itemStyle: byAgent ? agentStyle(s.label) : { color: c[KIND_COLOURS[s.key] || "muted"] },
        })),
      };
    };
  }

  function skills(data) {
    const rows = data.skills.filter((s) => s.usageCount > 0 || s.effectiveness != null).slice(0, 12);
    if (!rows.length) return null;
    return (c) => ({
      grid: { left: 40, right: 40, top: 36, bottom: 28, containLabel: true },
      tooltip: { trigger: "axis" },
      xAxis: Object.assign({ type: "category", data: rows.map((s) => s.name),
                             axisLabel: { color: c.muted, interval: 0, overflow: "truncate", width: 90 } },
                           { axisLine: C.axis(c).axisLine }),
      yAxis: [
        Object.assign({ type: "value", name: "uses", minInterval: 1 }, C.axis(c)),
        Object.assign({ type: "value", name: "effectiveness", min: 0, max: 1 }, C.axis(c), { splitLine: { show: false } }),
      ],
      series: [
        { type: "bar", name: "Uses", data: rows.map((s) => s.usageCount), barMaxWidth: 32, itemStyle: { color: c.accent } },
        { type: "line", name: "Effectiveness", yAxisIndex: 1, showSymbol: true, symbol: "circle", symbolSize: 10,
          lineStyle: { opacity: 0 }, itemStyle: { color: c.link },
          data: rows.map((s) => (s.effectiveness == null ? null : s.effectiveness)) },
      ],
    });
  }

  function affinityColour(c, affinity) {
    if (affinity == null) return c.muted;
    if (affinity > 0.25) return c.ok;
    if (affinity < -0.25) return c.danger;
    return c.warn;
  }

  function graph(data) {
    if (!data.nodes.length) return null;
    const most = Math.max(1, ...data.nodes.map((n) => n.spoken));
    return (c) => ({
      tooltip: {
        formatter: (p) => C.text(p.dataType === "edge"  // names are text, never HTML
          ? `${p.data.names} · ${p.data.count} impression(s) · affinity ${p.data.affinityText}`
          : `${p.data.name} · ${p.data.spoken} lines spoken`),
      },
      series: [{
        type: "graph", layout: "force", roam: true, draggable: true,
        force: { repulsion: 420, edgeLength: [120, 220], gravity: 0.08, layoutAnimation: false },
        label: { show: true, position: "bottom", color: c.text, fontFamily: c.font },
        edgeLabel: { show: false },
        emphasis: { focus: "adjacency", lineStyle: { width: 6 } },
        data: data.nodes.map((n) => ({
          id: n.id, name: n.name, spoken: n.spoken, symbolSize: 24 + 36 * (n.spoken / most),
          itemStyle: { color: c.accent, borderColor: c.surface, borderWidth: 2 },
        })),
        edges: data.edges.map((e) => ({
          source: e.source, target: e.target, count: e.impressions.length,
          names: data.nodes.filter((n) => n.id === e.source || n.id === e.target).map((n) => n.name).join(" ↔ "),
          affinityText: e.affinity == null ? "—" : e.affinity.toFixed(2),
          lineStyle: { width: Math.min(12, 3 + 1.5 * e.impressions.length), color: affinityColour(c, e.affinity), opacity: 0.85 },
        })),
      }],
    });
  }

  function talks(data) {
    const rows = data.talks.slice(0, 15).reverse();
    if (!rows.length) return null;
    return (c) => ({
      legend: { show: false },
      grid: { left: 16, right: 24, top: 8, bottom: 24, containLabel: true },
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" } },
      xAxis: Object.assign({ type: "value", minInterval: 1 }, C.axis(c)),
      yAxis: Object.assign({ type: "category", data: rows.map((t) => `${t.sourceName} → ${t.targetName}`) }, C.axis(c)),
      series: [{ type: "bar", name: "Times", data: rows.map((t) => t.count), barMaxWidth: 22, itemStyle: { color: c.link } }],
    });
  }

  function openPair(edge) {
    const pair = document.getElementById(`pair-${edge.source}-${edge.target}`)
      || document.getElementById(`pair-${edge.target}-${edge.source}`);
    if (!pair) return;
    document.querySelectorAll("details.pair.selected").forEach((d) => d.classList.remove("selected"));
    pair.open = true;
    pair.classList.add("selected");
    pair.scrollIntoView({ block: "nearest", behavior: "smooth" });
    pair.querySelector("summary").focus({ preventScroll: true });
  }

  const BUILDERS = { daily, skills, graph, talks };

  document.querySelectorAll(".chart[data-chart]").forEach(async (el) => {
    const data = await C.load(el);
    if (data == null) return;
    const build = BUILDERS[el.dataset.chart](data, el);
    const chart = C.mount(el, build ? (c) => build(c) : () => null);
    if (chart && el.dataset.chart === "graph") {
      chart.on("click", (p) => { if (p.dataType === "edge") openPair(p.data); });
    }
  });

  const period = document.getElementById("analytics-period");
  if (period) period.addEventListener("change", () => period.form.requestSubmit());
})();
