/* The workspace browser (templates/workspace.html).
 *
 * - Tree: a folder's button opens it in place; its entries are fetched once (HTMX,
 *   /agents/{name}/workspace/tree?path=).
 * - Highlighting: elements with data-lang (a skill file's or a code file's text, code
 *   blocks of rendered Markdown) are highlighted with the vendored highlight.js, in
 *   the a11y-light or a11y-dark colours of the current theme (dashboard.js switches them).
 * - Line numbers: the switch shows or hides the gutter (hidden: long lines wrap); the
 *   choice is remembered.
 * - Editor: Save (or Ctrl+S) PUTs the text as the file's raw bytes (UTF-8) to the
 *   public REST route /api/agents/{id}/workspace/{path}; the API's error is shown. A
 *   file whose lines ended in CRLF keeps them.
 * - Uploads: the file picker, or files and folders dropped anywhere on the page, are
 *   PUT one by one into the current folder (each path segment URL-encoded), with a
 *   progress bar each; a refusal (over the quota, a bad name) is shown with the API's
 *   message. Then the usage, the tree and the view are fetched again.
 * Deleting uses dashboard.js's data-api buttons; downloads are plain links.
 */
(function () {
  "use strict";

  const HIGHLIGHT_CHARS = 200000; // longer texts stay plain: highlighting them would stall
  const LINES_KEY = "opencrab-ws-lines";

  function encodePath(path) {
    return path.split("/").map(encodeURIComponent).join("/");
  }

  function size(bytes) {
    if (bytes < 1024) return bytes + " B";
    let value = bytes;
    for (const unit of ["KB", "MB", "GB", "TB"]) {
      value /= 1024;
      if (value < 1024 || unit === "TB") return (value < 100 ? value.toFixed(1) : Math.round(value)) + " " + unit;
    }
    return bytes + " B";
  }

  /* ---- highlighting, in the theme's colours ---- */
  function highlight(root) {
    root.querySelectorAll("[data-ws-markdown] pre > code[class^='language-']").forEach((code) => {
      code.dataset.lang = code.className.slice("language-".length);
    });
    if (!window.hljs) return;
    root.querySelectorAll("[data-lang]:not([data-highlighted])").forEach((el) => {
      const language = el.dataset.lang;
      el.dataset.highlighted = "1";
      if (!window.hljs.getLanguage(language) || el.textContent.length > HIGHLIGHT_CHARS) return;
      el.innerHTML = window.hljs.highlight(el.textContent, { language: language, ignoreIllegals: true }).value;
    });
  }

  /* ---- the tree: a folder's button shows or hides its entries (HTMX loads them once) ---- */
  document.addEventListener("click", (event) => {
    const button = event.target.closest(".ws-toggle");
    if (!button) return;
    const open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", open ? "true" : "false");
    const list = button.parentElement.querySelector(":scope > ul");
    if (list) list.hidden = !open;
  });

  /* ---- line numbers ---- */
  function showLines(on) {
    document.querySelectorAll("[data-ws-code]").forEach((el) => el.classList.toggle("plain", !on));
  }

  function lineSwitches(root) {
    let on = true;
    try { on = localStorage.getItem(LINES_KEY) !== "off"; } catch (e) { /* storage disabled */ }
    root.querySelectorAll("[data-ws-lines-switch]").forEach((label) => {
      label.hidden = false;
      label.querySelector("input").checked = on;
    });
    showLines(on);
  }

  document.addEventListener("change", (event) => {
    if (!event.target.matches("[data-ws-lines]")) return;
    const on = event.target.checked;
    try { localStorage.setItem(LINES_KEY, on ? "on" : "off"); } catch (e) { /* storage disabled */ }
    showLines(on);
  });

  /* ---- the editor ---- */
  async function save(form) {
    OpenCrab.clearErrors(form);
    const button = form.querySelector("[type=submit]");
    button.setAttribute("aria-busy", "true");
    const value = form.elements.content.value; // a textarea's lines end in "\n" alone
    const text = form.dataset.newline === "crlf" ? value.replace(/\n/g, "\r\n") : value;
    try {
      const data = await OpenCrab.api("PUT", form.dataset.url, new Blob([text]), { contentType: "text/plain; charset=utf-8" });
      form.dataset.saved = value;
      if (form.dataset.created) {
        location.assign(form.dataset.created);
        return;
      }
      OpenCrab.toast("Saved, " + size(data.size) + ".");
    } catch (err) {
      OpenCrab.showError(form, err);
    } finally {
      button.removeAttribute("aria-busy");
    }
  }

  document.addEventListener("submit", (event) => {
    const form = event.target.closest("form[data-ws-editor]");
    if (!form) return;
    event.preventDefault();
    save(form);
  });

  document.addEventListener("keydown", (event) => {
    if (!(event.ctrlKey || event.metaKey) || event.key.toLowerCase() !== "s") return;
    const form = document.querySelector("form[data-ws-editor]");
    if (!form) return;
    event.preventDefault();
    form.requestSubmit();
  });

  function unsaved() {
    const form = document.querySelector("form[data-ws-editor]");
    return form && form.elements.content.value !== form.dataset.saved;
  }

  window.addEventListener("beforeunload", (event) => {
    if (unsaved()) event.preventDefault();
  });

  /* ---- uploads ---- */
  const panel = document.querySelector("[data-ws-upload]");
  let queue = Promise.resolve();

  function uploadUrl(relative) {
    const folder = panel.dataset.folder;
    const path = folder ? folder + "/" + relative : relative;
    return "/api/agents/" + encodeURIComponent(panel.dataset.agent) + "/workspace/" + encodePath(path);
  }

  function send(url, file, progress) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("PUT", url);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.setRequestHeader("Content-Type", "application/octet-stream");
      xhr.upload.addEventListener("progress", (event) => {
        if (event.lengthComputable) progress(event.loaded / event.total);
      });
      xhr.addEventListener("load", () => {
        let data = null;
        try { data = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
        if (xhr.status >= 200 && xhr.status < 300) { resolve(data); return; }
        const message = (data && data.message) || xhr.status + " " + xhr.statusText;
        reject(new OpenCrab.ApiError(xhr.status, data && data.error, message));
      });
      xhr.addEventListener("error", () => {
        reject(new OpenCrab.ApiError(0, "network", "The server did not answer (is it still running?)."));
      });
      xhr.send(file);
    });
  }

  async function uploadAll(items) {
    if (!items.length) return;
    const list = panel.querySelector("[data-ws-uploads]");
    const alert = panel.querySelector("[data-ws-upload-error]");
    alert.hidden = true;
    alert.textContent = "";
    list.replaceChildren();
    const failures = [];
    let uploaded = 0;
    for (const item of items) {
      const row = document.createElement("li");
      const name = document.createElement("span");
      name.className = "ws-upload-name";
      name.textContent = item.path;
      const bar = document.createElement("progress");
      bar.max = 1;
      bar.value = 0;
      bar.setAttribute("aria-label", "Uploading " + item.path);
      const result = document.createElement("span");
      result.className = "muted";
      result.textContent = size(item.file.size);
      row.append(name, bar, result);
      list.append(row);
      try {
        const data = await send(uploadUrl(item.path), item.file, (done) => { bar.value = done; });
        bar.value = 1;
        result.textContent = (data.created ? "uploaded, " : "replaced, ") + size(data.size);
        row.classList.add("ok");
        uploaded += 1;
      } catch (err) {
        bar.remove();
        result.textContent = "not uploaded";
        result.className = "field-error";
        row.classList.add("failed");
        failures.push(item.path + ": " + err.message);
      }
    }
    if (failures.length) {
      alert.textContent = failures.join("\n");
      alert.hidden = false;
    }
    if (uploaded) await refresh();
  }

  function enqueue(items) {
    queue = queue.then(() => uploadAll(items)).catch((err) => OpenCrab.toast(err.message, true));
  }

  /* The usage, the tree and the view again, from the server, after files changed. */
  async function refresh() {
    const response = await fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const id of ["ws-usage", "ws-tree", "ws-view"]) {
      const next = fresh.getElementById(id);
      const old = document.getElementById(id);
      if (!next || !old) continue;
      old.replaceWith(next);
      if (window.htmx) window.htmx.process(next);
      OpenCrab.localTimes(next);
      init(next);
    }
  }

  /* Dropped folders are walked (their files keep their relative paths). */
  function walk(entry, prefix) {
    const path = prefix + entry.name;
    if (entry.isFile) {
      return new Promise((resolve, reject) => entry.file((file) => resolve([{ path: path, file: file }]), reject));
    }
    const reader = entry.createReader();
    const children = [];
    return new Promise((resolve, reject) => {
      const next = () => reader.readEntries((batch) => {
        if (batch.length) { children.push(...batch); next(); return; }
        Promise.all(children.map((child) => walk(child, path + "/")))
          .then((lists) => resolve([].concat(...lists)), reject);
      }, reject);
      next();
    });
  }

  function dropped(transfer) {
    const files = [];
    const folders = [];
    for (const item of Array.from(transfer.items || [])) {
      if (item.kind !== "file") continue;
      const entry = item.webkitGetAsEntry ? item.webkitGetAsEntry() : null;
      if (entry && entry.isDirectory) { folders.push(entry); continue; }
      const file = item.getAsFile();
      if (file) files.push({ path: file.name, file: file });
    }
    if (!transfer.items || !transfer.items.length) {
      for (const file of Array.from(transfer.files || [])) files.push({ path: file.name, file: file });
    }
    return Promise.all(folders.map((entry) => walk(entry, ""))).then((lists) => files.concat(...lists));
  }

  function carriesFiles(event) {
    return !!event.dataTransfer && Array.from(event.dataTransfer.types || []).includes("Files");
  }

  if (panel) {
    panel.hidden = false;
    const zone = document.querySelector("[data-ws]");
    let depth = 0;
    zone.addEventListener("dragenter", (event) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      depth += 1;
      zone.classList.add("dragging");
    });
    zone.addEventListener("dragleave", (event) => {
      if (!carriesFiles(event)) return;
      depth = Math.max(0, depth - 1);
      if (!depth) zone.classList.remove("dragging");
    });
    zone.addEventListener("drop", (event) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      depth = 0;
      zone.classList.remove("dragging");
      dropped(event.dataTransfer).then(enqueue, (err) => OpenCrab.toast(err.message, true));
    });
    document.addEventListener("change", (event) => {
      if (event.target.id !== "ws-files") return;
      const items = Array.from(event.target.files).map((file) => ({ path: file.name, file: file }));
      event.target.value = "";
      enqueue(items);
    });
  }
  /* A file dropped beside the drop area must not replace the page with itself. */
  document.addEventListener("dragover", (event) => { if (carriesFiles(event)) event.preventDefault(); });
  document.addEventListener("drop", (event) => { if (carriesFiles(event)) event.preventDefault(); });

  function init(root) {
    highlight(root);
    lineSwitches(root);
  }

  const editor = document.querySelector("form[data-ws-editor]");
  if (editor) editor.dataset.saved = editor.elements.content.value;
  init(document);
})();
