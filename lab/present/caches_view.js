// What the caches hold after a commit, drawn the same way by the presenter's round pages and the Explorer's
// cache stepper: the window ring, the draft ring, the compressor's latents and carry, the Engram history
// (lab/present/rounds.py `cache_state` records them by position). Pure function: no page state.
//
// st, before: cache states (before = the state the commit started from, or null: nothing marked fresh);
// ctx: { tokens [ids by position], vocab [texts], windowSize, maxNgram, t(key, vars) → text, esc(text) → html,
//        heading: the key of the heading, "caches" unless given }.
// A slot written by this commit gets the class "fresh"; every slot carries data-pos (the position it holds).
function cacheView(st, before, ctx) {
  const { esc, t } = ctx;
  const text = (pos) => `«${esc(ctx.vocab[ctx.tokens[pos]].replace(/^▁/, " "))}»`;
  function ring(slots, old, id) {
    const cells = slots.map((pos, s) => {
      if (pos < 0) return `<div class="slot empty" data-slot="${s}">${s}<b>${esc(t("empty"))}</b></div>`;
      const fresh = old && old[s] !== pos ? " fresh" : "";
      return `<div class="slot${fresh}" data-slot="${s}" data-pos="${pos}">${s} · ${pos}<b>${text(pos)}</b></div>`;
    });
    return `<div class="ring" id="${id}">${cells.join("")}</div>`;
  }
  const sources = st.sources
    .map((src, i) => {
      const was = before ? before.sources[i] : null;
      const grew = was && (was.latents !== src.latents || was.carry.join() !== src.carry.join()) ? " fresh" : "";
      const carry = src.carry.length ? src.carry.map((p) => `${p} ${text(p)}`).join(", ") : esc(t("no_carry"));
      const last = src.latents * src.ratio - 1;
      const line = esc(t("source_line", { layer: src.layer, r: src.ratio, n: src.latents, last, carry: "" }));
      return `<li class="source${grew}" data-layer="${src.layer}">${line}${carry}</li>`;
    })
    .join("");
  const oldHistory = before ? before.engram_positions : [];
  const hist = st.engram_history
    .map((id, i) => {
      const p = st.engram_positions[i];
      const fresh = before && p >= 0 && !oldHistory.includes(p) ? " fresh" : "";
      const label = p < 0 ? esc(t("pad")) : p;
      return `<div class="slot${fresh}" data-pos="${p}">${label}<b>${id}${p < 0 ? "" : " " + text(p)}</b></div>`;
    })
    .join("");
  return (
    `<h3>${esc(t(ctx.heading || "caches", { n: st.length }))}</h3><div class="caches" id="caches">` +
    `<div class="cache"><b>${esc(t("window_ring"))}</b>` +
    `<div class="help">${esc(t("window_help", { w: ctx.windowSize }))}</div>` +
    `${ring(st.window, before && before.window, "window-ring")}</div>` +
    `<div class="cache"><b>${esc(t("draft_ring"))}</b><div class="help">${esc(t("draft_ring_help"))}</div>` +
    `${ring(st.draft_ring, before && before.draft_ring, "draft-ring")}</div>` +
    `<div class="cache"><b>${esc(t("compressor"))}</b><ul id="compressor">${sources}</ul></div>` +
    `<div class="cache"><b>${esc(t("engram"))}</b>` +
    `<div class="help">${esc(t("engram_help", { n: ctx.maxNgram - 1 }))}</div>` +
    `<div class="ring" id="engram-history">${hist}</div></div></div>`
  );
}
