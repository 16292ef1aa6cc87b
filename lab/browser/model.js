/* The lab model in plain JavaScript, float64: a twin of dspark_mini (preset `lab`) for pages and scripts without
 * Python. The same numbers as the library's forward (every logit within 1e-9 of the largest |logit|; measured a few
 * 1e-15), the FP8/FP4 rounding bit for bit, the same caches, the same DSpark draft and greedy verify loop
 * (tests/test_js_model.py).
 *
 *   const DSparkModel = require("./model.js");            // a page: <script src="model.js"> defines DSparkModel
 *                                           (after ops.js, attention.js and speculative.js, which node requires itself)
 *   const model = DSparkModel.createModel(weights, config);
 *   model.forward(ids)                      → {logits [S·V], hidden [S·D], taps, pending, …} (no cache)
 *   const cache = model.newCache();  model.forward(ids, cache)   → the same, and the rows committed to the cache
 *   model.forward(ids, cache, {commit: false, lastOnly, trace})  → nothing stored; model.commit(cache, pending, n)
 *                                           stores the first n rows (the rollback of a partial accept)
 *   model.prefill(ids) → {cache, logits [V], next};  model.decode(cache, ids) → logits;
 *   model.verify(cache, anchor, drafts) → {logits, pending};  model.snapshot(cache), model.cloneCache(cache)
 *   model.draft(cache, anchor, k, sampling) → DSpark draft tokens, draft probabilities, confidences, logits
 *   model.speculativeRound(cache, anchor, ℓ, need, sampling) → one draft → verify → commit round
 *                                           (sampling: none = greedy, or {temperature, draw: () → [0, 1)})
 *   model.generate(promptIds, {maxNewTokens, verifyLen, temperature, seed, decode})  → the shape of `dspark-lab
 *                                           generate --json` (its strip, and per round what the verify saw)
 *   DSparkModel.sampling.tokenDistribution(logits, off, V, T), .verifyBlock(tokens, pd, pt, V, draw), .residual(pt, pd)
 *                                           the T > 0 pieces
 *
 * weights: {name: {shape: [..], data: Float64Array}} with the checkpoint's tensor names (target and draft files
 * together). A routed expert's weight is the master weight (its MXFP4 QDQ is applied here, as the library does) or
 * an already QDQ'd one flagged `qdq: "fp4"` (used as is).
 * config: the ModelConfig fields (the checkpoint header's `config`) and what the library derives from its tokenizer
 * and its random generator: compress_map [V] (token id → Engram compressed id), engram_multipliers {layer: [decimal
 * strings]}, and optionally confidence_temperatures [k], rope_inv_freq {window, compressed} and index_weight_scale
 * (the library's own float values; without them they are computed here, which can differ in the last bit).
 * lab/browser/model_config.py writes that object from a loaded model.
 *
 * The files, each a twin of dspark_mini's modules of the same mechanism: ops.js the stateless pieces (float helpers,
 * FP8/FP4 rounding, dense kernels, the sampling rule, RoPE, mHC, Engram, MoE), attention.js the compressor, indexer,
 * candidate filter and attention of one block, speculative.js the draft and generation, and this file the model that
 * holds the weights and the caches: its forward, the commit and rollback of rows.
 * Layouts: every array is a flat Float64Array, row-major; the shape is written where it is made (`// [S, hc, D]`).
 * Sampling (temperature > 0) draws with random.js's PortableGenerator (a page loads random.js first; node requires it
 * from next to this file) in the library's order, so a seed gives the tokens `dspark-lab generate --temperature T
 * --seed S` gives (tests/test_js_sampling.py); greedy decoding needs no random.js.
 */
