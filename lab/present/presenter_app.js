// The presenter deck: every step's builds (text → equation → figures → tables → checks, lab/present/deck.py), then
// 6B round by round, each round played as draft → schedule → (predict) → verify → commit. Next walks builds,
// narration sentences and phases alike, so a clicker (PageDown) drives the whole lesson; ArrowUp/ArrowDown scroll a
// slide. `?notes` (or S, or the button) opens the speaker view: the long notes, what comes next and a timer, kept on
// the same slide as the audience's window (BroadcastChannel, and localStorage events where that is missing).
// `?theme=dark`: the projector theme; `?predict`: the class guesses each verdict before verify shows it.
// Plain DOM, no framework; every string comes from data.ui in the chosen language; the numbers were computed in
// Python (lab/present/presenter.py, deck.py, rounds.py): this script only lays them out.
(function () {
  const data = JSON.parse(document.getElementById("presenter-data").textContent);
  const $ = (id) => document.getElementById(id);
  const FONT_MIN = 60, FONT_MAX = 200, FONT_STEP = 10;
  const PLOT_FONT = 1; // plot text = the slide's text (≥ 20 px)
  const TICKS_MAX = 40; // a heat map's axis with at most this many categories labels every one of them
  const REVEAL_MS = 350; // the verify step-through: one verdict every REVEAL_MS (none with reduced motion)
  const TAIL = 12; // a round shows the text's last TAIL tokens (the rest: "…"), so the round fits one screen
  const SYNC = "dspark-presenter"; // the BroadcastChannel and localStorage key the windows share
  const reduced = window.matchMedia("(prefers-reduced-motion: reduce)");
  const params = new URLSearchParams(location.search);
  const speaker = params.has("notes");
  const state = {
    lang: location.hash.includes("vi") ? "vi" : data.lang, slide: 0, sub: 0, font: 100,
    dark: params.get("theme") === "dark", predict: params.has("predict"), guesses: {},
  };
  const debugOf = () => data.debugger[state.lang];
  let shown = { slide: -1, lang: "", font: 0 }; // what #slide holds now: a new slide opens at its top
  let timers = [];
  const me = Math.random().toString(36).slice(2); // this window, so it ignores its own messages
  const started = Date.now();
  let clock = started;

  function t(key, vars = {}) {
    return data.ui[key][state.lang].replace(/\{(\w+)\}/g, (_, name) => String(vars[name]));
  }
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const tok = (id) => data.vocab[id].replace(/^▁/, " ");
  const quoted = (id) => `«${esc(tok(id))}»`;
  const num = (x) => (x === null || x === undefined ? "—" : Number(x).toFixed(3));
  const statusKey = (s) => s.replace(/ /g, "_"); // "not verified" → "not_verified"
  const marked = (s) => `${data.markers[statusKey(s)]} ${esc(t(statusKey(s)))}`;

  const nDrafts = (n) => t(n === 1 ? "n_draft_one" : "n_draft_many", { n });

  // ---- the slides: the steps' builds, then the rounds (0 = after the prefill) --------------------------------
  const nRounds = () => debugOf().rounds.length;
  const slides = () => [
    ...data.deck[state.lang].slides,
    ...Array.from({ length: nRounds() + 1 }, (_, i) => ({ kind: "round", step: "6B", round: i })),
  ];
  // a round's phases: predict (the class guesses) only when asked for and when something is sent to verify
  const phasesOf = (r) => ["draft", "schedule", ...(state.predict && r.verify_len > 0 ? ["predict"] : []), "verify", "commit"];
  const roundOf = (s) => (s.kind === "round" && s.round > 0 ? debugOf().rounds[s.round - 1] : null);
  const subs = (s) => (s.kind === "round" ? (s.round === 0 ? 1 : phasesOf(roundOf(s)).length) : (s.narration || [null]).length);
  const current = () => slides()[state.slide];

  // ---- the map: HTML blocks in the 4 columns (text wraps and scales), arrows drawn over them -----------------------
  function drawMap() {
    const m = data.map[state.lang];
    const cells = [];
    m.columns.forEach((col, c) => {
      cells.push(`<div class="map-head h${col.id}" style="grid-column:${c + 1};grid-row:1">${esc(col.label)}</div>`);
      col.steps.forEach((s, r) => {
        cells.push(
          `<button type="button" class="block c${col.id}" id="step-${s.id}" data-step="${s.id}" ` +
            `title="${esc(s.title)}" style="grid-column:${c + 1};grid-row:${r + 2}"><b>${s.id}</b>` +
            `${esc(s.title.split(":")[0])}</button>`,
        );
      });
    });
    $("side").innerHTML = `<div class="map" id="map">${cells.join("")}<svg class="arrows" aria-hidden="true"></svg></div>`;
    for (const b of $("map").querySelectorAll(".block")) {
      b.addEventListener("click", () => go(slides().findIndex((s) => s.step === b.dataset.step), 0));
    }
  }

  // the flow arrows between the blocks, from where the browser laid them out (redrawn on resize and font change)
  function drawArrows() {
    const map = $("map");
    if (!map) return;
    const box = map.getBoundingClientRect();
    const r = (id) => {
      const b = $(`step-${id}`).getBoundingClientRect();
      return { l: b.left - box.left, r: b.right - box.left, t: b.top - box.top, b: b.bottom - box.top };
    };
    const paths = data.map[state.lang].flow.map(([src, dst, both]) => {
      const a = r(src), b = r(dst);
      const ends = both ? ' marker-start="url(#tail)" marker-end="url(#head)"' : ' marker-end="url(#head)"';
      let d;
      if (Math.abs(a.l - b.l) < 2) {
        const x = (a.l + a.r) / 2;
        d = b.t > a.b ? `M${x},${a.b} V${b.t}` : `M${x},${a.t} V${b.b}`;
      } else {
        const y1 = (a.t + a.b) / 2, y2 = (b.t + b.b) / 2, mid = (a.r + b.l) / 2;
        d = `M${a.r},${y1} H${mid} V${y2} H${b.l}`;
      }
      return `<path d="${d}"${ends}/>`;
    });
    const head = (id, d) =>
      `<marker id="${id}" viewBox="0 0 10 10" refX="${id === "head" ? 9 : 1}" refY="5" markerWidth="6" ` +
      `markerHeight="6" orient="auto"><path d="${d}" fill="#444" stroke="none"/></marker>`;
    map.querySelector("svg.arrows").innerHTML =
      `<defs>${head("head", "M0,0 L10,5 L0,10 z")}${head("tail", "M10,0 L0,5 L10,10 z")}</defs>${paths.join("")}`;
  }

  // scroll `box` (a scrolling column, never the page) just enough to show `el`
  function reveal(box, el) {
    const b = box.getBoundingClientRect(), r = el.getBoundingClientRect();
    if (r.top < b.top) box.scrollTop -= b.top - r.top + 8;
    else if (r.bottom > b.bottom) box.scrollTop += Math.min(r.bottom - b.bottom + 8, r.top - b.top - 8);
    const wrap = el.closest(".table-wrap");
    if (wrap) {
      const w = wrap.getBoundingClientRect();
      if (r.right > w.right) wrap.scrollLeft += r.right - w.right + 8;
      else if (r.left < w.left) wrap.scrollLeft -= w.left - r.left + 8;
    }
  }

  function lightMap(step) {
    for (const b of $("map").querySelectorAll(".block")) b.classList.toggle("active", b.dataset.step === step);
    const active = $(`step-${step}`);
    if (active && active.offsetParent) reveal($("side"), active);
  }

  // ---- a build: its HTML, its figure drawn with fonts that follow the text size -----------------------------------
  function scaledFigure(fig, px) {
    const f = JSON.parse(JSON.stringify(fig));
    const k = (PLOT_FONT * px) / 12; // plotly's base size is 12 px
    const grow = (o) => {
      if (!o || typeof o !== "object") return;
      for (const [key, v] of Object.entries(o)) {
        if (/font$/.test(key) && v && typeof v === "object" && typeof v.size === "number") v.size = Math.max(px, v.size * k); // ≥ the body text
        else if (typeof v === "object") grow(v);
      }
    };
    f.data.forEach(grow);
    const { template, ...rest } = f.layout || {};
    grow(rest);
    f.layout = Object.assign(rest, { template, autosize: true, width: undefined });
    f.layout.font = Object.assign({}, f.layout.font, { size: Math.max(px, ((f.layout.font || {}).size || 12) * k) });
    for (const key of Object.keys(f.layout)) {
      if (!/^[xy]axis\d*$/.test(key)) continue;
      f.layout[key] = Object.assign({}, f.layout[key], { automargin: true });
      // a log axis labels whole decades only: plotly draws the 2s and 5s between them at 3/4 of the text size
      if (f.layout[key].type === "log" && f.layout[key].dtick === undefined) f.layout[key].dtick = 1;
    }
    // a heat map's rows and columns keep every label (plotly thins them when it thinks they crowd)
    for (const tr of f.data) {
      if (tr.type !== "heatmap") continue;
      for (const [ax, vals] of [["xaxis", tr.x], ["yaxis", tr.y]]) {
        const key = ax + String((tr[ax.slice(0, 1) + "axis"] || "").slice(1));
        if (Array.isArray(vals) && vals.length <= TICKS_MAX) f.layout[key] = Object.assign({}, f.layout[key], { tickmode: "linear", dtick: 1 });
      }
    }
    f.layout.xaxis = Object.assign({ automargin: true }, f.layout.xaxis);
    f.layout.yaxis = Object.assign({ automargin: true }, f.layout.yaxis);
    const m = f.layout.margin || {};
    f.layout.margin = { l: (m.l ?? 70) * k, r: (m.r ?? 30) * k, t: Math.max(20, ((m.t ?? 70) - 40) * k), b: (m.b ?? 50) * k };
    return f;
  }

  function drawBuild(s) {
    const all = slides().filter((x) => x.kind !== "round" && x.step === s.step);
    const i = all.indexOf(s) + 1;
    const same = all.filter((x) => x.kind === s.kind);
    const build = t(`build_${s.kind}`) + (same.length > 1 ? ` ${same.indexOf(s) + 1}` : "");
    const narration = s.narration
      ? `<ol class="narration" aria-label="${esc(t("narration"))}">` +
        s.narration.map((n, j) => `<li data-say="${j}" data-n="${j + 1}/${s.narration.length}">${esc(n.text)}</li>`).join("") +
        "</ol>"
      : "";
    $("slide").innerHTML =
      `<div class="build-slide" data-step="${s.step}" data-kind="${s.kind}">` +
      `<h2>${esc(s.title)}<span class="build">${esc(t("slide_of", { build, i, n: all.length }))}</span></h2>` +
      `${narration}${s.html}</div>`;
    if (s.kind === "figure") drawFigure(s);
  }

  function drawFigure(s) {
    const div = $("slide").querySelector(".figure");
    if (typeof Plotly === "undefined" || !div) return; // plotly.js not beside the page: the rest still shows
    const px = parseFloat(getComputedStyle($("slide")).fontSize);
    const room = $("slide").clientHeight - div.offsetTop + $("slide").offsetTop - 8;
    const height = Math.max(12 * px, room);
    div.style.height = `${height}px`;
    const fig = scaledFigure(data.deck[state.lang].figures[s.step][s.figure], px);
    fig.layout.height = height;
    Plotly.newPlot(div, fig.data, fig.layout, { displayModeBar: false, responsive: true });
  }

  // the narration: sentence `sub` is said, the cells it speaks about are lit
  function narrate(s) {
    const slide = $("slide");
    for (const el of slide.querySelectorAll(".lit")) el.classList.remove("lit");
    if (!s.narration) return;
    slide.querySelectorAll(".narration li").forEach((li, j) => {
      li.classList.toggle("now", j === state.sub);
      li.classList.toggle("done", j < state.sub);
    });
    const lit = s.narration[state.sub].lit.flatMap((sel) => [...slide.querySelectorAll(`.build-slide ${sel}`)]);
    lit.forEach((el) => el.classList.add("lit"));
    if (lit.length) reveal(slide, lit[0]);
  }

  // ---- 6B round by round: the strip, the text and (in the left column) the caches, phase by phase ----------------
  function guessMark(r, i, ph) {
    const g = (state.guesses[r.position] || [])[i];
    if (!g || ph !== 3) return ""; // beside the verdicts, in the verify phase (the commit has its own line)
    const right = g === r.status[i];
    return ` <span class="guessed ${right ? "right" : "wrong"}">${esc(t("guess"))} ${data.markers[g]}</span>`;
  }

  function drawStrip(r, phase) {
    const order = ["draft", "schedule", "predict", "verify", "commit"];
    const p = order.indexOf(phase); // 0 draft, 1 schedule, 2 predict, 3 verify, 4 commit
    const T = debugOf().temperature;
    const sent = (i) => i < r.verify_len;
    const status = (i) => {
      if (p >= 1 && !sent(i)) return `<td class="not_sent" title="${esc(t("not_sent"))}">${data.markers.not_sent}</td>`;
      if (p === 2) {
        const g = (state.guesses[r.position] || [])[i];
        const label = g ? `${data.markers[g]} ${esc(t(g))}` : `? ${esc(t("guess"))}`;
        return `<td class="guess-cell"><button type="button" class="guess${g ? " " + g : ""}" data-guess="${i}">${i + 1} · ${label}</button></td>`;
      }
      if (p < 3) return `<td class="pending">? ${esc(t("pending"))}</td>`;
      const shownAs = r.status[i] === "not verified" ? data.markers.not_verified : marked(r.status[i]); // the sentence says it
      return `<td class="${statusKey(r.status[i])}" data-verdict="${i}">${shownAs}${guessMark(r, i, p)}</td>`;
    };
    const cells = (f) => r.draft.map((_, i) => f(i)).join("");
    const rows = [
      ["pos", t("position"), (i) => `<th>${r.position + i + 1}</th>`],
      ["status", "", status],
      ["draft", t("draft_token"), (i) => `<td class="mono">${quoted(r.draft[i])}</td>`],
      ["pd", t("draft_prob_at", { t: T }), (i) => `<td>${num(r.draft_probs[i])}</td>`],
      ["conf", t("confidence"), (i) => `<td>${num(r.confidence[i])}</td>`],
      ["survival", t("survival"), (i) => `<td>${num(r.survival[i])}</td>`],
      ["pt", t("target_prob", { t: T }), (i) => `<td>${p >= 3 && sent(i) ? num(r.target_probs[i]) : "—"}</td>`],
    ];
    const plan = p === 1 // the schedule phase; later the ○ cells still say what was not sent
      ? `<p class="summary" id="plan">${esc(t("plan", { l: r.verify_len, k: r.draft.length, b: r.batch_tokens }))} ` +
        `<span class="tokens">${r.draft.map((_, i) => (sent(i) ? "●" : "○")).join("")}</span></p>`
      : "";
    const kept = t("kept", {
      n: r.n_accepted, drafts: nDrafts(r.verify_len), tok: quoted(r.next_token), mark: data.markers[r.next_kind],
      kind: t(r.next_kind), tau: r.n_accepted + 1,
    });
    const verdict = p >= 4 ? `<p class="summary" id="verdict">${esc(t("verdict"))}: ${kept}</p>` : "";
    return (
      `${plan}<div class="table-wrap"><table id="strip">` +
      rows.map(([id, h, f]) => `<tr data-r="${id}"><th>${esc(h)}</th>${cells(f)}</tr>`).join("") +
      `</table></div>${p === 3 ? score(r) : ""}${verdict}`
    );
  }

  // how many of the verified positions the class guessed right (only when it guessed)
  function score(r) {
    const g = state.guesses[r.position];
    if (!state.predict || !g || !g.some(Boolean)) return "";
    const verified = r.status.map((x, i) => i).filter((i) => r.status[i] === "accepted" || r.status[i] === "rejected");
    const right = verified.filter((i) => g[i] === r.status[i]).length;
    return `<p class="summary" id="score">${esc(t("guessed", { right, n: verified.length }))}</p>`;
  }

  function drawText(r, end, committed) {
    const debug = debugOf();
    const from = Math.max(0, end - TAIL);
    const spans = debug.tokens.slice(from, end).map((id, k) => {
      const j = from + k;
      const anchor = r && j === r.position;
      const fresh = committed && r && j > r.position; // committed by this round: kept drafts, then the target's token
      const cls = anchor ? "tok anchor" : fresh ? "tok gen new" : j >= debug.prompt_len ? "tok gen" : "tok";
      return `<span class="${cls}">${anchor ? data.markers.anchor : ""}${esc(tok(id))}</span>`;
    });
    return `<p id="context"><b>${esc(t("context"))}:</b> <span class="tokens" id="text">${from > 0 ? "… " : ""}${spans.join("")}</span></p>`;
  }

  // the sentence of each phase, and what it lights; the commit names what the cache panel marks as written
  function sayRound(r, phase) {
    const debug = debugOf();
    const a = quoted(r.anchor), k = r.draft.length, l = r.verify_len, n = r.n_accepted;
    if (phase === "draft") return { text: t("say_draft", { drafts: nDrafts(k), a }), lit: ['tr[data-r="draft"]', 'tr[data-r="conf"]'] };
    if (phase === "schedule") {
      return { text: t("say_schedule", { r: debug.requests, l, drafts: nDrafts(k) }), lit: ['tr[data-r="survival"]', "#plan", "td.not_sent"] };
    }
    if (phase === "predict") return { text: t("say_predict", { drafts: nDrafts(l) }), lit: ['tr[data-r="status"]'] };
    if (phase === "verify") {
      let text;
      if (l === 0) text = t("say_verify_none");
      else if (n === l) text = t(l === 1 ? "say_verify_one" : "say_verify_all", { drafts: nDrafts(l), l });
      else text = t("say_verify_reject", { drafts: nDrafts(l), n, p: r.position + n + 1 }) + (l > n + 1 ? t("say_verify_rest") : "");
      return { text, lit: ['tr[data-r="status"]', 'tr[data-r="pt"]'] };
    }
    const what = n === 0 ? t("commit_anchor", { a }) : t("commit_kept", { a, kept: t(n === 1 ? "kept_one" : "kept_many", { n }) });
    const where = n === 0 ? t("pos_one", { p: r.position }) : t("pos_range", { p: r.position, q: r.position + n });
    const text = t("say_commit", { what, where, t: quoted(r.next_token), kind: t(r.next_kind), tau: n + 1 });
    return { text, lit: ["#text .new", "#side .fresh", "#verdict"] };
  }

  function drawRound(s) {
    const debug = debugOf();
    const i = s.round; // states[i]: after round i (0: after the prefill)
    const r = roundOf(s);
    const phases = r ? phasesOf(r) : ["commit"];
    const phase = phases[state.sub];
    const committed = phase === "commit";
    const st = committed ? debug.states[i] : debug.states[i - 1];
    const before = committed && i > 0 ? debug.states[i - 1] : null;
    const end = committed ? (i > 0 ? debug.states[i].length + 1 : debug.prompt_len + 1) : debug.states[i - 1].length + 1;
    const head = r ? t("round_of", { i, n: nRounds(), p: r.position }) : t("prefill");
    const said = r ? phases.map((ph) => sayRound(r, ph)) : [{ text: t("say_prefill", { n: debug.prompt_len, w: debug.window_size }), lit: ["#window-ring"] }];
    const chips = r
      ? `<div class="phases">${phases.map((ph, j) => `<span class="${j === state.sub ? "now" : j < state.sub ? "done" : ""}">${j + 1} · ${esc(t(`phase_${ph}`))}</span>`).join("")}</div>`
      : "";
    const narration = `<ol class="narration" aria-label="${esc(t("narration"))}">` +
      said.map((n, j) => `<li data-say="${j}" data-n="${j + 1}/${said.length}" class="${j === state.sub ? "now" : j < state.sub ? "done" : ""}">${n.text}</li>`).join("") + "</ol>";
    $("slide").innerHTML =
      `<div class="rounds" data-round="${i}" data-phase="${phase}">` +
      `<h2 id="round-head">6B · ${esc(head)}</h2>` +
      (i === 0 ? `<p class="summary">${esc(t("rounds_title"))}</p>` : "") +
      `${chips}${narration}${r ? drawStrip(r, phase) : ""}${drawText(r, end, committed)}</div>`;
    const ctx = {
      tokens: debug.tokens, vocab: data.vocab, windowSize: debug.window_size, maxNgram: debug.max_ngram, t, esc,
      heading: committed ? "caches" : "caches_before",
    };
    $("side").innerHTML = cacheView(st, before, ctx); // the rollback sentence: in the speaker notes
    // the draft ring holds the window ring's positions (the same commit writes both): one line says so
    if (st.draft_ring.join() === st.window.join()) {
      $("draft-ring").outerHTML = `<p class="same" id="draft-ring">${esc(t("draft_same"))}</p>`;
    }
    const lit = said[state.sub].lit.flatMap((sel) => [...document.querySelectorAll(sel.startsWith("#side") ? sel : `#slide ${sel}, #side ${sel}`)]);
    lit.forEach((el) => el.classList.add("lit"));
    if (phase === "verify" && state.jumped) $("slide").querySelectorAll("#strip td.rejected").forEach((el) => el.classList.add("lit"));
    state.jumped = false;
    for (const b of $("slide").querySelectorAll("button.guess")) b.addEventListener("click", () => guess(Number(b.dataset.guess)));
    if (phase === "verify") stepThrough();
    // Next never leaves what it speaks about below the fold: each column shows its last lit element
    for (const box of [$("slide"), $("side")]) {
      const mine = lit.filter((el) => box.contains(el));
      if (mine.length) reveal(box, mine[mine.length - 1]);
    }
  }

  // predict: a guess per sent position cycles ? → ✓ → ✗ → ?
  function guess(i) {
    const s = current(), r = roundOf(s);
    if (!r || phasesOf(r)[state.sub] !== "predict" || i >= r.verify_len) return;
    const g = (state.guesses[r.position] = state.guesses[r.position] || []);
    g[i] = g[i] === undefined || g[i] === null ? "accepted" : g[i] === "accepted" ? "rejected" : null;
    render();
  }

  // the verify step-through: the verdicts appear one position at a time, left to right (at once with reduced motion)
  function stepThrough() {
    const cells = [...$("slide").querySelectorAll("#strip td[data-verdict]")];
    if (reduced.matches) return;
    const saved = cells.map((c) => [c.className, c.innerHTML]);
    cells.forEach((c) => {
      c.className = "pending";
      c.innerHTML = `? ${esc(t("pending"))}`;
    });
    cells.forEach((c, j) => {
      timers.push(setTimeout(() => {
        [c.className, c.innerHTML] = saved[j];
        c.classList.add("reveal");
      }, REVEAL_MS * (j + 1)));
    });
  }

  // ---- the speaker view: the long notes, what comes next, a timer ---------------------------------------------------
  function notesOf(s, sub) {
    if (s.kind !== "round") {
      const said = s.narration ? `<p class="now">${esc(s.narration[sub].text)}</p>` : "";
      return said + (s.notes || `<p>${esc(t("no_notes"))}</p>`);
    }
    const r = roundOf(s), debug = debugOf();
    const load = `<p><b>R = ${debug.requests} · T = ${debug.temperature}</b></p>`; // the strip's rows say T too
    if (!r) return `${load}<p>${esc(t("rounds_intro", { r: debug.requests }))}</p><p>${esc(t("say_prefill", { n: debug.prompt_len, w: debug.window_size }))}</p>`;
    const items = phasesOf(r).map((ph, j) => `<li class="${j === sub ? "now" : ""}">${sayRound(r, ph).text}</li>`).join("");
    const help = [t("window_help", { w: debug.window_size }), t("draft_ring_help"), t("engram_help", { n: debug.max_ngram - 1 })];
    return `${load}<h4>${esc(t("round_notes"))}</h4><ol>${items}</ol><p>${esc(t("rollback"))}</p>` +
      `<ul>${help.map((h) => `<li>${esc(h)}</li>`).join("")}</ul>`;
  }

  function whereOf(s, index, sub) {
    if (s.kind === "round") {
      const r = roundOf(s);
      const head = s.round ? t("round_where", { i: s.round, n: nRounds() }) : t("prefill_where");
      return r ? `${head} · ${t(`phase_${phasesOf(r)[sub]}`)}` : head;
    }
    return `${t("step")} ${s.step} · ${t(`build_${s.kind}`)} · ${index + 1}/${slides().length}`;
  }

  function nextOf() {
    const s = current();
    if (state.sub < subs(s) - 1) return [state.slide, state.sub + 1];
    if (state.slide < slides().length - 1) return [state.slide + 1, 0];
    return null;
  }

  function drawSpeaker() {
    const s = current();
    const nx = nextOf();
    $("sp-where").textContent = whereOf(s, state.slide, state.sub);
    $("sp-notes").innerHTML = `<h2>${esc(s.kind === "round" ? "6B" : s.title)}</h2>${notesOf(s, state.sub)}`;
    let upcoming = "—";
    if (nx) {
      const n = slides()[nx[0]];
      const nr = roundOf(n), debug = debugOf();
      let what;
      if (n.kind === "round") {
        what = nr ? sayRound(nr, phasesOf(nr)[nx[1]]).text : esc(t("say_prefill", { n: debug.prompt_len, w: debug.window_size }));
        what = `<p>${what}</p>`; // sayRound's sentences are HTML already (their tokens escaped)
      } else {
        what = n.narration ? `<p>${esc(n.narration[nx[1]].text)}</p>` : n.html.replace(/<div class="figure"[^>]*><\/div>/, "");
      }
      upcoming = `<p class="where">${esc(whereOf(n, nx[0], nx[1]))}</p><h3>${esc(n.kind === "round" ? "6B" : n.title)}</h3><div class="preview">${what}</div>`;
    }
    $("sp-next").innerHTML = `<h3 class="label">${esc(t("next_up"))}</h3>${upcoming}`;
    tick();
  }

  function tick() {
    const sec = Math.floor((Date.now() - clock) / 1000);
    const el = $("sp-time");
    if (el) el.textContent = `${String(Math.floor(sec / 60)).padStart(2, "0")}:${String(sec % 60).padStart(2, "0")}`;
  }

  // ---- keeping the windows together ---------------------------------------------------------------------------
  const channel = typeof BroadcastChannel === "function" ? new BroadcastChannel(SYNC) : null;
  function announce() {
    const msg = { from: me, slide: state.slide, sub: state.sub, predict: state.predict, at: Date.now() };
    if (channel) channel.postMessage(msg);
    try {
      localStorage.setItem(SYNC, JSON.stringify(msg)); // the other windows get a "storage" event
    } catch (e) {
      /* storage off (a private window from file://): the channel alone */
    }
  }
  function follow(msg) {
    if (!msg || msg.from === me) return;
    if (msg.hello) return announce(); // a window just opened: it takes this one's slide
    if (msg.slide === state.slide && msg.sub === state.sub && msg.predict === state.predict) return;
    state.predict = msg.predict;
    go(msg.slide, msg.sub, false);
  }
  if (channel) channel.onmessage = (e) => follow(e.data);
  window.addEventListener("storage", (e) => {
    if (e.key === SYNC && e.newValue) follow(JSON.parse(e.newValue));
  });

  // ---- navigation -------------------------------------------------------------------------------------------------
  function setParam(name, value) {
    if (value === null) params.delete(name);
    else params.set(name, value);
    const q = params.toString().replace(/=(?=&|$)/g, ""); // ?notes&predict, not ?notes=&predict=
    try {
      history.replaceState(null, "", `${location.pathname}${q ? "?" + q : ""}${location.hash}`);
    } catch (e) {
      /* a page where the address cannot change: the setting still applies */
    }
  }

  function render() {
    timers.forEach(clearTimeout);
    timers = [];
    document.documentElement.lang = state.lang;
    document.body.classList.toggle("dark", state.dark);
    document.body.classList.toggle("speaker", speaker);
    $("stage").style.setProperty("--scale", String(state.font / 100));
    for (const el of document.querySelectorAll("[data-t]")) el.textContent = t(el.dataset.t);
    $("lang-vi").setAttribute("aria-pressed", String(state.lang === "vi"));
    $("lang-en").setAttribute("aria-pressed", String(state.lang === "en"));
    $("dark").setAttribute("aria-pressed", String(state.dark));
    $("predict").setAttribute("aria-pressed", String(state.predict));
    $("font-value").textContent = `${state.font}%`;
    const s = current();
    const all = slides();
    Object.assign($("stage").dataset, { slide: state.slide, sub: state.sub, slides: all.length }); // for tests
    $("prev").disabled = state.slide === 0 && state.sub === 0;
    $("next").disabled = state.slide === all.length - 1 && state.sub === subs(s) - 1;
    $("where").textContent = s.kind === "round"
      ? s.round ? t("round_where", { i: s.round, n: nRounds() }) : t("prefill_where")
      : `${t("step")} ${s.step} · ${state.slide + 1}/${all.length}`;
    const mine = s.kind === "round" ? [] : all.filter((x) => x.kind !== "round" && x.step === s.step);
    $("builds").innerHTML = mine.map((x) => `<i class="${x === s ? "on" : ""}"></i>`).join("");
    if (speaker) {
      drawSpeaker();
      shown = { slide: state.slide, lang: state.lang, font: state.font };
      return;
    }
    const mode = s.kind === "round" ? "mode-round" : s.kind === "text" ? "mode-map" : "mode-full";
    $("stage").className = mode;
    const fresh = shown.slide !== state.slide || shown.lang !== state.lang || shown.font !== state.font;
    const top = $("slide").scrollTop;
    if (s.kind === "round") {
      drawRound(s);
    } else {
      if (!$("map") || fresh) drawMap(); // kept (hidden beside figures and tables) so it always says where we are
      lightMap(s.step);
      if (s.kind === "text") requestAnimationFrame(drawArrows);
      if (fresh) drawBuild(s);
      narrate(s);
    }
    if (shown.slide !== state.slide) $("slide").scrollTop = 0; // every slide opens at its top
    else if (s.kind === "round" && !$("slide").querySelector(".lit")) $("slide").scrollTop = top;
    shown = { slide: state.slide, lang: state.lang, font: state.font };
  }

  function go(slide, sub, tell = true) {
    const all = slides();
    state.slide = Math.min(all.length - 1, Math.max(0, slide));
    state.sub = Math.min(subs(all[state.slide]) - 1, Math.max(0, sub));
    render();
    if (tell) announce();
  }
  // Next: the next sentence or phase; on a build taller than the screen (a larger text size), first the rest of it
  // (a clicker has no scroll wheel); then the next slide, which opens at its top
  function next() {
    const box = $("slide");
    const below = !speaker && box.scrollHeight - box.clientHeight - box.scrollTop > 4;
    if (state.sub < subs(current()) - 1) go(state.slide, state.sub + 1);
    else if (below && current().kind !== "round" && !current().narration) scroll(0.85 / 0.4);
    else if (state.slide < slides().length - 1) go(state.slide + 1, 0);
  }
  function prev() {
    if (state.sub > 0) go(state.slide, state.sub - 1);
    else if (state.slide > 0) go(state.slide - 1, subs(slides()[state.slide - 1]) - 1);
  }
  function round(delta) {
    const all = slides();
    const first = all.findIndex((s) => s.kind === "round");
    const at = current().kind === "round" ? current().round : -1;
    go(first + Math.min(nRounds(), Math.max(0, at + delta)), 0);
  }
  // J: the verify phase of the next round that rejects a draft (after the current one, else the first)
  function jumpToRejection() {
    const rounds = debugOf().rounds;
    const at = current().kind === "round" ? current().round : 0;
    const hits = rounds.map((r, j) => j + 1).filter((i) => rounds[i - 1].status.includes("rejected"));
    if (!hits.length) return;
    const i = hits.find((x) => x > at) || hits[0];
    const first = slides().findIndex((s) => s.kind === "round");
    state.jumped = true;
    go(first + i, phasesOf(rounds[i - 1]).indexOf("verify"));
  }
  function scroll(direction) {
    $("slide").scrollBy({ top: direction * 0.4 * $("slide").clientHeight, behavior: "auto" });
  }
  function font(delta) {
    state.font = Math.min(FONT_MAX, Math.max(FONT_MIN, state.font + delta));
    render();
  }
  function setLang(lang) {
    state.lang = lang; // each language has its own prompt and rounds: a round may have another number of phases
    go(state.slide, state.sub, false);
  }
  function setDark(on) {
    state.dark = on;
    setParam("theme", on ? "dark" : null);
    render();
  }
  function setPredict(on) {
    const s = current(), r = roundOf(s);
    const phase = r ? phasesOf(r)[state.sub] : null;
    state.predict = on;
    setParam("predict", on ? "" : null);
    if (r) state.sub = Math.max(0, phasesOf(r).indexOf(phase === "predict" ? "verify" : phase)); // the same phase
    go(state.slide, state.sub);
  }
  function openSpeaker() {
    const q = new URLSearchParams(location.search);
    q.set("notes", "");
    window.open(`${location.pathname}?${q.toString().replace(/=(?=&|$)/g, "")}${location.hash}`, "dspark-notes");
    announce();
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
  $("dark").addEventListener("click", () => setDark(!state.dark));
  $("predict").addEventListener("click", () => setPredict(!state.predict));
  $("jump").addEventListener("click", jumpToRejection);
  $("speaker").addEventListener("click", openSpeaker);
  $("sp-reset").addEventListener("click", () => {
    clock = Date.now();
    tick();
  });
  // keys by what they name, case-blind: F and Shift+F, L and Shift+L do the same
  const keys = {
    arrowright: next, pagedown: next, " ": next, enter: next,
    arrowleft: prev, pageup: prev, backspace: prev,
    arrowdown: () => scroll(1), arrowup: () => scroll(-1),
    "+": () => font(FONT_STEP), "=": () => font(FONT_STEP), "-": () => font(-FONT_STEP), "_": () => font(-FONT_STEP),
    f: fullscreen, l: () => setLang(state.lang === "vi" ? "en" : "vi"),
    d: () => setDark(!state.dark), p: () => setPredict(!state.predict), j: jumpToRejection, s: openSpeaker,
    "]": () => round(1), "[": () => round(-1),
    home: () => go(0, 0), end: () => go(slides().length - 1, 0),
  };
  for (let n = 1; n <= 9; n++) keys[String(n)] = () => guess(n - 1);
  if (document.fonts) for (const w of ["", "bold "]) document.fonts.load(`${w}16px "DSpark Mono"`, "về").catch(() => {});
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.target.closest && e.target.closest("button") && (e.key === " " || e.key === "Enter")) return; // a button's own
    const action = keys[e.key.toLowerCase()];
    if (action) {
      e.preventDefault();
      action();
    }
  });
  window.addEventListener("resize", () => {
    if (current().kind === "text") drawArrows();
  });
  if (speaker) setInterval(tick, 1000);
  render();
  if (speaker) {
    // a new speaker view starts where the deck is: the deck's last word (localStorage), then its answer to hello
    try {
      follow(JSON.parse(localStorage.getItem(SYNC) || "null"));
    } catch (e) {
      /* no storage: the hello below */
    }
    if (channel) channel.postMessage({ from: me, hello: true });
  }
})();
