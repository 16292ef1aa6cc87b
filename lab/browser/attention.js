/* The lab model's attention in plain JavaScript, float64, for model.js: the compressor (3B), the indexer and
 * candidate filter (3C), attention over the sliding window and the picked compressed entries with the FP8/FP4 KV
 * cache (4A), and one V4.1 block (attention and MoE, each in single-pass mHC). attach(ctx) binds them to one model's
 * weights and sizes (ctx: what model.js's createModel holds); the twins of dspark_mini/compressor.py, indexer.py,
 * attention.py and block.py, tested through model.js (tests/test_js_model.py).
 *
 *   const DSparkAttention = require("./attention.js");   // a page: <script src="attention.js"> (before model.js)
 */
(function (root, factory) {
  const DSparkAttention = factory(root);
  if (typeof module === "object" && module && module.exports) module.exports = DSparkAttention;
  else root.DSparkAttention = DSparkAttention;
})(typeof globalThis !== "undefined" ? globalThis : this, function (root) {
  "use strict";
  const ops = root.DSparkOps || require("./ops.js"); // a page loads ops.js first
  const {
    applyRope, dot, fp4Qdq, fp8Qdq, hcMixes, hcPost, hcPre, linear, moeForward, rmsNorm, ropeTable, softmaxInPlace,
    stableOrderDesc,
  } = ops;

  /** One model's attention: ctx holds its config, sizes, RoPE tables and scales → {attention, block, compress, pick}.
   */
  function attach(ctx) {
    const {
      D, Dh, Di, H, Hi, Rq, W, attnScale, cfg, concat, hc, indexScale, ropeCompressed,
    } = ctx;
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
    return { attention, block, compress, pick };
  }

  return { attach };
});
