/* Home: the "New agent" dialog, live cards and the heartbeat countdowns.
 *
 * - [data-open-dialog=ID] opens the <dialog id=ID>; [data-close-dialog] closes its dialog.
 * - The create form is a data-api form (dashboard.js); its hidden identity.name takes the
 *   name typed (the identity is named after the agent, as the API's default is).
 * - The cards poll /agent-cards every 5 s (HTMX) and reload at once after an agent is
 *   created or deleted (event agents-changed); a poll is skipped while the page is
 *   hidden or the keyboard focus is inside the cards, so a swap never steals focus.
 * - A created agent closes and clears the dialog.
 * - "Next heartbeat in N s" counts down between polls.
 */
(function () {
  "use strict";

  document.addEventListener("click", (event) => {
    const opener = event.target.closest("[data-open-dialog]");
    if (opener) {
      const dialog = document.getElementById(opener.dataset.openDialog);
      if (dialog && !dialog.open) {
        dialog.showModal();
        const first = dialog.querySelector("input:not([type=hidden]), select, textarea");
        if (first) first.focus();
      }
      return;
    }
    const closer = event.target.closest("[data-close-dialog]");
    if (closer) {
      const dialog = closer.closest("dialog");
      if (dialog) dialog.close();
    }
  });

  /* capture: runs before dashboard.js reads the form's fields */
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement)) return;
    form.querySelectorAll("[data-copy-of]").forEach((copy) => {
      const source = form.elements.namedItem(copy.dataset.copyOf);
      if (source) copy.value = source.value;
    });
  }, true);

  document.addEventListener("htmx:beforeRequest", (event) => {
    const cards = event.detail.elt;
    if (!cards || !cards.matches || !cards.matches("[data-live-cards]")) return;
    const polled = !event.detail.requestConfig || !event.detail.requestConfig.triggeringEvent;
    if (polled && (document.hidden || cards.contains(document.activeElement))) event.preventDefault();
  });

  document.addEventListener("api:done", (event) => {
    const form = event.target.closest && event.target.closest("dialog form");
    if (!form) return;
    form.reset();
    form.closest("dialog").close();
  });

  setInterval(() => {
    document.querySelectorAll("[data-countdown]").forEach((el) => {
      const left = Math.max(0, parseInt(el.dataset.countdown, 10) - 1);
      el.dataset.countdown = String(left);
      el.textContent = left < 120 ? left + " s" : Math.round(left / 60) + " min";
    });
  }, 1000);
})();
