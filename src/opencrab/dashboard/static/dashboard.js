/* OpenCrab dashboard: the little script every page loads.
 *
 * - Theme: the button toggles html[data-theme] and remembers it (localStorage); the
 *   highlight.js stylesheets of a page (<link data-hljs-theme="light|dark">) follow it.
 * - Times: <time datetime> elements are shown in the browser's time zone (data-style
 *   "age": how long ago, the date in the tooltip).
 * - API forms: <form data-api="PUT /api/agents/x/soul" data-then="reload"> sends its
 *   fields as JSON to the public REST API. Field names are dotted paths
 *   ("soul.personality.openness"); data-type on a field says how to read it
 *   (number, int, bool, list, lines, json); data-optional leaves an empty field out.
 *   An API error is shown in the form's .form-error, and next to each field it names
 *   (the API's message is "field.path: ...", several joined by "; "). data-then: "reload", a URL
 *   ("{id}" and "{name}" filled from the response), or "event:NAME" (an HTMX trigger).
 * - API buttons: <button data-api="DELETE /api/..." data-confirm="..." data-then="/">.
 * - OpenCrab.api(method, url, body) for page scripts; it throws ApiError with the
 *   API's message (and its whole error body as `body`, e.g. a skill file error's line).
 *   OpenCrab.formBody(form), showError(form, err), fieldErrors(form, message) and
 *   clearErrors(form) let a page script send a form its own way.
 */
