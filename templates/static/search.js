// Search over the compiled match index (/api/match-index.json.gz), in the browser.
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
  // The indexes are gzipped files: unpacked here, unless the host already did (told by the
  // first two bytes, as kb's own reader does).
  function fetchJson(url) {
    return fetch(url).then(function (r) {
      if (!r.ok) throw new Error(url + ": " + r.status);
      return r.arrayBuffer();
    }).then(function (buf) {
      var head = new Uint8Array(buf, 0, Math.min(2, buf.byteLength));
      if (head.length === 2 && head[0] === 0x1f && head[1] === 0x8b) {
        if (typeof DecompressionStream === "undefined") throw new Error("this browser cannot unpack gzip: a newer one can");
        var stream = new Blob([buf]).stream().pipeThrough(new DecompressionStream("gzip"));
        return new Response(stream).text();
      }
      return new TextDecoder("utf-8").decode(buf);
    }).then(JSON.parse);
  }
  function reason(e) { return e && e.message ? " (" + String(e.message).slice(0, 200) + ")." : "."; }
  var MIN_LITERAL = 8, MIN_SIMILARITY = 0.2;
  var ANSI = /\u001b\[[0-9;?]*[ -\/]*[@-~]/g;
  var LOG_PREFIX = /^(?:\(\w+(?: pid=\d+)?\)\s+)?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\s+\[[^\]]*\]\s?/;
  var PYDANTIC = /Value error, (.*?)(?: \[type=value_error\b.*)?$/;
  var EXCEPTION = /^(?:[\w.]+\.)?\w*(?:Error|Exception)(?:\[[^\]]*\])?: /;
  var EXCEPTION_MARK = /(?<![A-Za-z0-9_.])(?:[A-Za-z0-9_]+\.)*[A-Za-z0-9_]*(?:Error|Exception)(?:\([A-Za-z0-9_.]*\))?(?:\[[^\]]*\])?: /g;
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
  var ENTITIES = {"&quot;": "\"", "&#39;": "'", "&#x27;": "'", "&lt;": "<", "&gt;": ">", "&amp;": "&"};
  function unescaped(text) {  // as kb explain: a log pasted as a JSON string, or copied from a web page
    return text.replace(/\\+(['"])/g, "$1").replace(/&quot;|&#39;|&#x27;|&lt;|&gt;|&amp;/g,
                                                    function (m) { return ENTITIES[m]; });
  }
  function records(text) {
    text = unescaped(text.replace(/\r\n?/g, "\n")).replace(ANSI, "");
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
    if (e.longest.charAt(e.longest.length - 1) === ".") e.longest = e.longest.slice(0, -1);  // a paste may lack it
    return e;
  }
  function wordsOf(e) {  // apart from prepare(): an exact match, the first lookup's usual answer, needs none
    if (e.words === undefined) {
      e.words = {};
      (e.parts.join(" ").match(WORD) || []).forEach(function (w) { e.words[w.toLowerCase()] = true; });
    }
    return e.words;
  }
  function values(e, m, count) {
    var out = [];
    for (var i = 0; i < count; i++) if ((m[i + 1] || "").trim()) out.push([e.names[i], m[i + 1].trim()]);
    return out;
  }
  var ORDER = {exact: 0, contained: 1, truncated: 2, probably: 3, similar: 4};
  var TRACEBACK_FILE = /File "[^"\n]*?\/(vllm\/[^"\n]+\.py)"/g;
  var RELEASE = /\bvllm\b[^\n\d]{0,30}?\bv?(\d+)\.(\d+)\.\d+/gi;
  function cluesOf(text) {  // as kb explain: the vLLM files of a traceback, the releases named
    var files = {}, minors = [], m;
    text = unescaped(text);
    TRACEBACK_FILE.lastIndex = 0;
    while ((m = TRACEBACK_FILE.exec(text)) !== null) files[m[1]] = true;
    RELEASE.lastIndex = 0;
    while ((m = RELEASE.exec(text)) !== null) minors.push([parseInt(m[1], 10), parseInt(m[2], 10)]);
    return {files: files, minors: minors};
  }
  function minor(release) {  // as kb explain: null for a release name that is no version
    var m = /^v?(\d+)\.(\d+)/.exec(release);
    return m ? [parseInt(m[1], 10), parseInt(m[2], 10)] : null;
  }
  function cmp(a, b) { for (var i = 0; i < a.length; i++) { if (a[i] !== b[i]) return a[i] - b[i]; } return 0; }
  function elsewhere(e, clues) {
    if (!clues.minors.length || !e.releases) return 0;
    var first = minor(e.releases[0]), last = minor(e.releases[1]);
    if (!first || !last) return 0;
    return clues.minors.some(function (m) { return cmp(first, m) <= 0 && cmp(m, last) <= 0; }) ? 0 : 1;
  }
  function since(e) {  // as kb explain: the wording raised by the most releases, then the oldest
    var first = e.releases && minor(e.releases[0]), last = e.releases && minor(e.releases[1]);
    if (!first || !last) return [0, 1e6, 0];
    return [-((last[0] - first[0]) * 1000 + last[1] - first[1]), first[0], first[1]];
  }
  function rank(list, clues) {
    var files = clues.files, any = Object.keys(files).length > 0;
    function away(m) { return any && !files[m.e.file] ? 1 : 0; }
    function older(m) { return m.e.older ? 1 : 0; }
    function olderWhole(m) { return m.kind === "exact" && m.e.older ? 1 : 0; }
    return list.sort(function (a, b) {
      return (ORDER[a.kind] - ORDER[b.kind]) || (away(a) - away(b)) || (elsewhere(a.e, clues) - elsewhere(b.e, clues)) ||
        (olderWhole(a) - olderWhole(b)) || (b.score - a.score) || (older(a) - older(b)) || cmp(since(a.e), since(b.e)) ||
        (a.e.id < b.e.id ? -1 : a.e.id > b.e.id ? 1 : 0);
    });
  }
  // As kb explain: a placeholder at an end of a template found inside a longer text takes only
  // the word or bracketed value next to the literal text.
  var OPEN = {"[": "]", "(": ")", "{": "}", "'": "'", "\"": "\""}, CLOSE = {"]": "[", ")": "(", "}": "{", "'": "'", "\"": "\""};
  var EDGE = "`*'\".,;:()[]{} ";
  function bracketed(text, opener, closer) {  // text: a string, or an array of its characters
    var depth = 0;
    for (var i = 0; i < text.length; i++) {
      var ch = text[i];
      if (ch === closer && (depth > 0 || opener === closer) && i > 0) { depth--; if (depth <= 0) return i + 1; }
      else if (ch === opener) depth++;
    }
    return -1;
  }
  function stripLeft(s) { var i = 0; while (i < s.length && EDGE.indexOf(s.charAt(i)) >= 0) i++; return s.slice(i); }
  function stripRight(s) { var i = s.length; while (i > 0 && EDGE.indexOf(s.charAt(i - 1)) >= 0) i--; return s.slice(0, i); }
  function words(s) { return s.split(/[ \t\n\r\f\v]+/).filter(function (w) { return w; }); }
  function leadValue(before) {
    var last = before.charAt(before.length - 1);
    if (last && CLOSE[last] !== undefined) {
      var end = bracketed(before.split("").reverse().join(""), last, CLOSE[last]);
      if (end > 0) return before.slice(before.length - end);
    }
    var w = words(before);
    return w.length ? stripRight(stripLeft(w[w.length - 1])) : "";
  }
  function trailValue(after) {
    after = after.replace(/^\s+/, "");
    var first = after.charAt(0);
    if (first && OPEN[first] !== undefined) {
      var end = bracketed(after, first, OPEN[first]);
      if (end > 0) return after.slice(0, end);
    }
    var w = words(after);
    return w.length ? stripRight(stripLeft(w[0])) : "";
  }
  function balanced(v) {
    return [["[", "]"], ["(", ")"], ["{", "}"]].every(function (p) { return count(v, p[0]) === count(v, p[1]); }) &&
      count(v, "'") % 2 === 0 && count(v, "\"") % 2 === 0;
  }
  function cleanEdges(parts, vals) {
    if (!vals.length) return true;
    if (parts[0] === "" && leadValue(vals[0]) !== vals[0].trim()) return false;
    return parts[parts.length - 1] !== "" || balanced(vals[vals.length - 1]);
  }
  function containedFit(parts, text) {
    var tries = [parts], last = parts[parts.length - 1];
    if (last.charAt(last.length - 1) === ".") tries.push(parts.slice(0, -1).concat([last.slice(0, -1)]));
    for (var t = 0; t < tries.length; t++) {
      var p = tries[t], lead = p[0] === "", trail = p[p.length - 1] === "";
      var core = p.slice(lead ? 1 : 0, trail ? p.length - 1 : p.length);
      if (trail && core.length) core = core.slice(0, -1).concat([core[core.length - 1].replace(/\s+$/, "")]);
      if (!core.length || !core[0]) continue;
      var found = fit(core, text, false, false);
      if (!found) continue;
      var vals = found[0], pos = found[1];
      if (lead) { var v = leadValue(text.slice(0, text.indexOf(core[0]))); if (!v) continue; vals = [v].concat(vals); }
      if (trail) { var w = trailValue(text.slice(pos)); if (!w && text.slice(pos).trim()) continue; vals = vals.concat([w]); }
      return [vals, pos];
    }
    return null;
  }
  function matchRecord(record, clues) {
    var out = matchWith(record, clues, false);
    // As kb explain: a paste all in lower case is compared without case.
    if (!out.length && /^[\x00-\x7f]*$/.test(record) && record === record.toLowerCase() &&
        record !== record.toUpperCase()) out = matchWith(record, clues, true);
    return out;
  }
  function matchWith(record, clues, fold) {
    var message = unwrap(record, fold), out = [];
    index.entries.forEach(function (e) {
      if (!e.matchable) return;  // "{key}: {value}" would match anything
      prepare(e);
      if (record.indexOf(fold ? e.longest.toLowerCase() : e.longest) < 0) return;
      var parts = fold ? e.parts.map(function (p) { return p.toLowerCase(); }) : e.parts;
      var last = parts[parts.length - 1], kind = "exact", used = parts;
      var found = fit(parts, message, true, true);
      if (!found && last.charAt(last.length - 1) === ".") {  // pasted without its final period
        used = parts.slice(0, -1).concat([last.slice(0, -1)]);
        found = fit(used, message, true, true);
      }
      if (found && !cleanEdges(used, found[0])) found = null;  // an end placeholder took text around it
      if (!found && e.literal >= MIN_LITERAL) { found = containedFit(parts, record); kind = "contained"; }
      if (found) out.push({e: e, kind: kind, score: e.literal, values: values(e, [""].concat(found[0]), e.names.length)});
    });
    return rank(out, clues);
  }
  function cutInside(tail, literal) {  // as kb explain: the longest start of literal in tail, by bisection
    var low = 0, high = literal.length;
    while (low < high) {
      var mid = Math.floor((low + high + 1) / 2);
      if (tail.indexOf(literal.slice(0, mid), 1) >= 0) low = mid; else high = mid - 1;
    }
    return low ? [tail.indexOf(literal.slice(0, low), 1), low] : [tail.length, 0];
  }
  var START = 8, byStart = null, shortStart = null;  // as kb explain: templates by their first 8 characters
  var byLead = null;  // ... and those beginning with a placeholder, by the 8 characters of the part after it
  function startIndex() {
    if (byStart) return;
    byStart = {}; shortStart = []; byLead = {};
    index.entries.forEach(function (e) {
      var first = e.parts[0];
      if (!e.matchable || e.literal < MIN_LITERAL) return;
      if (!first) {
        var next = e.parts.length > 1 ? Array.from(e.parts[1]) : [];  // code points, as Python counts them
        if (next.length >= START) {
          var l = "\u0000" + next.slice(0, START).join("");
          (byLead[l] = byLead[l] || []).push(e);
        }
      } else if (first.length >= START) {
        var k = "\u0000" + first.slice(0, START);
        (byStart[k] = byStart[k] || []).push(e);
      } else {
        shortStart.push(e);
      }
    });
  }
  var SPACE = " \t\n\r\f\v", MAX_LEAD = 4096;
  function leadEnd(chars) {  // as kb explain: how far the value the message begins with reaches
    var end = 0;
    if (chars.length && OPEN[chars[0]] !== undefined) end = Math.max(0, bracketed(chars, chars[0], OPEN[chars[0]]));
    while (end < chars.length && SPACE.indexOf(chars[end]) < 0) end++;
    while (end < chars.length && SPACE.indexOf(chars[end]) >= 0) end++;
    return end;
  }
  function leadCandidates(message) {  // as kb explain: each once, in the order first met
    var chars = Array.from(message), out = [], seen = new Set();
    for (var i = 1, last = Math.min(leadEnd(chars), chars.length - START, MAX_LEAD); i <= last; i++) {
      (byLead["\u0000" + chars.slice(i, i + START).join("")] || []).forEach(function (e) {
        if (!seen.has(e)) { seen.add(e); out.push(e); }
      });
    }
    return out;
  }
  function truncated(message, clues) {
    var out = [];
    startIndex();
    (byStart["\u0000" + message.slice(0, START)] || []).concat(shortStart, leadCandidates(message)).forEach(function (e) {
      var parts = e.parts, first = parts[0];
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
          var cut = cutInside(groups[groups.length - 1], parts[j]);
          groups[groups.length - 1] = groups[groups.length - 1].slice(0, cut[0]);
          matched += cut[1];
        }
        if (!first && (!groups[0].trim() || leadValue(groups[0]) !== groups[0].trim())) break;  // more than one value
        if (matched >= Math.min(24, e.literal)) {
          out.push({e: e, kind: "truncated", score: matched, values: values(e, [""].concat(groups), groups.length)});
        }
        break;
      }
    });
    return rank(out, clues).slice(0, 5);
  }
  function similar(message, floor) {  // as kb explain: Jaccard of the words, at least `floor`
    var words = {}, n = 0, least = floor === undefined ? MIN_SIMILARITY : floor;
    (message.match(WORD) || []).forEach(function (w) { if (!words[w.toLowerCase()]) { words[w.toLowerCase()] = true; n++; } });
    if (!n) return [];
    var out = [];
    index.entries.forEach(function (e) {
      if (!e.matchable || e.older || e.literal < MIN_LITERAL) return;  // suggestions are current errors
      var inter = 0, size = 0, ew = wordsOf(e);
      for (var w in ew) { size++; if (words[w]) inter++; }
      var raw = size ? inter / (n + size - inter) : 0;
      if (raw >= least && raw > 0) out.push({e: e, kind: "similar", score: Math.round(1000 * raw) / 1000, values: []});
    });
    return out.sort(function (a, b) { return (b.score - a.score) || (a.e.id < b.e.id ? -1 : 1); }).slice(0, 5);
  }
  // As kb explain's probably(): the whole message aligned with a template's words and signs.
  var TOKEN = /[A-Za-z0-9_]+|[^\sA-Za-z0-9_]/g;
  var FUZZY_MAX_TOKENS = 160, FUZZY_CANDIDATES = 6, FUZZY_MIN_WORDS = 0.5, FUZZY_MIN_TOKENS = 6;
  var FUZZY_EDITS = 0.0, WORD_COST = 4, SIGN_COST = 1;  // kb explain's constants (a test compares them)
  function weight(t) { return /[A-Za-z0-9_]/.test(t.charAt(0)) ? WORD_COST : SIGN_COST; }
  function tokens(text) {
    var out = [], m;
    TOKEN.lastIndex = 0;
    while ((m = TOKEN.exec(text)) !== null) out.push([m[0].toLowerCase(), m.index, m.index + m[0].length]);
    return out;
  }
  function templateTokens(e) {
    var out = [];
    e.parts.forEach(function (p, i) {
      (p.match(TOKEN) || []).forEach(function (t) { out.push(t.toLowerCase()); });
      if (i < e.names.length) out.push(null);
    });
    return out;
  }
  function close(a, b) {
    if (Math.abs(a.length - b.length) * 3 > Math.max(a.length, b.length)) return false;
    var prev = [];
    for (var j = 0; j <= b.length; j++) prev.push(j);
    for (var i = 1; i <= a.length; i++) {
      var cur = [i];
      for (j = 1; j <= b.length; j++) {
        cur.push(Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a.charAt(i - 1) !== b.charAt(j - 1) ? 1 : 0)));
      }
      prev = cur;
    }
    return prev[b.length] * 3 <= Math.max(a.length, b.length);
  }
  function align(template, message) {
    var n = message.length, m = template.length, i, j;
    var w = template.map(function (t) { return t === null ? WORD_COST : weight(t); });
    var added = message.map(weight), cost = [], step = [];
    for (i = 0; i <= n; i++) { cost.push(new Array(m + 1).fill(0)); step.push(new Array(m + 1).fill("")); }
    for (j = 1; j <= m; j++) { cost[0][j] = cost[0][j - 1] + w[j - 1]; step[0][j] = "-"; }
    for (i = 1; i <= n; i++) {
      var word = message[i - 1], row = cost[i], up = cost[i - 1], srow = step[i];
      row[0] = up[0] + added[i - 1]; srow[0] = "+";
      for (j = 1; j <= m; j++) {
        var t = template[j - 1], best, how;
        if (t === null) {
          best = up[j - 1]; how = "v";
          if (up[j] < best && (step[i - 1][j] === "v" || step[i - 1][j] === "w")) { best = up[j]; how = "w"; }
        } else {
          if (word === t) { best = up[j - 1]; how = "="; }
          else if (i > 1 && message[i - 2] + word === t) { best = cost[i - 2][j - 1]; how = "2"; }
          else if (close(word, t)) { best = up[j - 1] + Math.max(w[j - 1], added[i - 1]); how = "~"; }
          else { best = up[j - 1] + w[j - 1] + added[i - 1]; how = "~"; }
          if (up[j] + added[i - 1] < best) { best = up[j] + added[i - 1]; how = "+"; }
        }
        if (row[j - 1] + w[j - 1] < best) { best = row[j - 1] + w[j - 1]; how = "-"; }
        row[j] = best; srow[j] = how;
      }
    }
    var steps = [];
    i = n; j = m;
    while (j > 0 || i > 0) {
      var h = step[i][j];
      if (h === "=" || h === "~" || h === "v") { steps.push([h, i - 1, j - 1]); i--; j--; }
      else if (h === "2") { steps.push(["=", i - 1, j - 1], ["=", i - 2, j - 1]); i -= 2; j--; }
      else if (h === "w") { steps.push(["v", i - 1, j - 1]); i--; }
      else if (h === "+") { steps.push(["+", i - 1, -1]); i--; }
      else { steps.push(["-", -1, j - 1]); j--; }
    }
    steps.reverse();
    return [cost[n][m], steps];
  }
  function alignedValues(names, template, steps, toks, text) {
    var spans = {};
    steps.forEach(function (s) {
      if (s[0] !== "v") return;
      var a = toks[s[1]][1], b = toks[s[1]][2], old = spans[s[2]];
      spans[s[2]] = old ? [Math.min(old[0], a), Math.max(old[1], b)] : [a, b];
    });
    var out = [], k = 0;
    template.forEach(function (t, j) {
      if (t !== null) return;
      if (k < names.length && spans[j]) out.push([names[k], text.slice(spans[j][0], spans[j][1])]);
      k++;
    });
    return out;
  }
  function probably(message, clues) {
    var toks = tokens(message);
    if (!toks.length || toks.length > FUZZY_MAX_TOKENS) return [];
    var words = {}, n = 0;
    (message.match(WORD) || []).forEach(function (w) { if (!words[w.toLowerCase()]) { words[w.toLowerCase()] = true; n++; } });
    if (!n) return [];
    var shared = [];
    index.entries.forEach(function (e) {
      if (!e.matchable || e.literal < MIN_LITERAL) return;
      var inter = 0, size = 0, ew = wordsOf(e);
      for (var w in ew) { size++; if (words[w]) inter++; }
      if (size && inter / size >= FUZZY_MIN_WORDS) shared.push([inter / size, e]);
    });
    shared.sort(function (a, b) {  // as kb explain: most words shared, the release's own, the longest
      return (b[0] - a[0]) || ((a[1].older ? 1 : 0) - (b[1].older ? 1 : 0)) || (b[1].literal - a[1].literal) ||
        (a[1].id < b[1].id ? -1 : a[1].id > b[1].id ? 1 : 0);
    });
    var out = [], plain = toks.map(function (t) { return t[0]; });
    shared.slice(0, FUZZY_CANDIDATES).forEach(function (x) {
      var e = x[1], template = templateTokens(e), literal = 0, count = 0;
      template.forEach(function (t) { if (t !== null) { count++; literal += weight(t); } });
      if (count < FUZZY_MIN_TOKENS) return;
      var r = align(template, plain);
      if (r[0] > FUZZY_EDITS * literal) return;
      out.push({cost: r[0], words: JSON.stringify(template),
                match: {e: e, kind: "probably", score: literal - r[0], values: alignedValues(e.names, template, r[1], toks, message)}});
    });
    if (!out.length) return [];
    var least = Math.min.apply(null, out.map(function (o) { return o.cost; })), seen = {}, kinds = 0;
    out.forEach(function (o) { if (o.cost === least && !seen[o.words]) { seen[o.words] = true; kinds++; } });
    if (kinds > 1) return [];  // two templates of other words are as close: which one is a guess
    return rank(out.map(function (o) { return o.match; }), clues).slice(0, 3);
  }
  function fuller(message, clues) {  // as kb explain: cut off, else (when that explains little) aligned
    var cut = truncated(message, clues);
    if (!cut.length || cut[0].score < message.length / 2) {
      var near = probably(message, clues);
      if (near.length) cut = near;
    }
    return cut;
  }
  function innerFirst(matches, clues) {  // as kb explain: an error carried in a value comes first
    if (!matches.length) return matches;
    var best = matches[0];
    for (var i = 0; i < best.values.length; i++) {
      var inner = matchRecord(best.values[i][1], clues);
      if (inner.length && inner[0].kind === "exact") {
        return [inner[0], best].concat(inner.slice(1), matches.slice(1));
      }
    }
    return matches;
  }
  // As kb explain's _answered(): the first answer is the page of an error the release raises.
  var LIVE_VIA = {successor: true, same: true, declared: true}, NEAREST_FLOOR = 0.01, live = null;
  function liveEntry(id) {  // the index entry of an error the release raises
    if (!live) {
      live = {};
      index.entries.forEach(function (e) { if (!e.older && !e.part && !live["\u0000" + e.id]) live["\u0000" + e.id] = e; });
    }
    return live["\u0000" + id] || null;
  }
  function livePage(e) {  // the live error whose page answers for an index entry, or null
    if (!e.older) return e.id;
    return e.page && (e.current || LIVE_VIA[e.via] === true) ? e.page : null;
  }
  function sameParts(a, b) { return JSON.stringify(a.parts) === JSON.stringify(b.parts); }
  function answerOf(best, others, clues) {
    var candidates = [];
    [best].concat(others).forEach(function (m) {
      if (m.kind !== best.kind || m.score !== best.score) return;
      var page = livePage(m.e), entry = page !== null ? liveEntry(page) : null;
      if (entry) candidates.push([m, entry]);
    });
    if (!candidates.length) return null;
    var pick = candidates[0];
    if (!pick[1].solution && !clues.files[best.e.file]) {  // a page with a fix for the same message first
      pick = candidates.filter(function (c) { return c[1].solution && sameParts(c[0].e, pick[0].e); })[0] || pick;
    }
    var via = pick[0] !== best || pick[1].id !== livePage(best.e) ? "same" : !best.e.older ? "own" :
      best.e.current ? "successor" : (best.e.via || "same");
    return {e: pick[1], via: via};
  }
  function jaccard(a, b) {  // as kb explain's _similarity()
    var inter = 0, size = 0, w, aw = wordsOf(a), bw = wordsOf(b);
    for (w in aw) { size++; if (bw[w]) inter++; }
    for (w in bw) if (!aw[w]) size++;
    return size ? Math.round(1000 * inter / size) / 1000 : 0;
  }
  function closestOf(best, answer) {  // a removed error: the current error closest to it
    if (!best.e.older || best.e.current) return null;
    if (answer) return {e: answer.e, kind: "similar", score: jaccard(best.e, answer.e), values: []};
    return similar(best.e.parts.join(" "), NEAREST_FLOOR)[0] || null;
  }
  function span(e) { return e.releases[0] === e.releases[1] ? e.releases[0] : e.releases[0] + "\u2013" + e.releases[1]; }
  function templateOf(e) {
    var s = e.parts[0];
    for (var i = 1; i < e.parts.length; i++) s += "{" + e.names[i - 1] + "}" + e.parts[i];
    return s;
  }
  function wordingNote(e) {  // as kb explain's wording_note()
    if (!e.older) return "";
    if (e.current) return "This is the wording of vLLM " + span(e) + "; since " + e.endedIn + " it reads: " +
      e.currentTemplate + " -> " + e.current;
    return "Raised up to vLLM " + e.releases[1] + " (from " + e.releases[0] + "); removed in " + e.endedIn + ".";
  }
  function answerNote(r) {  // as kb explain's answer_note(): the user's wording beside the answer
    var a = r.answer, e = r.e;
    if (!a) return wordingNote(e);
    if (!e.older) return "";
    if (a.via === "successor") return wordingNote(e);
    var where = a.e.file + ":" + a.e.line, gone = e.endedIn ? ", removed in " + e.endedIn : "";
    var own = "Your wording is vLLM " + span(e) + "'s (" + e.file + ":" + e.line + gone + ")";
    if (sameParts(a.e, e)) return own + "; today the same message is raised at " + where + ".";
    if (a.via === "declared") return own + "; today this check is made at " + where +
      ", the successor its curated entry declares: " + templateOf(a.e);
    return own + "; today the same error is raised at " + where + ": " + templateOf(a.e);
  }
  function explain(text) {
    var asked = text.trim().toLowerCase();
    if (/^[0-9a-f]{16}$/.test(asked)) {  // an error's id (a link to a page the site lacks lands here): its wording
      var byId = index.entries.filter(function (e) { return e.id === asked && !e.part; })[0];
      if (byId) text = templateOf(byId);
    }
    var found = [], seen = {}, clues = cluesOf(text);
    function add(matches) {  // one error per template and values: the best, then the others that match
      var key = matches[0].e.id + JSON.stringify(matches[0].values);
      if (seen[key]) return;
      seen[key] = true;
      var best = matches[0];
      best.answer = answerOf(best, matches.slice(1), clues);
      best.closest = closestOf(best, best.answer);
      found.push(best);
      matches.slice(1).forEach(function (o) { o.other = true; found.push(o); });
    }
    records(text).forEach(function (r) {
      var matches = innerFirst(matchRecord(r.text, clues), clues);
      if (!matches.length) return;
      if (matches[0].kind === "contained") {  // a longer template cut off or aligned here explains more of it
        var more = fuller(unwrap(r.text), clues);
        if (more.length && (more[0].kind === "probably" || more[0].score > matches[0].score)) {
          matches = [more[0]].concat(matches);
        }
      }
      add(matches);
    });
    if (found.length) return {found: found};
    // As kb explain: messages cut off at the end on any line (the longest may be aligned whole instead).
    var messages = records(text).map(function (r) { return unwrap(r.text); }), longest = -1;
    messages.forEach(function (m, i) { if (longest < 0 || m.length > messages[longest].length) longest = i; });
    messages.forEach(function (message, i) {
      var cut = i === longest ? fuller(message, clues) : truncated(message, clues);
      if (cut.length) add(cut);
    });
    if (found.length) return {found: found};
    return {found: [], closestTo: longest >= 0 ? messages[longest] : ""};  // suggestions(): when words find nothing either
  }
  function suggestions(r) { return r.found.length ? [] : similar(r.closestTo); }
  window.kbExplain = function (text) {
    var r = explain(text);
    function plain(m) { return {id: m.e.id, kind: m.kind, score: m.score, values: m.values}; }
    function main(m) {
      return {id: m.e.id, kind: m.kind, score: m.score, values: m.values, answer: m.answer ? m.answer.e.id : null,
              via: m.answer ? m.answer.via : null, closest: m.closest ? [m.closest.e.id, m.closest.score] : null,
              note: answerNote(m)};
    }
    return {found: r.found.filter(function (m) { return !m.other; }).map(main), suggestions: suggestions(r).map(plain)};
  };

  // The ranked word search: the lunr query kb/search/words.py's clauses() builds, over the word
  // index the build wrote with lunr.py, so `kb search` ranks alike. The index comes in pieces
  // (kb/search/shards.py): a small head, then only the buckets of the terms a query needs, fetched
  // while the words are typed.
  var headUrl = new URL(script.dataset.search, window.location.href).href, wordHead = null, headLoading = null;
  var bucketLoads = {}, loaded = {}, byTerm = Object.create(null), titles = null, shownOf = null, titlesLoading = null;
  function queryTerms(text) { return text.normalize("NFKC").toLowerCase().match(/[a-z0-9]+/g) || []; }
  function queryWords(query, s) {  // as query_words(): each word once, in the order first met
    var seen = {};
    var head = Array.from(query).slice(0, s.maxChars).join("");  // characters, as Python counts them
    return queryTerms(head).slice(0, s.maxTerms).filter(function (w) {
      if (seen[" " + w]) return false;
      seen[" " + w] = true;
      return true;
    });
  }
  function clauses(query, data) {
    var s = data.settings, order = [], best = {}, sources = {};
    function add(term, boost, n, prefix) {
      var key = (prefix ? "*" : " ") + term;
      if (!(key in best)) { order.push([term, prefix, key]); best[key] = boost; sources[key] = []; }
      else if (best[key] < boost) best[key] = boost;
      if (sources[key].indexOf(n) < 0) sources[key].push(n);
    }
    queryWords(query, s).forEach(function (word, n) {
      add(word, 1.0, n, false);
      var means = Object.prototype.hasOwnProperty.call(data.synonyms, word) ? data.synonyms[word] : [];  // not "constructor"
      means.forEach(function (other) { add(other, s.synonymBoost, n, false); });
      if (word.length >= s.prefixMin && !/^[0-9]+$/.test(word)) add(word, s.prefixBoost, n, true);
    });
    return order.map(function (o) { return {term: o[0], prefix: o[1], boost: best[o[2]], words: sources[o[2]]}; });
  }
  // as coordination(): the share of the query's words a document holds, squared
  function coordination(matched, forms, words) {
    var held = {}, count = 0;
    forms.forEach(function (f) {
      var c = f[0], stems = f[1];
      var hit = matched.some(function (t) {
        return stems.indexOf(t) >= 0 || (c.prefix && t.slice(0, c.term.length) === c.term);
      });
      if (hit) c.words.forEach(function (n) { if (!held[n]) { held[n] = true; count++; } });
    });
    var share = count / words;
    return share * share;
  }
  function loadHead() {
    if (!headLoading) {
      headLoading = fetchJson(headUrl).then(function (data) {
        if (!data || data.format !== WORDS_FORMAT) throw new Error("not a word index of this kb: " + String(data && data.format).slice(0, 40));
        data.pipeline = lunr.Pipeline.load(data.pipeline);
        wordHead = data;
        return data;
      }, function (e) { headLoading = null; throw e; });  // the next search tries again
    }
    return headLoading;
  }
  function bucketOf(term) {  // the last bucket whose first term is not after `term`
    var b = wordHead.buckets, low = 0, high = b.length - 1;
    while (low < high) {
      var mid = (low + high + 1) >> 1;
      if (b[mid][0] <= term) low = mid; else high = mid - 1;
    }
    return low;
  }
  function bucketsFor(parts) {  // the files of the terms a query looks up: a prefix's may be several
    var files = [];
    function add(i) { var f = wordHead.buckets[i][1]; if (files.indexOf(f) < 0) files.push(f); }
    parts.forEach(function (c) {
      if (c.prefix) {
        for (var i = bucketOf(c.term), last = bucketOf(c.term + "\uffff"); i <= last; i++) add(i);
      } else {
        wordHead.pipeline.runString(c.term).forEach(function (t) { add(bucketOf(t)); });
      }
    });
    return files;
  }
  function loadBucket(file) {  // rows: [term, its number, then per field: doc, weight, doc, weight, ...]
    if (!bucketLoads[file]) {
      bucketLoads[file] = fetchJson(new URL(file, headUrl).href).then(function (data) {
        data.terms.forEach(function (row) { byTerm[row[0]] = row; });
        loaded[file] = data.terms;
      }, function (e) { delete bucketLoads[file]; throw e; });
    }
    return bucketLoads[file];
  }
  function wordsReady(text) {
    return wordHead !== null && bucketsFor(clauses(text, wordHead)).every(function (f) { return loaded[f]; });
  }
  function loadWords(text) {  // the head, then the buckets `text` needs
    return loadHead().then(function () { return Promise.all(bucketsFor(clauses(text, wordHead)).map(loadBucket)); });
  }
  // lunr's index of the terms a query reaches (its words, their stems, the terms its prefixes begin):
  // their postings, and each document's field vectors with these terms' weights only. A score is
  // the dot product of the query's vector and a field vector, which only the query's terms reach:
  // it is the score over the whole index (tests/test_browser.py compares them with kb search's).
  function queryIndex(parts) {
    var rows = Object.create(null);
    parts.forEach(function (c) {
      if (c.prefix) {
        for (var i = bucketOf(c.term), last = bucketOf(c.term + "\uffff"); i <= last; i++) {
          loaded[wordHead.buckets[i][1]].forEach(function (row) { if (row[0].lastIndexOf(c.term, 0) === 0) rows[row[0]] = row; });
        }
      } else {
        wordHead.pipeline.runString(c.term).forEach(function (t) { if (byTerm[t]) rows[t] = byTerm[t]; });
      }
    });
    var terms = Object.keys(rows).sort(), inverted = Object.create(null), vectors = Object.create(null);
    terms.slice().sort(function (a, b) { return rows[a][1] - rows[b][1]; }).forEach(function (term) {
      var row = rows[term], n = row[1], posting = {_index: n};  // by term number: each vector in order
      wordHead.fields.forEach(function (field, k) {
        var flat = row[2 + k], docs = {};
        for (var i = 0; i < flat.length; i += 2) {
          var ref = field + "/" + flat[i];
          docs[flat[i]] = {};
          (vectors[ref] = vectors[ref] || []).push(n, flat[i + 1]);
        }
        posting[field] = docs;
      });
      inverted[term] = posting;
    });
    var fieldVectors = Object.create(null);
    Object.keys(vectors).forEach(function (ref) { fieldVectors[ref] = new lunr.Vector(vectors[ref]); });
    return new lunr.Index({invertedIndex: inverted, fieldVectors: fieldVectors, tokenSet: lunr.TokenSet.fromArray(terms),
                           fields: wordHead.fields, pipeline: wordHead.pipeline});
  }
  function ranked(text, limit) {  // [[id, score]], best first: score, then id (as kb search)
    var parts = clauses(text, wordHead);
    if (!parts.length) return [];
    var idx = queryIndex(parts);
    var found = idx.query(function (q) {
      parts.forEach(function (c) {
        q.term(c.term, {boost: c.boost, usePipeline: !c.prefix,
                        wildcard: c.prefix ? lunr.Query.wildcard.TRAILING : lunr.Query.wildcard.NONE});
      });
    });
    var words = 0, pipeline = idx.pipeline;
    parts.forEach(function (c) { c.words.forEach(function (n) { if (n + 1 > words) words = n + 1; }); });
    var forms = parts.map(function (c) { return [c, c.prefix ? [c.term] : pipeline.runString(c.term)]; });
    return found.map(function (m) {
      var score = m.score * coordination(Object.keys(m.matchData.metadata), forms, words);
      return [wordHead.docs[+m.ref], Math.round(score * 1e6) / 1e6];
    })
      .sort(function (a, b) { return (b[1] - a[1]) || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0); })
      .filter(function (x) { return x[1] > 0; }).slice(0, limit);
  }
  // What a result shows of each error (title, class, file, line, curated) by id, as the match index
  // gives it: for the words ranked before the match index is in, and an id it does not list.
  function loadTitles() {
    if (!titlesLoading) {
      titlesLoading = loadHead().then(function () { return fetchJson(new URL(wordHead.titles, headUrl).href); })
        .then(function (data) {
          titles = {}; shownOf = {};
          data.titles.forEach(function (t, n) {
            var id = wordHead.docs[n], w = data.where[n];
            titles[id] = t;
            shownOf[id] = {id: id, title: t, cls: w[0], file: data.files[w[1]], line: w[2], curated: w[3] === 1};
          });
        }, function (e) { titlesLoading = null; throw e; });
    }
    return titlesLoading;
  }
  function wordMatches(hits) {
    return hits.map(function (x) {
      var e = (index && liveEntry(x[0])) || (shownOf && shownOf[x[0]]) || {id: x[0], title: x[0], cls: "", file: "", line: 0};
      return {e: e, kind: "words", score: x[1], values: []};
    });
  }
  var WORD_RESULTS = 20, PREFETCH_WORDS = 12, PAUSE_MS = 150, WORDS_FIRST_MS = 1000, WORDS_FORMAT = "kb-search-words/1";
  window.kbSearch = function (text, limit) {  // for the tests: what kb search --json ranks
    return loadWords(text).then(loadTitles).then(function () {
      return ranked(text, limit || 10).map(function (x) { return {id: x[0], score: x[1], title: titles[x[0]]}; });
    });
  };
  function few(text) {  // a few words: their pieces are fetched while they are typed
    return normalize(text).trim() !== "" && text.length <= 40 * PREFETCH_WORDS && queryTerms(text).length <= PREFETCH_WORDS;
  }
  var PASTED = new RegExp(EXCEPTION_MARK.source);  // "ValueError: ...": a message, for the lookup first
  function typed(text) { return few(text) && text.indexOf("\n") < 0 && !PASTED.test(text); }
  function prefetch(text) {  // the buckets of a few typed words load while the user types on
    if (few(text)) loadWords(text).catch(function () { /* told when the search runs */ });
  }

  function line(className, text) {
    var div = document.createElement("div");
    div.className = className;
    div.textContent = text;
    return div;
  }
  // An error's title as the pages show it (kb/site/render.py title_html): each placeholder, a
  // balanced {...} at the top level, in a var.ph; words in backticks outside them as code; a lone
  // backtick stays text. Built as nodes, never as HTML.
  function appendTitle(parent, text) {
    var spans = [], open = [], pairs = [], i;
    for (i = 0; i < text.length; i++) {
      if (text[i] === "{") open.push(i);
      else if (text[i] === "}" && open.length) pairs.push([open.pop(), i + 1]);
    }
    pairs.sort(function (x, y) { return x[0] - y[0]; });
    pairs.forEach(function (p) { if (!spans.length || p[0] >= spans[spans.length - 1][1]) spans.push(p); });
    var ticks = [], s = 0;
    for (i = 0; i < text.length; i++) {
      while (s < spans.length && spans[s][1] <= i) s++;
      if (text[i] === "`" && !(s < spans.length && spans[s][0] <= i)) ticks.push(i);
    }
    if (ticks.length % 2) ticks.pop();
    var into = parent, last = 0;
    function words(to) {
      for (var k = last; k < to; k++) {
        var t = ticks.indexOf(k);
        if (t < 0) continue;
        into.appendChild(document.createTextNode(text.slice(last, k)));
        if (t % 2 === 0) { into = parent.appendChild(document.createElement("code")); } else { into = parent; }
        last = k + 1;
      }
      into.appendChild(document.createTextNode(text.slice(last, to)));
    }
    spans.forEach(function (p) {
      words(p[0]);
      var v = into.appendChild(document.createElement("var"));
      v.className = "ph";
      v.textContent = text.slice(p[0], p[1]);
      last = p[1];
    });
    words(text.length);
  }
  function pageLink(id, text) {
    var a = document.createElement("a");
    a.href = root + "errors/" + id + "/";
    appendTitle(a, text);
    return a;
  }
  var HOW = {contained: " · found inside your text", truncated: " · your message is cut off: matched its start",
             probably: " · probably: the same words, spaced, cased or wrapped otherwise"};
  // One result. A found error leads with its first answer, the page of an error the release raises,
  // with its meaning and first fix, and the user's wording beside it (as kb explain prints it). What
  // has no page is plain text, never a link that goes nowhere: a removed error is given the nearest
  // live page instead.
  function item(r) {
    var li = document.createElement("li"), main = r.answer !== undefined && !r.other;
    var head = main && r.answer ? r.answer.e : r.e;
    var page = main && r.answer ? r.answer.e.id : (r.e.older ? r.e.page : r.e.id) || null;
    var title;
    if (page) {
      title = pageLink(page, head.title);
    } else {
      title = document.createElement("span");
      title.className = "nolink";
      appendTitle(title, head.title);
    }
    li.appendChild(title);
    var meta = document.createElement("span");
    meta.className = "where";
    var how = r.kind === "similar" ? " · similarity " + r.score + " (not a match)" : HOW[r.kind] || "";
    var wording = main || !r.e.older ? "" : r.e.current ? " · the wording of vLLM " + span(r.e) + "; since " + r.e.endedIn +
      " it is " + r.e.current : " · raised by vLLM " + span(r.e) + "; removed in " + r.e.endedIn;
    meta.textContent = " " + head.cls + " · " + head.file + ":" + head.line + (head.curated ? " · curated" : "") + how + wording;
    li.appendChild(meta);
    var note = main ? answerNote(r) : "";
    if (note) li.appendChild(line("note", note));
    if (r.values.length) li.appendChild(line("values", r.values.map(function (v) { return v[0] + " = " + v[1]; }).join(",  ")));
    if (main) {
      var derived = head.derived ? " (derived from vLLM's source)" : "";
      if (head.meaning) li.appendChild(line("meaning", "What it means" + derived + ": " + head.meaning));
      if (head.fixText) li.appendChild(line("fix", "First fix" + derived + ": " + head.fixText));  // plain text
      if (!page) {
        var gone = line("note", "No page on this site: vLLM " + (index.release || "of this build") + " does not raise it. ");
        if (r.closest) {
          gone.appendChild(document.createTextNode("The closest current error (similarity " + r.closest.score.toFixed(2) +
                                                   ", not this error): "));
          gone.appendChild(pageLink(r.closest.e.id, r.closest.e.title));
        } else {
          var browse = document.createElement("a");
          browse.href = root + "browse/";
          browse.textContent = "Browse the errors it raises";
          gone.appendChild(browse);
        }
        li.appendChild(gone);
      }
    }
    return li;
  }

  var searches = 0;  // a search started later wins over one still waiting for its words
  function run(text, navigate) {
    var mine = ++searches;
    list.textContent = "";
    if (!normalize(text).trim()) { statusEl.textContent = ""; return; }
    var early = ahead !== null && ahead.text === text ? ahead : null;
    var r = early && early.r ? early.r : explain(text);
    var main = r.found.filter(function (m) { return !m.other; });
    if (navigate && main.length === 1 && main[0].kind === "exact" && main[0].answer) {
      // straight to the first answer's page, unless an equal match leads to another live page
      var target = main[0].answer.e.id;
      var rivals = r.found.filter(function (m) {
        var other = m.other && m.kind === main[0].kind && m.score === main[0].score ? livePage(m.e) : null;
        return other !== null && other !== target;
      });
      if (!rivals.length) { window.location.href = root + "errors/" + target + "/"; return; }
    }
    if (r.found.length) {
      statusEl.textContent = "Your text matches " + main.length + " known error" + (main.length > 1 ? "s" : "") +
        (r.found.length > main.length ? " (less specific templates that match too are listed after each)" : "") + ".";
      r.found.forEach(function (x) { list.appendChild(item(x)); });
      return;
    }
    if (!wordsReady(text)) statusEl.textContent = "Loading the word index…";  // the pieces this query needs
    loadWords(text).then(function () {
      var hits = early && early.hits ? early.hits : ranked(text, WORD_RESULTS);
      var unknown = hits.some(function (x) { return !liveEntry(x[0]); });
      return unknown ? loadTitles().then(function () { return hits; }) : hits;
    }).then(function (hits) {
      if (mine === searches) showWords(wordMatches(hits), r);
    }).catch(function (e) { if (mine === searches) statusEl.textContent = "Could not load the word index" + reason(e); });
  }
  // What a search of the box's text finds, worked out while the typing pauses: Enter shows it at once.
  var ahead = null, pause = null;
  function lookAhead() {
    var text = box.value;
    if (!index || !normalize(text).trim() || (ahead !== null && ahead.text === text && ahead.r)) return;
    var r = explain(text), known = ahead !== null && ahead.text === text ? ahead.hits : null;
    ahead = {text: text, r: r, hits: known || (!r.found.length && wordsReady(text) ? ranked(text, WORD_RESULTS) : null)};
    var mine = ahead;
    if (!r.found.length && !mine.hits) {
      loadWords(text).then(function () { if (ahead === mine && !mine.hits) mine.hits = ranked(text, WORD_RESULTS); },
                           function () { /* told when the search runs */ });
    }
  }
  function wordsStatus(n) {
    return "Errors ranked by these words, best first" + (n === WORD_RESULTS ? " (the first " + WORD_RESULTS + ")" : "") + ".";
  }
  function showWords(results, r, note) {  // note: what the lookup is yet to say, while the match index loads
    if (results.length) {
      statusEl.textContent = wordsStatus(results.length) + (note ? " " + note : "");
    } else {
      results = suggestions(r);
      statusEl.textContent = results.length ? "No known error matches. The closest templates:" :
        "No known error matches. Try fewer words, or a part of the message without values.";
    }
    list.textContent = "";
    results.forEach(function (x) { list.appendChild(item(x)); });
  }
  // The lookup's work on every template, done once as the page settles (the first search would wait for it).
  function warm(from) {
    var end = Math.min(index.entries.length, from + 2000);
    for (var i = from; i < end; i++) wordsOf(prepare(index.entries[i]));
    if (end < index.entries.length) setTimeout(function () { warm(end); }, 0); else startIndex();
  }

  // The match index: 1.2 MB gzipped, 6.4 MB of JSON on 0.34.0. The page preloads it; unpacking and
  // reading it is the page's longest work, done on its one thread. A failed load is tried again by
  // the next search.
  var indexLoading = null, indexError = null;
  function loadIndex() {
    if (!indexLoading) {
      indexLoading = fetchJson(indexUrl).then(function (data) {
        index = data;
        indexError = null;
        statusEl.textContent = "";
        setTimeout(function () { warm(0); }, 0);
        return data;
      }, function (e) { indexError = e; indexLoading = null; throw e; });
    }
    return indexLoading;
  }
  // Until the match index is in, a few typed words (not a pasted "ValueError: ...") are ranked and
  // listed first (the index is unpacked once they are, or after WORDS_FIRST_MS: both would share
  // the thread), the status saying that the lookup is still to answer; then run() takes over as if
  // the index had been there: a known message replaces the words (or its page opens), and the list
  // is the one the lookup-first order gives.
  var LOOKING = "Still checking whether your text is a known error message…";
  function lookup() { return indexError ? "Could not load the search index" + reason(indexError) : LOOKING; }
  function search(text, navigate) {
    if (index) { run(text, navigate); return; }
    var mine = ++searches, listed = 0;
    list.textContent = "";
    var words = !typed(text) ? Promise.resolve() : Promise.all([loadWords(text), loadTitles()]).then(function () {
      if (mine !== searches || index) return;  // a later search, or the lookup is in
      ahead = {text: text, r: null, hits: ranked(text, WORD_RESULTS)};
      listed = ahead.hits.length;  // none: the closest templates wait for the match index
      if (listed) showWords(wordMatches(ahead.hits), null, lookup());
    }, function () { /* told when the search runs */ });
    var late = new Promise(function (go) { setTimeout(go, WORDS_FIRST_MS); });  // a stalled piece holds no lookup up
    Promise.race([words, late]).then(loadIndex).then(function () { if (mine === searches) run(text, navigate); }, function () {
      if (mine === searches) statusEl.textContent = (listed ? wordsStatus(listed) + " " : "") + lookup();
    });
  }

  var params = new URLSearchParams(window.location.search);
  var initial = params.get("q") || "";
  box.value = initial;
  statusEl.textContent = "Loading the index…";
  loadHead().catch(function () { /* told when a search needs it */ });
  search(initial, true);  // a few words from the header's box are listed before the match index is read
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var url = new URL(window.location.href);
    url.searchParams.set("q", box.value);
    history.replaceState(null, "", url);
    search(box.value, true);
  });
  box.addEventListener("input", function () {
    prefetch(box.value);
    clearTimeout(pause);
    pause = setTimeout(lookAhead, PAUSE_MS);
  });
})();
