// "Check your configuration": evaluates the check's condition, sent by the build as a JSON
// tree of the same expression that `kb check` evaluates (kb/evaluate.py), with Python's
// semantics (floor division, modulo sign, chained comparisons, `in`, None).
(function () {
  "use strict";
  function Missing(name) { this.name = name; }

  function eq(a, b) {
    if (typeof a === "boolean") a = a ? 1 : 0;
    if (typeof b === "boolean") b = b ? 1 : 0;
    if (Array.isArray(a) && Array.isArray(b)) {
      return a.length === b.length && a.every(function (x, i) { return eq(x, b[i]); });
    }
    return a === b;
  }
  function truthy(v) {
    if (Array.isArray(v)) return v.length > 0;
    return !(v === null || v === false || v === 0 || v === "");
  }
  function num(v) { return typeof v === "boolean" ? (v ? 1 : 0) : v; }
  function contains(container, item) {
    if (typeof container === "string") return container.indexOf(item) >= 0;
    return container.some(function (x) { return eq(x, item); });
  }
  var BIN = {
    "+": function (a, b) { return (typeof a === "string") ? a + b : num(a) + num(b); },
    "-": function (a, b) { return num(a) - num(b); },
    "*": function (a, b) { return num(a) * num(b); },
    "/": function (a, b) { if (num(b) === 0) throw new Error("division by zero"); return num(a) / num(b); },
    "//": function (a, b) { if (num(b) === 0) throw new Error("division by zero"); return Math.floor(num(a) / num(b)); },
    "%": function (a, b) { if (num(b) === 0) throw new Error("division by zero"); var m = num(a) % num(b); return (m !== 0 && (m < 0) !== (num(b) < 0)) ? m + num(b) : m; },
    "**": function (a, b) { return Math.pow(num(a), num(b)); }
  };
  var CMP = {
    "==": eq, "!=": function (a, b) { return !eq(a, b); },
    "<": function (a, b) { return num(a) < num(b); }, "<=": function (a, b) { return num(a) <= num(b); },
    ">": function (a, b) { return num(a) > num(b); }, ">=": function (a, b) { return num(a) >= num(b); },
    "in": function (a, b) { return contains(b, a); }, "not in": function (a, b) { return !contains(b, a); },
    "is": function (a, b) { return a === b; }, "is not": function (a, b) { return a !== b; }
  };
  var CALL = {
    min: function () { var a = arguments.length === 1 ? arguments[0] : Array.prototype.slice.call(arguments); return Math.min.apply(null, a.map(num)); },
    max: function () { var a = arguments.length === 1 ? arguments[0] : Array.prototype.slice.call(arguments); return Math.max.apply(null, a.map(num)); },
    len: function (x) { return x.length; }, abs: function (x) { return Math.abs(num(x)); },
    int: function (x) { return Math.trunc(Number(x)); }, float: function (x) { return Number(x); },
    str: function (x) { return x === null ? "None" : x === true ? "True" : x === false ? "False" : String(x); },
    bool: truthy
  };

  function ev(t, env) {
    switch (t[0]) {
      case "const": return t[1];
      case "name": if (!(t[1] in env)) throw new Missing(t[1]); return env[t[1]];
      case "and": { var v = true; for (var i = 0; i < t[1].length; i++) { v = ev(t[1][i], env); if (!truthy(v)) return v; } return v; }
      case "or": { var w = false; for (var j = 0; j < t[1].length; j++) { w = ev(t[1][j], env); if (truthy(w)) return w; } return w; }
      case "not": return !truthy(ev(t[1], env));
      case "neg": return -num(ev(t[1], env));
      case "pos": return num(ev(t[1], env));
      case "bin": return BIN[t[1]](ev(t[2], env), ev(t[3], env));
      case "cmp": {
        var left = ev(t[1], env);
        for (var k = 0; k < t[2].length; k++) {
          var right = ev(t[2][k][1], env);
          if (!CMP[t[2][k][0]](left, right)) return false;
          left = right;
        }
        return true;
      }
      case "if": return truthy(ev(t[1], env)) ? ev(t[2], env) : ev(t[3], env);
      case "list": return t[1].map(function (x) { return ev(x, env); });
      case "item": return ev(t[1], env)[ev(t[2], env)];
      case "call": return CALL[t[1]].apply(null, t[2].map(function (x) { return ev(x, env); }));
    }
    throw new Error("unknown node " + t[0]);
  }

  function read(input) {
    var text = input.value.trim(), type = input.dataset.type;
    if (text === "") return undefined;
    if (text === "None" || text === "null") return null;
    if (type === "bool" || type === "present") return /^(true|1|yes|on)$/i.test(text);
    if (type === "int" || type === "float" || type === "size") {
      var m = /^([0-9.]+)\s*([kKmM]?)$/.exec(text);
      if (!m) return NaN;
      var n = Number(m[1]) * (m[2] ? (m[2].toLowerCase() === "k" ? 1000 : 1000000) : 1);
      return type === "float" ? n : Math.trunc(n);
    }
    return text.replace(/^"(.*)"$/, "$1");
  }

  // Valid values, as `kb check` lists them (kb/checks/valid.py): for a count flag, 1 to 16, the powers
  // of two to 1024 and the divisors of the other counts given, at least its minimum; those with which
  // neither this check nor another check reading the flag (its inputs known, vLLM's defaults for
  // flags) raises, the rest unchanged.
  var MAX_CANDIDATES = 64;
  function raisesWith(tree, env) {
    try { return truthy(ev(tree, env)); } catch (e) { return false; }  // a check that cannot run: skipped
  }
  function candidates(name, env, inputs) {
    var found = {}, k, v;
    for (k = 1; k <= 16; k++) found[k] = true;
    for (k = 0; k <= 10; k++) found[Math.pow(2, k)] = true;
    inputs.forEach(function (input) {
      v = env[input.name];
      if (input.name !== name && (input.dataset.kind === "flag" || input.dataset.kind === "hardware") &&
          typeof v === "number" && v > 0 && v <= 4096 && Math.floor(v) === v) {
        for (k = 1; k <= v; k++) if (v % k === 0) found[k] = true;
      }
    });
    return Object.keys(found).map(Number).sort(function (a, b) { return a - b; });
  }
  function validValues(tree, peers, env, inputs) {
    var out = [];
    inputs.forEach(function (input) {
      if (input.dataset.kind !== "flag" || input.dataset.type !== "int") return;
      var name = input.name, low = input.dataset.min ? Number(input.dataset.min) : 0;
      var good = candidates(name, env, inputs).filter(function (v) { return v >= low; }).slice(0, MAX_CANDIDATES)
        .filter(function (v) {
          var trial = Object.assign({}, env); trial[name] = v;
          if (raisesWith(tree, trial)) return false;
          return !peers.some(function (p) {
            if (p[1].indexOf(name) < 0) return false;
            var penv = Object.assign({}, p[2], trial);
            return raisesWith(p[0], penv);
          });
        });
      if (good.length) out.push([input.dataset.flag, good]);
    });
    return out;
  }

  window.kbCheck = { evaluate: ev, Missing: Missing, validValues: validValues };
  Array.prototype.forEach.call(document.querySelectorAll("form.checker"), function (form) {
    var tree = JSON.parse(form.dataset.tree), out = form.querySelector(".verdict");
    var peers = JSON.parse(form.dataset.peers || "[]"), valid = form.querySelector(".valid");
    var inputs = Array.prototype.slice.call(form.querySelectorAll("input"));
    function update() {
      var env = {}, bad = null;
      Array.prototype.forEach.call(form.querySelectorAll("input"), function (input) {
        var v = read(input);
        if (v !== undefined) env[input.name] = v;
        if (!bad && typeof v === "number" && (isNaN(v) || (input.dataset.min && v < Number(input.dataset.min)))) {
          bad = isNaN(v) ? input.name + " must be a number." :  // as kb check: the vocabulary's minimum
            input.name + " must be at least " + input.dataset.min + ", got " + v + " (kb check refuses it too).";
        }
      });
      out.hidden = false;
      if (valid) valid.hidden = true;
      if (bad) { out.className = "verdict"; out.textContent = bad; return; }
      try {
        var raises = truthy(ev(tree, env));
        out.className = "verdict " + (raises ? "raises" : "ok");
        out.textContent = raises ? "✗ vLLM raises this error with these values." : "✔ This error is not raised with these values.";
        if (raises && valid) {
          var found = validValues(tree, peers, env, inputs);
          valid.textContent = found.map(function (f) {
            return "Valid " + f[0] + " here (the rest unchanged, every check of it passes): " + f[1].join(", ");
          }).join(" ");
          valid.hidden = found.length === 0;
        }
      } catch (e) {
        out.className = "verdict";
        out.textContent = e instanceof Missing ? "Give a value for " + e.name + "." : "Cannot evaluate: " + e.message;
      }
    }
    form.addEventListener("input", update);
    update();
  });
})();
