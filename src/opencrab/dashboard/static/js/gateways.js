/* The Gateways page (/settings/gateways), through the REST API:
 * - each gateway's form becomes {"settings": {...}} (keys of its [gateway.<name>] table;
 *   read-only keys of the config file are left out; lists one per line, maps
 *   "channel = agent" per line; a secret left empty keeps its stored value, "Remove"
 *   sends ""), PUT /api/gateways/{name}, then POST /api/gateways/{name}/restart;
 * - while a gateway runs here its state is read again every 3 s (a link that drops
 *   shows as retrying, with its error and the next try, without a reload). */
(function () {
  "use strict";

  const fail = (field, message) => Object.assign(new OpenCrab.ApiError(400, "validation_error", field + ": " + message), { field: field });

  function valueOf(el) {
    const kind = el.dataset.kind;
    if (kind === "bool") return el.checked;
    if (kind === "number") return el.value.trim() === "" ? null : Number(el.value);
    if (kind === "list") return el.value.split("\n").map((s) => s.trim()).filter(Boolean);
    if (kind === "map") {
      const out = {};
      el.value.split("\n").forEach((line, i) => {
        if (line.trim() === "") return;
        const at = line.indexOf("=");
        if (at <= 0) throw fail(el.name, "line " + (i + 1) + " is not written channel = agent");
        out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
      });
      return out;
    }
    if (kind === "text") return el.value.trim() === "" ? null : el.value.trim();
    return el.value;
  }

  function settingsOf(form) {
    const settings = {};
    form.querySelectorAll("[data-kind]").forEach((el) => {
      if (el.dataset.fixed !== undefined) return;
      if (el.dataset.kind === "secret") {
        const clear = form.querySelector("[data-clear='" + el.name + "']");
        if (clear && clear.checked) settings[el.name] = "";
        else if (el.value !== "") settings[el.name] = el.value;
        return;
      }
      const value = valueOf(el);
      if (value !== null) settings[el.name] = value;
    });
    return settings;
  }

  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form[data-gateway-form]");
    if (!form) return;
    event.preventDefault();
    OpenCrab.clearErrors(form);
    const name = form.dataset.gatewayForm;
    const url = "/api/gateways/" + encodeURIComponent(name);
    const submit = form.querySelector("[type=submit]");
    submit.setAttribute("aria-busy", "true");
    try {
      await OpenCrab.api("PUT", url, { settings: settingsOf(form) });
      const view = await OpenCrab.api("POST", url + "/restart");
      OpenCrab.toast("Saved " + name + " (" + (view.link ? view.link.state : view.enabled ? "not running" : "off") + ")");
      location.reload();
    } catch (err) {
      OpenCrab.showError(form, err);
    } finally {
      submit.removeAttribute("aria-busy");
    }
  });

  /* ---- the link's state, read again while it is moving ---- */
  const links = ["connected", "starting", "retrying"];
  const moving = () => Array.from(document.querySelectorAll("[data-link]")).some((b) => links.includes(b.textContent));
  const tones = { connected: "ok", starting: "busy", retrying: "warn" };

  async function refresh() {
    if (!moving()) return;
    try {
      const views = await OpenCrab.api("GET", "/api/gateways");
      views.forEach((g) => {
        const badge = document.querySelector("[data-link='" + g.name + "']");
        const line = document.querySelector("[data-link-error='" + g.name + "']");
        if (!badge || !g.link) return;
        badge.textContent = g.link.state;
        badge.className = "badge " + (tones[g.link.state] || "");
        if (line) {
          const retrying = g.link.state === "retrying" && g.link.error;
          line.hidden = !retrying;
          line.textContent = retrying ? g.link.error + " — next try in " + Math.round(g.link.retryIn || 0) + " s (attempt " + g.link.attempts + ")" : "";
        }
      });
    } catch (err) {
      /* the next look tries again */
    }
  }
  setInterval(refresh, 3000);
})();
