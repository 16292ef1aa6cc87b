/* The lab model in plain JavaScript, float64: a twin of dspark_mini (preset `lab`) for pages and scripts without
 * Python. The same numbers as the library's forward (every logit within 1e-9 of the largest |logit|; measured a few
 * 1e-15), the FP8/FP4 rounding bit for bit, the same caches, the same DSpark draft and greedy verify loop
 * (tests/test_js_model.py).
 *
 *   const DSparkModel = require("./model.js");            // a page: <script src="model.js"> defines DSparkModel
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
 * Layouts: every array is a flat Float64Array, row-major; the shape is written where it is made (`// [S, hc, D]`).
 * Sampling (temperature > 0) draws with random.js's PortableGenerator (a page loads random.js first; node requires it
 * from next to this file) in the library's order, so a seed gives the tokens `dspark-lab generate --temperature T
 * --seed S` gives (tests/test_js_sampling.py); greedy decoding needs no random.js.
 */
(function (root, factory) {
  const DSparkModel = factory();
  if (typeof module === "object" && module && module.exports) module.exports = DSparkModel;
  else root.DSparkModel = DSparkModel;
})(typeof globalThis !== "undefined" ? globalThis : this, function () {
  "use strict";

  // ---- exact float helpers ----------------------------------------------------------------------------------------
  const F64 = new Float64Array(1);
  const U32 = new Uint32Array(F64.buffer); // little-endian: U32[1] holds the sign, exponent and top mantissa bits
  const POW2 = new Float64Array(2100); // POW2[n + 1074] = 2^n, exact, n = −1074 … 1023
  {
    let p = 1;
    for (let n = 0; n <= 1023; n++, p *= 2) POW2[n + 1074] = p;
    p = 1;
    for (let n = 0; n >= -1074; n--, p /= 2) POW2[n + 1074] = p;
  }
  const pow2 = (n) => POW2[n + 1074];

  /** floor(log2 a) of a normal double a > 0 (its exponent field); −1023 for zero and subnormals. */
  function exponentOf(a) {
    F64[0] = a;
    return ((U32[1] >>> 20) & 0x7ff) - 1023;
  }

  /** Round half to even of a ≥ 0. */
  function roundHalfEven(v) {
    const r = Math.round(v); // half up
    return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
  }

  /** The nearest value of a sign-magnitude float grid (smallest normal exponent minExp, `mant` mantissa bits),
   * ties to even, saturating at ±maxValue; +0 for zero (dspark_mini/quant.py `_round_by_formula`). */
  function roundToGrid(x, maxValue, minExp, mant) {
    let a = Math.abs(x);
    if (a > maxValue) a = maxValue;
    let e = exponentOf(a);
    if (e < minExp) e = minExp;
    const q = pow2(e - mant);
    const y = roundHalfEven(a / q) * q;
    return x < 0 && y !== 0 ? -y : y;
  }

  /** The smallest power of two ≥ y (y > 0). */
  function pow2Ceil(y) {
    let e = exponentOf(y);
    if (e < -1022) e = -1074;
    let p = pow2(Math.max(e, -1074));
    while (p < y) p *= 2;
    return p;
  }

  const FP8_MAX = 448;
  const FP4_MAX = 6;
  const FP8_LOWEST_SCALE = pow2Ceil(1e-4 / FP8_MAX); // the scale the amax floor 1e-4 gives
  const FP4_E8M0_LOWEST_SCALE = pow2Ceil((6 * pow2(-126)) / FP4_MAX);
  const FP4_E4M3_AMAX_FLOOR = 6 * pow2(-9);

  /** The power-of-two block scale: the first 2^k ≥ lowest whose fmax·2^k ≥ amax. */
  function pow2Scale(amax, lowest, fmax) {
    if (!(fmax * lowest < amax)) return lowest;
    let p = pow2Ceil(amax / fmax);
    while (fmax * p < amax) p *= 2;
    while (p / 2 >= lowest && fmax * (p / 2) >= amax) p /= 2;
    return p;
  }

  function blockAmax(src, off, n) {
    let m = 0;
    for (let i = 0; i < n; i++) {
      const a = Math.abs(src[off + i]);
      if (a > m) m = a;
    }
    return m;
  }

  /** FP8 E4M3 QDQ, one power-of-two scale per 32 values: src[off … off+n) → dst (n a multiple of 32). */
  function fp8Qdq(src, off, n, dst, dOff) {
    for (let b = 0; b < n; b += 32) {
      const s = pow2Scale(blockAmax(src, off + b, 32), FP8_LOWEST_SCALE, FP8_MAX);
      for (let i = b; i < b + 32; i++) dst[dOff + i] = roundToGrid(src[off + i] / s, FP8_MAX, -6, 3) * s;
    }
  }

  /** FP4 E2M1 QDQ with one scale per `block` values: "e8m0" a power of two, "e4m3" an FP8 value. */
  function fp4Qdq(src, off, n, dst, dOff, block, fmt) {
    for (let b = 0; b < n; b += block) {
      const amax = blockAmax(src, off + b, block);
      const s =
        fmt === "e8m0"
          ? pow2Scale(amax, FP4_E8M0_LOWEST_SCALE, FP4_MAX)
          : roundToGrid(Math.max(amax, FP4_E4M3_AMAX_FLOOR) / FP4_MAX, FP8_MAX, -6, 3);
      for (let i = b; i < b + block; i++) dst[dOff + i] = roundToGrid(src[off + i] / s, FP4_MAX, 0, 1) * s;
    }
  }

  // ---- small dense kernels ----------------------------------------------------------------------------------------
  function dot(a, ao, b, bo, n) {
    let s0 = 0,
      s1 = 0,
      s2 = 0,
      s3 = 0,
      i = 0;
    for (; i + 3 < n; i += 4) {
      s0 += a[ao + i] * b[bo + i];
      s1 += a[ao + i + 1] * b[bo + i + 1];
      s2 += a[ao + i + 2] * b[bo + i + 2];
      s3 += a[ao + i + 3] * b[bo + i + 3];
    }
    for (; i < n; i++) s0 += a[ao + i] * b[bo + i];
    return s0 + s1 + (s2 + s3);
  }

  /** y = x · Wᵀ: x [rows, n] (from xOff), W [m, n] → [rows, m]. */
  function linear(x, xOff, rows, n, W, m) {
    const y = new Float64Array(rows * m); // [rows, m]
    const full = rows - (rows % 4);
    for (let o = 0; o < m; o++) {
      // one weight row against every input row while it sits in the cache, four rows per read of a weight
      const wo = o * n;
      for (let r = 0; r < full; r += 4) {
        const x0 = xOff + r * n,
          x1 = x0 + n,
          x2 = x1 + n,
          x3 = x2 + n;
        let a0 = 0,
          a1 = 0,
          a2 = 0,
          a3 = 0;
        for (let i = 0; i < n; i++) {
          const w = W[wo + i];
          a0 += x[x0 + i] * w;
          a1 += x[x1 + i] * w;
          a2 += x[x2 + i] * w;
          a3 += x[x3 + i] * w;
        }
        y[r * m + o] = a0;
        y[(r + 1) * m + o] = a1;
        y[(r + 2) * m + o] = a2;
        y[(r + 3) * m + o] = a3;
      }
      let r = full;
      if (rows - r >= 2) {
        const x0 = xOff + r * n,
          x1 = x0 + n;
        let a0 = 0,
          a1 = 0;
        for (let i = 0; i < n; i++) {
          const w = W[wo + i];
          a0 += x[x0 + i] * w;
          a1 += x[x1 + i] * w;
        }
        y[r * m + o] = a0;
        y[(r + 1) * m + o] = a1;
        r += 2;
      }
      if (r < rows) y[r * m + o] = dot(x, xOff + r * n, W, wo, n);
    }
    return y;
  }

  /** RMSNorm of each row: w · x / √(mean(x²) + eps) (w null: no weight). x [rows, n] → [rows, n]. */
  function rmsNorm(x, rows, n, w, eps) {
    const y = new Float64Array(rows * n); // [rows, n]
    for (let r = 0; r < rows; r++) {
      const o = r * n;
      let ss = 0;
      for (let i = 0; i < n; i++) ss += x[o + i] * x[o + i];
      const inv = 1 / Math.sqrt(ss / n + eps);
      if (w) for (let i = 0; i < n; i++) y[o + i] = x[o + i] * inv * w[i];
      else for (let i = 0; i < n; i++) y[o + i] = x[o + i] * inv;
    }
    return y;
  }

  const sigmoid = (v) => 1 / (1 + Math.exp(-v));

  /** Softmax of v[off … off+n) in place (max, exp(x − max), × 1/Σ). */
  function softmaxInPlace(v, off, n) {
    let m = -Infinity;
    for (let i = 0; i < n; i++) if (v[off + i] > m) m = v[off + i];
    let s = 0;
    for (let i = 0; i < n; i++) {
      const e = Math.exp(v[off + i] - m);
      v[off + i] = e;
      s += e;
    }
    const inv = 1 / s;
    for (let i = 0; i < n; i++) v[off + i] *= inv;
  }

  /** Index of the largest value (the first one on a tie), as torch.argmax. */
  function argmax(v, off, n) {
    let best = 0,
      bv = v[off];
    for (let i = 1; i < n; i++)
      if (v[off + i] > bv) {
        bv = v[off + i];
        best = i;
      }
    return best;
  }

  // ---- sampling: the distributions and the verify rule at temperature > 0 ------------------------------------------
  const MIN_TEMPERATURE = 1e-6; // the smallest temperature > 0 the library accepts (dspark_mini/validate.py)
  const RESIDUAL_FLOOR = 1e-12; // verify's residual with no more mass than this falls back to p_t
  const SUM_LANES = 8; // the lanes of torch's float64 sum inside softmax on an AVX-512 CPU

  /** Σ v[0 … n) in the order of torch's CPU softmax kernel (a vectorised reduce over SUM_LANES lanes): lane j sums
   * v[j], v[j + 8], v[j + 16], … left to right, then the lanes are added in order ((lane 0 + lane 1) + lane 2) + …
   * (fewer than 8 values: left to right). */
  function laneSum(v, n) {
    if (n < SUM_LANES) {
      let s = v[0];
      for (let i = 1; i < n; i++) s += v[i];
      return s;
    }
    const acc = Float64Array.from(v.subarray(0, SUM_LANES)); // [SUM_LANES]
    let i = SUM_LANES;
    for (; i + SUM_LANES <= n; i += SUM_LANES) for (let j = 0; j < SUM_LANES; j++) acc[j] += v[i + j];
    for (let j = 0; i + j < n; j++) acc[j] += v[i + j]; // a partial last vector: its first lanes only
    let s = acc[0];
    for (let j = 1; j < SUM_LANES; j++) s += acc[j];
    return s;
  }

  /** softmax(logits[off … off+n) / T) as torch.softmax computes it in float64 on a CPU: x / T (a true division, as
   * torch divides by a Python float), m = max, e = exp(x − m), s = Σ e in laneSum's order, then e · (1 / s).
   * Math.exp can differ from torch's vectorised exp in the last bit of a value (about one value in seven).
   * → a new Float64Array [n] */
  function tokenDistribution(logits, off, n, T) {
    const p = new Float64Array(n); // [n]
    for (let i = 0; i < n; i++) p[i] = logits[off + i] / T;
    let m = -Infinity;
    for (let i = 0; i < n; i++) if (p[i] > m) m = p[i];
    for (let i = 0; i < n; i++) p[i] = Math.exp(p[i] - m);
    const inv = 1 / laneSum(p, n);
    for (let i = 0; i < n; i++) p[i] *= inv;
    return p;
  }

  /** The `sampling` argument of draft and speculativeRound: none (greedy) or {temperature, draw: () → [0, 1)}.
   * → its temperature (0 when none). */
  function checkSampling(sampling) {
    if (!sampling) return 0;
    const T = checkTemperature(sampling.temperature);
    if (T > 0 && typeof sampling.draw !== "function")
      throw new Error("sampling.draw is invalid: allowed a function () → a float in [0, 1)");
    return T;
  }

  /** A temperature: 0 (greedy) or a finite number ≥ 1e-6, as the library allows; else a clear error. */
  function checkTemperature(temperature) {
    const ok = temperature === 0 || (temperature >= MIN_TEMPERATURE && temperature < Infinity);
    if (typeof temperature !== "number" || !ok)
      throw new RangeError(
        `temperature = ${temperature} is invalid: allowed 0 (greedy) or a finite number ≥ 1e-6`,
      );
    return temperature;
  }

  /** The portable random generator (random.js): the page's global DSparkRandom, or required next to this file. */
  function randomModule() {
    const g = typeof globalThis !== "undefined" ? globalThis : {};
    if (g.DSparkRandom) return g.DSparkRandom;
    if (typeof require === "function") return require("./random.js");
    throw new Error("temperature > 0 needs random.js: load it (it defines DSparkRandom) before model.js");
  }

  /** The draws of one generation: () → a float64 in [0, 1). A PortableGenerator from `seed` (0 ≤ seed < 2**63: a
   * Number, a BigInt or a decimal string), as the library's generate_plain and generate_speculative make theirs, or
   * the caller's own `uniform` function (each value checked). */
  function drawsFrom(seed, uniform) {
    if (uniform)
      return () => {
        const u = uniform();
        if (typeof u !== "number" || !(u >= 0 && u < 1))
          throw new RangeError(`uniform() gave ${u}: allowed a number in [0, 1)`);
        return u;
      };
    const g = new (randomModule().PortableGenerator)(seed);
    return () => g.random();
  }

  /** One token from a distribution p [V] with one draw: the portable sampling rule (random.js's pick). */
  function sampleRow(p, draw) {
    return randomModule().pick(p, draw(), "probs");
  }

  /** What a reject resamples from: res = max(0, p_t − p_d), mass = Σ res (left to right; torch sums in another
   * order, which scales every value of dist by the same factor to within its last bit, and the sampling rule, reading
   * u · total against the row's own cumulative sums, does not see a common factor), dist = res / mass, or p_t itself
   * when mass ≤ 1e−12 (nothing left). pt, pd [V] → {dist [V], mass}. */
  function residual(pt, pd) {
    const V = pt.length;
    const res = new Float64Array(V); // [V] max(0, p_t − p_d), then / mass
    let mass = 0;
    for (let v = 0; v < V; v++) {
      const r = pt[v] - pd[v];
      res[v] = r > 0 ? r : 0;
      mass += res[v];
    }
    if (!(mass > RESIDUAL_FLOOR)) return { dist: pt, mass };
    for (let v = 0; v < V; v++) res[v] /= mass; // a true division, as res / mass
    return { dist: res, mass };
  }

  /** verify_block of dspark_mini/speculative.py, draw for draw: for each of the k drafts x_i, ratio =
   * min(1, p_t(x_i) / max(p_d(x_i), 1e−12)), one draw u, kept while u < ratio; at the first reject one sample from
   * the residual max(0, p_t − p_d) / mass (mass its sum, left to right; mass ≤ 1e−12: from p_t itself); all kept:
   * one sample (the bonus) from p_t of row k.
   * tokens [k]; pd [k, V] and pt [(k + 1), V] flat Float64Arrays (rows of distributions); draw () → [0, 1).
   * → {n_accepted, next_token, next_kind: "resampled" | "bonus", ratios [n_accepted + 1 or k], residual_mass}. */
  function verifyBlock(tokens, pd, pt, V, draw) {
    const R = randomModule();
    const k = tokens.length;
    if (pd.length !== k * V || pt.length !== (k + 1) * V)
      throw new RangeError(
        `verify rows: p_d has ${pd.length} values, p_t ${pt.length}: ` +
          `allowed k·V = ${k * V} and (k + 1)·V = ${(k + 1) * V} (k = ${k} drafts)`,
      );
    const ratios = [];
    for (let i = 0; i < k; i++) {
      const x = tokens[i];
      const ratio = R.acceptRatio(pt[i * V + x], pd[i * V + x]);
      ratios.push(ratio);
      if (draw() < ratio) continue;
      const { dist, mass } = residual(pt.subarray(i * V, (i + 1) * V), pd.subarray(i * V, (i + 1) * V));
      return { n_accepted: i, next_token: sampleRow(dist, draw), next_kind: "resampled", ratios, residual_mass: mass };
    }
    return { n_accepted: k, next_token: sampleRow(pt.subarray(k * V), draw), next_kind: "bonus", ratios };
  }

  /** Indices of v sorted by value, largest first, equal values in index order (a stable descending sort). */
  function stableOrderDesc(v, n) {
    const idx = new Int32Array(n); // [n]
    for (let i = 0; i < n; i++) idx[i] = i;
    return Array.from(idx).sort((a, b) => (v[a] > v[b] ? -1 : v[a] < v[b] ? 1 : a - b));
  }

  // ---- RoPE ---------------------------------------------------------------------------------------------------------
  function ropeInvFreq(dim, theta, yarn, factor, originalSeqLen, betaFast, betaSlow) {
    const f = new Float64Array(dim / 2); // [r/2]
    for (let j = 0; j < dim / 2; j++) f[j] = 1 / Math.pow(theta, (2 * j) / dim);
    if (yarn) {
      const corrected = (rot) => (dim * Math.log(originalSeqLen / (rot * 2 * Math.PI))) / (2 * Math.log(theta));
      const lo = Math.max(Math.floor(corrected(betaFast)), 0);
      const hi = Math.min(Math.ceil(corrected(betaSlow)), dim - 1);
      for (let j = 0; j < dim / 2; j++) {
        const ramp = Math.min(Math.max((j - lo) / Math.max(hi - lo, 1e-3), 0), 1);
        f[j] = (f[j] / factor) * ramp + f[j] * (1 - ramp);
      }
    }
    return f;
  }

  /** cos and sin of p·f_j for each position: {cos, sin} [n, r/2]. */
  function ropeTable(positions, invFreq) {
    const n = positions.length,
      h = invFreq.length;
    const cos = new Float64Array(n * h); // [n, r/2]
    const sin = new Float64Array(n * h); // [n, r/2]
    for (let s = 0; s < n; s++)
      for (let j = 0; j < h; j++) {
        const a = positions[s] * invFreq[j];
        cos[s * h + j] = Math.cos(a);
        sin[s * h + j] = Math.sin(a);
      }
    return { cos, sin, half: h };
  }

  /** Rotate the last r channels (interleaved pairs) of each of `heads` vectors of width C per row, in place:
   * x [rows, heads, C], row s at table row s; inverse: by −θ. */
  function applyRope(x, rows, heads, C, table, inverse) {
    const h = table.half,
      first = C - 2 * h;
    for (let s = 0; s < rows; s++)
      for (let k = 0; k < heads; k++) {
        const o = (s * heads + k) * C + first;
        for (let j = 0; j < h; j++) {
          const c = table.cos[s * h + j],
            sn = inverse ? -table.sin[s * h + j] : table.sin[s * h + j];
          const a = x[o + 2 * j],
            b = x[o + 2 * j + 1];
          x[o + 2 * j] = a * c - b * sn;
          x[o + 2 * j + 1] = a * sn + b * c;
        }
      }
    return x;
  }

  // ---- mHC ----------------------------------------------------------------------------------------------------------
  /** The mixes of one sublayer from the streams x [S, hc, D] → pre [S, hc], post [S, hc], comb [S, hc, hc]. */
  function hcMixes(hcw, x, S, cfg) {
    const hc = cfg.hc_mult,
      D = cfg.dim,
      n = hc * D,
      nMix = (2 + hc) * hc,
      eps = cfg.hc_eps;
    const normed = rmsNorm(x, S, n, null, cfg.norm_eps); // [S, hc·D]
    const z = linear(normed, 0, S, n, hcw.fnScaled, nMix); // [S, 24]
    const pre = new Float64Array(S * hc); // [S, hc]
    const post = new Float64Array(S * hc); // [S, hc]
    const comb = new Float64Array(S * hc * hc); // [S, hc, hc]
    const colSum = new Float64Array(hc); // [hc]
    for (let s = 0; s < S; s++) {
      const zo = s * nMix;
      for (let m = 0; m < nMix; m++) z[zo + m] = hcw.base[m] + z[zo + m];
      for (let j = 0; j < hc; j++) {
        pre[s * hc + j] = sigmoid(z[zo + j]) * 1 + eps;
        post[s * hc + j] = sigmoid(z[zo + hc + j]) * 2 + 0;
      }
      const co = s * hc * hc;
      for (let i = 0; i < hc * hc; i++) comb[co + i] = z[zo + 2 * hc + i];
      for (let i = 0; i < hc; i++) softmaxInPlace(comb, co + i * hc, hc);
      for (let i = 0; i < hc * hc; i++) comb[co + i] += eps;
      sinkhorn(comb, co, hc, cfg.hc_sinkhorn_iters, eps, colSum);
    }
    return { pre, post, comb };
  }

  /** Alternate column and row normalizations of one hc×hc matrix in place: `iters` column passes in all. */
  function sinkhorn(c, o, hc, iters, eps, colSum) {
    const cols = () => {
      for (let j = 0; j < hc; j++) {
        let s = 0;
        for (let i = 0; i < hc; i++) s += c[o + i * hc + j];
        colSum[j] = s + eps;
      }
      for (let i = 0; i < hc; i++) for (let j = 0; j < hc; j++) c[o + i * hc + j] /= colSum[j];
    };
    cols();
    for (let it = 1; it < iters; it++) {
      for (let i = 0; i < hc; i++) {
        let s = 0;
        for (let j = 0; j < hc; j++) s += c[o + i * hc + j];
        s += eps;
        for (let j = 0; j < hc; j++) c[o + i * hc + j] /= s;
      }
      cols();
    }
  }

  /** Collapse the copies: Σ_i pre_i · X_i.  x [S, hc, D], pre [S, hc] → [S, D]. */
  function hcPre(x, pre, S, hc, D) {
    const y = new Float64Array(S * D); // [S, D]
    for (let s = 0; s < S; s++)
      for (let d = 0; d < D; d++) {
        let v = 0;
        for (let i = 0; i < hc; i++) v += pre[s * hc + i] * x[(s * hc + i) * D + d];
        y[s * D + d] = v;
      }
    return y;
  }

  /** Expand: copy j = Σ_i comb[i, j] · R_i + post_j · y.  → [S, hc, D] */
  function hcPost(y, R, post, comb, S, hc, D) {
    const out = new Float64Array(S * hc * D); // [S, hc, D]
    for (let s = 0; s < S; s++)
      for (let j = 0; j < hc; j++)
        for (let d = 0; d < D; d++) {
          let v = 0;
          for (let i = 0; i < hc; i++) v += comb[(s * hc + i) * hc + j] * R[(s * hc + i) * D + d];
          out[(s * hc + j) * D + d] = v + post[s * hc + j] * y[s * D + d];
        }
    return out;
  }

  // ---- Engram -------------------------------------------------------------------------------------------------------
  function isPrime(n) {
    if (n < 2) return false;
    for (let p = 2; p * p <= n; p++) if (n % p === 0) return false;
    return true;
  }

  /** The bucket moduli of every Engram layer: the smallest unused primes above engram_vocab_size − 1. */
  function engramPrimes(cfg) {
    const used = new Set();
    return cfg.engram_layer_ids.map(() => {
      const layer = [];
      for (let o = 2; o <= cfg.engram_max_ngram_size; o++)
        for (let h = 0; h < cfg.engram_n_heads; h++) {
          let n = cfg.engram_vocab_size;
          while (used.has(n) || !isPrime(n)) n++;
          used.add(n);
          layer.push(n);
        }
      return layer;
    });
  }

  /** Table rows of every (order, head) for each token: compressed ids [S] after `history` [n−1].  → [S, cols] */
  function engramRowIds(compressed, history, mult, primes, offsets) {
    const k = mult.length - 1,
      S = compressed.length,
      cols = primes.length,
      heads = cols / k;
    const ext = history.concat(Array.from(compressed)); // [k + S]
    const out = new Int32Array(S * cols); // [S, cols]
    for (let t = 0; t < S; t++) {
      let r = BigInt.asIntN(64, BigInt(ext[k + t]) * mult[0]);
      for (let n = 2; n <= k + 1; n++) {
        r = BigInt.asIntN(64, r ^ BigInt.asIntN(64, BigInt(ext[k + t - (n - 1)]) * mult[n - 1]));
        for (let h = 0; h < heads; h++) {
          const c = (n - 2) * heads + h;
          let m = r % BigInt(primes[c]);
          if (m < 0n) m += BigInt(primes[c]);
          out[t * cols + c] = Number(m) + offsets[c];
        }
      }
    }
    return out;
  }

  /** x + g·value for one Engram layer: x [S, hc, D], row ids [S, cols] → [S, hc, D] (and gate [S, hc]). */
  function engramForward(eg, x, rowIds, S, cfg) {
    const hc = cfg.hc_mult,
      D = cfg.dim,
      hd = cfg.engram_head_dim,
      cols = eg.cols,
      eps = cfg.norm_eps;
    const e = new Float64Array(S * cols * hd); // [S, cols·head_dim]
    for (let t = 0; t < S; t++)
      for (let c = 0; c < cols; c++) {
        const row = rowIds[t * cols + c];
        e.set(eg.table.subarray(row * hd, (row + 1) * hd), (t * cols + c) * hd);
      }
    const kv = linear(e, 0, S, cols * hd, eg.wkv, (hc + 1) * D); // [S, (hc+1)·D]: keys of every copy, then the value
    const xn = rmsNorm(x, S * hc, D, null, eps); // [S, hc, D]
    const keys = new Float64Array(S * hc * D); // [S, hc, D]
    for (let t = 0; t < S; t++) keys.set(kv.subarray(t * (hc + 1) * D, t * (hc + 1) * D + hc * D), t * hc * D);
    const kn = rmsNorm(keys, S * hc, D, null, eps); // [S, hc, D]
    const out = new Float64Array(S * hc * D); // [S, hc, D]
    const gate = new Float64Array(S * hc); // [S, hc]
    const sq = Math.sqrt(D);
    for (let t = 0; t < S; t++) {
      const vo = t * (hc + 1) * D + hc * D;
      for (let c = 0; c < hc; c++) {
        const o = (t * hc + c) * D;
        let dt = 0;
        for (let d = 0; d < D; d++) dt += xn[o + d] * eg.w[c * D + d] * kn[o + d];
        dt /= sq;
        const g = sigmoid(Math.sign(dt) * Math.sqrt(Math.max(Math.abs(dt), 1e-6)));
        gate[t * hc + c] = g;
        for (let d = 0; d < D; d++) out[o + d] = x[o + d] + g * kv[vo + d];
      }
    }
    return { x: out, gate };
  }

  // ---- MoE ----------------------------------------------------------------------------------------------------------
  /** Router and experts of one layer: v [S, D] → y [S, D] (and the chosen experts [S, k], weights [S, k]). */
  function moeForward(m, v, S, cfg) {
    const D = cfg.dim,
      I = cfg.moe_inter_dim,
      E = m.nExperts,
      k = m.topk,
      L = cfg.swiglu_limit;
    const chosen = new Int32Array(S * k); // [S, k]
    const weights = new Float64Array(S * k); // [S, k]
    const scores = linear(v, 0, S, D, m.gate, E); // [S, E] router logits, then scores a = √softplus(·)
    const biased = new Float64Array(E); // [E]
    const rw = new Float64Array(S * (E + 1)); // [S, E + 1] dense routing weights (0: not chosen), the shared one last
    for (let s = 0; s < S; s++) {
      const so = s * E;
      for (let e = 0; e < E; e++) {
        const lg = scores[so + e];
        scores[so + e] = Math.sqrt(lg > 20 ? lg : Math.log1p(Math.exp(lg))); // √softplus
        biased[e] = scores[so + e] + m.bias[e];
      }
      const order = stableOrderDesc(biased, E); // the bias only selects
      let sum = 0;
      for (let j = 0; j < k; j++) sum += scores[so + order[j]];
      rw[s * (E + 1) + E] = 1;
      for (let j = 0; j < k; j++) {
        const e = order[j];
        const w = (k > 1 ? scores[so + e] / (sum + 1e-20) : scores[so + e]) * cfg.route_scale;
        chosen[s * k + j] = e;
        weights[s * k + j] = w;
        rw[s * (E + 1) + e] = w;
      }
    }
    // each expert over the tokens that chose it, experts in ascending order (the shared one, E, last and on every
    // token): y[s] = Σ_e w2_e(rw · silu(min(w1_e x, L)) · clamp(w3_e x, ±L))
    const y = new Float64Array(S * D); // [S, D]
    const rows = new Int32Array(S); // [≤ S] the tokens of one expert
    for (let e = 0; e <= E; e++) {
      let n = 0;
      for (let s = 0; s < S; s++) if (rw[s * (E + 1) + e] !== 0) rows[n++] = s;
      if (!n) continue;
      let xs = v; // [n, D] the expert's tokens
      if (n < S) {
        xs = new Float64Array(n * D);
        for (let j = 0; j < n; j++) xs.set(v.subarray(rows[j] * D, (rows[j] + 1) * D), j * D);
      }
      const g = linear(xs, 0, n, D, m.w1[e], I); // [n, I] gate branch
      const u = linear(xs, 0, n, D, m.w3[e], I); // [n, I] up branch
      for (let j = 0; j < n; j++) {
        const r = rw[rows[j] * (E + 1) + e];
        for (let i = j * I; i < (j + 1) * I; i++) {
          let a = g[i],
            b = u[i];
          if (L > 0) {
            if (a > L) a = L;
            b = b < -L ? -L : b > L ? L : b;
          }
          g[i] = (a / (1 + Math.exp(-a))) * b * r; // silu(gate) · up · routing weight
        }
      }
      const out = linear(g, 0, n, I, m.w2[e], D); // [n, D]
      for (let j = 0; j < n; j++) {
        const yo = rows[j] * D;
        for (let d = 0; d < D; d++) y[yo + d] += out[j * D + d];
      }
    }
    return { y, chosen, weights, scores };
  }

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

    // ---- attention --------------------------------------------------------------------------------------------------
    /** 3B: this chunk's new latents at a KV source → index keys, RoPE at the group positions, FP4; published. */
    function compress(b, S, start, proj, rope, cache, pending, shared) {
      const ratio = b.ratio,
        c = b.comp;
      let latent, nNew; // [nNew, Dh] pre-RoPE
      if (ratio === 1) {
        nNew = S;
        latent = rmsNorm(proj.compKv, S, Dh, c.norm, cfg.norm_eps);
      } else {
        const st = cache ? cache.sources[b.id] : null;
        const carryKv = st ? st.carryKv : new Float64Array(0),
          carrySc = st ? st.carryScore : new Float64Array(0);
        const kvAll = concat(carryKv, proj.compKv), // [c + S, Dh]
          scAll = concat(carrySc, proj.compScore);
        nNew = Math.floor(kvAll.length / Dh / ratio);
        const pooled = new Float64Array(nNew * Dh); // [nNew, Dh]
        const g = new Float64Array(ratio); // [ratio]
        for (let j = 0; j < nNew; j++)
          for (let d = 0; d < Dh; d++) {
            let m = -Infinity;
            for (let t = 0; t < ratio; t++) m = Math.max(m, scAll[(j * ratio + t) * Dh + d]);
            let sum = 0;
            for (let t = 0; t < ratio; t++) {
              g[t] = Math.exp(scAll[(j * ratio + t) * Dh + d] - m);
              sum += g[t];
            }
            let v = 0;
            for (let t = 0; t < ratio; t++) v += kvAll[(j * ratio + t) * Dh + d] * (g[t] / sum);
            pooled[j * Dh + d] = v;
          }
        latent = rmsNorm(pooled, nNew, Dh, c.norm, cfg.norm_eps);
        if (pending) pending.tokens[b.id] = [proj.compKv, proj.compScore];
      }
      let newKv = new Float64Array(0),
        newIk = new Float64Array(0);
      if (nNew) {
        let gang = rope;
        if (!(ratio === 1 && nNew === S)) {
          const gp = [];
          for (let j = 0; j < nNew; j++) gp.push((Math.floor(start / ratio) + j) * ratio);
          gang = ropeTable(gp, ropeCompressed);
        }
        const ik = rmsNorm(linear(latent, 0, nNew, Dh, b.idx.wk, Di), nNew, Di, b.idx.kNorm, cfg.norm_eps); // [n, Di]
        applyRope(ik, nNew, 1, Di, gang, false);
        newIk = new Float64Array(nNew * Di); // [n, Di]
        if (cfg.kv_quant) for (let j = 0; j < nNew; j++) fp4Qdq(ik, j * Di, Di, newIk, j * Di, 32, "e8m0");
        else newIk.set(ik);
        const rot = applyRope(latent.slice(), nNew, 1, Dh, gang, false); // [n, Dh]
        newKv = new Float64Array(nNew * Dh); // [n, Dh]
        if (cfg.kv_quant) for (let j = 0; j < nNew; j++) fp4Qdq(rot, j * Dh, Dh, newKv, j * Dh, 16, "e4m3");
        else newKv.set(rot);
      }
      const st = cache ? cache.sources[b.id] : null;
      shared.compKv = st ? concat(st.kv.subarray(0, st.count * Dh), newKv) : newKv; // [T, Dh]
      shared.indexK = st ? concat(st.indexK.subarray(0, st.count * Di), newIk) : newIk; // [T, Di]
      shared.T = shared.compKv.length / Dh;
      if (pending) {
        pending.latents[b.id] = newKv;
        pending.indexK[b.id] = newIk;
      }
    }

    /** 3C: the indexer's scores and top-k of every query (and the candidate pool at the candidate source). */
    function pick(b, qr, S, positions, rope, proj, shared) {
      const T = shared.T,
        ratio = b.ratio,
        k = Math.min(cfg.index_topk, T);
      const picks = new Int32Array(S * k).fill(-1); // [S, k] compressed positions, ascending, −1 first
      shared.pickK = k;
      shared.picks = picks;
      if (T === 0) {
        if (b.candidateSource) shared.candidates = new Uint8Array(0);
        return;
      }
      const q = linear(qr, 0, S, Rq, b.idx.wqB, Hi * Di); // [S, Hi, Di]
      applyRope(q, S, Hi, Di, rope, false);
      if (cfg.kv_quant) for (let j = 0; j < S * Hi; j++) fp4Qdq(q, j * Di, Di, q, j * Di, 32, "e8m0");
      const scores = new Float64Array(S * T); // [S, T]
      const ik = shared.indexK;
      for (let s = 0; s < S; s++) {
        const visible = Math.floor((positions[s] + 1) / ratio);
        for (let t = 0; t < T; t++) {
          if (t >= visible) {
            scores[s * T + t] = -Infinity;
            continue;
          }
          let v = 0;
          for (let h = 0; h < Hi; h++) {
            const d = dot(q, (s * Hi + h) * Di, ik, t * Di, Di);
            v += (d > 0 ? d : 0) * (proj.wproj[s * Hi + h] * indexScale);
          }
          scores[s * T + t] = v;
        }
      }
      if (b.candidateSource) {
        const bs = cfg.candidate_block_size,
          nb = Math.ceil(T / bs);
        const cand = new Uint8Array(S * T); // [S, T] the kept blocks' positions
        const blockScores = new Float64Array(nb); // [nb]
        for (let s = 0; s < S; s++) {
          const visible = Math.floor((positions[s] + 1) / ratio);
          const newest = Math.floor((visible - 1) / bs);
          for (let j = 0; j < nb; j++) {
            let m = -Infinity;
            for (let t = j * bs; t < Math.min((j + 1) * bs, T); t++) m = Math.max(m, scores[s * T + t]);
            blockScores[j] = j === newest ? Infinity : m;
          }
          const order = stableOrderDesc(blockScores, nb);
          for (let j = 0; j < Math.min(cfg.candidate_topk_blocks, nb); j++) {
            if (!(blockScores[order[j]] > -Infinity)) continue;
            for (let t = order[j] * bs; t < Math.min((order[j] + 1) * bs, T); t++) cand[s * T + t] = 1;
          }
        }
        shared.candidates = cand;
      }
      if (b.usesCandidates && shared.candidates)
        for (let i = 0; i < S * T; i++) if (!shared.candidates[i]) scores[i] = -Infinity;
      const row = new Float64Array(T); // [T]
      for (let s = 0; s < S; s++) {
        row.set(scores.subarray(s * T, (s + 1) * T));
        const order = stableOrderDesc(row, T);
        const got = [];
        for (let j = 0; j < k; j++) if (row[order[j]] > -Infinity) got.push(order[j]);
        got.sort((a, c) => a - c);
        for (let j = 0; j < got.length; j++) picks[s * k + (k - got.length) + j] = got[j];
      }
      if (shared.record)
        shared.record[b.id] = { scores, picks, candidates: b.candidateSource ? shared.candidates : null };
    }

    /** One attention sublayer: u [S, D] (normed input) at `positions` → [S, D]. */
    function attention(b, u, S, positions, start, shared, cache, pending) {
      const a = b.attn;
      const rope = b.ratio > 0 ? shared.ropeCompressed : shared.ropeWindow;
      const proj = {};
      const qa = linear(u, 0, S, D, a.wqA, Rq); // [S, Rq]
      const kvp = linear(u, 0, S, D, a.wkv, Dh); // [S, Dh]
      if (b.indexSource) proj.wproj = linear(u, 0, S, D, b.idx.wproj, Hi); // [S, Hi]
      if (b.kvSource) {
        proj.compKv = linear(u, 0, S, D, b.comp.wkv, Dh); // [S, Dh]
        if (b.ratio > 1) proj.compScore = linear(u, 0, S, D, b.comp.wgate, Dh); // [S, Dh]
      }
      const qr = rmsNorm(qa, S, Rq, a.qNorm, cfg.norm_eps); // [S, Rq]
      const q = applyRope(linear(qr, 0, S, Rq, a.wqB, H * Dh), S, H, Dh, rope, false); // [S, H, Dh]
      const kvRaw = applyRope(rmsNorm(kvp, S, Dh, a.kvNorm, cfg.norm_eps), S, 1, Dh, rope, false); // [S, Dh]
      let kv = kvRaw;
      if (cfg.kv_quant) {
        kv = new Float64Array(S * Dh); // [S, Dh] FP8 as stored
        for (let s = 0; s < S; s++) fp8Qdq(kvRaw, s * Dh, Dh, kv, s * Dh);
      }
      if (pending && !b.draft) pending.window[b.id] = kv;

      if (b.ratio) {
        if (b.kvSource) compress(b, S, start, proj, rope, cache, pending, shared);
        if (b.indexSource) pick(b, qr, S, positions, rope, proj, shared);
      }
      const ring = cache ? cache.rings[b.id] : null;
      const ringPos = cache ? (b.draft ? cache.ringPos.draft : cache.ringPos.target) : null;
      const o = new Float64Array(S * H * Dh); // [S, H, Dh]
      const sinkShare = new Float64Array(S * H); // [S, H] the softmax mass the sink took
      const nKeys = W + S + (b.ratio ? shared.pickK : 0);
      const keyOff = new Int32Array(nKeys); // offsets of this query's unmasked keys
      const keySrc = new Array(nKeys);
      const sc = new Float64Array(nKeys + 1); // [keys + sink]
      for (let s = 0; s < S; s++) {
        const qp = positions[s];
        let n = 0;
        if (ring)
          for (let j = 0; j < W; j++) {
            const kp = ringPos[j];
            if (kp >= 0 && (b.draft || (kp <= qp && kp > qp - W))) {
              keySrc[n] = ring;
              keyOff[n++] = j * Dh;
            }
          }
        for (let t = 0; t < S; t++) {
          const kp = positions[t];
          if (b.draft || (kp <= qp && kp > qp - W)) {
            keySrc[n] = kv;
            keyOff[n++] = t * Dh;
          }
        }
        if (b.ratio)
          for (let j = 0; j < shared.pickK; j++) {
            const t = shared.picks[s * shared.pickK + j];
            if (t >= 0) {
              keySrc[n] = shared.compKv;
              keyOff[n++] = t * Dh;
            }
          }
        for (let h = 0; h < H; h++) {
          const qo = (s * H + h) * Dh;
          for (let j = 0; j < n; j++) sc[j] = attnScale * dot(q, qo, keySrc[j], keyOff[j], Dh);
          sc[n] = a.sink[h];
          softmaxInPlace(sc, 0, n + 1);
          sinkShare[s * H + h] = sc[n];
          for (let j = 0; j < n; j++) {
            const p = sc[j],
              src = keySrc[j],
              ko = keyOff[j];
            for (let d = 0; d < Dh; d++) o[qo + d] += p * src[ko + d];
          }
        }
      }
      applyRope(o, S, H, Dh, rope, true);
      const G = cfg.o_groups,
        R = cfg.o_lora_rank,
        C = (H * Dh) / G;
      const mid = new Float64Array(S * G * R); // [S, G·R]
      for (let s = 0; s < S; s++)
        for (let g = 0; g < G; g++)
          for (let r2 = 0; r2 < R; r2++)
            mid[s * G * R + g * R + r2] = dot(a.woA, (g * R + r2) * C, o, s * H * Dh + g * C, C);
      if (shared.sinks) shared.sinks[b.id] = sinkShare;
      return linear(mid, 0, S, G * R, a.woB, D); // [S, D]
    }

    /** One block: x [S, hc, D], preIn [S, hc] → {x, pre}. */
    function block(b, x, preIn, S, positions, start, shared, cache, pending) {
      const ma = hcMixes(b.hcAttn, x, S, cfg);
      const u = rmsNorm(hcPre(x, preIn, S, hc, D), S, D, b.attnNorm, cfg.norm_eps); // [S, D]
      const att = attention(b, u, S, positions, start, shared, cache, pending);
      const xAttn = hcPost(att, x, ma.post, ma.comb, S, hc, D); // [S, hc, D]
      const mf = hcMixes(b.hcFfn, xAttn, S, cfg);
      const v = rmsNorm(hcPre(xAttn, ma.pre, S, hc, D), S, D, b.ffnNorm, cfg.norm_eps); // [S, D]
      const moe = moeForward(b.moe, v, S, cfg);
      return { x: hcPost(moe.y, xAttn, mf.post, mf.comb, S, hc, D), pre: mf.pre, moe, u, v, ma, mf };
    }

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

    // ---- the DSpark draft -------------------------------------------------------------------------------------------
    /** One draft pass after `anchor` (at position cache.length): k tokens, greedy, or sampled when `sampling` is
     * {temperature > 0, draw: () → [0, 1)}: the Markov head's token at each position from softmax(logits / T) with
     * one draw, in position order (then `probs` [k, V] holds the rows p_d they were drawn from). */
    function draft(cache, anchor, k, sampling) {
      const T = checkSampling(sampling);
      if (!mtp) throw new Error("this config has no draft layers (n_mtp_layers = 0)");
      k = k === undefined ? cfg.dspark_block_size : k;
      if (!Number.isInteger(k) || k < 1 || k > cfg.dspark_block_size)
        throw new Error(`block size = ${k} is invalid: allowed 1..${cfg.dspark_block_size} (the trained draft block)`);
      checkIds([anchor], "anchor");
      const p = cache.length;
      if (p === 0) throw new Error("the draft needs the target to have processed a prompt first (empty cache)");
      if (p + k > cfg.max_seq_len)
        throw new Error(`draft block would reach position ${p + k - 1}: max_seq_len = ${cfg.max_seq_len}`);
      const ids = [anchor];
      for (let i = 1; i < k; i++) ids.push(cfg.dspark_noise_token_id);
      const positions = new Float64Array(k); // [k]
      for (let i = 0; i < k; i++) positions[i] = p + i;
      const shared = { ropeWindow: ropeTable(positions, ropeWindow), ropeCompressed: null, pickK: 0 };
      let x = embedRows(ids); // [k, hc, D]
      let pre = identityPre(k); // [k, hc]
      for (let i = L; i < nAll; i++) {
        const out = block(blocks[i], x, pre, k, positions, p, shared, cache, null);
        x = out.x;
        pre = out.pre;
      }
      const h = hcPre(x, pre, k, hc, D); // [k, D]
      const base = linear(rmsNorm(h, k, D, mtp.norm, cfg.norm_eps), 0, k, D, head, V); // [k, V] U_i
      const r = cfg.dspark_markov_rank;
      const tokens = [],
        draftProbs = [],
        confidence = [];
      const logits = new Float64Array(k * V); // [k, V]
      const probs = T > 0 ? new Float64Array(k * V) : null; // [k, V] p_d rows (sampled drafts only)
      let prev = anchor;
      const temps = cfg.confidence_temperatures;
      for (let i = 0; i < k; i++) {
        const e = mtp.markovEmbed.subarray(prev * r, (prev + 1) * r); // W1[x_{i−1}] [r]
        for (let t = 0; t < V; t++) logits[i * V + t] = base[i * V + t] + dot(e, 0, mtp.markovHead, t * r, r);
        let xi, row;
        if (T > 0) {
          row = tokenDistribution(logits, i * V, V, T); // [V] p_d at this position
          probs.set(row, i * V);
          xi = sampleRow(row, sampling.draw);
        } else {
          xi = argmax(logits, i * V, V);
          row = logits.slice(i * V, (i + 1) * V); // [V]
          softmaxInPlace(row, 0, V);
        }
        let z = confDot(h, i, e);
        if (temps) z /= temps[i];
        confidence.push(sigmoid(z));
        draftProbs.push(row[xi]);
        tokens.push(xi);
        prev = xi;
      }
      // base: U_i = head(norm(h_i)) [k, V] before the Markov bias; logits [k, V] after it; hidden h [k, D]
      return { tokens, draftProbs, confidence, logits, probs, base, hidden: h, positions: Array.from(positions) };
    }

    /** w · [h_i; e] in one sum, in order (the confidence head's logit). */
    function confDot(h, i, e) {
      const w = mtp.conf,
        r = e.length;
      const cat = new Float64Array(D + r); // [D + r]
      cat.set(h.subarray(i * D, (i + 1) * D), 0);
      cat.set(e, D);
      return dot(w, 0, cat, 0, D + r);
    }

    // ---- generation -------------------------------------------------------------------------------------------------
    function checkGenerate(promptIds, maxNewTokens, temperature, uniform, seed) {
      checkIds(promptIds, "prompt");
      const room = cfg.max_seq_len - promptIds.length;
      if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1 || maxNewTokens > room)
        throw new Error(
          `maxNewTokens = ${maxNewTokens} is invalid: allowed 1..${room} ` +
            `(max_seq_len ${cfg.max_seq_len} − prompt ${promptIds.length})`,
        );
      checkTemperature(temperature);
      if (uniform !== undefined && typeof uniform !== "function")
        throw new Error("uniform must be a function () → a float in [0, 1)");
      if (temperature > 0 && uniform === undefined) randomModule().checkIndex(seed, "seed");
    }

    /** One round: draft after the anchor, verify the first ℓ drafts in one forward, commit the kept prefix. Greedy,
     * or sampled with `sampling` {temperature > 0, draw} (as speculative_round: the draft's draws for all its drafted
     * positions first, then verifyBlock's). */
    function speculativeRound(cache, anchor, ell, need, sampling) {
      const T = checkSampling(sampling);
      const p = cache.length;
      const room = cfg.max_seq_len - p;
      const drafted = Math.max(Math.min(cfg.dspark_block_size, room, need || room), ell);
      const d = draft(cache, anchor, drafted, sampling);
      const sent = d.tokens.slice(0, ell);
      const out = forward([anchor, ...sent], cache, { commit: false }); // [ℓ + 1, V]
      const targetArgmax = [];
      for (let i = 0; i <= ell; i++) targetArgmax.push(argmax(out.logits, i * V, V));
      const targetProbs = [];
      let n, next, kind;
      if (T > 0) {
        const pt = new Float64Array((ell + 1) * V); // [ℓ + 1, V] softmax(logits / T) of each verified row
        for (let i = 0; i <= ell; i++) pt.set(tokenDistribution(out.logits, i * V, V, T), i * V);
        const v = verifyBlock(sent, d.probs.subarray(0, ell * V), pt, V, sampling.draw);
        [n, next, kind] = [v.n_accepted, v.next_token, v.next_kind];
        for (let i = 0; i < ell; i++) targetProbs.push(pt[i * V + sent[i]]);
      } else {
        n = 0;
        while (n < ell && sent[n] === targetArgmax[n]) n++;
        [next, kind] = [targetArgmax[n], n < ell ? "resampled" : "bonus"];
        for (let i = 0; i < ell; i++) {
          const row = out.logits.slice(i * V, (i + 1) * V);
          softmaxInPlace(row, 0, V);
          targetProbs.push(row[sent[i]]);
        }
      }
      commit(cache, out.pending, n + 1);
      const status = [];
      for (let i = 0; i < drafted; i++)
        status.push(i < n ? "accepted" : i === n && n < ell ? "rejected" : i < ell ? "not verified" : "not sent");
      return {
        position: p,
        anchor,
        draft: d.tokens,
        verify_len: ell,
        status,
        n_accepted: n,
        next_token: next,
        next_kind: kind,
        draft_probs: d.draftProbs,
        confidence: d.confidence,
        target_probs: targetProbs,
        target_argmax: targetArgmax,
        committed: d.tokens.slice(0, n).concat([next]),
      };
    }

    function now() {
      return typeof performance !== "undefined" ? performance.now() : Date.now();
    }

    /** Speculative then plain decoding of one prompt; shaped as `dspark-lab generate --json`'s result.
     * opts: maxNewTokens (32), verifyLen ℓ (1..block, default the block), temperature (0: greedy; else a finite
     * T ≥ 1e-6: sampled from softmax(logits / T)), seed (0, read at T > 0 only; 0 ≤ seed < 2**63, a BigInt or a
     * decimal string above 2**53: each of the two runs draws from its own PortableGenerator(seed), as the CLI's),
     * uniform (instead of the seeded generators: () → a float in [0, 1), read by both runs in turn), plain (true: also
     * decode plainly), decode (ids → text, e.g. tokenizer.js's decode: fills the `text` fields). Greedy decoding reads
     * no draw. */
    function generate(promptIds, opts) {
      opts = opts || {};
      const maxNew = opts.maxNewTokens === undefined ? 32 : opts.maxNewTokens;
      const temperature = opts.temperature === undefined ? 0 : opts.temperature;
      const seed = opts.seed === undefined ? 0 : opts.seed;
      checkGenerate(promptIds, maxNew, temperature, opts.uniform, seed);
      // a run's next token from the logits of its last row [V]: the argmax, or at T > 0 a sample (one draw)
      const nextToken = (logits, sampling) =>
        sampling ? sampleRow(tokenDistribution(logits, 0, V, temperature), sampling.draw) : argmax(logits, 0, V);
      const newSampling = () => (temperature > 0 ? { temperature, draw: drawsFrom(seed, opts.uniform) } : null);
      const kMax = opts.verifyLen === undefined ? cfg.dspark_block_size : opts.verifyLen;
      if (!Number.isInteger(kMax) || kMax < 1 || kMax > cfg.dspark_block_size)
        throw new Error(
          `verifyLen = ${kMax} is invalid: allowed 1..${cfg.dspark_block_size} (the trained draft block)`,
        );
      const ids = Array.from(promptIds);

      let t0 = now();
      let sampling = newSampling(); // one generator for the speculative run: prefill, then each round's draws
      let cache = newCache();
      let out = forward(ids, cache, { lastOnly: true });
      const spec = [nextToken(out.logits, sampling)];
      const rounds = [];
      while (spec.length < maxNew) {
        const need = maxNew - spec.length;
        const r = speculativeRound(cache, spec[spec.length - 1], Math.min(kMax, need), need, sampling);
        rounds.push(r);
        spec.push(...r.committed);
      }
      const specSeconds = (now() - t0) / 1000;
      const decode = typeof opts.decode === "function" ? opts.decode : null;
      const result = {
        prompt_ids: ids,
        dtype: "float64",
        device: "javascript",
        k: rounds.length ? Math.max(...rounds.map((r) => r.draft.length)) : null,
        block: rounds.length ? Math.max(...rounds.map((r) => r.draft.length)) : null,
        verify_len: kMax,
        temperature,
        seed: typeof seed === "number" ? seed : String(seed), // a BigInt as its decimal digits (JSON has no BigInt)
        speculative: {
          tokens: spec.slice(0, maxNew),
          text: decode ? decode(spec.slice(0, maxNew)) : null,
          seconds: specSeconds,
          tokens_per_s: maxNew / specSeconds,
          rounds: rounds.length,
          target_forwards: rounds.length,
          ...acceptanceStats(rounds),
          strip: rounds.map((r) => ({
            anchor: r.anchor,
            draft: r.draft,
            verify_len: r.verify_len,
            status: r.status,
            next_token: r.next_token,
            next_kind: r.next_kind,
            draft_probs: r.draft_probs,
            confidence: r.confidence,
            // beyond the CLI's strip: what a page shows of the verify
            position: r.position,
            n_accepted: r.n_accepted,
            target_probs: r.target_probs,
            target_argmax: r.target_argmax,
            committed: r.committed,
          })),
        },
      };
      if (opts.plain !== false) {
        t0 = now();
        sampling = newSampling(); // the plain run's own generator, from the same seed
        cache = newCache();
        out = forward(ids, cache, { lastOnly: true });
        const plain = [nextToken(out.logits, sampling)];
        while (plain.length < maxNew) plain.push(nextToken(forward([plain[plain.length - 1]], cache).logits, sampling));
        const seconds = (now() - t0) / 1000;
        result.plain = {
          tokens: plain,
          text: decode ? decode(plain) : null,
          seconds,
          tokens_per_s: maxNew / seconds,
          target_forwards: maxNew - 1,
        };
        result.identical_tokens = plain.every((t, i) => t === result.speculative.tokens[i]);
        const diff = plain.findIndex((t, i) => t !== result.speculative.tokens[i]);
        result.first_difference = diff < 0 ? null : diff;
        result.speedup = result.speculative.tokens_per_s / result.plain.tokens_per_s;
      }
      return result;
    }

    function acceptanceStats(rounds) {
      if (!rounds.length) return { mean_accepted_length: 0, acceptance_rate: 0, per_position: [] };
      const k = Math.max(...rounds.map((r) => r.verify_len));
      const per = [];
      for (let i = 0; i < k; i++) {
        const full = rounds.filter((r) => r.verify_len > i);
        const reached = full.filter((r) => r.n_accepted >= i);
        const kept = reached.filter((r) => r.n_accepted > i);
        const mean = (f) => (full.length ? full.reduce((a, r) => a + f(r), 0) / full.length : null);
        per.push({
          position: i + 1,
          reached: reached.length,
          cond_accept: reached.length ? kept.length / reached.length : null,
          cum_accept: full.length ? kept.length / full.length : null,
          mean_confidence: mean((r) => r.confidence[i]),
          mean_draft_prob: mean((r) => r.draft_probs[i]),
        });
      }
      return {
        mean_accepted_length: rounds.reduce((a, r) => a + r.n_accepted + 1, 0) / rounds.length,
        acceptance_rate: rounds.reduce((a, r) => a + r.n_accepted, 0) / rounds.reduce((a, r) => a + r.verify_len, 0),
        per_position: per,
      };
    }

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
