/* Tickets: the board's "New ticket" form and a ticket's page (dashboard/pages/tickets.py).
 *
 * - Forms that need JavaScript (creating a ticket, answering a suspended one, deciding
 *   a held tool call) are shown
 *   once it runs; dashboard.js sends them to the REST API.
 * - The params field must hold a JSON object: it is checked as it is typed and again
 *   before the form is sent, the problem shown next to the field (the API checks it too
 *   and its message lands in the same place).
 * - A ticket's page polls its state part (HTMX, every 3 s; 204 while unchanged); when the
 *   swapped-in state names another current session than the live feed follows, a note
 *   offers to reload.
 */
(function () {
  "use strict";

  function enableForms(root) {
    root.querySelectorAll("[data-new-ticket], [data-answer], [data-approval] form").forEach((form) => { form.hidden = false; });
    root.querySelectorAll("[data-needs-script]").forEach((el) => { el.hidden = true; });
  }

  /* ---- params: a JSON object or nothing ---- */
  function paramsProblem(text) {
    if (text.trim() === "") return null;
    let value;
    try { value = JSON.parse(text); } catch (err) { return "not valid JSON (" + err.message + ")"; }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return "must be a JSON object, like {\"branch\": \"main\"}";
    }
    return null;
  }

  function showParams(field) {
    const slot = field.form.querySelector('[data-error-for="params"]');
    const problem = paramsProblem(field.value);
    if (slot) { slot.textContent = problem || ""; slot.hidden = !problem; }
    if (problem) field.setAttribute("aria-invalid", "true"); else field.removeAttribute("aria-invalid");
    return problem;
  }

  document.addEventListener("change", (event) => {
    if (event.target.matches("[data-new-ticket] [name=params]")) showParams(event.target);
  });
  document.addEventListener("input", (event) => {
    /* while typing, only clear a shown error once the text is right again */
    const field = event.target;
    if (field.matches("[data-new-ticket] [name=params]") && field.getAttribute("aria-invalid") && !paramsProblem(field.value)) showParams(field);
  });
  /* before dashboard.js sends the form (capture phase runs first) */
  document.addEventListener("submit", (event) => {
    const form = event.target.closest("[data-new-ticket]");
    if (!form) return;
    const field = form.querySelector("[name=params]");
    if (field && showParams(field)) {
      event.preventDefault();
      event.stopImmediatePropagation();
      field.focus();
    }
  }, true);

  /* ---- a ticket's page: its polled state ---- */
  function checkSession() {
    const state = document.getElementById("ticket-main");
    const note = document.querySelector("[data-new-session]");
    if (!state || !note) return;
    const feed = document.getElementById("feed");
    const following = feed ? feed.dataset.sessionId : "";
    const current = state.dataset.currentSession || "";
    note.hidden = !current || current === following;
  }

  document.addEventListener("htmx:afterSettle", () => { enableForms(document); checkSession(); });
  enableForms(document);
})();
