/* node js_model_driver.js MODEL_JS WEIGHTS_DIR JOB_JSON OUT_DIR: loads the weights dumped by tests/test_js_model.py
 * (weights.bin, raw little-endian float64, and index.json {name: {shape, offset, length, qdq?}} plus config.json),
 * runs every task of the job and writes result.json; big float arrays go to result.bin as float64, referenced from
 * the JSON as {bin: offset, n: length}. */
const fs = require("fs");
const path = require("path");
const [, , modelJs, weightsDir, jobPath, outDir] = process.argv;
const DSparkModel = require(path.resolve(modelJs));

const raw = fs.readFileSync(path.join(weightsDir, "weights.bin"));
const all = new Float64Array(raw.buffer, raw.byteOffset, raw.length / 8);
const index = JSON.parse(fs.readFileSync(path.join(weightsDir, "index.json"), "utf8"));
const config = JSON.parse(fs.readFileSync(path.join(weightsDir, "config.json"), "utf8"));
// the model's files as a page loads them, in order (lab/browser/__init__.py's MODEL_SCRIPTS), after `first`
const MODEL_SCRIPTS = ["ops.js", "attention.js", "speculative.js", "model.js"];
function runPageScripts(context, first = []) {
  const vm = require("vm");
  const dir = path.dirname(path.resolve(modelJs));
  for (const name of [...first, ...MODEL_SCRIPTS]) vm.runInContext(fs.readFileSync(path.join(dir, name), "utf8"), context);
}
function weightsFrom(idx) {
  const w = {};
  for (const [name, e] of Object.entries(idx)) {
    w[name] = { shape: e.shape, data: all.subarray(e.offset, e.offset + e.length) };
    if (e.qdq) w[name].qdq = e.qdq;
  }
  return w;
}

const chunks = [];
let binLength = 0;
function bin(arr) {
  const a = Float64Array.from(arr);
  chunks.push(Buffer.from(a.buffer));
  const ref = { bin: binLength, n: a.length };
  binLength += a.length;
  return ref;
}

const job = JSON.parse(fs.readFileSync(jobPath, "utf8"));
const models = {};
function modelFor(task) {
  const key = task.weights || "master";
  if (!models[key]) {
    const idx = key === "master" ? index.master : index.qdq;
    const t0 = performance.now();
    models[key] = DSparkModel.createModel(weightsFrom(idx), config);
    models[key].loadMs = performance.now() - t0;
  }
  return models[key];
}

