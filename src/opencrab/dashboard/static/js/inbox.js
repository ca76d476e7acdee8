/* The inbox page: when the top bar's count changes (js/inbox_count.js), the list is read
 * again from /inbox/items and swapped in — unless someone is typing in it, whose text
 * would be lost; then a button offers the new list instead.
 */
(function () {
  "use strict";
  const box = document.querySelector("[data-inbox-items]");
  if (!box) return;

  function busy() {
    const active = document.activeElement;
    if (active && box.contains(active) && active.matches("input, textarea")) return true;
    return Array.from(box.querySelectorAll("input, textarea")).some((f) => f.value.trim() !== "");
  }

  async function refresh() {
    const response = await fetch(box.dataset.src, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (!response.ok) return;
    box.innerHTML = await response.text();
    if (window.OpenCrab) window.OpenCrab.localTimes(box);
  }

  document.body.addEventListener("inbox:count", (event) => {
    const total = box.querySelector("[data-inbox-total]");
    if (total && Number(total.dataset.inboxTotal) === event.detail.count) return;
    if (!busy()) { refresh(); return; }
    if (box.querySelector("[data-inbox-newer]")) return;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "button";
    button.dataset.inboxNewer = "";
    button.textContent = "The inbox changed: show it";
    button.addEventListener("click", refresh);
    box.prepend(button);
  });
})();
