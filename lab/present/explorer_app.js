// The Explorer's screens: read the controls, call window.dspark (explorer_live.js) and draw steps 1A→6B, the rounds
// and the race of plain against speculative decoding. The whole state lives in the URL's #fragment (prompt, T, ℓ,
// seed, lang, step, round), so a link reproduces what it showed. Plain DOM; every string comes from data.ui.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("explorer-data").textContent);
  const $ = (id) => document.getElementById(id);
  const cfg = data.config;
  const STEPS = data.step_ids;
  const state = { lang: "en", prompt: null, T: "0", ell: String(data.limits.verify_len[1]), seed: "0", step: STEPS[0], round: 0 };
  let result = null;
  const phone = window.matchMedia("(max-width: 600px)"); // a phone: the strip's positions become rows
  let firstScreen = null;

  function t(key, vars = {}) {
    const entry = data.ui[key];
    if (!entry) throw new Error(`no string ${key}`);
    return entry[state.lang].replace(/\{(\w+)\}/g, (_, name) => String(vars[name]));
  }
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const tok = (id) => data.vocab[id];
  const quoted = (id) => `<span class="code">«${esc(tok(id))}»</span>`;
  const f2 = (x) => (x === undefined || x === null ? "—" : x.toFixed(2));
  const f3 = (x) => (x === undefined || x === null ? "—" : x.toFixed(3));
  const bar = (p, cls = "") => `<span class="bar ${cls}"><span style="width:${(100 * Math.max(0, Math.min(1, p))).toFixed(1)}%"></span></span>`;
  const statusClass = (s) => s.replace(/ /g, "_");
  const table = (head, rows) =>
    `<div class="scroll"><table><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr>` +
    rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("") + "</table></div>";

  // ---- the URL ------------------------------------------------------------------------------------------------
  function fromAddress() {
    if (location.hash === "#vi" || location.hash === "#en") history.replaceState(null, "", "#lang=" + location.hash.slice(1));
    const q = new URLSearchParams(location.hash.slice(1)); // (#vi and #en: the older links still open their language)
    if (q.get("lang") === "vi" || q.get("lang") === "en") state.lang = q.get("lang");
    if (q.has("prompt")) state.prompt = q.get("prompt");
    for (const [key, name] of [["T", "T"], ["l", "ell"], ["seed", "seed"]]) if (q.has(key)) state[name] = q.get(key);
    if (STEPS.includes(q.get("step"))) state.step = q.get("step");
    if (/^[0-9]+$/.test(q.get("round") || "")) state.round = Number(q.get("round")) - 1;
    if (state.prompt === null) state.prompt = data.ui.default_prompt[state.lang];
  }
  function toAddress() {
    const q = new URLSearchParams({
      lang: state.lang, prompt: state.prompt, T: state.T, l: state.ell, seed: state.seed, step: state.step,
      round: String(state.round + 1),
    });
    history.replaceState(null, "", "#" + q.toString());
  }

  // ---- controls: validated here, refused with a message (never clamped) ---------------------------------------
  function options() {
    const T = state.T.trim() === "" ? NaN : Number(state.T);
    const [tLo, tHi] = data.limits.temperature;
    if (!(T >= tLo && T <= tHi)) return { error: t("err_temperature", { value: state.T, lo: tLo, hi: tHi }) };
    if (T > 0 && !window.dspark.sampled) return { error: t("err_sampling", { value: state.T }) };
    const seed = state.seed.trim();
    if (!/^[0-9]{1,19}$/.test(seed) || BigInt(seed) > BigInt(data.limits.seed_max))
      return { error: t("err_seed", { value: state.seed, max: data.limits.seed_max }) };
    const ell = Number(state.ell);
    const [lo, hi] = data.limits.verify_len;
    if (!Number.isInteger(ell) || ell < lo || ell > hi) return { error: t("err_ell", { value: state.ell, lo, hi }) };
    if (!state.prompt.trim()) return { error: t("err_prompt_empty") };
    const room = cfg.max_seq_len - window.dspark.tokenize(state.prompt).ids.length;
    const maxNewTokens = Math.min(data.limits.max_new_tokens, room);
    if (maxNewTokens < 1) return { error: t("err_prompt_long", { max: cfg.max_seq_len }) };
    return { temperature: T, verifyLen: ell, seed, maxNewTokens };
  }

  function syncControls() {
    $("prompt").value = state.prompt;
    $("temperature").value = state.T;
    $("ell").value = state.ell;
    $("ell-value").textContent = state.ell;
    $("seed").value = state.seed;
  }

  async function compute() {
    toAddress();
    const o = options();
    $("message").textContent = o.error || "";
    document.body.classList.toggle("refused", !!o.error);
    if (o.error) return;
    // first the step screens (one traced prefill: fast), then the decoding runs for 6B and the race
    result = { steps: window.dspark.steps(window.dspark.tokenize(state.prompt).ids) };
    draw();
    if (firstScreen === null) {
      firstScreen = performance.now(); // ms since the page started loading: the first screen a student sees
      window.dspark.firstScreenMs = firstScreen;
    }
    $("status").textContent = t("running");
    await new Promise((r) => setTimeout(r, 0)); // let the screen and the status show before the model runs
    try {
      result = await window.dspark.run(state.prompt, o);
    } catch (e) {
      $("message").textContent = String(e.message);
      return;
    }
    state.round = Math.min(Math.max(0, state.round), result.rounds.length - 1);
    $("status").textContent = t("ran", { n: result.tokens.length, ms: result.ms.speculative.toFixed(0) });
    draw();
    document.body.dataset.runs = String(Number(document.body.dataset.runs || 0) + 1); // tests wait on it
  }

  // ---- the steps ---------------------------------------------------------------------------------------------
  function pieceCell(id, piece) {
    return `<span class="code">${esc(piece.replace(/^ /, "▁").replace(/\n/g, "↵"))}</span>`;
  }

  const screens = {
    "1A"(s) {
      const rows = s.ids.map((id, i) => [String(i), pieceCell(id, s.pieces[i]), String(id)]);
      return `<p>${esc(t("tokens_count", { n: s.ids.length, d: cfg.dim, hc: cfg.hc_mult }))}</p>` +
        table([esc(t("position")), esc(t("token")), esc(t("token_id"))], rows);
    },
    "1B"(s) {
      return s.engram.map((e) => {
        const rows = e.tokens.map((x, i) => [
          pieceCell(s.ids[i], s.pieces[i]),
          `<span class="code">${x.rows.join(" ")}</span>`,
          x.gate.map((g) => `${bar(g)} ${f2(g)}`).join("<br>"),
        ]);
        return `<h3>${esc(t("engram_layer", { l: e.layer, n: cfg.engram_max_ngram_size }))}</h3>` +
          table([esc(t("token")), esc(t("engram_rows")), esc(t("gate"))], rows);
      }).join("");
    },
    "2A"(s) {
      const grid = (l) => {
        const cells = [];
        for (let i = 0; i < cfg.hc_mult; i++)
          cells.push(`<tr>${l.comb.slice(i * cfg.hc_mult, (i + 1) * cfg.hc_mult)
            .map((v) => `<td style="background:rgba(70,120,200,${v.toFixed(2)})">${f2(v)}</td>`).join("")}</tr>`);
        return `<figure class="mix"><figcaption>${`${esc(t("layer"))} ${l.layer}`}</figcaption>` +
          `<table class="comb">${cells.join("")}</table>` +
          `<p class="small">pre ${l.pre.map(f2).join(" ")}<br>post ${l.post.map(f2).join(" ")}</p></figure>`;
      };
      return `<p>${esc(t("mhc_note", { tok: tok(s.ids[s.ids.length - 1]), hc: cfg.hc_mult }))}</p><div class="mixes">${s.layers.map(grid).join("")}</div>`;
    },
    "3A"(s) {
      const role = (i) => {
        const r = cfg.compress_ratios[i];
        if (r === 0) return t("role_swa_only");
        if (cfg.kv_source_layers.includes(i)) return t("role_full");
        if (cfg.index_source_layers.includes(i)) return t("role_reindex");
        return t("role_reuse");
      };
      const rows = s.layers.map((l) => [
        String(l.layer), esc(role(l.layer)),
        cfg.engram_layer_ids.includes(l.layer) ? "Engram" : "",
        cfg.dspark_target_layer_ids.includes(l.layer) ? "DSpark" : "",
      ]);
      return table([esc(t("layer")), esc(t("role")), "", ""], rows);
    },
    "3B"(s) {
      const rows = s.kv.sources.map((x) => [String(x.layer), String(x.ratio), String(s.ids.length), String(x.entries)]);
      return `<p>${esc(t("compress_note"))}</p>` +
        table([esc(t("layer")), esc(t("ratio")), esc(t("tokens_head")), esc(t("entries"))], rows);
    },
    "3C"(s) {
      const S = s.ids.length;
      const rows = s.picks.map((p) => {
        const spans = p.picks.map((e) => {
          const a = e * p.ratio;
          const b = Math.min(S, a + p.ratio);
          return `<span class="code pick">${esc(s.pieces.slice(a, b).join("").replace(/\n/g, "↵"))}</span>`;
        });
        return [String(p.layer), `${p.picks.length} / ${p.entries}`, spans.join(" ")];
      });
      const win = s.pieces.slice(Math.max(0, S - cfg.window_size)).join("");
      return `<p>${esc(t("picks_note", { k: cfg.index_topk, w: cfg.window_size }))}</p>` +
        table([esc(t("layer")), esc(t("picked")), esc(t("picked_text"))], rows) +
        `<p>${esc(t("window_text", { w: cfg.window_size }))} <span class="code pick">${esc(win)}</span></p>`;
    },
    "4A"(s) {
      const rows = s.layers.filter((l) => l.sink).map((l) => [
        String(l.layer), l.sink.map((v) => `${bar(v)} ${f2(v)}`).join("<br>"),
      ]);
      return `<p>${esc(t("sink_note", { h: cfg.n_heads }))}</p>` + table([esc(t("layer")), esc(t("sink"))], rows);
    },
    "5A"(s) {
      const head = [esc(t("token")), ...s.layers.map((l) => `${esc(t("layer"))} ${l.layer}`)];
      const rows = s.ids.map((id, i) => [
        pieceCell(id, s.pieces[i]),
        ...s.layers.map((l) => l.experts[i].chosen.map((e, j) => `e${e}·${f2(l.experts[i].weights[j])}`).join("<br>")),
      ]);
      return `<p>${esc(t("experts_note", { k: cfg.n_activated_experts, e: cfg.n_routed_experts }))}</p>` + table(head, rows);
    },
    "6A"(s) {
      const k = s.kv;
      const rows = [
        [esc(t("kv_window", { w: k.window_rows, l: cfg.n_layers })), Math.round(k.window_bytes).toLocaleString()],
        ...k.sources.map((x) => [esc(t("kv_source", { l: x.layer, n: x.entries })), Math.round(x.kv + x.index).toLocaleString()]),
        [`<b>${esc(t("kv_total"))}</b>`, `<b>${Math.round(k.total).toLocaleString()}</b>`],
      ];
      return table([esc(t("kv_what")), esc(t("kv_bytes"))], rows) +
        `<p>${esc(t("kv_per_token", { b: k.per_token_compressed.toFixed(1), n: k.tokens }))}</p>`;
    },
    "6B"(s) {
      const rows = s.top.map((x) => [quoted(x.id), `${bar(x.p)} ${f3(x.p)}`, f2(x.logit)]);
      return `<p>${esc(t("top_note"))}</p>` + table([esc(t("token")), esc(t("probability")), esc(t("logit"))], rows);
    },
  };

  function drawSteps() {
    $("steps").innerHTML = STEPS.map((s) =>
      `<button type="button" data-step="${s}" aria-pressed="${s === state.step}">${s}</button>`).join("");
    const info = data.steps[state.step];
    $("step-title").textContent = `${state.step} · ${info.title[state.lang]}`;
    $("step-short").textContent = info.short[state.lang];
    $("step-body").innerHTML = result ? screens[state.step](result.steps) : "";
    const at6B = state.step === "6B" && !!(result && result.rounds);
    $("rounds-view").hidden = !at6B;
    $("race").hidden = !at6B;
  }

  // ---- 6B: the rounds ---------------------------------------------------------------------------------------
  function why(r, i) {
    const s = r.status[i];
    if (result.temperature > 0 && (s === "accepted" || s === "rejected")) {
      const a = Math.min(1, r.p_t[i] / Math.max(r.p_d[i], 1e-12)).toFixed(3); // sampled: the accept test's odds
      return t(s === "accepted" ? "why_accepted_sampled" : "why_rejected_sampled", { a });
    }
    if (s === "accepted") return t("why_accepted");
    if (s === "rejected") return t("why_rejected", { tok: `«${tok(r.target_argmax[i])}»` });
    return s === "not verified" ? t("why_not_verified") : t("why_not_sent");
  }

  function drawRounds() {
    const r = result.rounds[state.round];
    $("rounds-summary").textContent = t("rounds_summary", {
      n: result.rounds.length, mean: result.mean_accepted_length.toFixed(2),
      same: t(result.temperature > 0 ? "sampled_text" : result.identical_tokens ? "same_text" : "other_text"),
    });
    $("round-of").textContent = t("round_of", { i: state.round + 1, n: result.rounds.length, p: r.position });
    const cols = r.draft.map((_, i) => i);
    const sent = (i) => i < r.verify_len;
    const rows = [
      [esc(t("position")), (i) => `<td>${r.position + 1 + i}</td>`],
      ["", (i) => `<td class="${statusClass(r.status[i])}">${data.markers[statusClass(r.status[i])]} ${esc(t(statusClass(r.status[i])))}</td>`],
      [esc(t("draft_token")), (i) => `<td class="${statusClass(r.status[i])}">${quoted(r.draft[i])}</td>`],
      [esc(t("confidence")), (i) => `<td>${bar(r.confidence[i])} ${f3(r.confidence[i])}</td>`],
      ["p_d / p_t", (i) => `<td>${bar(r.p_d[i], "pd")} ${f3(r.p_d[i])}<br>${sent(i) ? `${bar(r.p_t[i], "pt")} ${f3(r.p_t[i])}` : "—"}</td>`],
      [esc(t("why")), (i) => `<td class="why">${esc(why(r, i))}</td>`],
    ];
    // a phone: one table row per draft position, three cells (position; verdict, token and why; the bars);
    // wider screens: one column per position
    const verdict = (i) => `${data.markers[statusClass(r.status[i])]} ${esc(t(statusClass(r.status[i])))}`;
    const narrow = (i) =>
      `<tr><td>${r.position + 1 + i}</td><td class="${statusClass(r.status[i])}">${verdict(i)}<br>${quoted(r.draft[i])}` +
      `<br><span class="why">${esc(why(r, i))}</span></td><td class="bars">c ${bar(r.confidence[i])} ${f3(r.confidence[i])}` +
      `<br>p_d ${bar(r.p_d[i], "pd")} ${f3(r.p_d[i])}<br>p_t ${sent(i) ? `${bar(r.p_t[i], "pt")} ${f3(r.p_t[i])}` : "—"}</td></tr>`;
    $("strip").innerHTML = phone.matches
      ? `<tr><th>${esc(t("position"))}</th><th>${esc(t("draft_token"))}</th><th>${esc(t("confidence"))} · p_d · p_t</th></tr>` +
        cols.map(narrow).join("")
      : rows.map(([head, f]) => `<tr><th>${head}</th>${cols.map(f).join("")}</tr>`).join("");
    $("strip").classList.toggle("rows", phone.matches);
    $("next-token").innerHTML = `${esc(t("target_token"))}: <span class="${r.next_kind}">${data.markers[r.next_kind]} ` +
      `${esc(t(r.next_kind))} ${quoted(r.next_token)}</span> · ${esc(t("accepted_length"))} = ${r.accepted_length}`;
    $("caches").textContent = t("caches_line", { w: r.verified_rows, k: r.n_accepted + 1, d: r.rolled_back, c: r.position + r.n_accepted + 1 });
    const before = result.rounds.slice(0, state.round).reduce((a, x) => a + x.committed.length, 1);
    const kept = result.tokens.slice(0, before).map((id) => esc(tok(id).replace(/^▁/, " "))).join("");
    const added = r.committed.map((id) => `<span class="new">${esc(tok(id).replace(/^▁/, " "))}</span>`).join("");
    $("committed").innerHTML = `${esc(t("committed"))}: ${esc(state.prompt)}<span class="gen">${kept}</span>${added}`;
  }

  function drawRace() {
    const f = result.target_forwards;
    const ms = result.ms;
    const most = Math.max(f.plain, f.speculative);
    const mostMs = Math.max(ms.plain, ms.speculative, 1e-9);
    const lane = (name, n, m) =>
      `<div class="lane"><span class="who">${esc(t(name))}</span>` +
      `<span class="track"><span class="run ${name}" style="width:${(100 * n / most).toFixed(1)}%"></span></span>` +
      `<span class="count">${esc(t("forwards", { n }))}</span></div>` +
      `<div class="lane"><span class="who"></span><span class="track"><span class="run time ${name}" ` +
      `style="width:${(100 * m / mostMs).toFixed(1)}%"></span></span><span class="count">${m.toFixed(0)} ms</span></div>`;
    $("chart").innerHTML = lane("race_plain", f.plain, ms.plain) + lane("race_speculative", f.speculative, ms.speculative) +
      `<p class="summary">${esc(t("race_summary", { n: result.tokens.length, x: (f.plain / f.speculative).toFixed(2), y: (ms.plain / ms.speculative).toFixed(2) }))}</p>`;
  }

  function draw() {
    document.documentElement.lang = state.lang;
    for (const el of document.querySelectorAll("[data-t]")) el.textContent = t(el.dataset.t);
    $("lang-vi").setAttribute("aria-pressed", String(state.lang === "vi"));
    $("lang-en").setAttribute("aria-pressed", String(state.lang === "en"));
    $("footer").textContent = t("footer", { cmd: data.command });
    drawSteps();
    if (result && result.rounds && state.step === "6B") {
      drawRounds();
      drawRace();
    }
    toAddress();
  }

  // ---- events ----------------------------------------------------------------------------------------------
  function setLang(lang) {
    const swap = state.prompt === data.ui.default_prompt[state.lang] && lang !== state.lang; // the default follows
    if (swap) state.prompt = data.ui.default_prompt[lang];
    state.lang = lang;
    syncControls();
    draw();
    if (swap) ((state.round = 0), compute());
  }
  $("lang-vi").addEventListener("click", () => setLang("vi"));
  $("lang-en").addEventListener("click", () => setLang("en"));
  $("steps").addEventListener("click", (e) => {
    const b = e.target.closest("button[data-step]");
    if (b) ((state.step = b.dataset.step), draw());
  });
  const read = () => {
    state.prompt = $("prompt").value;
    state.T = $("temperature").value;
    state.ell = $("ell").value;
    state.seed = $("seed").value;
    $("ell-value").textContent = state.ell;
  };
  $("run").addEventListener("click", () => (read(), (state.round = 0), compute()));
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) (e.preventDefault(), read(), (state.round = 0), compute());
  });
  for (const id of ["temperature", "ell", "seed"]) $(id).addEventListener("change", () => (read(), compute()));
  $("ell").addEventListener("input", () => ($("ell-value").textContent = $("ell").value));
  $("prev-round").addEventListener("click", () => result && result.rounds && ((state.round = Math.max(0, state.round - 1)), draw()));
  $("next-round").addEventListener("click", () =>
    result && result.rounds && ((state.round = Math.min(result.rounds.length - 1, state.round + 1)), draw()));
  $("copy-link").addEventListener("click", async () => {
    toAddress();
    try {
      await navigator.clipboard.writeText(location.href);
      $("message").textContent = t("link_copied");
    } catch (e) {
      $("message").textContent = location.href;
    }
  });

  phone.addEventListener("change", draw);
  fromAddress();
  syncControls();
  draw();
  $("status").textContent = t("loading");
  window.dspark.ready.then(
    (times) => {
      $("status").textContent = t("ready", { ms: (times.decodeMs + times.buildMs).toFixed(0) });
      compute();
    },
    (e) => ($("message").textContent = String(e.message)),
  );
})();
