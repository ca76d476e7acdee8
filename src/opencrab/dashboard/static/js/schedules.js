/* Schedules (dashboard/pages/schedules.py): the "New schedule" form is shown once this
 * runs; the agent chosen decides where dashboard.js sends it
 * (POST /api/agents/{id}/schedules). */
(function () {
  "use strict";
  const form = document.querySelector("[data-new-schedule]");
  if (!form) return;
  form.hidden = false;
  document.querySelectorAll("[data-needs-script]").forEach((el) => { el.hidden = true; });
  const agent = form.querySelector("[data-schedule-agent]");
  const aim = () => { form.dataset.api = "POST /api/agents/" + encodeURIComponent(agent.value) + "/schedules"; };
  agent.addEventListener("change", aim);
  aim();
})();
