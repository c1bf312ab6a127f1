// Search over the compiled match index (/api/match-index.json), in the browser.
// A pasted message is matched against every template (placeholders match any value,
// across lines); words are matched against messages, titles and curated prose.
(function () {
  "use strict";
  var script = document.currentScript;
  var indexUrl = script.dataset.index, root = script.dataset.root;
  var form = document.getElementById("search-form"), box = document.getElementById("q");
  var statusEl = document.getElementById("status"), list = document.getElementById("results");
  var index = null;

  function normalize(s) {
    return s.replace(/\u001b\[[0-9;]*[A-Za-z]/g, "").replace(/\r\n?/g, "\n").replace(/\s+/g, " ").trim();
  }
  function unwrap(s) {
    var m = /Value error, ([\s\S]*?)(?: \[type=value_error|$)/.exec(s);
    if (m) s = m[1];
    s = s.replace(/^(?:[\w.]*(?:Error|Exception)): /, "");
    return s;
  }
  function escapeRe(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  function compile(entry) {
    if (!entry.re) {
      var parts = entry.parts.map(function (p) { return escapeRe(p); });
      entry.re = new RegExp("^" + parts.join("(.+?)") + "$");
      entry.reIn = new RegExp(parts.join("(.+?)"));
    }
    return entry;
  }

  function pasteMatches(text) {
    var msg = normalize(unwrap(normalize(text)));
    var found = [];
    index.entries.forEach(function (e) {
      if (e.literal < 8) return;
      if (msg.indexOf(e.longest) < 0) return;
      compile(e);
      var m = e.re.exec(msg), exact = true;
      if (!m) { m = e.reIn.exec(msg); exact = false; }
      if (!m) return;
      var values = e.names.map(function (n, i) { return [n, m[i + 1]]; });
      found.push({e: e, exact: exact, score: e.literal, values: values});
    });
    found.sort(function (a, b) { return (b.exact - a.exact) || (b.score - a.score) || (a.e.id < b.e.id ? -1 : 1); });
    return found;
  }

  function wordMatches(text) {
    var words = normalize(text).toLowerCase().split(" ").filter(Boolean);
    if (!words.length) return [];
    var found = [];
    index.entries.forEach(function (e) {
      for (var i = 0; i < words.length; i++) if (e.text.indexOf(words[i]) < 0) return;
      var score = (e.curated ? 1000 : 0) + (e.title.toLowerCase().indexOf(words[0]) >= 0 ? 100 : 0);
      found.push({e: e, exact: false, score: score, values: []});
    });
    found.sort(function (a, b) { return (b.score - a.score) || (a.e.id < b.e.id ? -1 : 1); });
    return found.slice(0, 100);
  }

  function item(r) {
    var li = document.createElement("li");
    var a = document.createElement("a");
    a.href = root + "errors/" + r.e.id + "/";
    a.textContent = r.e.title;
    li.appendChild(a);
    var meta = document.createElement("span");
    meta.className = "where";
    meta.textContent = " " + r.e.cls + " · " + r.e.file + ":" + r.e.line + (r.e.curated ? " · curated" : "");
    li.appendChild(meta);
    if (r.values.length) {
      var vals = document.createElement("div");
      vals.className = "values";
      vals.textContent = r.values.map(function (v) { return v[0] + " = " + v[1]; }).join(",  ");
      li.appendChild(vals);
    }
    return li;
  }

  function run(text, navigate) {
    list.textContent = "";
    if (!normalize(text)) { statusEl.textContent = ""; return; }
    var pasted = pasteMatches(text);
    var exact = pasted.filter(function (r) { return r.exact; });
    if (navigate && exact.length && (exact.length === 1 || exact[0].score > exact[1].score)) {
      window.location.href = root + "errors/" + exact[0].e.id + "/";
      return;
    }
    var results = pasted.length ? pasted : wordMatches(text);
    statusEl.textContent = pasted.length
      ? (exact.length ? "Your message matches " : "Your text contains ") + pasted.length + " known message" + (pasted.length > 1 ? "s" : "") + ", most specific first."
      : results.length ? results.length + " errors mention these words." : "No known error matches. Try fewer words, or a part of the message without values.";
    results.forEach(function (r) { list.appendChild(item(r)); });
  }

  var params = new URLSearchParams(window.location.search);
  var initial = params.get("q") || "";
  box.value = initial;
  statusEl.textContent = "Loading the index…";
  fetch(indexUrl).then(function (r) { return r.json(); }).then(function (data) {
    index = data;
    statusEl.textContent = "";
    run(initial, true);
  }).catch(function () { statusEl.textContent = "Could not load the search index."; });
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var url = new URL(window.location.href);
    url.searchParams.set("q", box.value);
    history.replaceState(null, "", url);
    if (index) run(box.value, true);
  });
})();