(function (root, factory) {
  const DSparkModel = factory(root);
  if (typeof module === "object" && module && module.exports) module.exports = DSparkModel;
  else root.DSparkModel = DSparkModel;
})(typeof globalThis !== "undefined" ? globalThis : this, function (root) {
  "use strict";

  const ops = root.DSparkOps || require("./ops.js"); // a page loads ops.js, attention.js, speculative.js first
  const DSparkAttention = root.DSparkAttention || require("./attention.js");
  const DSparkSpeculative = root.DSparkSpeculative || require("./speculative.js");
  const {
    MIN_TEMPERATURE, applyRope, argmax, engramForward, engramPrimes, engramRowIds, fp4Qdq, fp8Qdq, hcPre, laneSum,
    linear, pow2Scale, residual, rmsNorm, ropeInvFreq, ropeTable, roundToGrid, tokenDistribution, verifyBlock,
  } = ops;

  // ---- the model ----------------------------------------------------------------------------------------------------
  const REQUIRED_CONFIG = [
    "vocab_size", "dim", "n_layers", "n_mtp_layers", "n_heads", "head_dim", "rope_head_dim", "q_lora_rank",
    "o_groups", "o_lora_rank", "window_size", "compress_ratios", "kv_source_layers", "index_source_layers",
    "candidate_source_layer", "candidate_topk_blocks", "candidate_block_size", "index_n_heads", "index_head_dim",
    "index_topk", "rope_theta", "compress_rope_theta", "rope_factor", "original_seq_len", "beta_fast", "beta_slow",
    "max_seq_len", "n_routed_experts", "n_activated_experts", "n_shared_experts", "moe_inter_dim", "route_scale",
    "gate_temp", "swiglu_limit", "hc_mult", "hc_sinkhorn_iters", "hc_eps", "norm_eps", "engram_layer_ids",
    "engram_max_ngram_size", "engram_vocab_size", "engram_n_heads", "engram_head_dim", "engram_pad_id",
    "dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids", "dspark_tap_mix", "dspark_markov_kind",
    "dspark_n_routed_experts", "dspark_n_activated_experts", "dtype", "kv_quant", "expert_quant", "expert_act_quant",
    "engram_table_quant", "compress_map", "engram_multipliers",
  ];

  function checkConfig(cfg) {
    if (!cfg || typeof cfg !== "object") throw new Error("config must be an object of ModelConfig fields");
    for (const name of REQUIRED_CONFIG)
      if (!(name in cfg)) throw new Error(`config field '${name}' is missing`);
    const need = (ok, name, allowed) => {
      if (!ok) throw new Error(`config field '${name}' = ${JSON.stringify(cfg[name])} is invalid: allowed ${allowed}`);
    };
    need(cfg.dtype === "float64", "dtype", "'float64' (this twin computes in float64 only)");
    need(cfg.dspark_tap_mix === "mean", "dspark_tap_mix", "'mean'");
    need(cfg.dspark_markov_kind === "vanilla", "dspark_markov_kind", "'vanilla'");
    need(cfg.expert_act_quant === false, "expert_act_quant", "false");
    need(cfg.n_shared_experts === 1, "n_shared_experts", "1");
    need(cfg.gate_temp === 1, "gate_temp", "1");
    need(cfg.compress_map.length === cfg.vocab_size, "compress_map", `an array of vocab_size = ${cfg.vocab_size} ids`);
    for (const l of cfg.engram_layer_ids)
      need(
        Array.isArray(cfg.engram_multipliers[l]) && cfg.engram_multipliers[l].length === cfg.engram_max_ngram_size,
        "engram_multipliers",
        `{layer: [${cfg.engram_max_ngram_size} decimal strings]} for every Engram layer ${cfg.engram_layer_ids}`,
      );
    if (cfg.confidence_temperatures != null)
      need(
        cfg.confidence_temperatures.length === cfg.dspark_block_size &&
          cfg.confidence_temperatures.every((t) => t > 0 && t < Infinity),
        "confidence_temperatures",
        `${cfg.dspark_block_size} values, each > 0`,
      );
  }

  function createModel(weights, config) {
    checkConfig(config);
    const cfg = config;
    const D = cfg.dim,
      hc = cfg.hc_mult,
      V = cfg.vocab_size,
      H = cfg.n_heads,
      Dh = cfg.head_dim,
      Rq = cfg.q_lora_rank,
      Hi = cfg.index_n_heads,
      Di = cfg.index_head_dim,
      W = cfg.window_size,
      L = cfg.n_layers,
      nAll = cfg.n_layers + cfg.n_mtp_layers;

    function tensor(name, shape) {
      const t = weights[name];
      if (!t) throw new Error(`weights: tensor '${name}' is missing`);
      if (!t.data || Object.prototype.toString.call(t.data) !== "[object Float64Array]") // any realm's (a frame's)
        throw new Error(`weights: tensor '${name}' must hold its values as a Float64Array in 'data'`);
      const want = shape.reduce((a, b) => a * b, 1);
      if (!Array.isArray(t.shape) || t.shape.join(",") !== shape.join(",") || t.data.length !== want)
        throw new Error(
          `weights: tensor '${name}' has shape [${t.shape}] (${t.data.length} values): expected [${shape}]`,
        );
      return t.data;
    }

    /** A routed expert's weight as the kernels read it: the master weight MXFP4-QDQ'd here, or an entry flagged
     * qdq: "fp4" as is. */
    function expertWeight(name, shape) {
      const data = tensor(name, shape);
      const flag = weights[name].qdq;
      if (flag !== undefined && flag !== null && flag !== "fp4")
        throw new Error(`weights: tensor '${name}' has qdq = ${JSON.stringify(flag)}: allowed "fp4" or none`);
      if (flag === "fp4" && !cfg.expert_quant)
        throw new Error(`weights: tensor '${name}' has qdq = "fp4" but config field 'expert_quant' is false`);
      if (flag === "fp4" || !cfg.expert_quant) return data;
      const out = new Float64Array(data.length); // [rows, cols], blocks of 32 along cols
      fp4Qdq(data, 0, data.length, out, 0, 32, "e8m0");
      return out;
    }

    const ropeWindow = cfg.rope_inv_freq
      ? Float64Array.from(cfg.rope_inv_freq.window)
      : ropeInvFreq(cfg.rope_head_dim, cfg.rope_theta, false);
    const ropeCompressed = cfg.rope_inv_freq
      ? Float64Array.from(cfg.rope_inv_freq.compressed)
      : ropeInvFreq(
          cfg.rope_head_dim, cfg.compress_rope_theta, true, cfg.rope_factor, cfg.original_seq_len, cfg.beta_fast,
          cfg.beta_slow,
        );
    const indexScale =
      cfg.index_weight_scale != null ? cfg.index_weight_scale : Math.pow(Di, -0.5) * Math.pow(Hi, -0.5);
    const attnScale = cfg.attn_scale != null ? cfg.attn_scale : Math.pow(Dh, -0.5);

    function hcWeights(p) {
      const nMix = (2 + hc) * hc;
      const fn = tensor(p + ".fn", [nMix, hc * D]),
        scale = tensor(p + ".scale", [3]);
      const fnScaled = new Float64Array(nMix * hc * D); // [24, hc·D] fn with each mix's group scale folded in
      for (let m = 0; m < nMix; m++) {
        const sc = scale[m < hc ? 0 : m < 2 * hc ? 1 : 2];
        for (let i = 0; i < hc * D; i++) fnScaled[m * hc * D + i] = fn[m * hc * D + i] * sc;
      }
      return { fnScaled, base: tensor(p + ".base", [nMix]) };
    }

    function blockWeights(i) {
      const draft = i >= L;
      const p = draft ? `mtp.layers.${i - L}` : `layers.${i}`;
      const ratio = cfg.compress_ratios[i];
      const b = {
        id: i,
        draft,
        ratio,
        kvSource: !draft && cfg.kv_source_layers.includes(i),
        indexSource: !draft && cfg.index_source_layers.includes(i),
        candidateSource: !draft && i === cfg.candidate_source_layer,
        attnNorm: tensor(p + ".attn_norm.weight", [D]),
        ffnNorm: tensor(p + ".ffn_norm.weight", [D]),
        hcAttn: hcWeights(p + ".hc_attn"),
        hcFfn: hcWeights(p + ".hc_ffn"),
      };
      b.usesCandidates = b.indexSource && cfg.candidate_source_layer >= 0 && cfg.candidate_source_layer < i;
      const a = p + ".attn.";
      const G = cfg.o_groups,
        R = cfg.o_lora_rank;
      b.attn = {
        wqA: tensor(a + "wq_a.weight", [Rq, D]),
        qNorm: tensor(a + "q_norm.weight", [Rq]),
        wqB: tensor(a + "wq_b.weight", [H * Dh, Rq]),
        wkv: tensor(a + "wkv.weight", [Dh, D]),
        kvNorm: tensor(a + "kv_norm.weight", [Dh]),
        woA: tensor(a + "wo_a.weight", [G * R, (H * Dh) / G]),
        woB: tensor(a + "wo_b.weight", [D, G * R]),
        sink: tensor(a + "attn_sink", [H]),
      };
      if (b.kvSource) {
        b.comp = {
          wkv: tensor(a + "compressor.wkv.weight", [Dh, D]),
          norm: tensor(a + "compressor.norm.weight", [Dh]),
          wgate: ratio > 1 ? tensor(a + "compressor.wgate.weight", [Dh, D]) : null,
        };
      }
      if (b.indexSource) {
        b.idx = {
          wqB: tensor(a + "indexer.wq_b.weight", [Hi * Di, Rq]),
          wproj: tensor(a + "indexer.weights_proj.weight", [Hi, D]),
          wk: b.kvSource ? tensor(a + "indexer.wk.weight", [Di, Dh]) : null,
          kNorm: b.kvSource ? tensor(a + "indexer.k_norm.weight", [Di]) : null,
        };
      }
      const E = draft ? cfg.dspark_n_routed_experts : cfg.n_routed_experts;
      const I = cfg.moe_inter_dim,
        f = p + ".ffn.";
      b.moe = {
        nExperts: E,
        topk: draft ? cfg.dspark_n_activated_experts : cfg.n_activated_experts,
        gate: tensor(f + "gate.weight", [E, D]),
        bias: tensor(f + "gate.bias", [E]),
        w1: [],
        w2: [],
        w3: [],
      };
      for (let e = 0; e < E; e++) {
        b.moe.w1.push(expertWeight(`${f}experts.${e}.w1.weight`, [I, D]));
        b.moe.w2.push(expertWeight(`${f}experts.${e}.w2.weight`, [D, I]));
        b.moe.w3.push(expertWeight(`${f}experts.${e}.w3.weight`, [I, D]));
      }
      b.moe.w1.push(tensor(f + "shared_experts.w1.weight", [I, D]));
      b.moe.w2.push(tensor(f + "shared_experts.w2.weight", [D, I]));
      b.moe.w3.push(tensor(f + "shared_experts.w3.weight", [I, D]));
      return b;
    }

    // the Engram layers: primes, offsets, multipliers and the FP8-QDQ'd table
    const primesAll = engramPrimes(cfg);
    const engrams = {};
    cfg.engram_layer_ids.forEach((l, li) => {
      const primes = primesAll[li];
      const rows = primes.reduce((a, b) => a + b, 0);
      const hd = cfg.engram_head_dim,
        cols = primes.length;
      const raw = tensor(`layers.${l}.engram.embed.weight`, [rows, hd]);
      let table = raw;
      if (cfg.engram_table_quant) {
        table = new Float64Array(raw.length); // [rows, head_dim]
        for (let r = 0; r < rows; r++) fp8Qdq(raw, r * hd, hd, table, r * hd);
      }
      const q = tensor(`layers.${l}.engram.q_weight`, [hc, D]),
        kw = tensor(`layers.${l}.engram.k_weight`, [hc, D]);
      const w = new Float64Array(hc * D); // [hc, D] q_weight ⊙ k_weight
      for (let i = 0; i < hc * D; i++) w[i] = q[i] * kw[i];
      const offsets = [];
      let acc = 0;
      for (const p of primes) {
        offsets.push(acc);
        acc += p;
      }
      engrams[l] = {
        primes,
        offsets,
        mult: cfg.engram_multipliers[l].map((v) => BigInt(v)),
        table,
        cols,
        wkv: tensor(`layers.${l}.engram.wkv.weight`, [(hc + 1) * D, cols * hd]),
        w,
      };
    });

    const blocks = [];
    for (let i = 0; i < nAll; i++) blocks.push(blockWeights(i));
    const embed = tensor("embed.weight", [V, D]);
    const head = tensor("head.weight", [V, D]);
    const norm = tensor("norm.weight", [D]);
    const r = cfg.dspark_markov_rank;
    const mtp = cfg.n_mtp_layers
      ? {
          mainNorm: tensor("mtp.main_norm.weight", [D]),
          norm: tensor("mtp.norm.weight", [D]),
          markovEmbed: tensor("mtp.markov_head.embed.weight", [V, r]),
          markovHead: tensor("mtp.markov_head.head.weight", [V, r]),
          conf: tensor("mtp.confidence_head.weight", [1, D + r]),
        }
      : null;
    const cmap = Int32Array.from(cfg.compress_map); // [V]
    const padCompressed = cmap[cfg.engram_pad_id];

    // ---- caches -----------------------------------------------------------------------------------------------------
    function newCache() {
      const cache = {
        length: 0,
        ringPos: { target: new Int32Array(W).fill(-1), draft: new Int32Array(W).fill(-1) }, // [W] each
        rings: {},
        sources: {},
        history: new Array(cfg.engram_max_ngram_size - 1).fill(padCompressed), // [n − 1] oldest first
      };
      for (let i = 0; i < nAll; i++) cache.rings[i] = new Float64Array(W * Dh); // [W, Dh]
      for (const s of cfg.kv_source_layers) {
        const ratio = cfg.compress_ratios[s],
          cap = Math.floor(cfg.max_seq_len / ratio);
        cache.sources[s] = {
          ratio,
          kv: new Float64Array(cap * Dh), // [cap, Dh]
          indexK: new Float64Array(cap * Di), // [cap, Di]
          count: 0,
          carryKv: new Float64Array(0), // [length % ratio, Dh]
          carryScore: new Float64Array(0),
        };
      }
      return cache;
    }

    /** Store the first n rows of a forward's writes (all of them when n is undefined). */
    function commit(cache, pending, n) {
      n = n === undefined ? pending.seqlen : n;
      if (pending.start !== cache.length)
        throw new Error(`pending writes start at ${pending.start} but the cache holds ${cache.length} tokens`);
      if (!(Number.isInteger(n) && n >= 0 && n <= pending.seqlen))
        throw new Error(`commit n = ${n} is out of range: allowed 0..${pending.seqlen}`);
      const start = pending.start,
        end = start + n;
      if (n) {
        const first = Math.max(start, end - W);
        for (const key in pending.window) {
          const layer = +key,
            rows = pending.window[key],
            ring = cache.rings[layer];
          for (let p = first; p < end; p++)
            ring.set(rows.subarray((p - start) * Dh, (p - start + 1) * Dh), (p % W) * Dh);
        }
        for (const pos of [cache.ringPos.target, cache.ringPos.draft]) for (let p = first; p < end; p++) pos[p % W] = p;
      }
      for (const key in cache.sources) {
        const st = cache.sources[key],
          ratio = st.ratio;
        const nNew = Math.floor(end / ratio) - Math.floor(start / ratio);
        if (nNew) {
          st.kv.set(pending.latents[key].subarray(0, nNew * Dh), st.count * Dh);
          st.indexK.set(pending.indexK[key].subarray(0, nNew * Di), st.count * Di);
          st.count += nNew;
        }
        if (ratio > 1) {
          const [tk, ts] = pending.tokens[key];
          const keep = end % ratio;
          const openKv = concat(st.carryKv, tk.subarray(0, n * Dh)); // [c + n, Dh]
          const openSc = concat(st.carryScore, ts.subarray(0, n * Dh));
          st.carryKv = openKv.slice(openKv.length - keep * Dh);
          st.carryScore = openSc.slice(openSc.length - keep * Dh);
        }
      }
      const hist = cache.history.concat(Array.from(pending.compressed.subarray(0, n)));
      cache.history = hist.slice(hist.length - cache.history.length);
      cache.length = end;
    }

    function concat(a, b) {
      const out = new Float64Array(a.length + b.length);
      out.set(a, 0);
      out.set(b, a.length);
      return out;
    }

    /** Every valid piece of a cache's state, as plain arrays (the library's KVCache.snapshot names). */
    function snapshot(cache) {
      const out = { length: cache.length };
      for (let i = 0; i < nAll; i++) {
        const pos = i >= L ? cache.ringPos.draft : cache.ringPos.target;
        out[`window.${i}.pos`] = Array.from(pos);
        const rows = [];
        for (let j = 0; j < W; j++) if (pos[j] >= 0) rows.push(...cache.rings[i].subarray(j * Dh, (j + 1) * Dh));
        out[`window.${i}.kv`] = rows;
      }
      for (const key in cache.sources) {
        const st = cache.sources[key];
        out[`source.${key}.kv`] = Array.from(st.kv.subarray(0, st.count * Dh));
        out[`source.${key}.index_k`] = Array.from(st.indexK.subarray(0, st.count * Di));
        if (st.ratio > 1) {
          out[`source.${key}.carry_kv`] = Array.from(st.carryKv);
          out[`source.${key}.carry_score`] = Array.from(st.carryScore);
        }
      }
      out["engram.history"] = cache.history.slice();
      return out;
    }

    function cloneCache(cache) {
      const c = {
        length: cache.length,
        ringPos: { target: cache.ringPos.target.slice(), draft: cache.ringPos.draft.slice() },
        rings: {},
        sources: {},
        history: cache.history.slice(),
      };
      for (const k in cache.rings) c.rings[k] = cache.rings[k].slice();
      for (const k in cache.sources) {
        const s = cache.sources[k];
        c.sources[k] = {
          ...s,
          kv: s.kv.slice(),
          indexK: s.indexK.slice(),
          carryKv: s.carryKv.slice(),
          carryScore: s.carryScore.slice(),
        };
      }
      return c;
    }

    // ---- attention (attention.js) -----------------------------------------------------------------------------------
    const { attention, block, compress, pick } = DSparkAttention.attach({
      D, Dh, Di, H, Hi, Rq, W, attnScale, cfg, concat, hc, indexScale, ropeCompressed,
    });

    function checkIds(ids, name) {
      if (!(Array.isArray(ids) || ArrayBuffer.isView(ids)) || ids.length === 0)
        throw new Error(`${name} must be a non-empty array of token ids`);
      for (const t of ids)
        if (!Number.isInteger(t) || t < 0 || t >= V)
          throw new Error(`${name}: token id ${t} is out of range: allowed 0..${V - 1}`);
    }

    function identityPre(S) {
      const pre = new Float64Array(S * hc); // [S, hc] one-hot on copy 0
      for (let s = 0; s < S; s++) pre[s * hc] = 1;
      return pre;
    }

    function embedRows(ids) {
      const S = ids.length;
      const x = new Float64Array(S * hc * D); // [S, hc, D]
      for (let s = 0; s < S; s++) {
        const row = embed.subarray(ids[s] * D, (ids[s] + 1) * D);
        for (let i = 0; i < hc; i++) x.set(row, (s * hc + i) * D);
      }
      return x;
    }

    /** The target forward over ids at positions cache.length … (0 without a cache).
     * opts: commit (default true), lastOnly (logits of the last row only), trace (what each layer computed: its
     * output streams, the mHC mixes, router scores and choices, the sink's share, Engram rows and gates, the indexer's
     * scores and picks — for teaching views). */
    function forward(ids, cache, opts) {
      opts = opts || {};
      checkIds(ids, "tokens");
      cache = cache || null;
      const S = ids.length,
        start = cache ? cache.length : 0;
      if (start + S > cfg.max_seq_len)
        throw new Error(`sequence length ${start + S} exceeds max_seq_len = ${cfg.max_seq_len}`);
      const positions = new Float64Array(S); // [S]
      for (let s = 0; s < S; s++) positions[s] = start + s;
      // what this forward would write, row by row: window rows per layer [S, Dh], a ratio-2 source's per-token kv and
      // scores [S, Dh], new latents [n, Dh] and index keys [n, Di] per source, Engram compressed ids [S]
      const pending = { start, seqlen: S, window: {}, tokens: {}, latents: {}, indexK: {} };
      pending.compressed = new Int32Array(S); // [S]
      for (let s = 0; s < S; s++) pending.compressed[s] = cmap[ids[s]];
      const history = cache ? cache.history : new Array(cfg.engram_max_ngram_size - 1).fill(padCompressed);
      const trace = opts.trace ? { layers: [], engram: {}, picks: {} } : null;
      const shared = {
        ropeWindow: ropeTable(positions, ropeWindow),
        ropeCompressed: ropeTable(positions, ropeCompressed),
        compKv: new Float64Array(0),
        indexK: new Float64Array(0),
        T: 0,
        picks: new Int32Array(0),
        pickK: 0,
        candidates: null,
        record: trace ? trace.picks : null,
        sinks: trace ? {} : null,
      };
      let x = embedRows(ids); // [S, hc, D]
      let pre = identityPre(S); // [S, hc]
      const taps = {};
      for (let i = 0; i < L; i++) {
        const b = blocks[i];
        if (engrams[i]) {
          const eg = engrams[i];
          const rows = engramRowIds(pending.compressed, history, eg.mult, eg.primes, eg.offsets); // [S, cols]
          const r2 = engramForward(eg, x, rows, S, cfg);
          x = r2.x;
          if (trace) trace.engram[i] = { row_ids: Array.from(rows), gate: r2.gate };
        }
        if (cfg.dspark_target_layer_ids.includes(i)) taps[i] = copyMean(x, S);
        const out = block(b, x, pre, S, positions, start, shared, cache, pending);
        x = out.x;
        pre = out.pre;
        if (trace)
          trace.layers.push({
            x, // [S, hc, D] the block's output streams
            attn_input: out.u, // [S, D]
            ffn_input: out.v, // [S, D]
            attn_pre: out.ma.pre, // [S, hc]
            attn_post: out.ma.post, // [S, hc]
            attn_comb: out.ma.comb, // [S, hc, hc]
            ffn_pre: out.mf.pre,
            ffn_post: out.mf.post,
            ffn_comb: out.mf.comb,
            router_scores: out.moe.scores, // [S, E]
            chosen: out.moe.chosen, // [S, k] experts, best first
            route_weights: out.moe.weights, // [S, k]
            sink_share: shared.sinks[i], // [S, H]
          });
      }
      let hidden = hcPre(x, pre, S, hc, D); // [S, D]
      const rows = opts.lastOnly ? 1 : S;
      if (opts.lastOnly) hidden = hidden.slice((S - 1) * D);
      const normed = rmsNorm(hidden, rows, D, norm, cfg.norm_eps); // [rows, D]
      const logits = linear(normed, 0, rows, D, head, V); // [rows, V]
      if (mtp) {
        const mainX = mainXOf(taps, S); // [S, D]
        const draftRope = shared.ropeWindow;
        for (let i = L; i < nAll; i++) pending.window[i] = ringRow(blocks[i], mainX, S, draftRope);
      }
      if (cache && opts.commit !== false) commit(cache, pending);
      return { logits, rows, hidden, taps, pending, trace };
    }

    /** Mean over the hc copies: x [S, hc, D] → [S, D]. */
    function copyMean(x, S) {
      const y = new Float64Array(S * D); // [S, D]
      for (let s = 0; s < S; s++)
        for (let d = 0; d < D; d++) {
          let v = 0;
          for (let i = 0; i < hc; i++) v += x[(s * hc + i) * D + d];
          y[s * D + d] = v / hc;
        }
      return y;
    }

    /** The drafter's view of the target: main_norm(mean of the taps).  → [S, D] */
    function mainXOf(taps, S) {
      const ids = cfg.dspark_target_layer_ids;
      const mixed = new Float64Array(S * D); // [S, D]
      for (let i = 0; i < S * D; i++) {
        let v = taps[ids[0]][i];
        for (let j = 1; j < ids.length; j++) v += taps[ids[j]][i];
        mixed[i] = v / ids.length;
      }
      return rmsNorm(mixed, S, D, mtp.mainNorm, cfg.norm_eps);
    }

    /** What a draft layer's ring stores for these positions: FP8(RoPE(kv_norm(wkv(main_x)))).  → [S, Dh] */
    function ringRow(b, mainX, S, rope) {
      const normed = rmsNorm(linear(mainX, 0, S, D, b.attn.wkv, Dh), S, Dh, b.attn.kvNorm, cfg.norm_eps); // [S, Dh]
      const r2 = applyRope(normed, S, 1, Dh, rope, false);
      if (!cfg.kv_quant) return r2;
      const out = new Float64Array(S * Dh); // [S, Dh]
      for (let s = 0; s < S; s++) fp8Qdq(r2, s * Dh, Dh, out, s * Dh);
      return out;
    }

    // ---- the DSpark draft and generation (speculative.js) -----------------------------------------------------------
    const { draft, generate, speculativeRound } = DSparkSpeculative.attach({
      D, L, V, block, blocks, cfg, checkIds, commit, embedRows, forward, hc, head, identityPre, mtp, nAll, newCache, r,
      ropeCompressed, ropeWindow,
    });

    return {
      config: cfg,
      newCache,
      cloneCache,
      commit,
      snapshot,
      forward,
      draft,
      speculativeRound,
      generate,
      /** Prefill a prompt into a new cache: {cache, logits of the last row [V], next (its argmax)}. */
      prefill(ids) {
        const cache = newCache();
        const out = forward(ids, cache, { lastOnly: true });
        return { cache, logits: out.logits, next: argmax(out.logits, 0, V) };
      },
      /** Run ids after what the cache holds and commit them: logits [S·V]. */
      decode(cache, ids) {
        return forward(ids, cache).logits;
      },
      /** Verify drafts after an anchor without committing: {logits [(ℓ + 1)·V], pending} (commit(cache, pending, n)
       * keeps the first n rows). */
      verify(cache, anchor, drafts) {
        const out = forward([anchor, ...drafts], cache, { commit: false });
        return { logits: out.logits, pending: out.pending };
      },
    };
  }

  return {
    createModel,
    sampling: { tokenDistribution, verifyBlock, residual, laneSum, MIN_TEMPERATURE },
    quant: { roundToGrid, fp8Qdq, fp4Qdq, pow2Scale },
    ropeInvFreq,
    engramPrimes,
  };
});