(function () {
  "use strict";

  class ApiError extends Error {
    constructor(status, code, message, body) { super(message); this.status = status; this.code = code; this.body = body; }
  }

  async function api(method, url, body, options) {
    const init = { method: method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (body instanceof Blob || body instanceof ArrayBuffer) {
      init.body = body;
      init.headers["Content-Type"] = (options && options.contentType) || "application/octet-stream";
    } else if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    let response;
    try {
      response = await fetch(url, init);
    } catch (err) {
      throw new ApiError(0, "network", "The server did not answer (is it still running?).");
    }
    const type = response.headers.get("content-type") || "";
    const data = type.includes("json") ? await response.json().catch(() => null) : null;
    if (!response.ok) {
      const message = (data && (data.message || (data.error && data.error.message))) || response.status + " " + response.statusText;
      throw new ApiError(response.status, data && data.error, message, data);
    }
    return data === null && !type.includes("json") ? response : data;
  }

  /* US dollars, the way the server's `money` filter writes them (dashboard/render.py). */
  function money(value) {
    if (value === null || value === undefined) return "–";
    if (value === 0) return "$0";
    if (value > 0 && value < 0.0001) return "<$0.0001";
    return value >= 1
      ? "$" + value.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })
      : "$" + value.toFixed(4);
  }

  function toast(message, isError) {
    const el = document.getElementById("toast");
    if (!el) return;
    el.textContent = message;
    el.classList.toggle("error", !!isError);
    el.hidden = false;
    clearTimeout(el._timer);
    el._timer = setTimeout(() => { el.hidden = true; }, isError ? 8000 : 3000);
  }

  /* ---- theme ---- */
  function currentTheme() {
    const set = document.documentElement.dataset.theme;
    if (set) return set;
    return matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  function codeTheme() {
    const theme = currentTheme();
    document.querySelectorAll("link[data-hljs-theme]").forEach((link) => {
      link.media = link.dataset.hljsTheme === theme ? "all" : "not all";
    });
  }
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", codeTheme);
  new MutationObserver(codeTheme).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  codeTheme();
  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-theme-toggle]");
    if (!button) return;
    const next = currentTheme() === "dark" ? "light" : "dark";
    document.documentElement.dataset.theme = next;
    try { localStorage.setItem("opencrab-theme", next); } catch (e) { /* private mode */ }
  });

  document.addEventListener("click", (event) => {
    if (event.target.closest("[data-history-back]")) history.back();
  });

  /* ---- local times ---- */
  const formats = {
    datetime: new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" }),
    date: new Intl.DateTimeFormat(undefined, { dateStyle: "medium" }),
    time: new Intl.DateTimeFormat(undefined, { timeStyle: "medium" }),
  };
  const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
  const steps = [["year", 31536e6], ["month", 2592e6], ["week", 6048e5], ["day", 864e5], ["hour", 36e5], ["minute", 6e4]];
  /* data-style="age": "5 minutes ago" (the date itself in the tooltip) */
  function age(date) {
    const ms = date.getTime() - Date.now();
    for (const [unit, size] of steps) {
      if (Math.abs(ms) >= size) return relative.format(Math.round(ms / size), unit);
    }
    return relative.format(0, "minute");
  }
  function localTimes(root) {
    root.querySelectorAll("time[datetime]:not([data-local])").forEach((el) => {
      const date = new Date(el.getAttribute("datetime"));
      if (isNaN(date)) return;
      el.title = el.dataset.style === "age" ? formats.datetime.format(date) : el.textContent;
      el.textContent = el.dataset.style === "age" ? age(date) : (formats[el.dataset.style] || formats.datetime).format(date);
      el.dataset.local = "1";
    });
  }

  /* ---- forms to the API ---- */
  function setPath(target, path, value) {
    const keys = path.split(".");
    let node = target;
    keys.slice(0, -1).forEach((key) => { node = node[key] = node[key] || {}; });
    node[keys[keys.length - 1]] = value;
  }

  function readField(el) {
    const type = el.dataset.type || (el.type === "number" || el.type === "range" ? "number" : "text");
    if (type === "bool") return el.checked;
    const raw = el.value;
    if (raw.trim() === "" && el.hasAttribute("data-optional")) return undefined;
    switch (type) {
      case "number": return raw.trim() === "" ? null : Number(raw);
      case "int": return raw.trim() === "" ? null : parseInt(raw, 10);
      case "list": return raw.split(",").map((s) => s.trim()).filter(Boolean);
      case "lines": return raw.split("\n").map((s) => s.trim()).filter(Boolean);
      case "json": return raw.trim() === "" ? null : JSON.parse(raw);
      default: return raw;
    }
  }

  function formBody(form) {
    const body = {};
    for (const el of form.elements) {
      if (!el.name || el.disabled || el.dataset.skip !== undefined) continue;
      if ((el.type === "radio") && !el.checked) continue;
      if (el.type === "checkbox" && el.dataset.type !== "bool") {
        if (el.checked) setPath(body, el.name, el.value);
        continue;
      }
      let value;
      try { value = readField(el); } catch (err) {
        throw Object.assign(new ApiError(400, "validation_error", el.name + ": not valid JSON (" + err.message + ")"), { field: el.name });
      }
      if (value !== undefined) setPath(body, el.name, value);
    }
    return body;
  }

  function clearErrors(form) {
    form.querySelectorAll(".form-error, [data-error-for]").forEach((el) => { el.hidden = true; el.textContent = ""; });
    form.querySelectorAll("[aria-invalid]").forEach((el) => el.removeAttribute("aria-invalid"));
  }

  /* "soul.personality.openness: Input should be ..." -> the field soul.personality.openness */
  function fieldOf(form, message, prefix) {
    const match = /^([A-Za-z0-9_.\[\]]+): /.exec(message || "");
    if (!match) return null;
    const path = match[1].replace(/^body\./, "").replace(/\[(\d+)\]/g, ".$1");
    const camelToSnake = (s) => s.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase());
    const candidates = [path, camelToSnake(path), (prefix || "") + path, (prefix || "") + camelToSnake(path)];
    for (const name of candidates) {
      const slot = form.querySelector('[data-error-for="' + CSS.escape(name) + '"]');
      if (slot) return { slot: slot, input: form.querySelector('[name="' + CSS.escape(name) + '"]'), message: message.slice(match[0].length) };
    }
    return null;
  }

  /* Each "path: message" part of an error (the API joins several with "; ") is shown next
     to its field; the first of those fields on the page gets the focus. True when any
     field was named. */
  function fieldErrors(form, message, prefix) {
    let named = false;
    for (const part of (message || "").split(/; (?=[A-Za-z0-9_.\[\]]+: )/)) {
      const hit = fieldOf(form, part, prefix);
      if (!hit) continue;
      hit.slot.textContent = hit.slot.hidden ? hit.message : hit.slot.textContent + " " + hit.message;
      hit.slot.hidden = false;
      if (hit.input) hit.input.setAttribute("aria-invalid", "true");
      named = true;
    }
    const first = form.querySelector('[aria-invalid="true"]');
    if (first) first.focus();
    return named;
  }

  function showError(form, err) {
    const hit = fieldErrors(form, err.message, form.dataset.errorPrefix);
    const box = form.querySelector(".form-error");
    if (box) { box.textContent = err.message; box.hidden = false; } else if (!hit) { toast(err.message, true); }
  }

  function fill(template, data) {
    return template.replace(/\{(\w+)\}/g, (_, key) => encodeURIComponent(data && data[key] != null ? data[key] : ""));
  }

  function after(el, data) {
    const then = el.dataset.then || "";
    if (el.dataset.done) toast(el.dataset.done);
    if (then === "reload") { location.reload(); return; }
    if (then.startsWith("event:")) { document.body.dispatchEvent(new CustomEvent(then.slice(6), { bubbles: true, detail: data })); return; }
    if (then) { location.assign(fill(then, data)); }
  }

  function endpoint(el) {
    const [method, ...rest] = el.dataset.api.trim().split(/\s+/);
    return [method.toUpperCase(), rest.join(" ")];
  }

  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form[data-api]");
    if (!form) return;
    event.preventDefault();
    clearErrors(form);
    const submit = form.querySelector("[type=submit]");
    if (submit) submit.setAttribute("aria-busy", "true");
    try {
      const [method, url] = endpoint(form);
      const data = await api(method, url, method === "GET" || method === "DELETE" ? undefined : formBody(form));
      form.dispatchEvent(new CustomEvent("api:done", { bubbles: true, detail: data }));
      after(form, data);
    } catch (err) {
      showError(form, err);
    } finally {
      if (submit) submit.removeAttribute("aria-busy");
    }
  });

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-api]");
    if (!button || button.form && button.form.matches("form[data-api]") && button.type === "submit") return;
    event.preventDefault();
    if (button.dataset.confirm && !confirm(button.dataset.confirm)) return;
    button.setAttribute("aria-busy", "true");
    try {
      const [method, url] = endpoint(button);
      const body = button.dataset.body ? JSON.parse(button.dataset.body) : undefined;
      const data = await api(method, url, body);
      button.dispatchEvent(new CustomEvent("api:done", { bubbles: true, detail: data }));
      after(button, data);
    } catch (err) {
      toast(err.message, true);
    } finally {
      button.removeAttribute("aria-busy");
    }
  });

  /* HTMX: a failed request shows the API's message; new content gets local times. */
  document.addEventListener("htmx:responseError", (event) => {
    const xhr = event.detail.xhr;
    let message = xhr.status + " " + xhr.statusText;
    try { const data = JSON.parse(xhr.responseText); message = data.message || message; } catch (e) { /* HTML */ }
    toast(message, true);
  });
  document.addEventListener("htmx:afterSwap", (event) => localTimes(event.target));
  document.addEventListener("DOMContentLoaded", () => localTimes(document));

  window.OpenCrab = { api: api, money: money, ApiError: ApiError, toast: toast, showError: showError, fieldErrors: fieldErrors, clearErrors: clearErrors, localTimes: localTimes, formBody: formBody };
})();
