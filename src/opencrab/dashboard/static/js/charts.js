/* OpenCrab dashboard: ECharts setup shared by the pages that draw charts.
 *
 * Load after the vendored echarts.min.js. `OpenCrabCharts.mount(el, build)` makes a
 * chart on `el` and draws `build(colours)`'s option; it draws again with the new
 * colours when the theme changes (the theme button or the system's setting) and
 * resizes with its box. `build` returning null shows the "no data" state instead.
 *
 *   const chart = OpenCrabCharts.mount(el, (c) => ({ color: c.palette, series: [...] }));
 *   await OpenCrabCharts.load(el)  // el.dataset.src's JSON, or null (the error shown in the box)
 *   OpenCrabCharts.axis(c)    // the axis style of the theme, for xAxis / yAxis
 *
 * Colours come from the page's CSS custom properties (--text, --muted, --border,
 * --surface, --accent, --ok, --warn, --danger, --link, --inner), never hard-coded.
 */
(function () {
  "use strict";

  const darkQuery = matchMedia("(prefers-color-scheme: dark)");
  const mounted = new Set();

  function colours() {
    const css = getComputedStyle(document.documentElement);
    const v = (name) => css.getPropertyValue(name).trim();
    const c = {
      text: v("--text"), muted: v("--muted"), border: v("--border"), surface: v("--surface"),
      surface2: v("--surface-2"), accent: v("--accent"), ok: v("--ok"), warn: v("--warn"),
      danger: v("--danger"), link: v("--link"), inner: v("--inner"), font: v("--font"),
    };
    c.palette = [c.accent, c.link, c.ok, c.inner, c.warn, c.danger, c.muted];
    return c;
  }

  function axis(c) {
    return {
      axisLine: { lineStyle: { color: c.border } },
      axisTick: { lineStyle: { color: c.border } },
      axisLabel: { color: c.muted, fontFamily: c.font },
      splitLine: { lineStyle: { color: c.border, opacity: 0.6 } },
      nameTextStyle: { color: c.muted },
    };
  }

  function base(c) {
    return {
      color: c.palette,
      backgroundColor: "transparent",
      textStyle: { color: c.text, fontFamily: c.font },
      legend: { textStyle: { color: c.text }, top: 0, type: "scroll",
                pageIconColor: c.text, pageTextStyle: { color: c.muted } },
      tooltip: { backgroundColor: c.surface, borderColor: c.border, textStyle: { color: c.text } },
      animation: false,
    };
  }

  function showEmpty(el, text) {
    el.classList.add("chart-empty");
    el.dataset.state = "empty";
    el.textContent = text;
  }

  function mount(el, build) {
    const c = colours();
    const option = build(c);
    if (option == null) {
      showEmpty(el, el.dataset.empty || "No data in this period.");
      return null;
    }
    const chart = echarts.init(el, null, { renderer: "canvas" });
    chart.setOption(Object.assign(base(c), option));
    el.dataset.state = "drawn";
    const entry = { el, chart, build };
    mounted.add(entry);
    new ResizeObserver(() => chart.resize()).observe(el);
    return chart;
  }

  function redraw() {
    const c = colours();
    mounted.forEach((m) => {
      m.chart.setOption(Object.assign(base(c), m.build(c)), { notMerge: true });
    });
  }
  darkQuery.addEventListener("change", redraw);
  new MutationObserver(redraw).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });

  const loads = new Map();  // one request per URL, however many charts draw from it
  function fetchJson(url) {
    if (!loads.has(url)) {
      loads.set(url, fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(async (response) => ({ ok: response.ok, body: await response.json() })));
    }
    return loads.get(url);
  }

  /* The JSON at el.dataset.src, or null after showing the API's error in the box. */
  async function load(el) {
    const { ok, body } = await fetchJson(el.dataset.src);
    if (!ok) {
      showEmpty(el, body.message || "The chart's data could not be read.");
      el.setAttribute("role", "alert");
      return null;
    }
    return body;
  }

  window.OpenCrabCharts = { colours, axis, mount, load, showEmpty };
})();