function run(task) {
  const model = modelFor(task);
  if (task.kind === "forward") {
    const out = model.forward(task.ids, null, { trace: !!task.trace });
    const res = { logits: bin(out.logits) };
    if (task.trace) {
      res.layers = out.trace.layers.map((l) => bin(l.x));
      res.fields = out.trace.layers.map((l) =>
        Object.fromEntries(
          ["attn_input", "ffn_input", "attn_pre", "attn_post", "attn_comb", "ffn_pre", "ffn_post", "ffn_comb",
            "router_scores", "route_weights", "sink_share"].map((k) => [k, bin(l[k])]),
        ),
      );
      res.engram_gates = Object.fromEntries(Object.entries(out.trace.engram).map(([k, v]) => [k, bin(v.gate)]));
      res.index_scores = Object.fromEntries(Object.entries(out.trace.picks).map(([k, v]) => [k, bin(v.scores)]));
      res.chosen = out.trace.layers.map((l) => Array.from(l.chosen));
      res.engram_rows = Object.fromEntries(Object.entries(out.trace.engram).map(([k, v]) => [k, v.row_ids]));
      res.picks = Object.fromEntries(Object.entries(out.trace.picks).map(([k, v]) => [k, Array.from(v.picks)]));
      res.taps = Object.fromEntries(Object.entries(out.taps).map(([k, v]) => [k, bin(v)]));
    }
    return res;
  }
  if (task.kind === "steps") {
    // chunks fed one after another; each [ids, keep]: keep rows committed (null: all)
    const cache = model.newCache();
    const logits = [];
    for (const [ids, keep] of task.steps) {
      const out = model.forward(ids, cache, { commit: false });
      model.commit(cache, out.pending, keep === null ? undefined : keep);
      logits.push(bin(out.logits));
    }
    const snap = model.snapshot(cache);
    const snapRefs = {};
    for (const [k, v] of Object.entries(snap))
      snapRefs[k] = /\.(kv|index_k|carry_kv|carry_score)$/.test(k) ? bin(v) : v;
    return { logits, snapshot: snapRefs };
  }
  if (task.kind === "draft") {
    const cache = model.newCache();
    model.forward(task.prompt, cache);
    const d = model.draft(cache, task.anchor, task.k);
    return {
      tokens: d.tokens,
      draft_probs: d.draftProbs,
      confidence: d.confidence,
      logits: bin(d.logits),
      base: bin(d.base),
      hidden: bin(d.hidden),
    };
  }
  if (task.kind === "generate") {
    // the text fields from the lab tokenizer's JavaScript twin (next to model.js) when a tokenizer.json is given
    const tok = task.tokenizer_json
      ? require(path.join(path.dirname(path.resolve(modelJs)), "tokenizer.js"))(
          JSON.parse(fs.readFileSync(task.tokenizer_json, "utf8")),
        )
      : null;
    return model.generate(task.prompt, {
      maxNewTokens: task.max_new,
      verifyLen: task.verify_len,
      plain: task.plain !== false,
      decode: tok ? (ids) => tok.decode(ids) : undefined,
      temperature: task.temperature,
      seed: task.seed, // a decimal string above 2**53
    });
  }
  if (task.kind === "distribution") {
    // softmax(logits / T) of each row [n, V] of task.logits (flat), as sampling at T > 0 computes it
    const x = Float64Array.from(task.logits);
    const V = task.vocab;
    const rows = [];
    for (let i = 0; i < x.length / V; i++) rows.push(...DSparkModel.sampling.tokenDistribution(x, i * V, V, task.T));
    return { probs: bin(rows) };
  }
  if (task.kind === "residual") {
    // the residual distribution of each pair of rows p_t, p_d [n, V] (flat)
    const pt = Float64Array.from(task.pt);
    const pd = Float64Array.from(task.pd);
    const V = task.vocab;
    const rows = [];
    for (let i = 0; i < pt.length / V; i++)
      rows.push(...DSparkModel.sampling.residual(pt.subarray(i * V, (i + 1) * V), pd.subarray(i * V, (i + 1) * V)).dist);
    return { dist: bin(rows) };
  }
  if (task.kind === "verify_block") {
    // DSparkModel.sampling.verifyBlock on given rows, drawing from PortableGenerator(seed): the verdict and the draws
    const R = require(path.join(path.dirname(path.resolve(modelJs)), "random.js"));
    const g = new R.PortableGenerator(task.seed);
    const v = DSparkModel.sampling.verifyBlock(
      task.tokens, Float64Array.from(task.pd), Float64Array.from(task.pt), task.vocab, () => g.random());
    return { ...v, draws: Number(g.counter) };
  }
  if (task.kind === "time") {
    const reps = task.reps || 5;
    const time = (f) => {
      const ts = [];
      for (let i = 0; i < reps; i++) {
        const t0 = performance.now();
        f();
        ts.push(performance.now() - t0);
      }
      ts.sort((a, b) => a - b);
      return ts[Math.floor(ts.length / 2)];
    };
    const prefill = time(() => model.forward(task.prompt, model.newCache(), { lastOnly: true }));
    const base = model.newCache();
    model.forward(task.prompt, base, { lastOnly: true });
    const decode = time(() => model.forward([task.prompt[0]], model.cloneCache(base), { lastOnly: true }));
    const gen = time(() => model.generate(task.prompt, { maxNewTokens: task.max_new, plain: false }));
    return { prefill_ms: prefill, decode_ms: decode, speculative_ms: gen, load_ms: model.loadMs };
  }
  if (task.kind === "quant") {
    // each row of `x` (a multiple of 32 values) through fp8 QDQ, fp4 QDQ with an E8M0 scale per 32 and with an E4M3
    // scale per 16
    const x = Float64Array.from(task.x);
    const out = { fp8: new Float64Array(x.length), e8m0: new Float64Array(x.length), e4m3: new Float64Array(x.length) };
    DSparkModel.quant.fp8Qdq(x, 0, x.length, out.fp8, 0);
    DSparkModel.quant.fp4Qdq(x, 0, x.length, out.e8m0, 0, 32, "e8m0");
    DSparkModel.quant.fp4Qdq(x, 0, x.length, out.e4m3, 0, 16, "e4m3");
    return { fp8: bin(out.fp8), e8m0: bin(out.e8m0), e4m3: bin(out.e4m3) };
  }
  if (task.kind === "constants") {
    const c = config;
    const win = DSparkModel.ropeInvFreq(c.rope_head_dim, c.rope_theta, false);
    const comp = DSparkModel.ropeInvFreq(
      c.rope_head_dim, c.compress_rope_theta, true, c.rope_factor, c.original_seq_len, c.beta_fast, c.beta_slow);
    return { window: Array.from(win), compressed: Array.from(comp), primes: DSparkModel.engramPrimes(c) };
  }
  if (task.kind === "page") {
    // the script run as a page's script (no `module`): it defines the global DSparkModel
    const vm = require("vm");
    const page = {};
    vm.createContext(page);
    runPageScripts(page);
    const global = typeof page.DSparkModel === "object" && typeof page.DSparkModel.createModel === "function";
    // and it runs there, without node's globals: the same greedy tokens as the module
    const inPage = page.DSparkModel.createModel(weightsFrom(index.master), config);
    const opts = { maxNewTokens: 8, verifyLen: 3 };
    const same = JSON.stringify(inPage.generate(task.prompt, opts).speculative.tokens) ===
      JSON.stringify(modelFor(task).generate(task.prompt, opts).speculative.tokens);
    return { global, same };
  }
  if (task.kind === "page_sampling") {
    // random.js and model.js run as a page's two scripts (random.js first): sampling there draws what the module draws
    const vm = require("vm");
    const page = {};
    vm.createContext(page);
    runPageScripts(page, ["random.js"]);
    const inPage = page.DSparkModel.createModel(weightsFrom(index.master), config);
    const result = inPage.generate(task.prompt, task.opts);
    // without random.js the page still decodes greedily, and sampling says what is missing
    const bare = {};
    vm.createContext(bare);
    runPageScripts(bare);
    const alone = bare.DSparkModel.createModel(weightsFrom(index.master), config);
    const greedy = alone.generate(task.prompt, { ...task.opts, temperature: 0 }).speculative.tokens;
    let error = null;
    try {
      alone.generate(task.prompt, task.opts);
    } catch (e) {
      error = String(e.message);
    }
    return { result, module: modelFor(task).generate(task.prompt, task.opts), greedy, error };
  }
  if (task.kind === "error") {
    try {
      if (task.call === "create") {
        const w = weightsFrom(index.master);
        for (const [name, change] of Object.entries(task.weights_change || {})) {
          if (change === null) delete w[name];
          else {
            const data = change.length ? new Float64Array(change.length) : w[name].data;
            w[name] = { ...w[name], ...change, data };
          }
        }
        const cfg = { ...config, ...(task.config_change || {}) };
        for (const name of task.config_drop || []) delete cfg[name];
        DSparkModel.createModel(w, cfg);
      } else if (task.call === "forward") model.forward(task.ids);
      else if (task.call === "draft") model.draft(model.prefill(task.prompt).cache, task.anchor, task.k);
      else {
        const opts = { ...task.opts };
        if ("uniform_value" in opts) opts.uniform = () => opts.uniform_value; // a draw source giving one value
        model.generate(task.prompt, opts);
      }
      return { error: null };
    } catch (e) {
      return { error: String(e.message) };
    }
  }
  throw new Error("unknown task " + task.kind);
}

const results = job.tasks.map(run);
fs.writeFileSync(path.join(outDir, "result.bin"), Buffer.concat(chunks));
fs.writeFileSync(path.join(outDir, "result.json"), JSON.stringify({ results }));
