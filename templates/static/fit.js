// "Will it fit?" on the memory error pages: kb/fit/ (shape.py, memory.py) in the browser. The
// constants come from the page (data-defs: kb.fit.memory.definitions(), the same numbers kb fit
// uses); a browser test compares this form with `kb fit` (tests/test_browser.py).
(function () {
  "use strict";
  var GIB = 1073741824;

  function int(d, keys, dflt) {
    for (var i = 0; i < keys.length; i++) {
      var v = d[keys[i]];
      if (typeof v === "number" && isFinite(v) && v >= 0 && Math.floor(v) === v) return v;
    }
    return dflt;
  }

  function shapeOf(config, defs) {
    var text = config.text_config && typeof config.text_config === "object" ? config.text_config : config;
    var layers = int(text, ["num_hidden_layers", "n_layer", "num_layers"], 0);
    var hidden = int(text, ["hidden_size", "n_embd", "d_model"], 0);
    var heads = int(text, ["num_attention_heads", "n_head"], 0);
    if (!layers || !hidden || !heads) throw new Error("config.json needs num_hidden_layers, hidden_size and num_attention_heads");
    var dtype = String(text.torch_dtype || text.dtype || config.torch_dtype || "bfloat16");
    if (dtype === "float32" || dtype === "float") dtype = "bfloat16";
    var quant = config.quantization_config || text.quantization_config || config.compression_config;
    var bits = 0, method = "";
    if (quant && typeof quant === "object") {
      method = String(quant.quant_method || quant.format || "");
      bits = int(quant, ["bits", "w_bit", "num_bits"], 0);
      var groups = quant.config_groups;
      if (!bits && groups && typeof groups === "object") {
        var first = groups[Object.keys(groups)[0]];
        if (first && first.weights) bits = int(first.weights, ["num_bits"], 0);
      }
      if (!bits && ["fp8", "fbgemm_fp8", "modelopt"].indexOf(method) >= 0) bits = 8;
      if (!bits && ["mxfp4", "gpt_oss_mxfp4"].indexOf(method) >= 0) bits = 4;
    }
    var window = int(text, ["sliding_window"], 0), sliding = [];
    var types = text.layer_types, mt = text.model_type;
    if (Array.isArray(types) && types.length === layers) sliding = types.map(function (t) { return t === "sliding_attention"; });
    else if (window && (mt === "gemma2" || mt === "cohere2")) for (var i = 0; i < layers; i++) sliding.push(i % 2 === 0);
    else if (window && (mt === "gemma3" || mt === "gemma3_text")) {
      var pattern = int(text, ["sliding_window_pattern"], 6) || 6;
      for (var j = 0; j < layers; j++) sliding.push((j + 1) % pattern !== 0);
    } else if (window && text.use_sliding_window !== false && (mt === "mistral" || mt === "mixtral")) {
      for (var k = 0; k < layers; k++) sliding.push(true);
    }
    if (sliding.indexOf(true) < 0) { sliding = []; window = 0; }
    var kv = int(text, ["num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num"], heads) || heads;
    var vision = config.vision_config, visionParams = 0;
    if (vision && typeof vision === "object") {
      var vh = int(vision, ["hidden_size", "embed_dim", "width"], 0), vl = int(vision, ["num_hidden_layers", "depth", "layers"], 0);
      var vi = int(vision, ["intermediate_size"], 4 * vh);
      visionParams = vl * (4 * vh * vh + 2 * vh * vi) + vh * hidden * 2;
    }
    var headDim = int(text, ["head_dim"], Math.floor(hidden / heads)) || Math.floor(hidden / heads);
    return {
      layers: layers, hidden: hidden, heads: heads, kv: kv, headDim: headDim, vHeadDim: int(text, ["v_head_dim"], headDim),
      inter: int(text, ["intermediate_size", "ffn_dim", "n_inner"], 4 * hidden), vocab: int(text, ["vocab_size", "padded_vocab_size"], 32000),
      tied: !!(text.tie_word_embeddings !== undefined ? text.tie_word_embeddings : config.tie_word_embeddings),
      dtype: dtype, experts: int(text, ["num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"], 0),
      topk: int(text, ["num_experts_per_tok", "moe_topk", "top_k"], 0),
      moeInter: int(text, ["moe_intermediate_size"], int(text, ["intermediate_size"], 0)),
      shared: int(text, ["n_shared_experts", "num_shared_experts"], 0), dense: int(text, ["first_k_dense_replace"], 0),
      kvLora: int(text, ["kv_lora_rank"], 0), rope: int(text, ["qk_rope_head_dim"], 0), nope: int(text, ["qk_nope_head_dim"], 0),
      qLora: int(text, ["q_lora_rank"], 0), window: window, sliding: sliding, bits: bits, visionParams: visionParams,
      mpe: int(text, ["max_position_embeddings"], 0)
    };
  }

  function weightBytes(s, defs, quantization) {
    var embed = s.vocab * s.hidden * (s.tied ? 1 : 2), attn;
    if (s.kvLora) {
      var q = s.qLora ? s.hidden * s.qLora + s.qLora * s.heads * (s.nope + s.rope) : s.hidden * s.heads * (s.nope + s.rope);
      attn = q + s.hidden * (s.kvLora + s.rope) + s.kvLora * s.heads * (s.nope + s.vHeadDim) + s.heads * s.vHeadDim * s.hidden;
    } else {
      attn = s.hidden * s.headDim * (s.heads + 2 * s.kv) + s.heads * s.headDim * s.hidden;
    }
    var denseMlp = 3 * s.hidden * s.inter, linear, other;
    if (s.experts) {
      var moe = 3 * s.hidden * s.moeInter * (s.experts + s.shared), dense = Math.min(s.dense, s.layers);
      linear = s.layers * attn + dense * denseMlp + (s.layers - dense) * moe;
      other = embed + (s.layers - dense) * s.hidden * s.experts;
    } else {
      linear = s.layers * (attn + denseMlp);
      other = embed;
    }
    other += 2 * s.layers * s.hidden + s.visionParams;
    var bits = s.bits;
    if (!bits && defs.online8bit.indexOf(quantization) >= 0) bits = 8;
    var perLinear = !bits || bits >= 16 ? (defs.dtypeBytes[s.dtype] || 2) : bits / 8 + (bits <= 4 ? 2 / 128 : 0);
    return linear * perLinear + other * (defs.dtypeBytes[s.dtype] || 2);
  }

  function kvBytes(s, defs, kvDtype) {
    if (!kvDtype || kvDtype === "auto") return defs.dtypeBytes[s.dtype] || 2;
    if (/^(fp8|nvfp4|int8|int4|turboquant|octave)/.test(kvDtype)) return 1;
    return defs.dtypeBytes[kvDtype] || 2;
  }

  function layout(s, defs, tp, pp, kvDtype, block) {
    var b = kvBytes(s, defs, kvDtype);
    var page = s.kvLora ? block * (s.kvLora + s.rope) * b : block * Math.max(1, Math.floor(s.kv / tp)) * 2 * s.headDim * b;
    var layers = Math.ceil(s.layers / pp), sliding = 0;
    if (s.sliding.length) sliding = Math.round(layers * s.sliding.filter(Boolean).length / s.sliding.length);
    var full = layers - sliding;
    if (!sliding || !full) return { page: page, block: block, full: full, sliding: sliding, window: s.window, group: layers, sg: sliding ? 1 : 0, fg: full ? 1 : 0 };
    var small = Math.min(full, sliding), large = Math.max(full, sliding), group = large < 1.5 * small ? large : small;
    return { page: page, block: block, full: full, sliding: sliding, window: s.window, group: group, sg: Math.ceil(sliding / group), fg: Math.ceil(full / group) };
  }

  function perRequest(l, length, inflight) {
    var full = Math.ceil(length / l.block);
    var sw = Math.ceil(Math.min(l.window - 1 + inflight, length) / l.block) + 1;
    return l.fg * full + l.sg * sw;
  }

  function gib(b) { return String(Math.round(b / GIB * 100) / 100); }
  // Python's str(round(x, 2)): a float always shows a decimal point ("32.0")
  function pyGib(b) { var t = gib(b); return t.indexOf(".") < 0 && t.indexOf("e") < 0 ? t + ".0" : t; }

  // kb/fit/follow.py fill: the release's own template, its placeholders named without their objects
  function fill(template, values) {
    return template.replace(/\{([^{}]*)\}/g, function (m, name) {
      var key = name.replace(/\s/g, "").replace(/\b[A-Za-z_][A-Za-z0-9_]*\./g, "");
      return Object.prototype.hasOwnProperty.call(values, key) ? values[key] : m;
    });
  }

  // kb/fit/follow.py kv_hint: _more_kv_cache_memory_hint as the release spells it (null: none)
  function hint(defs, ext, util, after) {
    var h = !ext ? defs.hints.classic : util < 1 ? (after ? defs.hints.afterBelow : defs.hints.beforeBelow)
      : (after ? defs.hints.afterFull : defs.hints.beforeFull);
    return h == null ? null : h.split("{u}").join(String(util));
  }

  function message(defs, key, values) {
    var t = defs.templates[key];
    return t ? "vLLM raises: " + fill(t, values) : "kb predicts: " + key;
  }

  function compute(s, defs, inp) {
    var std = defs.blockDefault || 16;
    var block = inp.block || (s.kvLora && inp.cc === 9 ? Math.max(std, 64) : s.kvLora && inp.cc === 10 ? Math.max(std, 128) : std);
    var l = layout(s, defs, inp.tp, inp.pp, inp.kvDtype, block), bpb = l.group * l.page;
    var weights = weightBytes(s, defs, inp.quantization) / (inp.tp * inp.pp);
    var requested = Math.ceil(inp.total * inp.util);
    var t = inp.tokens, r = Math.min(inp.tokens, inp.seqs);
    var sampler = defs.samplerBytesPerLogit * r * s.vocab;
    var mlp = s.experts ? 0 : Math.floor(3 * s.inter / inp.tp);
    var act = Math.max(sampler, t * (4 * s.hidden + mlp) * 2) +
      (s.experts ? Math.floor(2 * t * s.topk * 2 * s.moeInter / inp.tp) * 2 : 0);
    var nonTorch = inp.tp > 1 ? defs.nonTorchTp : defs.nonTorchTp1;
    var ext = !!defs.extensible;
    var graphs = inp.eager ? 0 : defs.cudagraphBase + defs.cudagraphPerLayer * (l.full + l.sliding);
    var cg = ext ? graphs : (defs.estimateCudagraphs ? graphs : 0);
    var available = requested - weights - act - nonTorch - (ext ? 0 : cg), capacity = null;
    if (ext) {  // measure_kv_cache_bytes, with the estimates of what it measures
      capacity = available;
      var resident = weights + nonTorch + cg, margin = Math.max(defs.marginFloor, defs.marginFraction * act);
      available = Math.max(0, Math.min(requested - resident, inp.total - resident - margin) - act);
    }
    var blocks = Math.max(0, Math.floor(available / bpb)), length = inp.length;
    var check = (ext ? capacity : available) - bpb;
    var inflight = (inp.pp + 1) * inp.tokens;
    function needed(n) { return bpb * perRequest(l, n, inflight); }
    function longest(mem) {
      if (mem <= 0 || needed(1) > mem) return 0;
      var lo = 1, hi = Math.max(1, length);
      while (lo < hi) { var mid = Math.floor((lo + hi + 1) / 2); if (needed(mid) <= mem) lo = mid; else hi = mid - 1; }
      return lo;
    }
    var errors = [];
    function kvErrors(mem, after) {
      var h = hint(defs, ext, inp.util, after), v = h == null ? {} : { hint: h };
      if (mem <= 0) { errors.push(message(defs, "no-memory", v)); return true; }
      if (needed(length) > mem) {
        var fitsHere = longest(mem);
        v.max_model_len = String(length);
        v["format_gib(needed_memory)"] = pyGib(needed(length));
        v["format_gib(available_memory)"] = pyGib(mem);
        v.estimated_msg = fitsHere ? "Based on the available memory, the estimated maximum model length is " + fitsHere + ". " : "";
        errors.push(message(defs, "max-seq-len", v));
        return true;
      }
      return false;
    }
    // vLLM stops at its first failure, in the order its startup runs the steps (kb fit's Rules.startup);
    // loading fails when the weights exceed the GPU's memory, whatever the utilization says
    var weightsFail = weights > inp.total, order = defs.startup || ["load_model", "get_kv_cache_configs"];
    var loadFirst = order.indexOf("load_model") < order.indexOf("get_kv_cache_configs");
    if (weightsFail && loadFirst) errors.push("kb predicts: loading the weights fails with CUDA out of memory: they take " + pyGib(weights) + " GiB per GPU, more than the GPU's free memory (" + pyGib(inp.total) + " GiB)");
    else if (!kvErrors(check, false) && ext) kvErrors((blocks - 1) * bpb, true);
    if (weightsFail && !errors.length) errors.push("kb predicts: loading the weights fails with CUDA out of memory: they take " + pyGib(weights) + " GiB per GPU, more than the GPU's free memory (" + pyGib(inp.total) + " GiB)");
    var fits = longest(ext ? (blocks - 1) * bpb : check);
    var conc = blocks / perRequest(l, length, inflight);
    return { weights: weights, act: act, nonTorch: nonTorch, cg: cg, available: available, perToken: (l.full + l.sliding) * l.page / block,
             tokens: Math.floor(conc * length), conc: conc, fits: fits, errors: errors };
  }

  function run(form) {
    var defs = JSON.parse(form.getAttribute("data-defs")), out = form.querySelector(".fit-out");
    function val(name) { var e = form.elements[name]; return e ? e.value.trim() : ""; }
    try {
      var config = JSON.parse(val("config") || "{}");
      var s = shapeOf(config, defs);
      var gpu = defs.gpus[val("gpu")], total = parseFloat(val("gpu_memory_gib")) || (gpu ? gpu.memory_gib : 0);
      if (!(total > 0)) throw new Error("Choose a GPU or give its memory in GiB.");
      var length = parseInt(val("max_model_len"), 10) || s.mpe;
      if (!(length > 0)) throw new Error("Give --max-model-len (config.json has no max_position_embeddings).");
      // get_batch_defaults for `vllm serve`: 160 GiB and more, 70 GiB and more but not an A100 or GB10, the rest
      var name = gpu ? gpu.name.toLowerCase() : "", gb10 = gpu && gpu.capability[0] === 12 && gpu.capability[1] === 1;
      var tier = total >= 160 ? defs.batch.huge : total >= 70 && name.indexOf("a100") < 0 && !gb10 ? defs.batch.large : defs.batch.small;
      var seqs = parseInt(val("max_num_seqs"), 10) || tier[1];
      var tokens = parseInt(val("max_num_batched_tokens"), 10) || tier[0];
      if (!val("max_num_batched_tokens")) tokens = Math.min(tokens, seqs * length);
      var r = compute(s, defs, { total: total * GIB, tp: parseInt(val("tensor_parallel_size"), 10) || 1,
        pp: parseInt(val("pipeline_parallel_size"), 10) || 1, util: parseFloat(val("gpu_memory_utilization")) || defs.utilization,
        length: length, kvDtype: val("kv_cache_dtype") || "auto", tokens: tokens, seqs: seqs,
        eager: form.elements.enforce_eager && form.elements.enforce_eager.checked, block: parseInt(val("block_size"), 10) || 0,
        cc: gpu ? gpu.capability[0] : 0, quantization: val("quantization") });
      var rows = [["Weights per GPU", gib(r.weights) + " GiB (estimated from config.json)"],
        ["Activation peak", gib(r.act) + " GiB (estimated)"], ["CUDA graphs", gib(r.cg) + " GiB"],
        ["KV cache memory per GPU", gib(r.available) + " GiB"], ["KV bytes per token", String(r.perToken)],
        ["KV cache tokens", String(r.tokens)], ["Max concurrency at max_model_len", (Math.round(r.conc * 100) / 100).toFixed(2) + "x"],
        ["Longest max_model_len that fits", String(r.fits)]];
      out.textContent = "";
      var dl = document.createElement("dl");
      rows.forEach(function (row) {
        var dt = document.createElement("dt"), dd = document.createElement("dd");
        dt.textContent = row[0]; dd.textContent = row[1]; dd.setAttribute("data-key", row[0]);
        dl.appendChild(dt); dl.appendChild(dd);
      });
      out.appendChild(dl);
      var verdict = document.createElement("p");
      verdict.className = "fit-verdict";
      verdict.textContent = r.errors.length ? r.errors[0] : "Fits: vLLM starts with this KV cache.";
      out.appendChild(verdict);
    } catch (e) {
      out.textContent = e.message;
    }
  }

  document.querySelectorAll("form.fit").forEach(function (form) {
    form.addEventListener("input", function () { run(form); });
    form.addEventListener("change", function () { run(form); });
    run(form);
  });
})();
