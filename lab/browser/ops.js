/* The lab model's stateless pieces in plain JavaScript, float64, for model.js (the model that holds the weights and
 * caches): exact float helpers and the FP8/FP4 rounding, the dense kernels (linear, RMSNorm, softmax), the sampling
 * rule at temperature > 0, RoPE, mHC (the mixes, Sinkhorn, hc_pre / hc_post), Engram's hashing and gate, the MoE.
 * Each is the twin of a dspark_mini function and is tested through model.js (tests/test_js_model.py,
 * tests/test_js_sampling.py).
 *
 *   const ops = require("./ops.js");   // a page: <script src="ops.js"> defines DSparkOps (before model.js)
 */
(function (root, factory) {
  const DSparkOps = factory(root);
  if (typeof module === "object" && module && module.exports) module.exports = DSparkOps;
  else root.DSparkOps = DSparkOps;
})(typeof globalThis !== "undefined" ? globalThis : this, function (root) {
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

  // what attention.js, speculative.js and model.js read (the rest is this file's own)
  return {
    MIN_TEMPERATURE, applyRope, argmax, checkSampling, checkTemperature, dot, drawsFrom, engramForward, engramPrimes,
    engramRowIds, fp4Qdq, fp8Qdq, hcMixes, hcPost, hcPre, laneSum, linear, moeForward, pow2Scale, randomModule,
    residual, rmsNorm, ropeInvFreq, ropeTable, roundToGrid, sampleRow, sigmoid, softmaxInPlace, stableOrderDesc,
    tokenDistribution, verifyBlock,
  };
});
