/* Start a discussion (/discussions/new): the ticked agents become the JSON list the
 * form's hidden `participants` field sends (dashboard.js sends the form to the API). */
(function () {
  "use strict";
  const form = document.getElementById("discussion-form");
  if (!form) return;
  const list = form.querySelector('input[name="participants"]');
  function sync() {
    const ids = Array.from(form.querySelectorAll('input[name="participant"]:checked'), (el) => el.value);
    list.value = JSON.stringify(ids);
  }
  form.addEventListener("change", sync);
  form.addEventListener("submit", sync);  /* before dashboard.js reads the form */
  sync();
})();
