/* The DSpark draft and speculative generation in plain JavaScript, float64, for model.js: one draft pass (the
 * Markov head and the confidence head), one round (draft → verify → commit, the caches rolled back to what was
 * kept), plain and speculative generation in the shape of `dspark-lab generate --json`. attach(ctx) binds them to
 * one model (ctx: its forward, caches and weights, from model.js's createModel); the twins of dspark_mini/dspark.py
 * and speculative.py, tested through model.js (tests/test_js_model.py, tests/test_js_sampling.py).
 *
 *   const DSparkSpeculative = require("./speculative.js");   // a page: <script src="speculative.js">
 */
(function (root, factory) {
  const DSparkSpeculative = factory(root);
  if (typeof module === "object" && module && module.exports) module.exports = DSparkSpeculative;
  else root.DSparkSpeculative = DSparkSpeculative;
})(typeof globalThis !== "undefined" ? globalThis : this, function (root) {
  "use strict";
  const ops = root.DSparkOps || require("./ops.js"); // a page loads ops.js first
  const {
    argmax, checkSampling, checkTemperature, dot, drawsFrom, hcPre, linear, randomModule, rmsNorm, ropeTable,
    sampleRow, sigmoid, softmaxInPlace, tokenDistribution, verifyBlock,
  } = ops;

  /** One model's draft and generation: ctx holds its forward, caches, weights and sizes →
   * {draft, generate, speculativeRound}. */
  function attach(ctx) {
    const {
      D, L, V, block, blocks, cfg, checkIds, commit, embedRows, forward, hc, head, identityPre, mtp, nAll, newCache, r,
      ropeCompressed, ropeWindow,
    } = ctx;
    // ---- the DSpark draft -------------------------------------------------------------------------------------------
    /** One draft pass after `anchor` (at position cache.length): k tokens, greedy, or sampled when `sampling` is
     * {temperature > 0, draw: () → [0, 1)}: the Markov head's token at each position from softmax(logits / T) with
     * one draw, in position order (then `probs` [k, V] holds the rows p_d they were drawn from). */
    function draft(cache, anchor, k, sampling) {
      const T = checkSampling(sampling);
      if (!mtp) throw new Error("this config has no draft layers (n_mtp_layers = 0)");
      k = k === undefined ? cfg.dspark_block_size : k;
      if (!Number.isInteger(k) || k < 1 || k > cfg.dspark_block_size)
        throw new Error(
          `k (the draft block size) = ${k} is invalid: allowed 1..${cfg.dspark_block_size} ` +
            "(dspark_block_size, the trained block)",
        );
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
    return { draft, generate, speculativeRound };
  }

  return { attach };
});
