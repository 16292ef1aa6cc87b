// window.dspark: the lab model live in this page (the Explorer's screens use this same API).
//
//   await dspark.ready                         → {decodeMs, buildMs}: the weights decoded, the model built
//   dspark.tokenize(text)                      → {ids, pieces} (as `python -m lab tokenize --json`: ids, tokens[].text)
//   await dspark.run(prompt, {temperature, verifyLen, seed, maxNewTokens})
//        → {prompt_ids, tokens (as `generate --json`'s speculative.tokens), plain_tokens, text, plain_text,
//           rounds: [{position, anchor, draft, confidence, p_d, p_t, status, n_accepted, accepted_length,
//                     next_token, next_kind, committed, verified_rows, rolled_back}],
//           accepted_lengths, target_forwards {plain, speculative}, ms {plain, speculative}, identical_tokens,
//           steps (what the step screens draw: dspark.steps), generate (model.js's whole result)}
//   dspark.steps(ids)                          → one traced prefill of the prompt: tokens, Engram rows and gates,
//                                                 mHC mixes, indexer picks, attention sinks, KV bytes, expert routing,
//                                                 the top next-token logits
//   dspark.checkOptions(opts)                  → the options validated (a RangeError names the bad one)
// T > 0 samples with the seed through random.js's portable generator: the draws `dspark-lab generate` makes.
(function () {
  "use strict";
  const SAMPLED = true; // model.js's generate takes {temperature > 0, seed}: the same draws as Python's lab
  const data = JSON.parse(document.getElementById("explorer-data").textContent);
  const cfg = data.config;
  const SEED_MAX = BigInt(data.limits.seed_max);
  let model = null;
  let tokenizer = null;

  const now = () => performance.now();
  const ready = (async () => {
    const t0 = now();
    tokenizer = DSparkTokenizer(JSON.parse(document.getElementById("dspark-tokenizer").textContent));
    const manifest = JSON.parse(document.getElementById("dspark-manifest").textContent);
    const weights = await DSparkWeights.unpack(document.getElementById("dspark-weights").textContent, manifest);
    const t1 = now();
    model = DSparkModel.createModel(weights, cfg);
    return { decodeMs: t1 - t0, buildMs: now() - t1 };
  })();

  function tokenize(text) {
    if (!tokenizer) throw new Error("the tokenizer is not ready yet: await dspark.ready");
    if (typeof text !== "string") throw new TypeError("text must be a string");
    const ids = tokenizer.encode(text);
    return { ids, pieces: tokenizer.pieces(ids) };
  }

  // ---- options: each checked, none clamped --------------------------------------------------------------------
  function checkOptions(opts) {
    opts = opts || {};
    const [lo, hi] = data.limits.verify_len;
    const verifyLen = opts.verifyLen === undefined ? hi : opts.verifyLen;
    if (!Number.isInteger(verifyLen) || verifyLen < lo || verifyLen > hi)
      throw new RangeError(`verifyLen = ${verifyLen} is invalid: allowed an integer ${lo}..${hi}`);
    const temperature = opts.temperature === undefined ? 0 : opts.temperature;
    const [tLo, tHi] = data.limits.temperature;
    if (typeof temperature !== "number" || !(temperature >= tLo && temperature <= tHi))
      throw new RangeError(`temperature = ${temperature} is invalid: allowed a number ${tLo}..${tHi}`);
    if (temperature > 0 && !SAMPLED)
      throw new RangeError(
        `temperature = ${temperature} is not available yet: this page decodes greedily (T = 0) only`,
      );
    const seed = opts.seed === undefined ? "0" : String(opts.seed);
    if (!/^[0-9]{1,19}$/.test(seed) || BigInt(seed) > SEED_MAX)
      throw new RangeError(`seed = ${JSON.stringify(opts.seed)} is invalid: allowed an integer 0..${data.limits.seed_max}`);
    const maxNewTokens = opts.maxNewTokens === undefined ? data.limits.max_new_tokens : opts.maxNewTokens;
    if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1)
      throw new RangeError(`maxNewTokens = ${maxNewTokens} is invalid: allowed an integer ≥ 1`);
    return { verifyLen, temperature, seed, maxNewTokens };
  }

  // ---- the step screens' data: one traced prefill -----------------------------------------------------------
  const V = cfg.vocab_size;
  const hc = cfg.hc_mult;

  function topOf(row, n) {
    let m = -Infinity;
    for (let v = 0; v < row.length; v++) m = Math.max(m, row[v]);
    let z = 0;
    for (let v = 0; v < row.length; v++) z += Math.exp(row[v] - m);
    const order = Array.from(row.keys()).sort((a, b) => row[b] - row[a] || a - b);
    return order.slice(0, n).map((id) => ({ id, logit: row[id], p: Math.exp(row[id] - m) / z }));
  }

  function kvBytes(cache, S) {
    // what the caches hold after the prefill, at the formats step 6A names: the window ring FP8 (one byte a value,
    // one scale byte per 32), the compressed KV and the index keys FP4 (half a byte a value, one scale byte per 32)
    const Dh = cfg.head_dim;
    const Di = cfg.index_head_dim;
    const fp8 = (n) => n + n / 32;
    const fp4 = (n) => n / 2 + n / 32;
    const windowRows = Math.min(S, cfg.window_size);
    const layers = cfg.n_layers;
    const sources = cfg.kv_source_layers.map((s) => {
      const st = cache.sources[s];
      return { layer: s, ratio: st.ratio, entries: st.count, kv: fp4(st.count * Dh), index: fp4(st.count * Di) };
    });
    const window = layers * fp8(windowRows * Dh);
    const compressed = sources.reduce((a, s) => a + s.kv + s.index, 0);
    return {
      tokens: S,
      window_rows: windowRows,
      window_bytes: window,
      sources,
      compressed_bytes: compressed,
      total: window + compressed,
      per_token_compressed: S ? compressed / S : 0,
    };
  }

  function steps(ids) {
    if (!model) throw new Error("the model is not ready yet: await dspark.ready");
    const cache = model.newCache();
    const out = model.forward(ids, cache, { trace: true });
    const S = ids.length;
    const tr = out.trace;
    const rows = (a, width, s) => Array.prototype.slice.call(a, s * width, (s + 1) * width);
    const last = S - 1;
    const layers = tr.layers.map((l, i) => ({
      layer: i,
      ratio: cfg.compress_ratios[i],
      pre: rows(l.attn_pre, hc, last), // [hc] the last token's pre-mix into attention
      post: rows(l.attn_post, hc, last), // [hc]
      comb: rows(l.attn_comb, hc * hc, last), // [hc·hc] row-major
      experts: Array.from({ length: S }, (_, s) => ({
        chosen: rows(l.chosen, l.chosen.length / S, s),
        weights: rows(l.route_weights, l.route_weights.length / S, s),
      })),
      router: rows(l.router_scores, l.router_scores.length / S, last), // [E] the last token's scores
      sink: l.sink_share ? rows(l.sink_share, cfg.n_heads, last) : null, // [H]
    }));
    const engram = Object.entries(tr.engram).map(([layer, e]) => {
      const cols = e.row_ids.length / S;
      return {
        layer: Number(layer),
        tokens: Array.from({ length: S }, (_, s) => ({
          rows: rows(e.row_ids, cols, s),
          gate: rows(e.gate, hc, s), // [hc] one gate per lane
        })),
      };
    });
    const picks = Object.entries(tr.picks).map(([layer, p]) => {
      const k = p.picks.length / S;
      const ratio = cfg.compress_ratios[Number(layer)] || 1;
      const chosen = rows(p.picks, k, last).filter((t) => t >= 0);
      return { layer: Number(layer), ratio, entries: p.scores.length / S, picks: chosen };
    });
    return {
      ids: Array.from(ids),
      pieces: tokenizer.pieces(ids),
      layers,
      engram,
      picks,
      kv: kvBytes(cache, S),
      top: topOf(out.logits.subarray((S - 1) * V, S * V), 8),
    };
  }

  // ---- a run: speculative and plain decoding of the prompt --------------------------------------------------
  async function run(prompt, opts) {
    await ready;
    const o = checkOptions(opts);
    const { ids } = tokenize(String(prompt));
    if (!ids.length) throw new RangeError("prompt is empty: allowed a text of at least one token");
    const room = cfg.max_seq_len - ids.length;
    if (o.maxNewTokens > room)
      throw new RangeError(
        `maxNewTokens = ${o.maxNewTokens} is invalid: allowed 1..${room} (max_seq_len ${cfg.max_seq_len} − ` +
          `prompt ${ids.length} tokens)`,
      );
    const options = { maxNewTokens: o.maxNewTokens, verifyLen: o.verifyLen, temperature: o.temperature };
    if (SAMPLED) options.seed = o.seed;
    options.decode = (t) => tokenizer.decode(t);
    const g = model.generate(ids, options);
    const rounds = g.speculative.strip.map((r) => ({
      position: r.position,
      anchor: r.anchor,
      draft: r.draft,
      verify_len: r.verify_len,
      confidence: r.confidence,
      p_d: r.draft_probs,
      p_t: r.target_probs,
      target_argmax: r.target_argmax,
      status: r.status,
      n_accepted: r.n_accepted,
      accepted_length: r.n_accepted + 1,
      next_token: r.next_token,
      next_kind: r.next_kind,
      committed: r.committed,
      verified_rows: r.verify_len + 1, // the verify forward wrote anchor + ℓ rows …
      rolled_back: r.verify_len - r.n_accepted, // … and the caches drop those past the kept drafts
    }));
    return {
      prompt: String(prompt),
      prompt_ids: ids,
      temperature: o.temperature,
      verify_len: o.verifyLen,
      seed: o.seed,
      max_new_tokens: o.maxNewTokens,
      tokens: g.speculative.tokens,
      text: g.speculative.text,
      plain_tokens: g.plain.tokens,
      plain_text: g.plain.text,
      identical_tokens: g.identical_tokens,
      rounds,
      accepted_lengths: rounds.map((r) => r.accepted_length),
      mean_accepted_length: g.speculative.mean_accepted_length,
      target_forwards: { plain: g.plain.target_forwards + 1, speculative: g.speculative.target_forwards + 1 },
      ms: { plain: 1000 * g.plain.seconds, speculative: 1000 * g.speculative.seconds },
      steps: steps(ids),
      generate: g,
    };
  }

  window.dspark = { ready, tokenize, run, steps, checkOptions, config: cfg, sampled: SAMPLED };
})();
