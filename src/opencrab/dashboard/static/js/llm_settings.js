/* The LLM settings page: connection tests and the alias form (both through the REST API).
 * Provider forms, the fallback chain and removals are plain data-api forms (dashboard.js). */
(function () {
  "use strict";

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("[data-test-provider]");
    if (!button) return;
    const name = button.dataset.testProvider;
    const out = document.querySelector('[data-test-result="' + CSS.escape(name) + '"]');
    out.className = "test-result";
    out.textContent = "Testing…";
    button.setAttribute("aria-busy", "true");
    try {
      const result = await OpenCrab.api("POST", "/api/llm/providers/" + encodeURIComponent(name) + "/test");
      out.classList.add(result.ok ? "ok" : "failed");
      out.textContent = result.ok
        ? "Connected: " + (result.model || "default model") + " answered in " + result.latencyMs + " ms."
        : "Failed after " + result.latencyMs + " ms: " + result.error;
    } catch (err) {
      out.classList.add("failed");
      out.textContent = err.message;
    } finally {
      button.removeAttribute("aria-busy");
    }
  });

  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form[data-alias-form]");
    if (!form) return;
    event.preventDefault();
    OpenCrab.clearErrors(form);
    const alias = form.elements.alias.value.trim();
    try {
      await OpenCrab.api("PUT", "/api/llm/aliases/" + encodeURIComponent(alias), {
        provider: form.elements.provider.value,
        model: form.elements.model.value.trim(),
      });
      location.reload();
    } catch (err) {
      OpenCrab.showError(form, err);
    }
  });
})();
