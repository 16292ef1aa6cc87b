// The Explorer's page: reads the controls, runs the sampler, scheduler and verifier block above, draws the plan,
// the strip and the chart.
// Plain DOM, no framework; every string comes from data.ui in the chosen language.
(function () {
  const data = JSON.parse(document.getElementById("explorer-data").textContent);
  const $ = (id) => document.getElementById(id);
  const state = { lang: location.hash === "#vi" ? "vi" : "en", prompt: 0, round: 0, policy: data.policies[0], after: true };
  const phone = window.matchMedia("(max-width: 600px)"); // a phone: the strip's positions become rows

  function t(key, vars = {}) {
    return data.ui[key][state.lang].replace(/\{(\w+)\}/g, (_, name) => String(vars[name]));
  }
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const tok = (id) => data.vocab[id];
  const quoted = (id) => `«${esc(tok(id))}»`;
  const num = (x) => (x === undefined ? "—" : x.toFixed(3));
  const marked = (status) => `${data.markers[status]} ${esc(t(status))}`;

  function settings() {
    return {
      T: Number($("temperature").value),
      policy: {
        name: state.policy,
        k: Number($("ell").value),
        threshold: Number($("threshold").value),
        requests: data.loads[Number($("requests").value)],
      },
      seed: Math.max(0, Math.floor(Number($("seed").value) || 0)),
    };
  }

  // ---- controls -----------------------------------------------------------------------------------------
  function fillPrompts() {
    $("prompt").innerHTML = data.prompts
      .map((p, i) => {
        const label = p.domain === "walk" ? t("walk_prompt") : p.name;
        const text = p.tokens.slice(0, p.prompt_len).map(tok).join("").replace(/▁/g, " ");
        return `<option value="${i}">${esc(label)}: ${esc(text)}</option>`;
      })
      .join("");
    $("prompt").value = String(state.prompt);
  }

  function fillPolicies() {
    $("policy").innerHTML = data.policies
      .map((name) => `<option value="${name}">${esc(t(`policy_${name}`))}</option>`)
      .join("");
    $("policy").value = state.policy;
  }

  // each knob counts for one policy only: the others are greyed out
  function showKnobs(policy) {
    const knobs = { ell: "fixed", threshold: "threshold", requests: "dspark" };
    for (const [id, name] of Object.entries(knobs)) {
      $(id).disabled = policy !== name;
      $(id).closest("label").classList.toggle("off", policy !== name);
    }
  }

  function fillRounds() {
    const rounds = data.prompts[state.prompt].rounds;
    $("round").innerHTML = rounds
      .map((r, i) => `<option value="${i}">${esc(t("round_of", { i: i + 1, n: rounds.length, p: r.p }))}</option>`)
      .join("");
    $("round").value = String(state.round);
  }

  // ---- one round: the plan and the strip ------------------------------------------------------------------------
  function topTokens(probs) {
    return probs
      .map((p, v) => [p, v])
      .sort((a, b) => b[0] - a[0])
      .slice(0, 3)
      .filter(([p]) => p > 0)
      .map(([p, v]) => `${quoted(v)} ${p.toFixed(2)}`)
      .join("<br>");
  }

  function drawContext(prompt, round) {
    const spans = prompt.tokens.slice(0, round.p + 1).map((id, j) => {
      const cls = j === round.p ? "tok anchor" : j >= prompt.prompt_len ? "tok gen" : "tok";
      const mark = j === round.p ? data.markers.anchor : "";
      return `<span class="${cls}">${mark}${esc(tok(id).replace(/^▁/, " "))}</span>`;
    });
    $("context").innerHTML = spans.join("");
  }

  // the ℓ of the R − 1 copies that share the load with this request (none when R = 1)
  function copies(lengths) {
    if (lengths.length === 0) return "";
    const lo = Math.min(...lengths);
    const hi = Math.max(...lengths);
    const n = lengths.length;
    return lo === hi ? t("plan_copies_one", { n, c: lo }) : t("plan_copies_split", { n, lo, hi });
  }

  // which policy decided ℓ, and what this round's verify forward costs and yields: B, τ*, Θ = τ*·SPS(B)
  function drawPlan(plan, policy, confidence) {
    const l = plan.verifyLen;
    const rule =
      policy.name === "fixed"
        ? t("plan_fixed", { l })
        : policy.name === "threshold"
          ? t("plan_threshold", { l, t: policy.threshold.toFixed(2) })
          : t("plan_dspark", { r: plan.requests, l }) + copies(plan.lengths.slice(1));
    const mine = survival(confidence).slice(0, l).reduce((a, b) => a + b, 1); // this request's τ* = 1 + Σ_{j≤ℓ} a_j
    const cost = t("plan_cost", {
      r: plan.requests,
      b: plan.batchTokens,
      tau: mine.toFixed(2),
      theta: plan.throughput.toFixed(1),
    });
    $("plan").innerHTML = `${esc(rule)}<br>${esc(cost)}`;
  }

  function drawStrip(prepared, result) {
    const { tokens, probs, confidence, verifyLen, verdict, status } = result;
    const survival = [];
    confidence.reduce((s, c, i) => (survival[i] = s * c), 1);
    const cells = (f) => tokens.map((_, i) => f(i)).join("");
    const verified = (i) => i < verifyLen; // the target computed this row
    const reached = (i) => i < verdict.ratios.length; // the verifier compared p_t and p_d here
    const rows = [
      [t("position"), (i) => `<th>${i + 1}</th>`],
      ["", (i) => `<td class="${status[i]}">${marked(status[i])}</td>`],
      [t("draft_token"), (i) => `<td class="code ${status[i]}">${quoted(tokens[i])}</td>`],
      [t("draft_probability"), (i) => `<td>${num(probs[i][tokens[i]])}</td>`],
      ["p_t(x)", (i) => `<td>${verified(i) ? num(prepared.target[i][tokens[i]]) : "—"}</td>`],
      [t("accept_ratio"), (i) => `<td>${reached(i) ? num(verdict.ratios[i]) : "—"}</td>`],
      [t("confidence"), (i) => `<td>${num(confidence[i])}</td>`],
      [t("survival"), (i) => `<td>${num(survival[i])}</td>`],
      [`${t("top")} p_t`, (i) => `<td class="top">${verified(i) ? topTokens(prepared.target[i]) : "—"}</td>`],
      [`${t("top")} p_d`, (i) => `<td class="top">${topTokens(probs[i])}</td>`],
    ];
    const narrow = rows.slice(0, 8); // a phone: one row per position, without the top-3 lists
    $("strip").innerHTML = phone.matches
      ? `<tr>${narrow.map(([head]) => `<th>${esc(head)}</th>`).join("")}</tr>` +
        tokens.map((_, i) => `<tr>${narrow.map(([, f]) => f(i)).join("")}</tr>`).join("")
      : rows.map(([head, f]) => `<tr><th>${esc(head)}</th>${cells(f)}</tr>`).join("");
    $("strip").classList.toggle("rows", phone.matches);
    const n = verdict.nAccepted;
    const rate = verifyLen > 0 ? ` · ${esc(t("acceptance_rate"))} ${(n / verifyLen).toFixed(2)}` : "";
    $("tau").innerHTML =
      `${esc(t("sent", { l: verifyLen }))} · ${esc(t("kept_of", { n, l: verifyLen }))} · ` +
      `${esc(t("accepted_length"))} = ${n + 1}${rate}`;
    const from =
      verifyLen === 0
        ? t("from_plain")
        : verdict.kind === "resampled"
          ? t("from_residual", { i: n + 1 })
          : t("from_bonus", { i: verifyLen + 1 });
    $("next-token").innerHTML =
      `${esc(t("target_token"))}: <span class="code ${verdict.kind}">${marked(verdict.kind)} ` +
      `${quoted(verdict.nextToken)}</span> — ${esc(from)}`;
    const kept = result.committed.map((id) => `<span class="tok new">${esc(tok(id).replace(/^▁/, " "))}</span>`);
    $("committed").innerHTML = `${esc(t("committed"))}: ${kept.join("")}`;
  }

  // the page's own checks, on the settings shown: position 1's share of kept re-samples against its exact probability
  // Σ_x min(p_t(x), p_d(x)) (whether it is sent depends on c_1 alone, so the share is over the rounds that sent it);
  // at T = 0 also the greedy round Python recorded (fixed k = 5)
  function drawCheck(prepared, stats, s, round) {
    const lines = [];
    if (stats.sent0 === 0) {
      lines.push(t("check_unsent"));
    } else {
      const pd = prepared.draftRow(0, prepared.anchor);
      const p = prepared.target[0].reduce((sum, pt, v) => sum + Math.min(pt, pd[v]), 0);
      const tol = (4 * Math.sqrt(stats.sent0 * p * (1 - p)) + 1) / stats.sent0; // 4σ and one re-sample
      const f = stats.kept0 / stats.sent0;
      const mark = Math.abs(f - p) <= tol ? "✓" : "✗";
      lines.push(t("check_stat", { mark, k: stats.kept0, n: stats.sent0, f: f.toFixed(3), p: p.toFixed(3), tol: tol.toFixed(3) }));
    }
    if (s.T === 0) {
      const fixed = { name: "fixed", k: data.k_max };
      const greedy = simulateRound(prepareRound(data, state.prompt, state.round, 0), fixed, mulberry32(0));
      const want = round.greedy;
      const same = greedy.verdict.nAccepted === want.n && greedy.verdict.nextToken === want.next;
      lines.push(t(same ? "check_ok" : "check_bad", { n: want.n, tok: `«${tok(want.next)}»` }));
    }
    $("check").innerHTML = lines.map(esc).join("<br>");
  }

  // ---- the caches of the recorded greedy run: before and after the selected round's commit ------------------
  function drawCaches(prompt) {
    const rounds = prompt.rounds;
    const r = rounds[state.round];
    const before = state.round > 0 ? rounds[state.round - 1].caches : prompt.caches;
    const st = state.after ? r.caches : before;
    const ctx = {
      tokens: prompt.tokens, vocab: data.vocab, windowSize: data.window_size, maxNgram: data.max_ngram, t, esc,
      heading: state.after ? "caches" : "caches_before",
    };
    $("caches-view").innerHTML = cacheView(st, state.after ? before : null, ctx);
    const a = before.length, b = r.caches.length - 1;
    const toks = prompt.tokens.slice(a, b + 1).map((id) => `«${tok(id)}»`).join(" ");
    $("caches-note").textContent = t("caches_note", { i: state.round + 1, n: b - a + 1, toks, a, b });
    $("cache-before").setAttribute("aria-pressed", String(!state.after));
    $("cache-after").setAttribute("aria-pressed", String(state.after));
  }

  // ---- many rounds: acceptance by position -----------------------------------------------------------------
  function drawChart(prepared, s) {
    const K = data.k_max;
    const n = data.seed_rounds;
    const rand = mulberry32(s.seed); // the same stream as the strip: its first round is the one shown above
    const kept = new Array(K).fill(0);
    const sent = new Array(K).fill(0);
    const survival = new Array(K).fill(0);
    let tau = 0;
    let kept0 = 0;
    let sent0 = 0;
    let sumKept = 0;
    let sumSent = 0;
    for (let r = 0; r < n; r++) {
      const res = simulateRound(prepared, s.policy, rand);
      let surv = 1;
      for (let i = 0; i < K; i++) {
        surv *= res.confidence[i];
        survival[i] += surv / n;
        if (res.verdict.nAccepted > i) kept[i] += 1 / n;
        if (res.verifyLen > i) sent[i] += 1 / n;
      }
      tau += (res.verdict.nAccepted + 1) / n;
      if (res.verifyLen > 0) sent0 += 1;
      if (res.verdict.nAccepted > 0) kept0 += 1;
      sumKept += res.verdict.nAccepted;
      sumSent += res.verifyLen;
    }
    const W = 420, H = 236, left = 36, bottom = 46, top = 12;
    const band = (W - left) / K;
    const y = (v) => top + (1 - v) * (H - top - bottom);
    const parts = [`<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(t("chart", { n, s: s.seed }))}">`];
    for (const g of [0, 0.5, 1]) {
      parts.push(`<line x1="${left}" x2="${W}" y1="${y(g)}" y2="${y(g)}" stroke="#ccc"/>`);
      parts.push(`<text x="${left - 4}" y="${y(g) + 4}" font-size="11" text-anchor="end">${g}</text>`);
    }
    for (let i = 0; i < K; i++) {
      const x = left + i * band;
      const cx = x + band / 2;
      const label = sent[i] > 0 ? String(i + 1) : `${i + 1} ${data.markers.not_sent}`; // never sent: ○
      parts.push(`<rect x="${x + band * 0.1}" y="${y(sent[i])}" width="${band * 0.8}" ` +
        `height="${y(0) - y(sent[i])}" fill="none" stroke="#234" stroke-dasharray="4 3"/>`);
      parts.push(`<rect x="${x + band * 0.2}" y="${y(kept[i])}" width="${band * 0.6}" height="${y(0) - y(kept[i])}" ` +
        `fill="#6b9bd1" stroke="#234"/>`);
      // the kept share under the position's number, never over a bar or a ◆
      parts.push(`<text x="${cx}" y="${H - 6}" font-size="11" text-anchor="middle" fill="#1f4f8a">${kept[i].toFixed(2)}</text>`);
      const d = y(survival[i]);
      parts.push(`<path d="M${cx} ${d - 5} L${cx + 5} ${d} L${cx} ${d + 5} L${cx - 5} ${d} Z" fill="#222"/>`);
      parts.push(`<text x="${cx}" y="${H - 24}" font-size="12" text-anchor="middle">${esc(label)}</text>`);
    }
    parts.push("</svg>");
    $("chart").innerHTML = parts.join("");
    $("chart-title").textContent = t("chart", { n, s: s.seed });
    const rate = sumSent > 0 ? (sumKept / sumSent).toFixed(2) : "—";
    $("chart-summary").textContent = t("chart_summary", { tau: tau.toFixed(2), l: (sumSent / n).toFixed(2), rate });
    return { kept0, sent0 };
  }

  // ---- everything --------------------------------------------------------------------------------------------
  function render() {
    document.documentElement.lang = state.lang;
    for (const el of document.querySelectorAll("[data-t]")) el.textContent = t(el.dataset.t);
    $("lang-vi").setAttribute("aria-pressed", String(state.lang === "vi"));
    $("lang-en").setAttribute("aria-pressed", String(state.lang === "en"));
    $("note-scheduler").textContent = t("note_scheduler", { src: data.sps.source, on: data.sps.measured_on });
    fillPrompts();
    fillPolicies();
    fillRounds();
    const s = settings();
    showKnobs(s.policy.name);
    $("temperature-value").textContent = s.T.toFixed(1);
    $("ell-value").textContent = String(s.policy.k);
    $("legend-sps").textContent = t("legend_sps", { src: data.sps.source });
    $("threshold-value").textContent = s.policy.threshold.toFixed(2);
    $("requests-value").textContent = String(s.policy.requests);
    const prompt = data.prompts[state.prompt];
    const round = prompt.rounds[state.round];
    const prepared = prepareRound(data, state.prompt, state.round, s.T);
    drawContext(prompt, round);
    const result = simulateRound(prepared, s.policy, mulberry32(s.seed));
    drawPlan(result.plan, s.policy, result.confidence);
    drawStrip(prepared, result);
    drawCheck(prepared, drawChart(prepared, s), s, round);
    drawCaches(prompt);
    $("footer").textContent = t("footer", { cmd: data.command });
  }

  function setRound(i) {
    const n = data.prompts[state.prompt].rounds.length;
    state.round = Math.min(n - 1, Math.max(0, i));
    render();
  }

  $("prompt").addEventListener("change", (e) => {
    state.prompt = Number(e.target.value);
    setRound(0);
  });
  $("round").addEventListener("change", (e) => setRound(Number(e.target.value)));
  $("prev-round").addEventListener("click", () => setRound(state.round - 1));
  $("next-round").addEventListener("click", () => setRound(state.round + 1));
  $("policy").addEventListener("change", (e) => ((state.policy = e.target.value), render()));
  for (const id of ["temperature", "ell", "threshold", "requests", "seed"]) $(id).addEventListener("input", render);
  $("cache-before").addEventListener("click", () => ((state.after = false), render()));
  $("cache-after").addEventListener("click", () => ((state.after = true), render()));
  phone.addEventListener("change", render);
  $("resample").addEventListener("click", () => {
    $("seed").value = String(settings().seed + 1);
    render();
  });
  $("lang-vi").addEventListener("click", () => ((state.lang = "vi"), render()));
  $("lang-en").addEventListener("click", () => ((state.lang = "en"), render()));
  $("threshold").value = String(data.threshold_default);
  $("requests").max = String(data.loads.length - 1); // R = data.loads[slider]: 1, 2, 4, …, 256
  $("requests").value = String(data.loads.indexOf(data.load_default));
  render();
})();
