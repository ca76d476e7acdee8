/* The persona editor (templates/persona.html).
 *
 * - Sliders show their value as they move; the social style's dot and its automatic
 *   style name follow the two social sliders.
 * - Save sends the whole form with one PUT /api/agents/{id} (persona, identity, prompt,
 *   heartbeat and language in one transaction); the API's errors appear next to the
 *   fields they name (OpenCrab.fieldErrors) and whole above the Save button.
 * - The heartbeat interval's hint warns as it is typed when the interval is not a prime,
 *   in the words of the server's `prime_warning` (core/heartbeat.py) that the CLI prints.
 * - Preview sends the form as it is, saved or not, with the sample message to
 *   POST /api/agents/{id}/preview and shows the model's answer.
 * Values are read from the form by OpenCrab.formBody; the role (built-in or custom) and
 * the custom traits (values, "name: value" lines) are put together here.
 */
(function () {
  "use strict";

  const form = document.getElementById("persona-form");
  if (!form) return;
  const $ = (id) => document.getElementById(id);
  const MAX_IMAGE_BYTES = 256 * 1024;
  form.querySelector("[type=submit]").disabled = false;  /* both need this script */
  $("preview-button").disabled = false;

  /* ---- sliders, social style ---- */
  function quadrant(assertiveness, responsiveness) {  /* opencrab.core.soul.quadrant */
    if (assertiveness >= 0) return responsiveness >= 0 ? "Expressive" : "Driving";
    return responsiveness >= 0 ? "Amiable" : "Analytical";
  }

  function showSlider(input) {
    const output = $(input.dataset.output);
    if (output) output.textContent = Number(input.value).toFixed(2);
  }

  function showSocial() {
    const a = Number($("slider-assertiveness").value);
    const r = Number($("slider-responsiveness").value);
    const dot = $("quadrant-dot");
    dot.style.setProperty("--x", ((a + 1) / 2).toFixed(3));
    dot.style.setProperty("--y", ((1 - r) / 2).toFixed(3));
    const select = $("social-style-name");
    const auto = select.querySelector("option[data-auto]");
    const derived = quadrant(a, r);
    auto.textContent = "Automatic: " + derived;
    const shown = select.value || derived;
    document.querySelectorAll(".quadrant [data-style]").forEach((el) => {
      el.classList.toggle("current", el.dataset.style === shown);
    });
  }

  form.querySelectorAll("input[type=range]").forEach((input) => {
    input.addEventListener("input", () => {
      showSlider(input);
      if (input.name.startsWith("soul.socialStyle.")) showSocial();
    });
  });
  $("social-style-name").addEventListener("change", showSocial);
  showSocial();

  /* ---- role ---- */
  const role = $("identity-role");
  const customRole = $("identity-role-custom");
  role.addEventListener("change", () => {
    customRole.hidden = role.value !== "custom";
    if (!customRole.hidden) customRole.focus();
  });

  /* ---- image ---- */
  const imageUrl = $("identity-image-url");
  const image = $("identity-image");
  function showImage() {
    const url = imageUrl.value.trim();
    const local = url.startsWith("data:image/") || (url.startsWith("/") && !url.startsWith("//"));
    if (local) image.src = url; else image.removeAttribute("src");
    image.hidden = !local;
    $("identity-initial").hidden = local;
  }
  imageUrl.addEventListener("input", showImage);
  $("identity-name").addEventListener("input", (event) => {
    $("identity-initial").textContent = (event.target.value.trim() || "?").charAt(0).toUpperCase();
  });
  $("identity-image-pick").addEventListener("click", () => $("identity-image-file").click());
  $("identity-image-clear").addEventListener("click", () => { imageUrl.value = ""; showImage(); changed(); });
  $("identity-image-file").addEventListener("change", (event) => {
    const file = event.target.files[0];
    event.target.value = "";
    if (!file) return;
    OpenCrab.clearErrors(form);
    if (file.size > MAX_IMAGE_BYTES) {
      OpenCrab.fieldErrors(form, "identity.imageUrl: " + file.name + " has " + Math.ceil(file.size / 1024) +
        " KB; an image file may have at most 256 KB");
      return;
    }
    const reader = new FileReader();
    reader.onload = () => { imageUrl.value = reader.result; showImage(); changed(); };
    reader.readAsDataURL(file);
  });

  /* ---- language: the text fields follow it (their lang); the page carries the sample
     message of the agent's saved language only, so an untouched sample stays as it is ---- */
  const language = $("agent-language");
  const sample = $("preview-message");
  let shownLanguage = language.value;
  language.addEventListener("change", () => {
    const next = language.value;
    if (sample.value.trim() === (sample.dataset["sample" + cap(shownLanguage)] || "").trim()) {
      sample.value = sample.dataset["sample" + cap(next)] || sample.value;
    }
    document.querySelectorAll(".persona-layout [lang]").forEach((el) => { el.lang = next; });
    shownLanguage = next;
  });
  function cap(text) { return text.charAt(0).toUpperCase() + text.slice(1); }

  /* ---- heartbeat: a non-prime interval warns (core/heartbeat.py prime_warning) ---- */
  function isPrime(n) {
    if (n < 2) return false;
    if (n % 2 === 0) return n === 2;
    for (let d = 3; d * d <= n; d += 2) if (n % d === 0) return false;
    return true;
  }
  function primeWarning(n) {
    if (isPrime(n)) return null;
    let below = null;
    for (let k = n - 1; k > 1; k--) if (isPrime(k)) { below = k; break; }
    let above = n + 1;
    while (!isPrime(above)) above++;
    const nearest = (below === null ? [above] : [below, above]).join(", ");
    return "heartbeat interval " + n + " s is not a prime; nearest primes: " + nearest +
      " (prime intervals keep agents from ticking in step)";
  }
  const interval = $("heartbeat-interval");
  const intervalHint = $("heartbeat-hint");
  interval.addEventListener("input", () => {
    const n = Number(interval.value);
    const warning = Number.isInteger(n) && n >= 1 ? primeWarning(n) : null;
    if (warning) {
      const span = document.createElement("span");
      span.className = "warn-text";
      span.textContent = warning + ".";
      intervalHint.replaceChildren(span);
    } else {
      intervalHint.textContent = "A prime number keeps agents from ticking in step.";
    }
  });

  /* ---- the body sent to the API ---- */
  function fail(field, message) {
    return Object.assign(new OpenCrab.ApiError(400, "validation_error", field + ": " + message), { field: field });
  }

  /* "name: value" lines; a value that reads as JSON (a number, a list, "quoted") is parsed. */
  function traitsOf(text) {
    const traits = {};
    text.split("\n").forEach((line, index) => {
      if (!line.trim()) return;
      let name, rest;
      const quoted = /^\s*("(?:[^"\\]|\\.)*")\s*:(.*)$/.exec(line);
      if (quoted) { name = JSON.parse(quoted[1]); rest = quoted[2]; } else {
        const at = line.indexOf(":");
        if (at <= 0 || !line.slice(0, at).trim()) {
          throw fail("soul.customTraits", "line " + (index + 1) + " is not \"name: value\"");
        }
        name = line.slice(0, at).trim();
        rest = line.slice(at + 1);
      }
      if (name === "values") throw fail("soul.customTraits", "line " + (index + 1) + ": write values in the Values field");
      traits[name] = valueOf(rest.trim());
    });
    return traits;
  }

  function valueOf(text) {
    if (/^(-?\d|\[|\{|"|true$|false$|null$)/.test(text)) {
      try { return JSON.parse(text); } catch (e) { /* plain text after all */ }
    }
    return text;
  }

  function personaBody() {
    const body = OpenCrab.formBody(form);
    body.identity.role = role.value === "custom" ? { custom: customRole.value } : role.value;
    const values = $("soul-values").value.split("\n").map((s) => s.trim()).filter(Boolean);
    const traits = traitsOf($("soul-traits").value);
    if (values.length) traits.values = values;
    body.soul.customTraits = Object.keys(traits).length ? traits : null;
    return body;
  }

  /* ---- save ---- */
  const dirty = $("persona-dirty");
  const saveError = form.querySelector(".save-bar .form-error");
  function changed() { dirty.hidden = false; }
  form.addEventListener("input", changed);
  form.addEventListener("change", changed);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    OpenCrab.clearErrors(form);
    const submit = form.querySelector("[type=submit]");
    submit.setAttribute("aria-busy", "true");
    try {
      await OpenCrab.api("PUT", form.dataset.url, personaBody());
      dirty.hidden = true;
      OpenCrab.toast("Persona saved");
    } catch (err) {
      OpenCrab.fieldErrors(form, err.message);
      saveError.textContent = "Not saved: " + err.message.replace(/(^|; )body\./g, "$1");
      saveError.hidden = false;
    } finally {
      submit.removeAttribute("aria-busy");
    }
  });

  /* ---- preview ---- */
  const button = $("preview-button");
  const error = $("preview-error");
  const result = $("preview-result");

  function money(value) {
    return value === null || value === undefined ? "cost unknown" : window.OpenCrab.money(value);
  }

  function showPreview(asked, data, body) {
    $("preview-asked").textContent = asked;
    $("preview-who").textContent = (body.identity && body.identity.name) || $("preview-who").textContent;
    const thought = $("preview-thought");
    thought.textContent = data.thought || "";
    thought.hidden = !data.thought;
    const reply = $("preview-reply");
    reply.textContent = data.reply || "(no words: it chose only the actions below)";
    reply.classList.toggle("muted", !data.reply);
    const actions = $("preview-actions");
    actions.replaceChildren(...data.actions.map((a) => {
      const li = document.createElement("li");
      const name = document.createElement("code");
      name.textContent = a.name;
      li.append("Would call ", name, " " + JSON.stringify(a.arguments) + " (not run in a preview)");
      return li;
    }));
    actions.hidden = data.actions.length === 0;
    const tokens = data.usage.inputTokens + " in / " + data.usage.outputTokens + " out tokens";
    const took = data.latencyMs != null ? " · " + (data.latencyMs / 1000).toFixed(1) + " s" : "";
    $("preview-meta").textContent = data.provider + " · " + data.model + " · " + tokens + " · " + money(data.costUsd) + took;
    $("preview-system").textContent = data.systemPrompt;
    result.querySelectorAll("[lang]").forEach((el) => { el.lang = body.language || el.lang; });
    result.hidden = false;
  }

  button.addEventListener("click", async () => {
    OpenCrab.clearErrors(form);
    error.hidden = true;
    button.setAttribute("aria-busy", "true");
    button.disabled = true;
    const asked = sample.value;
    try {
      const body = personaBody();
      delete body.heartbeat;
      const data = await OpenCrab.api("POST", form.dataset.previewUrl, Object.assign(body, { message: asked }));
      showPreview(asked, data, body);
    } catch (err) {
      const named = OpenCrab.fieldErrors(form, err.message);
      error.textContent = named ? "Not previewed: " + err.message : err.message;
      error.hidden = false;
    } finally {
      button.removeAttribute("aria-busy");
      button.disabled = false;
    }
  });
})();
