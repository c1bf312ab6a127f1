// An error's readable URL, /errors/<slug>/, has no file of its own: the host serves this 404
// page, which finds the slug's id in /api/slugs.json and goes to /errors/<id>/. The site may live
// under a sub-path (a GitHub Pages project site), so its root is what precedes "/errors/".
(function () {
  var m = /^(.*\/)errors\/([a-z0-9][a-z0-9-]*)\/?$/.exec(location.pathname);
  if (!m || /^[0-9a-f]{16}$/.test(m[2])) return;
  var root = m[1], slug = m[2];
  // only a path of this site: "//host/..." (or "/\\host/...") would make the fetch, and the
  // redirect, go to another origin
  if (!/^\/(?![\/\\])[^\\]*$/.test(root) || new URL(root, location.origin).origin !== location.origin) return;
  var note = document.getElementById("missing");
  fetch(root + "api/slugs.json").then(function (r) { return r.ok ? r.json() : {}; }).then(function (slugs) {
    var id = Object.prototype.hasOwnProperty.call(slugs, slug) ? slugs[slug] : null;
    if (typeof id === "string" && /^[0-9a-f]{16}$/.test(id)) {
      location.replace(root + "errors/" + id + "/" + location.hash);
    } else if (note) {
      note.textContent = "No error has the slug \u201c" + slug + "\u201d in this release. Search for its message instead.";
    }
  }).catch(function () { /* offline: the page's own text stays */ });
})();
