// The site's error URLs without a file of their own, on a static host without redirects (kb serve,
// and hosts that read /_redirects for the release paths, answer them first; kb/site/urlmap.py has
// the same rules): /errors/<slug>/ (api/slugs.json), /errors/<id of an older wording>/ (its live
// page: api/older-ids/<first digit>.json), /<release>/errors/<id or slug>/ (this release's page,
// ?release= saying which was asked), an id nothing answers for (the search). The site may live
// under a sub-path (a GitHub Pages project site): its root is what precedes "[<release>/]errors/".
(function () {
  var RELEASE = /^[0-9]+(?:\.[0-9A-Za-z_+-]+)+$/, ID = /^[0-9a-f]{16}$/;
  var m = /^(.*\/)errors\/([a-z0-9][a-z0-9-]*)\/?$/.exec(location.pathname);
  if (!m) return;
  var root = m[1], name = m[2], release = "", r = /^(.*\/)([^\/]+)\/$/.exec(root), segment = "";
  try { segment = r ? decodeURIComponent(r[2]) : ""; } catch (e) { /* not a release */ }
  if (RELEASE.test(segment) && segment.length <= 64) { root = r[1]; release = segment; }
  // only a path of this site: "//host/..." (or "/\\host/...") would make the fetch, and the
  // redirect, go to another origin
  if (!/^\/(?![\/\\])[^\\]*$/.test(root) || new URL(root, location.origin).origin !== location.origin) return;
  var note = document.getElementById("missing"), built = note ? note.getAttribute("data-release") : "";
  var asked = release || new URLSearchParams(location.search).get("release") || "";
  if (!RELEASE.test(asked) || asked.length > 64) asked = "";
  function go(id, from) {  // the release asked for, when not this one, and the older id followed
    var q = (asked && asked !== built ? ["release=" + encodeURIComponent(asked)] : []).concat(from ? ["from=" + from] : []);
    location.replace(root + "errors/" + id + "/" + (q.length ? "?" + q.join("&") : "") + location.hash);
  }
  function lookup(path, key) {
    return fetch(root + path).then(function (r) { return r.ok ? r.json() : {}; }).then(function (map) {
      var id = Object.prototype.hasOwnProperty.call(map, key) ? map[key] : null;
      return typeof id === "string" && ID.test(id) ? id : null;
    });
  }
  if (release) {  // this release's page of the same name (without a page of its own, this page again)
    go(name);
  } else if (ID.test(name)) {
    lookup("api/older-ids/" + name[0] + ".json", name).then(function (id) {
      if (id) go(id, name); else location.replace(root + "search/?q=" + name);
    }).catch(function () { /* offline: the page's own text stays */ });
  } else {
    lookup("api/slugs.json", name).then(function (id) {
      if (id) go(id);
      else if (note) note.textContent = "No error has the slug \u201c" + name + "\u201d in this release. Search for its message instead.";
    }).catch(function () { /* offline: the page's own text stays */ });
  }
})();
