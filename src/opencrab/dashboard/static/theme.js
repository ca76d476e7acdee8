/* Loaded in <head> before the first paint: the saved theme, so a dark page never flashes light. */
try {
  var saved = localStorage.getItem("opencrab-theme");
  if (saved === "dark" || saved === "light") document.documentElement.dataset.theme = saved;
} catch (e) { /* storage disabled */ }
