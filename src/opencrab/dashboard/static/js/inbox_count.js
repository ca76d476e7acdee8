/* The top bar's inbox count on every page, live over /api/ws (server/inbox_live.py).
 *
 * It sends {"type": "inbox.subscribe"} and shows each {"type": "inbox", "count": N} in
 * the badge of the top bar's Inbox link; a closed socket is opened again after a pause
 * that grows (1 s, 2 s, … up to 30 s). Each change is also told to the page as the
 * event "inbox:count" on document.body (detail: {count, previous}).
 */
(function () {
  "use strict";
  const badge = document.querySelector("[data-inbox-count]");
  if (!badge || !("WebSocket" in window)) return;
  const link = badge.closest("a");
  let attempt = 0;
  let last = null;

  function show(count) {
    badge.textContent = String(count);
    badge.hidden = count === 0;
    badge.dataset.count = String(count);
    if (link) link.setAttribute("aria-label", count === 1 ? "Inbox: 1 item waits" : "Inbox: " + count + " items wait");
    const previous = last;
    last = count;
    document.body.dispatchEvent(new CustomEvent("inbox:count", { detail: { count: count, previous: previous } }));
  }

  function open() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/api/ws");
    ws.addEventListener("open", () => {
      attempt = 0;
      ws.send(JSON.stringify({ type: "inbox.subscribe" }));
    });
    ws.addEventListener("message", (m) => {
      let message;
      try { message = JSON.parse(m.data); } catch (err) { return; }
      if (message.type === "inbox" && typeof message.count === "number") show(message.count);
    });
    ws.addEventListener("close", () => {
      attempt += 1;
      setTimeout(open, Math.min(30000, 1000 * attempt));
    });
  }
  open();
})();
