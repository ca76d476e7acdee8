/* OpenCrab dashboard: the skills pages.
 *
 * - Switches: <input data-skill-toggle="/api/.../toggle"> posts {active} to the REST API
 *   and shows what the API answered (on an error the switch goes back).
 * - Highlighting: <pre class="code-view" data-highlight><code>skill file</code></pre> is
 *   shown with numbered lines, the frontmatter highlighted as YAML, the body as Markdown
 *   (highlight.js, vendored); dashboard.js gives it the page's light or dark theme.
 * - Editor: [data-editor] lays the highlighted lines under a transparent textarea (the
 *   textarea stays the control: typing, selection, Tab leaving it, screen readers).
 *   <form data-skill-form="POST /api/..."> sends the text as `markdown`; an error in it
 *   (400 invalid_skill_file with a `line`) marks that line and says why beside the editor.
 */
(function () {
  "use strict";

  /* ---- highlighting into lines ---- */
  function escapeHtml(text) {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function highlight(text, language) {
    if (!window.hljs || !text) return escapeHtml(text);
    return window.hljs.highlight(text, { language: language, ignoreIllegals: true }).value;
  }

  /* highlight.js output split at newlines: spans open at a line's end are closed and reopened. */
  function splitLines(html) {
    const lines = [];
    const open = [];
    let current = "";
    const token = /(<span[^>]*>)|(<\/span>)|(\n)|([^<\n]+)/g;
    let match;
    while ((match = token.exec(html))) {
      if (match[1]) { open.push(match[1]); current += match[1]; }
      else if (match[2]) { open.pop(); current += match[2]; }
      else if (match[3]) { lines.push(current + "</span>".repeat(open.length)); current = open.join(""); }
      else current += match[4];
    }
    lines.push(current);
    return lines;
  }

  /* The skill file's lines, highlighted: frontmatter as YAML, the rest as Markdown. */
  function skillLines(text) {
    const lines = text.split("\n");
    const close = lines[0] !== undefined && lines[0].trim() === "---"
      ? lines.findIndex((line, i) => i > 0 && line.trim() === "---") : -1;
    if (close < 0) return splitLines(highlight(text, "markdown"));
    const front = splitLines(highlight(lines.slice(0, close + 1).join("\n"), "yaml"));
    const rest = lines.slice(close + 1);
    return rest.length ? front.concat(splitLines(highlight(rest.join("\n"), "markdown"))) : front;
  }

  function renderLines(code, text, marked) {
    code.innerHTML = skillLines(text).map((html, i) =>
      '<span class="line' + (i + 1 === marked ? " marked" : "") + '" data-n="' + (i + 1) + '">' + html + "</span>"
    ).join("");
  }

  document.querySelectorAll("pre[data-highlight] > code").forEach((code) => {
    const text = code.textContent.replace(/\n$/, "");
    renderLines(code, text, 0);
    code.parentElement.classList.add("numbered");
  });

  /* ---- the editor ---- */
  function Editor(root) {
    this.root = root;
    this.textarea = root.querySelector("textarea");
    this.code = root.querySelector("pre > code");
    this.marked = 0;
    this.markedText = null;
    this.pending = false;
    root.classList.add("enhanced");
    this.textarea.addEventListener("input", () => this.changed());
    this.render();
  }
  Editor.prototype.changed = function () {
    if (this.marked && this.textarea.value.split("\n")[this.marked - 1] !== this.markedText) this.unmark();
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.render(); });
  };
  Editor.prototype.render = function () {
    renderLines(this.code, this.textarea.value, this.marked);
  };
  Editor.prototype.mark = function (line) {
    const lines = this.textarea.value.split("\n");
    this.marked = Math.min(Math.max(line, 1), lines.length);
    this.markedText = lines[this.marked - 1];
    this.root.classList.add("invalid");
    this.textarea.setAttribute("aria-invalid", "true");
    this.render();
  };
  Editor.prototype.unmark = function () {
    this.marked = 0;
    this.markedText = null;
    this.root.classList.remove("invalid");
    this.textarea.removeAttribute("aria-invalid");
    this.render();
  };
  /* Put the caret at the start of `line`, select that line, and bring it into view. */
  Editor.prototype.goTo = function (line) {
    const lines = this.textarea.value.split("\n");
    const n = Math.min(Math.max(line, 1), lines.length);
    const start = lines.slice(0, n - 1).reduce((sum, l) => sum + l.length + 1, 0);
    this.textarea.focus({ preventScroll: true });
    this.textarea.setSelectionRange(start, start + lines[n - 1].length);
    const target = this.code.querySelector('.line[data-n="' + n + '"]');
    if (target) target.scrollIntoView({ block: "center" });
  };

  document.querySelectorAll("form[data-skill-form]").forEach((form) => {
    const root = form.querySelector("[data-editor]");
    if (!root) return;
    const editor = new Editor(root);
    const box = form.querySelector(".editor-error");
    const message = box.querySelector("[data-editor-message]");
    const goto = box.querySelector("[data-editor-goto]");

    function clear() {
      OpenCrab.clearErrors(form);
      box.hidden = true;
      goto.hidden = true;
      editor.unmark();
    }

    goto.addEventListener("click", () => editor.goTo(Number(goto.dataset.line)));

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clear();
      const [method, ...rest] = form.dataset.skillForm.trim().split(/\s+/);
      const submit = form.querySelector("[type=submit]");
      submit.setAttribute("aria-busy", "true");
      try {
        const skill = await OpenCrab.api(method, rest.join(" "), OpenCrab.formBody(form));
        location.assign(form.dataset.then.replace("{id}", encodeURIComponent(skill.id)));
      } catch (err) {
        const line = err.body && Number.isInteger(err.body.line) ? err.body.line : null;
        if (line) {
          editor.mark(line);
          message.textContent = err.message.replace(/^line \d+: /, "Line " + line + ": ");
          goto.dataset.line = String(line);
          goto.querySelector("span").textContent = String(line);
          goto.hidden = false;
          box.hidden = false;
          editor.goTo(line);
        } else {
          OpenCrab.showError(form, err);
        }
      } finally {
        submit.removeAttribute("aria-busy");
      }
    });
  });

  /* ---- switches ---- */
  document.addEventListener("change", async (event) => {
    const box = event.target.closest("input[data-skill-toggle]");
    if (!box) return;
    const wanted = box.checked;
    const state = box.parentElement.querySelector(".switch-state");
    box.setAttribute("aria-busy", "true");
    try {
      const skill = await OpenCrab.api("POST", box.dataset.skillToggle, { active: wanted });
      box.checked = skill.isActive;
      OpenCrab.toast(box.dataset.skillName + (skill.isActive ? " is on" : " is off"));
    } catch (err) {
      box.checked = !wanted;
      OpenCrab.toast(err.message, true);
    } finally {
      box.removeAttribute("aria-busy");
      if (state) state.textContent = box.checked ? state.dataset.on : state.dataset.off;
    }
  });
})();
