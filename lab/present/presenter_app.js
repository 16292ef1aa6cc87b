// The presenter page: slides 1A … 6B (the map lit on the active block, the step's panel), then 6B round by round.
// Plain DOM, no framework; every string comes from data.ui in the chosen language; the numbers were computed in
// Python (lab/present/presenter.py, rounds.py): this script only draws them.
(function () {
  const data = JSON.parse(document.getElementById("presenter-data").textContent);
  const $ = (id) => document.getElementById(id);
  const FONT_MIN = 70, FONT_MAX = 220, FONT_STEP = 10;
  const state = {
    lang: location.hash.includes("vi") ? "vi" : data.lang,
    slide: 0, // index into data.slides
    round: 0, // on the rounds slide: 0 = after the prefill, i = after round i
    font: 100, // % of the browser's default size
  };
  const debug = data.debugger;
  const nRounds = debug.rounds.length;

  function t(key, vars = {}) {
    return data.ui[key][state.lang].replace(/\{(\w+)\}/g, (_, name) => String(vars[name]));
  }
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const tok = (id) => data.vocab[id].replace(/^▁/, " ");
  const quoted = (id) => `«${esc(tok(id))}»`;
  const num = (x) => (x === null || x === undefined ? "—" : Number(x).toFixed(3));
  const statusKey = (s) => s.replace(/ /g, "_"); // "not verified" → "not_verified"
  const marked = (s) => `${data.markers[statusKey(s)]} ${esc(t(statusKey(s)))}`;
  const slideId = () => data.slides[state.slide];
  const onRounds = () => slideId() === "6B-rounds";

  // ---- the map: lab.lesson.diagrams' SVG, the active block lit, a click opens a step -------------------------------
  function drawMap() {
    $("map").innerHTML = data.maps[state.lang];
    for (const g of $("map").querySelectorAll('g[id^="step-"]')) {
      g.addEventListener("click", () => go(data.slides.indexOf(g.id.slice(5)), 0));
    }
  }

  function lightMap() {
    const active = onRounds() ? "6B" : slideId();
    for (const g of $("map").querySelectorAll('g[id^="step-"]')) g.classList.toggle("active", g.id === `step-${active}`);
  }

  // ---- a step's panel: the notebooks' panel (head, figures, body) --------------------------------------------
  function drawStep(id) {
    const panel = data.panels[state.lang][id];
    const figures = panel.figures.map((_, i) => `<div class="figure" id="figure-${i}"></div>`).join("");
    $("panel").innerHTML = `<div class="step" data-step="${id}">${panel.head}${figures}${panel.body}</div>`;
    if (typeof Plotly === "undefined") return; // plotly.js not beside the page: the numbers still show
    panel.figures.forEach((fig, i) => {
      const layout = Object.assign({}, fig.layout, { autosize: true, width: undefined });
      Plotly.newPlot($(`figure-${i}`), fig.data, layout, { displayModeBar: false, responsive: true });
    });
  }

  // ---- 6B round by round --------------------------------------------------------------------------------------
  function drawText(round, end) {
    const spans = debug.tokens.slice(0, end).map((id, j) => {
      const anchor = round && j === round.position;
      const fresh = round && j > round.position; // committed by this round: kept drafts, then the target's token
      const cls = anchor ? "tok anchor" : fresh ? "tok gen new" : j >= debug.prompt_len ? "tok gen" : "tok";
      return `<span class="${cls}">${anchor ? data.markers.anchor : ""}${esc(tok(id))}</span>`;
    });
    return `<h3>${esc(t("context"))}</h3><p class="tokens">${spans.join("")}</p>`;
  }

  function drawStrip(r) {
    const cells = (f) => r.draft.map((_, i) => f(i)).join("");
    const rows = [
      [t("position"), (i) => `<th>${r.position + i + 1}</th>`],
      ["", (i) => `<td class="${statusKey(r.status[i])}">${marked(r.status[i])}</td>`],
      [t("draft_token"), (i) => `<td class="${statusKey(r.status[i])}">${quoted(r.draft[i])}</td>`],
      [t("draft_probability"), (i) => `<td>${num(r.draft_probs[i])}</td>`],
      [t("target_prob"), (i) => `<td>${i < r.verify_len ? num(r.target_probs[i]) : "—"}</td>`],
      [t("confidence"), (i) => `<td>${num(r.confidence[i])}</td>`],
      [t("survival"), (i) => `<td>${num(r.survival[i])}</td>`],
    ];
    const sent = r.draft.map((_, i) => (i < r.verify_len ? "●" : "○")).join("");
    const plan = t("plan", { l: r.verify_len, k: r.draft.length, b: r.batch_tokens });
    const kept = t("kept", {
      n: r.n_accepted, l: r.verify_len, tok: `«${tok(r.next_token)}»`, kind: t(r.next_kind), tau: r.n_accepted + 1,
    });
    return (
      `<p class="summary" id="plan">${esc(plan)} <span class="tokens">${sent}</span></p>` +
      `<table id="strip">${rows.map(([h, f]) => `<tr><th>${esc(h)}</th>${cells(f)}</tr>`).join("")}</table>` +
      `<p class="summary" id="verdict">${esc(t("verdict"))}: ${esc(kept)} ${data.markers[r.next_kind]}</p>`
    );
  }

  function ring(slots, before, id) {
    const cells = slots.map((pos, s) => {
      if (pos < 0) return `<div class="slot empty">${s}<b>${esc(t("empty"))}</b></div>`;
      const fresh = before && before[s] !== pos ? " fresh" : "";
      return `<div class="slot${fresh}">${s} · ${pos}<b>${quoted(debug.tokens[pos])}</b></div>`;
    });
    return `<div class="ring" id="${id}">${cells.join("")}</div>`;
  }

  function drawCaches(st, before) {
    const sources = st.sources
      .map((src) => {
        const carry = src.carry.length ? src.carry.map((p) => `${p} ${quoted(debug.tokens[p])}`).join(", ") : t("no_carry");
        const last = src.latents * src.ratio - 1;
        return `<li>${esc(t("source_line", { layer: src.layer, r: src.ratio, n: src.latents, last, carry: "" }))}` +
          `${src.carry.length ? carry : esc(carry)}</li>`;
      })
      .join("");
    const hist = st.engram_history
      .map((id, i) => {
        const p = st.engram_positions[i];
        return `<div class="slot">${p < 0 ? esc(t("pad")) : p}<b>${id}${p < 0 ? "" : " " + quoted(debug.tokens[p])}</b></div>`;
      })
      .join("");
    return (
      `<h3>${esc(t("caches", { n: st.length }))}</h3><div class="caches" id="caches">` +
      `<div><b>${esc(t("window_ring"))}</b><div class="help">${esc(t("window_help", { w: debug.window_size }))}</div>` +
      `${ring(st.window, before && before.window, "window-ring")}</div>` +
      `<div><b>${esc(t("draft_ring"))}</b><div class="help">${esc(t("draft_ring_help"))}</div>` +
      `${ring(st.draft_ring, before && before.draft_ring, "draft-ring")}</div>` +
      `<div><b>${esc(t("compressor"))}</b><ul id="compressor">${sources}</ul></div>` +
      `<div><b>${esc(t("engram"))}</b><div class="help">${esc(t("engram_help", { n: debug.max_ngram - 1 }))}</div>` +
      `<div class="ring" id="engram-history">${hist}</div></div></div>` +
      `<p class="rollback">${esc(t("rollback"))}</p>`
    );
  }

  function drawRounds() {
    const i = state.round; // states[i]: after round i (0: after the prefill)
    const r = i > 0 ? debug.rounds[i - 1] : null;
    const head = r ? t("round_of", { i, n: nRounds, p: r.position }) : t("prefill");
    const end = i > 0 ? debug.states[i].length + 1 : debug.prompt_len + 1; // committed tokens + the next anchor
    $("panel").innerHTML =
      `<div class="rounds" data-round="${i}"><h2>${esc(t("rounds_title"))}</h2>` +
      `<p>${esc(t("rounds_intro", { r: debug.requests }))}</p>` +
      `<p class="summary" id="round-head">${esc(head)} · ${esc(t("requests_in_flight"))} = ${debug.requests} · ` +
      `${esc(t("temperature"))} = ${debug.temperature}</p>` +
      `${r ? drawStrip(r) : ""}${drawText(r, end)}${drawCaches(debug.states[i], i > 0 ? debug.states[i - 1] : null)}</div>`;
  }

  // ---- navigation -------------------------------------------------------------------------------------------------
  function render() {
    document.documentElement.lang = state.lang;
    document.documentElement.style.fontSize = `${state.font}%`;
    for (const el of document.querySelectorAll("[data-t]")) el.textContent = t(el.dataset.t);
    $("lang-vi").setAttribute("aria-pressed", String(state.lang === "vi"));
    $("lang-en").setAttribute("aria-pressed", String(state.lang === "en"));
    $("font-value").textContent = `${state.font}%`;
    if (!$("map").dataset.lang || $("map").dataset.lang !== state.lang) {
      drawMap();
      $("map").dataset.lang = state.lang;
    }
    lightMap();
    if (onRounds()) drawRounds();
    else drawStep(slideId());
    const id = slideId();
    $("where").textContent = onRounds()
      ? `6B · ${state.round}/${nRounds}`
      : `${t("step")} ${id} · ${state.slide + 1}/${data.steps.length}`;
    $("prev").disabled = state.slide === 0;
    $("next").disabled = onRounds() && state.round === nRounds;
    if (onRounds()) {
      $("prev").textContent = state.round > 0 ? t("prev_round") : t("prev");
      $("next").textContent = t("next_round");
    }
  }

  function go(slide, round) {
    state.slide = Math.min(data.slides.length - 1, Math.max(0, slide));
    state.round = Math.min(nRounds, Math.max(0, round));
    render();
  }

  // Next walks the slides, and on the rounds slide the rounds (like a presentation's builds); Previous goes back.
  function next() {
    if (onRounds()) go(state.slide, state.round + 1);
    else go(state.slide + 1, 0);
  }
  function prev() {
    if (onRounds() && state.round > 0) go(state.slide, state.round - 1);
    else go(state.slide - 1, 0);
  }
  function font(delta) {
    state.font = Math.min(FONT_MAX, Math.max(FONT_MIN, state.font + delta));
    render();
  }
  function setLang(lang) {
    state.lang = lang;
    render();
  }
  function fullscreen() {
    if (document.fullscreenElement) document.exitFullscreen();
    else if (document.documentElement.requestFullscreen) document.documentElement.requestFullscreen().catch(() => {});
  }

  $("next").addEventListener("click", next);
  $("prev").addEventListener("click", prev);
  $("font-up").addEventListener("click", () => font(FONT_STEP));
  $("font-down").addEventListener("click", () => font(-FONT_STEP));
  $("lang-vi").addEventListener("click", () => setLang("vi"));
  $("lang-en").addEventListener("click", () => setLang("en"));
  $("fullscreen").addEventListener("click", fullscreen);
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const keys = {
      ArrowRight: next, PageDown: next, " ": next,
      ArrowLeft: prev, PageUp: prev,
      "+": () => font(FONT_STEP), "=": () => font(FONT_STEP), "-": () => font(-FONT_STEP),
      f: fullscreen, l: () => setLang(state.lang === "vi" ? "en" : "vi"),
      Home: () => go(0, 0), End: () => go(data.slides.length - 1, 0),
    };
    const action = keys[e.key];
    if (action) {
      e.preventDefault();
      action();
    }
  });
  render();
})();
