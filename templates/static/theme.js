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
// An error page reached through another release's URL or an older id (kb/site/urlmap.py adds
// ?release=R and ?from=ID): say which release and which error the page is for.
(function () {
  var ids = document.querySelector("p.ids"), ld = document.querySelector('script[type="application/ld+json"]');
  var q = new URLSearchParams(location.search), asked = q.get("release") || "", from = q.get("from") || "";
  if (!ids || !ld || !(asked || from)) return;
  var version = "";
  try { version = String(JSON.parse(ld.textContent).version || ""); } catch (e) { return; }
  if (!/^[0-9]+(?:\.[0-9A-Za-z_+-]+)+$/.test(asked) || asked.length > 64 || asked === version) asked = "";
  if (!/^[0-9a-f]{16}$/.test(from)) from = "";
  if (!version || !(asked || from)) return;
  var here = "vLLM " + version + ", the release this site is built for";
  var p = document.createElement("p");
  p.className = "notice asked";
  p.setAttribute("role", "note");
  p.textContent = from ? "You followed a link to error " + from + (asked ? " of vLLM " + asked : "") +
    ", an id of an older release; this page answers for it in " + here + "." :
    "You followed a link for vLLM " + asked + "; this page shows the error in " + here + ".";
  ids.parentNode.insertBefore(p, ids.nextSibling);
})();
