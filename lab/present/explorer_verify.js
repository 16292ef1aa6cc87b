// The Explorer's sampler, scheduler and verifier: the page's twin of one speculative round in dspark_mini/ (the
// Markov head's draft loop in dspark.py, the verify-length policies of scheduler.py, `verify_block` in
// speculative.py), run on the stored distributions and the stored SPS(B) table.
// Pure functions, no page state: the tests load this very block with node and compare its ℓ with Python's
// Scheduler on every stored round and its statistics with Python's `verify_block` on the same data
// (lab/present/explorer.py holds the Python twin).

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
    rate: spsRate(data.sps), // SPS(B) of the stored cost table, for the scheduler
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

// ---- the verify length ℓ: dspark_mini/scheduler.py's policies "fixed", "threshold" and "dspark", ported --------

// SPS(B) of a stored cost table (lab/serving/sps.py's SPSTable, already forced monotone): the step time t = 1/SPS
// between measured sizes by the table's rule ("linear": interpolated; "step": padded up to the next measured size),
// t(B_1) below the first size and the last segment's slope beyond the last one — SPSTable._interpolate's float64
// operations in the same order, so Θ below is bit for bit Python's. table {batch_tokens [N], steps_per_s [N],
// interpolation} → rate(B), memoised per B.
function spsRate(table) {
  const bs = table.batch_tokens;
  const ts = table.steps_per_s.map((s) => 1.0 / s); // step seconds, non-decreasing in B
  const n = bs.length;
  function stepSeconds(b) {
    if (n === 1 || b <= bs[0]) return ts[0];
    let i = 0;
    while (i < n && bs[i] < b) i++; // searchsorted: the first measured size ≥ b (n when b is beyond them all)
    const hi = Math.min(Math.max(i, 1), n - 1);
    const lo = hi - 1;
    const slope = (ts[hi] - ts[lo]) / (bs[hi] - bs[lo]);
    if (b > bs[n - 1]) return ts[n - 1] + slope * (b - bs[n - 1]);
    if (table.interpolation === "step") return ts[i];
    return ts[lo] + slope * (b - bs[lo]);
  }
  const memo = new Map();
  return function rate(b) {
    if (!memo.has(b)) memo.set(b, 1.0 / stepSeconds(b));
    return memo.get(b);
  };
}

// a_j = Π_{i≤j} c_i, then a running minimum (as `survival` in scheduler.py: it keeps the order exact).  [k] → [k]
function survival(confidence) {
  const out = [];
  let run = 1;
  let low = Infinity;
  for (const c of confidence) {
    run *= c;
    low = Math.min(low, run);
    out.push(low);
  }
  return out;
}

// Algorithm 1, the `dspark` policy: every candidate (r, j) sorted by survival a_{r,j}, largest first, ties by
// position j then request r (flat id m = j·R + r, as `greedy_path`); walk that path from Θ_0 = R·SPS(R) and admit
// the n-th candidate while Θ_n = (R + v_1 + … + v_n)·SPS(R + n) > Θ_{n−1}; stop at the first that does not raise Θ.
// a [R][k] survivals, rate = spsRate(table) → the number of candidates admitted and the path's flat ids.
function dsparkWalk(a, rate) {
  const R = a.length;
  const k = a[0].length;
  const value = (m) => a[m % R][Math.floor(m / R)];
  const path = [];
  for (let m = 0; m < R * k; m++) path.push(m);
  path.sort((m1, m2) => (value(m1) > value(m2) ? -1 : value(m1) < value(m2) ? 1 : m1 - m2));
  let theta = R * rate(R); // Θ_0: nothing admitted, every request decodes its anchor only
  let cum = 0; // v_1 + … + v_n, summed left to right (torch.cumsum)
  let n = 0;
  for (; n < path.length; n++) {
    cum += value(path[n]);
    const next = (R + cum) * rate(R + n + 1);
    if (!(next > theta)) break; // the first candidate that does not raise Θ ends the walk
    theta = next;
  }
  return { n, path };
}

// One round's verify plan for R requests, as Scheduler(policy).plan in scheduler.py: confidences [R][k] →
// { lengths [R] ℓ_r, batchTokens B = Σ (1 + ℓ_r), expectedTokens τ* = Σ (1 + Σ_{j≤ℓ_r} a_{r,j}), throughput Θ }.
// policy: { name: "fixed", k } | { name: "threshold", threshold } | { name: "dspark" } (needs rate).
function planRound(confidences, policy, rate) {
  const R = confidences.length;
  const a = confidences.map(survival); // [R][k]
  let lengths;
  if (policy.name === "fixed") {
    lengths = a.map(() => policy.k);
  } else if (policy.name === "threshold") {
    lengths = a.map((row) => row.filter((x) => x >= policy.threshold).length); // a is non-increasing
  } else if (policy.name === "dspark") {
    const { n, path } = dsparkWalk(a, rate);
    lengths = new Array(R).fill(0);
    for (const m of path.slice(0, n)) lengths[m % R] += 1;
  } else {
    throw new Error(`policy ${JSON.stringify(policy.name)}: allowed "fixed", "threshold", "dspark"`);
  }
  const gained = lengths.reduce((s, l, r) => s + a[r].slice(0, l).reduce((u, x) => u + x, 0), 0);
  const batchTokens = R + lengths.reduce((s, l) => s + l, 0);
  const expectedTokens = R + gained;
  return { lengths, batchTokens, expectedTokens, throughput: expectedTokens * rate(batchTokens) };
}

// The page's load: this request and R − 1 copies of it (its confidences [k] stacked R times, as
// lab/present/rounds.py and the 6B screens do); ℓ is copy 0's. policy.requests = R (dspark only; the others: 1).
function planLoad(confidence, policy, rate) {
  const R = policy.name === "dspark" ? policy.requests : 1;
  const plan = planRound(new Array(R).fill(confidence), policy, rate);
  return { ...plan, requests: R, verifyLen: plan.lengths[0] };
}

// One round: draft the whole block (x_i ~ p_d^i, left to right, x_0 = the anchor), send ℓ drafts, verify them.
// status per draft position, as speculative.py: accepted / rejected / not verified (after a rejection) / not sent.
// policy as planLoad's; the plan reads this round's own confidences (those of the drafts just drawn).
function simulateRound(prepared, policy, rand) {
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
  const plan = planLoad(confidence, policy, prepared.rate);
  const verifyLen = plan.verifyLen;
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
  const committed = [...tokens.slice(0, n), verdict.nextToken];
  return { tokens, probs, confidence, plan, verifyLen, verdict, status, committed };
}
