/* The MCP page (/settings/mcp), through the REST API:
 * - the add and edit forms (POST /api/mcp/servers, PUT /api/mcp/servers/{name}): the
 *   transport switch shows its fields; "NAME=value" and "Name: value" lines become
 *   objects, "one per line" fields lists; a bearer token left empty keeps the stored one;
 * - per-agent switches (PUT /api/mcp/servers/{name}/agents/{id}): grant or revoke every
 *   tool of the server;
 * - "Call…" opens the call form under the server with an arguments skeleton from the
 *   tool's input schema (POST …/tools/{tool}/call) and shows text, structured content,
 *   other content and errors;
 * - while a server is starting or restarting its state is read again every 3 s.
 * Removing a server is a plain data-api button (dashboard.js). */
(function () {
  "use strict";

  const fail = (field, message) => Object.assign(new OpenCrab.ApiError(400, "validation_error", field + ": " + message), { field: field });

  function pairs(form, name, sep) {
    const out = {};
    const lines = form.elements[name].value.split("\n");
    lines.forEach((line, i) => {
      if (line.trim() === "") return;
      const at = line.indexOf(sep);
      if (at <= 0) throw fail(name, "line " + (i + 1) + " is not written " + (sep === "=" ? "NAME=value" : "Name: value"));
      out[line.slice(0, at).trim()] = line.slice(at + sep.length).trim();
    });
    return out;
  }

  const listOf = (form, name) => form.elements[name].value.split("\n").map((s) => s.trim()).filter(Boolean);

  function serverBody(form) {
    const transport = form.querySelector("input[name=transport]:checked").value;
    const body = {
      callTimeoutSecs: Number(form.elements.callTimeoutSecs.value),
      startTimeoutSecs: Number(form.elements.startTimeoutSecs.value),
    };
    if (form.elements.name) body.name = form.elements.name.value.trim();
    if (transport === "stdio") {
      body.command = form.elements.command.value.trim();
      body.args = listOf(form, "args");
      body.env = pairs(form, "env", "=");
      body.secretEnv = pairs(form, "secretEnv", "=");
      body.readPaths = listOf(form, "readPaths");
      body.network = form.elements.network.checked;
    } else {
      body.url = form.elements.url.value.trim();
      body.headers = pairs(form, "headers", ":");
      body.secretHeaders = pairs(form, "secretHeaders", ":");
      body.allowPrivate = form.elements.allowPrivate.checked;
      const token = form.elements.bearerToken.value;
      const clear = form.elements.clearToken;
      if (clear && clear.checked) body.bearerToken = "";
      else if (token !== "") body.bearerToken = token;
    }
    return body;
  }

  document.addEventListener("change", (event) => {
    const radio = event.target.closest("input[name=transport]");
    if (!radio) return;
    const form = radio.form;
    form.querySelectorAll("[data-transport]").forEach((el) => { el.hidden = el.dataset.transport !== radio.value; });
  });

  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form[data-mcp-form]");
    if (!form) return;
    event.preventDefault();
    OpenCrab.clearErrors(form);
    const submit = form.querySelector("[type=submit]");
    submit.setAttribute("aria-busy", "true");
    try {
      const view = await OpenCrab.api(form.dataset.method, form.dataset.url, serverBody(form));
      OpenCrab.toast(form.dataset.done + " (" + view.state + ")");
      location.hash = "";
      location.reload();
    } catch (err) {
      OpenCrab.showError(form, err);
    } finally {
      submit.removeAttribute("aria-busy");
    }
  });

  /* ---- per-agent enablement ---- */
  document.addEventListener("change", async (event) => {
    const box = event.target.closest("input[data-grant]");
    if (!box) return;
    const server = box.dataset.grantServer;
    box.disabled = true;
    try {
      await OpenCrab.api("PUT", "/api/mcp/servers/" + encodeURIComponent(server) + "/agents/" + encodeURIComponent(box.dataset.grant), { enabled: box.checked });
      const partial = box.closest("li").querySelector(".badge");
      if (partial) partial.remove();
      OpenCrab.toast((box.checked ? "Granted " : "Revoked ") + server + "'s tools");
    } catch (err) {
      box.checked = !box.checked;
      OpenCrab.toast(err.message, true);
    } finally {
      box.disabled = false;
    }
  });

  /* ---- the call form ---- */
  const panel = document.getElementById("call");
  const callForm = panel && panel.querySelector("form[data-call-form]");
  const target = { server: "", tool: "" };  // the tool the call form calls

  function skeleton(schema) {
    const out = {};
    const props = (schema && schema.properties) || {};
    const required = new Set((schema && schema.required) || Object.keys(props));
    for (const [name, prop] of Object.entries(props)) {
      if (!required.has(name)) continue;
      if (prop && "default" in prop) { out[name] = prop.default; continue; }
      const type = prop && (Array.isArray(prop.type) ? prop.type[0] : prop.type);
      out[name] = { string: "", integer: 0, number: 0, boolean: false, array: [], object: {} }[type] ?? null;
    }
    return out;
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-call-tool]");
    if (button) {
      const row = button.closest("tr");
      const schema = JSON.parse(row.querySelector(".schema code").textContent);
      target.server = button.dataset.callServer;
      target.tool = button.dataset.callTool;
      panel.querySelector("[data-call-name]").textContent = row.dataset.tool;
      callForm.elements.arguments.value = JSON.stringify(skeleton(schema), null, 2);
      panel.querySelector("[data-call-result]").hidden = true;
      OpenCrab.clearErrors(callForm);
      button.closest("li.server").querySelector(".mcp-tools").after(panel);
      panel.hidden = false;
      panel.scrollIntoView({ block: "nearest" });
      callForm.elements.arguments.focus();
      return;
    }
    if (event.target.closest("[data-call-close]")) panel.hidden = true;
  });

  function show(name, value) {
    const box = panel.querySelector("[data-call-" + name + "-box]");
    box.hidden = value === null || value === undefined || (Array.isArray(value) && value.length === 0);
    if (!box.hidden) panel.querySelector("[data-call-" + name + "]").textContent = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  if (callForm) callForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    OpenCrab.clearErrors(callForm);
    const submit = callForm.querySelector("[type=submit]");
    submit.setAttribute("aria-busy", "true");
    try {
      let args;
      try { args = JSON.parse(callForm.elements.arguments.value || "{}"); } catch (err) { throw fail("arguments", "not valid JSON (" + err.message + ")"); }
      if (args === null || typeof args !== "object" || Array.isArray(args)) throw fail("arguments", "must be a JSON object");
      const url = "/api/mcp/servers/" + encodeURIComponent(target.server) + "/tools/" + encodeURIComponent(target.tool) + "/call";
      const result = await OpenCrab.api("POST", url, { arguments: args });
      const out = panel.querySelector("[data-call-result]");
      const outcome = panel.querySelector("[data-call-outcome]");
      outcome.className = "badge " + (result.success ? "ok" : "danger");
      outcome.textContent = result.success ? "success" : "error";
      const error = panel.querySelector("[data-call-error]");
      error.hidden = !result.error;
      error.textContent = result.error || "";
      show("text", result.text);
      show("structured", result.structured);
      show("content", result.content);
      out.hidden = false;
    } catch (err) {
      OpenCrab.showError(callForm, err);
    } finally {
      submit.removeAttribute("aria-busy");
    }
  });

  /* ---- a starting or restarting server's state, read again ---- */
  const moving = () => [...document.querySelectorAll("[data-state]")].some((el) => el.textContent === "starting" || el.textContent === "restarting");
  async function refresh() {
    if (!moving()) return;
    try {
      const servers = await OpenCrab.api("GET", "/api/mcp/servers");
      for (const s of servers) {
        const badge = document.querySelector('[data-state="' + CSS.escape(s.name) + '"]');
        if (!badge || badge.textContent === s.state) continue;
        if (s.state === "running") { location.reload(); return; }
        badge.textContent = s.state;
        badge.className = "badge " + ({ failed: "danger", restarting: "warn", starting: "busy" }[s.state] || "");
        const error = document.querySelector('[data-last-error="' + CSS.escape(s.name) + '"]');
        if (error) { error.hidden = !s.lastError; error.textContent = s.lastError ? "Last error: " + s.lastError : ""; }
      }
    } catch (err) { /* the next round tries again */ }
    setTimeout(refresh, 3000);
  }
  setTimeout(refresh, 3000);
})();
