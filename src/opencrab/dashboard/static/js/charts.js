/* OpenCrab dashboard: ECharts setup shared by the pages that draw charts.
 *
 * Load after the vendored echarts.min.js. `OpenCrabCharts.mount(el, build)` makes a
 * chart on `el` and draws `build(colours)`'s option; it draws again with the new
 * colours when the theme changes (the theme button or the system's setting) and
 * resizes with its box. `build` returning null shows the "no data" state instead.
 *
 *   const chart = OpenCrabCharts.mount(el, (c) => ({ series: [...] }), { renderer: "svg" });
 *   await OpenCrabCharts.load(el)  // el.dataset.src's JSON, or null (the error shown in the box)
 *   OpenCrabCharts.axis(c, {type: "value"})  // the axis style of the theme, for xAxis / yAxis
 *   OpenCrabCharts.base(c)    // the options every chart shares (pages that draw by themselves)
 *   OpenCrabCharts.onTheme(f) // call f() when the theme changes (pages that draw by themselves)
 *   OpenCrabCharts.axisMoney(v) // dollars for axis ticks and colour scales
 *   OpenCrabCharts.text(v)    // a value as text inside a tooltip formatter's HTML
 *   OpenCrabCharts.named(c, names)(name) // the itemStyle of a model's (provider's, agent's) series
 *
 * A tooltip `formatter` returns HTML, which ECharts puts into the page as it is: every
 * value from the API (agent, model, skill and task names, labels) goes through text()
 * there, or an agent named `<meta http-equiv=refresh …>` would redirect the browser on
 * hover. ECharts' own tooltips (no formatter) escape what they show.
 * Colours come from the page's CSS custom properties (--text, --muted, --border,
 * --surface, --accent, --ok, --warn, --danger, --link, --inner; the series palette
 * --chart-1..8 and the heat-map ends --heat-low/--heat-high, all in dashboard.css),
 * never hard-coded, so every page's charts share one palette in both themes.
 *
 * A series (or a pie slice) that stands for a model, a provider or an agent takes its
 * colour from named(): a hash of the name into --chart-1..7 (--chart-8, the neutral, is
 * left for counts), so "gpt-5.2" has the same colour on every chart of every page, whatever
 * order the data came in, and the same place in the palette in both themes. Two names of
 * one chart that hash alike are told apart: the one sorted first keeps the colour, the
 * other takes the next free one (so it too is the same on every chart of those names).
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
      low: v("--heat-low"), high: v("--heat-high"),
    };
    c.palette = [1, 2, 3, 4, 5, 6, 7, 8].map((i) => v("--chart-" + i));
    return c;
  }

  const NAMED = 7;  // --chart-1..7; --chart-8 is the palette's neutral

  /* The palette index of `name`: FNV-1a over its code points, the same in every browser. */
  function nameIndex(name) {
    let hash = 0x811c9dc5;
    for (const ch of String(name)) {
      hash ^= ch.codePointAt(0);
      hash = Math.imul(hash, 0x01000193);
    }
    return (hash >>> 0) % NAMED;
  }

  /* name => the itemStyle of the series or slice standing for it, for a chart drawing
     `names` (see the header): each its hashed colour, unless a name sorted before it in
     this chart has it already; then the next free one. */
  function named(c, names) {
    const taken = new Set();
    const styles = new Map();
    [...new Set(names.map(String))].sort().forEach((name) => {
      let index = nameIndex(name);
      for (let tries = 0; tries < NAMED && taken.has(index); tries++) index = (index + 1) % NAMED;
      taken.add(index);
      styles.set(name, { color: c.palette[index] });
    });
    return (name) => styles.get(String(name));
  }

  function axis(c, extra) {
    return Object.assign({
      axisLine: { lineStyle: { color: c.border } },
      axisTick: { lineStyle: { color: c.border } },
      axisLabel: { color: c.muted, fontFamily: c.font },
      splitLine: { lineStyle: { color: c.border, opacity: 0.6 } },
      nameTextStyle: { color: c.muted },
    }, extra || {});
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

  /* Dollars on an axis or a colour scale: as many digits as the tick needs, never the
     "<$0.0001" of OpenCrab.money, which would label every small tick alike. */
  function axisMoney(value) {
    if (!value) return "$0";
    if (Math.abs(value) >= 1) return OpenCrab.money(value);
    return "$" + (Math.abs(value) < 1e-6 ? value.toExponential(1) : String(Number(value.toPrecision(3))));
  }

  /* `value` as HTML text: <, >, &, " and ' escaped (for tooltip formatters). */
  function htmlText(value) {
    return echarts.format.encodeHTML(String(value));
  }

  function showEmpty(el, text) {
    el.classList.add("chart-empty");
    el.dataset.state = "empty";
    el.textContent = text;
  }

  function mount(el, build, opts) {
    const c = colours();
    const option = build(c);
    if (option == null) {
      showEmpty(el, el.dataset.empty || "No data in this period.");
      return null;
    }
    const chart = echarts.getInstanceByDom(el) ||
      echarts.init(el, null, { renderer: (opts && opts.renderer) || "canvas" });
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
  function onTheme(f) {
    darkQuery.addEventListener("change", f);
    new MutationObserver(f).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  }
  onTheme(redraw);

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

  window.OpenCrabCharts = { colours, axis, axisMoney, base, mount, load, showEmpty, onTheme, text: htmlText, named };
})();
