// Search over the compiled match index (/api/match-index.json), in the browser.
// The paste lookup follows kb/explain.py step by step (the CLI's `kb explain` reads the same
// index): split the text into messages, unwrap each from log prefixes, ANSI colours,
// `ValueError: ` and pydantic's wrapper, match templates exactly, inside a longer text, or
// cut off at the end; otherwise offer the closest templates, never as an answer.
(function () {
  "use strict";
  var script = document.currentScript;
  var indexUrl = script.dataset.index, root = script.dataset.root;
  var form = document.getElementById("search-form"), box = document.getElementById("q");
  var statusEl = document.getElementById("status"), list = document.getElementById("results");
  var index = null;
  var MIN_LITERAL = 8, MIN_SIMILARITY = 0.2;
  var ANSI = /\u001b\[[0-9;?]*[ -\/]*[@-~]/g;
  var LOG_PREFIX = /^(?:\(\w+(?: pid=\d+)?\)\s+)?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\s+\[[^\]]*\]\s?/;
  var PYDANTIC = /Value error, (.*?)(?: \[type=value_error\b.*)?$/;
  var EXCEPTION = /^(?:[\w.]+\.)?\w*(?:Error|Exception)(?:\[[^\]]*\])?: /;
  var EXCEPTION_MARK = /(?:^|(?<=[\s`'"(\[:]))(?:[\w.]+\.)?\w*(?:Error|Exception)(?:\([\w.]*\))?(?:\[[^\]]*\])?: /g;
  var EXCEPTION_MARK_FOLD = new RegExp(EXCEPTION_MARK.source, "gi");
  var WRAPPING = "`*'\"";
  function count(text, ch) { return text.split(ch).length - 1; }
  function unbalancedEdges(message) {  // as kb explain: a lone backtick, star or quote at either end
    for (;;) {
      var first = message.charAt(0), last = message.charAt(message.length - 1);
      if (message && WRAPPING.indexOf(first) >= 0 && count(message, first) % 2) message = message.slice(1).trim();
      else if (message && WRAPPING.indexOf(last) >= 0 && count(message, last) % 2) message = message.slice(0, -1).trim();
      else return message;
    }
  }
  var STARTS = /^(?:Traceback \(most recent call last\):|\s*File "|During handling|The above exception)/;
  var WORD = /[A-Za-z][A-Za-z0-9_]{3,}/g;

  function normalize(s) { return s.replace(/\s+/g, " "); }
  function unwrap(record, fold) {
    var m = PYDANTIC.exec(record), last = null, mark = fold ? EXCEPTION_MARK_FOLD : EXCEPTION_MARK;
    if (m) record = m[1];
    mark.lastIndex = 0;
    while ((m = mark.exec(record)) !== null) last = m.index + m[0].length;
    if (last !== null) record = record.slice(last);
    return unbalancedEdges(record.trim());
  }
  function records(text) {
    text = text.replace(/\r\n?/g, "\n").replace(ANSI, "");
    var out = [], fresh = true;
    text.split("\n").forEach(function (raw, i) {
      if (!raw.trim()) { fresh = true; return; }
      var line = raw.replace(LOG_PREFIX, ""), hadPrefix = line !== raw;
      if (fresh || hadPrefix || STARTS.test(raw) || EXCEPTION.test(line.trim())) {
        out.push({line: i + 1, lines: [line]});
      } else {
        out[out.length - 1].lines.push(line);
      }
      fresh = false;
    });
    return out.filter(function (r) { return r.lines.join("").trim(); })
      .map(function (r) { return {line: r.line, text: normalize(r.lines.join(" ")).trim()}; });
  }
  // As kb explain's fit(): each literal part at its leftmost place after the one before, a value
  // of at least one character between: what a regex with lazy groups finds, without backtracking.
  function fit(parts, text, start, end) {
    var first = parts[0], pos;
    if (start) {
      if (text.slice(0, first.length) !== first) return null;
      pos = first.length;
    } else {
      pos = text.indexOf(first);
      if (pos < 0) return null;
      pos += first.length;
    }
    var middle = parts.slice(1);
    if (!middle.length) return !end || pos === text.length ? [[], pos] : null;
    var limit = text.length;
    if (end) {
      var last = middle[middle.length - 1];
      if (text.length < last.length || text.slice(text.length - last.length) !== last) return null;
      limit -= last.length;
      middle = middle.slice(0, -1);
    }
    var vals = [];
    for (var k = 0; k < middle.length; k++) {
      var p = middle[k], bound = end ? limit - 1 : limit, i = text.indexOf(p, pos + 1);
      if (i < 0 || i + p.length > bound) return null;
      vals.push(text.slice(pos, i));
      pos = i + p.length;
    }
    if (end) {
      if (limit - pos < 1) return null;
      vals.push(text.slice(pos, limit));
      pos = text.length;
    }
    return [vals, pos];
  }
  function prepare(e) {
    if (e.longest !== undefined) return e;
    e.longest = e.parts.reduce(function (a, b) { return b.length > a.length ? b : a; }, "");
    e.words = {};
    (e.parts.join(" ").match(WORD) || []).forEach(function (w) { e.words[w.toLowerCase()] = true; });
    return e;
  }
  function values(e, m, count) {
    var out = [];
    for (var i = 0; i < count; i++) if ((m[i + 1] || "").trim()) out.push([e.names[i], m[i + 1].trim()]);
    return out;
  }
  var ORDER = {exact: 0, contained: 1, truncated: 2, similar: 3};
  var TRACEBACK_FILE = /File "[^"\n]*?\/(vllm\/[^"\n]+\.py)"/g;
  function tracebackFiles(text) {
    var files = {}, m;
    TRACEBACK_FILE.lastIndex = 0;
    while ((m = TRACEBACK_FILE.exec(text)) !== null) files[m[1]] = true;
    return files;
  }
  function rank(list, files) {
    var any = files && Object.keys(files).length > 0;
    function away(m) { return any && !files[m.e.file] ? 1 : 0; }
    return list.sort(function (a, b) {
      return (ORDER[a.kind] - ORDER[b.kind]) || (away(a) - away(b)) || ((a.e.older ? 1 : 0) - (b.e.older ? 1 : 0)) ||
        (b.score - a.score) || (a.e.id < b.e.id ? -1 : a.e.id > b.e.id ? 1 : 0);
    });
  }
  function matchRecord(record, files) {
    var out = matchWith(record, files, false);
    // As kb explain: a paste all in lower case is compared without case.
    if (!out.length && /^[\x00-\x7f]*$/.test(record) && record === record.toLowerCase() &&
        record !== record.toUpperCase()) out = matchWith(record, files, true);
    return out;
  }
  function matchWith(record, files, fold) {
    var message = unwrap(record, fold), out = [];
    index.entries.forEach(function (e) {
      if (!e.matchable) return;  // "{key}: {value}" would match anything
      prepare(e);
      if (record.indexOf(fold ? e.longest.toLowerCase() : e.longest) < 0) return;
      var parts = fold ? e.parts.map(function (p) { return p.toLowerCase(); }) : e.parts;
      var last = parts[parts.length - 1], kind = "exact";
      var found = fit(parts, message, true, true);
      if (!found && last.charAt(last.length - 1) === ".") {  // pasted without its final period
        found = fit(parts.slice(0, -1).concat([last.slice(0, -1)]), message, true, true);
      }
      if (!found && e.literal >= MIN_LITERAL) { found = fit(parts, record, false, false); kind = "contained"; }
      if (found) out.push({e: e, kind: kind, score: e.literal, values: values(e, [""].concat(found[0]), e.names.length)});
    });
    return rank(out, files);
  }
  function overlap(tail, literal) {
    for (var k = Math.min(tail.length - 1, literal.length); k > 0; k--) {
      if (tail.slice(tail.length - k) === literal.slice(0, k)) return k;
    }
    return 0;
  }
  function truncated(message, files) {
    var out = [];
    index.entries.forEach(function (e) {
      if (!e.matchable || e.literal < MIN_LITERAL) return;
      var parts = e.parts, first = parts[0];
      if (!first) return;
      if (first.indexOf(message) === 0) {
        if (message.length >= 24) out.push({e: e, kind: "truncated", score: message.length, values: []});
        return;
      }
      if (message.indexOf(first) !== 0) return;
      for (var j = parts.length; j > 0; j--) {
        var found = fit(parts.slice(0, j), message, true, j === parts.length);
        if (!found) continue;
        var groups = found[0].concat(j < parts.length ? [message.slice(found[1])] : []);
        var matched = parts.slice(0, j).join("").length;
        if (j < parts.length) {
          var cut = overlap(groups[groups.length - 1], parts[j]);
          groups[groups.length - 1] = groups[groups.length - 1].slice(0, groups[groups.length - 1].length - cut);
          matched += cut;
        }
        if (matched >= Math.min(24, e.literal)) {
          out.push({e: e, kind: "truncated", score: matched, values: values(e, [""].concat(groups), groups.length)});
        }
        break;
      }
    });
    return rank(out, files).slice(0, 5);
  }
  function similar(message) {
    var words = {}, n = 0;
    (message.match(WORD) || []).forEach(function (w) { if (!words[w.toLowerCase()]) { words[w.toLowerCase()] = true; n++; } });
    if (!n) return [];
    var out = [];
    index.entries.forEach(function (e) {
      if (!e.matchable || e.older || e.literal < MIN_LITERAL) return;  // suggestions are current errors
      prepare(e);
      var inter = 0, size = 0;
      for (var w in e.words) { size++; if (words[w]) inter++; }
      var score = size ? Math.round(1000 * inter / (n + size - inter)) / 1000 : 0;
      if (score >= MIN_SIMILARITY) out.push({e: e, kind: "similar", score: score, values: []});
    });
    return out.sort(function (a, b) { return (b.score - a.score) || (a.e.id < b.e.id ? -1 : 1); }).slice(0, 5);
  }
  function innerFirst(matches, files) {  // as kb explain: an error carried in a value comes first
    if (!matches.length) return matches;
    var best = matches[0];
    for (var i = 0; i < best.values.length; i++) {
      var inner = matchRecord(best.values[i][1], files);
      if (inner.length && inner[0].kind === "exact") {
        return [inner[0], best].concat(inner.slice(1), matches.slice(1));
      }
    }
    return matches;
  }
  function explain(text) {
    var found = [], seen = {}, files = tracebackFiles(text);
    records(text).forEach(function (r) {
      var matches = innerFirst(matchRecord(r.text, files), files);
      if (!matches.length) return;
      var key = matches[0].e.id + JSON.stringify(matches[0].values);
      if (seen[key]) return;
      seen[key] = true;
      found.push(matches[0]);
      matches.slice(1).forEach(function (o) { o.other = true; found.push(o); });
    });
    if (found.length) return {found: found};
    var messages = records(text).map(function (r) { return unwrap(r.text); });
    var message = messages.reduce(function (a, b) { return b.length > a.length ? b : a; }, "");
    var cut = truncated(message, files);
    if (cut.length) return {found: cut};
    return {found: [], suggestions: similar(message)};
  }
  window.kbExplain = function (text) {
    var r = explain(text);
    function plain(m) { return {id: m.e.id, kind: m.kind, score: m.score, values: m.values}; }
    return {found: r.found.filter(function (m) { return !m.other; }).map(plain), suggestions: (r.suggestions || []).map(plain)};
  };

  function wordMatches(text) {
    var words = normalize(text).toLowerCase().split(" ").filter(Boolean);
    if (!words.length) return [];
    var found = [];
    index.entries.forEach(function (e) {
      if (e.haystack === undefined) {
        e.haystack = [e.title, e.parts.join(" "), e.file, e.func, e.cls, e.text || ""].join(" ").toLowerCase();
      }
      for (var i = 0; i < words.length; i++) if (e.haystack.indexOf(words[i]) < 0) return;
      var score = (e.curated ? 1000 : 0) + (e.title.toLowerCase().indexOf(words[0]) >= 0 ? 100 : 0);
      found.push({e: e, kind: "words", score: score, values: []});
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
    var how = {contained: " · found inside your text", truncated: " · your message is cut off: matched its start",
               similar: " · similarity " + r.score + " (not a match)"}[r.kind] || "";
    meta.textContent = " " + r.e.cls + " · " + r.e.file + ":" + r.e.line + (r.e.curated ? " · curated" : "") + how;
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
    if (!normalize(text).trim()) { statusEl.textContent = ""; return; }
    var r = explain(text);
    var main = r.found.filter(function (m) { return !m.other; });
    if (navigate && main.length === 1 && main[0].kind === "exact") {
      var rivals = r.found.filter(function (m) { return m.other && m.kind === main[0].kind && m.score === main[0].score; });
      if (!rivals.length) { window.location.href = root + "errors/" + main[0].e.id + "/"; return; }
    }
    var results = r.found.length ? r.found : wordMatches(text);
    if (r.found.length) {
      statusEl.textContent = "Your text matches " + main.length + " known error" + (main.length > 1 ? "s" : "") +
        (r.found.length > main.length ? " (less specific templates that match too are listed after each)" : "") + ".";
    } else if (results.length) {
      statusEl.textContent = results.length + " errors mention these words.";
    } else {
      results = r.suggestions || [];
      statusEl.textContent = results.length ? "No known error matches. The closest templates:" :
        "No known error matches. Try fewer words, or a part of the message without values.";
    }
    results.forEach(function (x) { list.appendChild(item(x)); });
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
