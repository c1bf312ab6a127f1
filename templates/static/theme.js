// Light / dark theme switch; the page follows the system setting until one is chosen.
(function () {
  var button = document.getElementById("theme");
  if (!button) return;
  button.hidden = false;
  button.addEventListener("click", function () {
    var root = document.documentElement;
    var dark = root.dataset.theme ? root.dataset.theme === "dark"
      : window.matchMedia("(prefers-color-scheme: dark)").matches;
    root.dataset.theme = dark ? "light" : "dark";
    try { localStorage.setItem("kb-theme", root.dataset.theme); } catch (e) { /* private mode */ }
  });
})();
