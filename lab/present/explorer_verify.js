// The Explorer's sampler and verifier: the page's twin of one speculative round in dspark_mini/ (the Markov
// head's draft loop in dspark.py, `verify_block` in speculative.py), run on the stored distributions.
// Pure functions, no page state: the tests load this very block with node and compare its statistics with
// Python's `verify_block` on the same data (lab/present/explorer.py holds the Python twin).

// mulberry32: a tiny seeded PRNG. Returns rand() → a uniform number in [0, 1).
function mulberry32(seed) {
  let s = seed >>> 0;
  return function rand() {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// softmax(logits / T); T = 0 → one-hot argmax (greedy), as `token_distribution` in dspark.py.  [V] → [V]
function tokenDistribution(logits, T) {
  let top = 0;
  for (let v = 1; v < logits.length; v++) if (logits[v] > logits[top]) top = v; // the first maximum, as argmax
  if (T === 0) return logits.map((_, v) => (v === top ? 1 : 0));
  const e = logits.map((l) => Math.exp((l - logits[top]) / T));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / sum);
}

// One token from probs [V] (not necessarily normalised): the first v whose cumulative mass passes u · total.
function sample(probs, rand) {
  const total = probs.reduce((a, b) => a + b, 0);
  const u = rand() * total;
  let cum = 0;
  let last = 0;
  for (let v = 0; v < probs.length; v++) {
    if (probs[v] <= 0) continue;
    cum += probs[v];
    last = v;
    if (u < cum) return v;
  }
  return last; // u landed past the end by rounding: the last token with mass
}

// Rejection sampling over one block, as `verify_block` in speculative.py.
// draftTokens [k]; draftProbs [k][V] (the p_d rows the tokens were drawn from); targetProbs [k + 1][V].
function verifyBlock(draftTokens, draftProbs, targetProbs, rand) {
  const k = draftTokens.length;
  const ratios = [];
  for (let i = 0; i < k; i++) {
    const x = draftTokens[i];
    const pt = targetProbs[i];
    const pd = draftProbs[i];
    const ratio = Math.min(1, pt[x] / Math.max(pd[x], 1e-12));
    ratios.push(ratio);
    if (rand() < ratio) continue; // keep x_i with probability min(1, p_t(x_i) / p_d(x_i))
    const res = pt.map((p, v) => Math.max(0, p - pd[v])); // the first rejection: the residual max(0, p_t − p_d)
    const mass = res.reduce((a, b) => a + b, 0);
    const dist = mass > 1e-12 ? res.map((r) => r / mass) : pt; // no residual mass left: fall back to p_t
    return { nAccepted: i, nextToken: sample(dist, rand), kind: "resampled", ratios };
  }
  return { nAccepted: k, nextToken: sample(targetProbs[k], rand), kind: "bonus", ratios }; // all kept: the bonus
}

// One stored round at temperature T, ready to sample: the target rows p_t [K + 1][V] (they do not depend on
// the drafts: see the page's notes) and the draft rows p_d^i, which depend on the previous draft token.
function prepareRound(data, promptIndex, roundIndex, T) {
  const prompt = data.prompts[promptIndex];
  const round = prompt.rounds[roundIndex];
  const K = data.k_max;
  const j = round.p - prompt.prompt_len;
  const memo = new Map();
  return {
    K,
    anchor: prompt.tokens[round.p],
    target: prompt.target.slice(j, j + K + 1).map((l) => tokenDistribution(l, T)),
    // logits_i = U_i + W2·W1[x_{i−1}]: the parallel pass plus the Markov head's bias (the only sequential part)
    draftLogits(i, prev) {
      const e = data.markov_w1[prev]; // W1[x_{i−1}] [r]
      return round.base[i].map((u, v) => {
        const w = data.markov_w2[v]; // W2[v] [r]
        let bias = 0;
        for (let c = 0; c < e.length; c++) bias += w[c] * e[c];
        return u + bias;
      });
    },
    // p_d^i = softmax(logits_i / T), memoised per (i, x_{i−1})
    draftRow(i, prev) {
      const key = i * 100000 + prev;
      if (!memo.has(key)) memo.set(key, tokenDistribution(this.draftLogits(i, prev), T));
      return memo.get(key);
    },
    // c_i = σ((w_h·h_i + w_e·W1[x_{i−1}]) / T_sts,i): depends on the context and the previous draft, not on T
    confidence(i, prev) {
      return 1 / (1 + Math.exp(-(round.a[i] + data.conf_q[prev]) / data.conf_sts[i]));
    },
  };
}

// ℓ ≤ k: the longest prefix whose survival Π_{j≤i} c_j stays at or above the threshold.
function verifyLength(confidence, k, threshold) {
  let survival = 1;
  let n = 0;
  for (const c of confidence.slice(0, k)) {
    survival *= c;
    if (survival < threshold) break;
    n += 1;
  }
  return n;
}

// One round: draft the whole block (x_i ~ p_d^i, left to right, x_0 = the anchor), send ℓ drafts, verify them.
// status per draft position, as speculative.py: accepted / rejected / not verified (after a rejection) / not sent.
function simulateRound(prepared, k, threshold, rand) {
  const tokens = [];
  const probs = [];
  const confidence = [];
  let prev = prepared.anchor;
  for (let i = 0; i < prepared.K; i++) {
    const pd = prepared.draftRow(i, prev);
    const x = sample(pd, rand);
    confidence.push(prepared.confidence(i, prev));
    tokens.push(x);
    probs.push(pd);
    prev = x;
  }
  const verifyLen = verifyLength(confidence, k, threshold);
  const verdict = verifyBlock(
    tokens.slice(0, verifyLen),
    probs.slice(0, verifyLen),
    prepared.target.slice(0, verifyLen + 1),
    rand,
  );
  const n = verdict.nAccepted;
  const status = tokens.map((_, i) =>
    i < n ? "accepted" : i === n && n < verifyLen ? "rejected" : i < verifyLen ? "not_verified" : "not_sent",
  );
  return { tokens, probs, confidence, verifyLen, verdict, status, committed: [...tokens.slice(0, n), verdict.nextToken] };
}
