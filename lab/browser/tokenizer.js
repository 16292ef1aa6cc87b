/* The lab tokenizer in plain JavaScript: a twin of dspark_mini/hf_tokenizer.py (which runs the Hugging Face
 * `tokenizers` library on dspark_mini/lab_tokenizer/tokenizer.json), for pages and scripts without Python.
 *
 *   const tok = DSparkTokenizer(JSON.parse(tokenizerJsonText));  // node: require("./tokenizer.js")
 *   tok.encode("Hôm nay trời đẹp")  → ids       (no special tokens added; "<eos>" typed in a text is text)
 *   tok.decode(ids)                 → text      (special tokens written out, stray bytes as U+FFFD)
 *   tok.pieces(ids)                 → strings   (what `dspark-lab tokenize` shows: a stray byte as "<0xNN>")
 *
 * The stages, as tokenizer.json names them: NFC normalizer → Split pre-tokenizer (a regular expression, each match
 * its own word) → ByteLevel (a word's UTF-8 bytes, each written as one printable character) → BPE (merges applied
 * lowest rank first) → ids. No dependencies, no network; runs in node 20 and in a page opened from file://.
 * tests/test_js_tokenizer.py holds it equal to Python's tokenizer: the same ids, decoded text and pieces on many
 * texts, and the same normalization and word splitting on every Unicode code point.
 */
(function (root, factory) {
  const DSparkTokenizer = factory();
  if (typeof module === "object" && module && module.exports) module.exports = DSparkTokenizer;
  else root.DSparkTokenizer = DSparkTokenizer;
})(typeof globalThis !== "undefined" ? globalThis : this, function () {
  "use strict";

  // ---- Where JavaScript's Unicode differs from the library's --------------------------------------------------
  // `tokenizers` runs its Split pattern with Oniguruma, whose tables are Unicode 16; a JavaScript engine has its own
  // (node 20: Unicode 17). Letters and numbers new in Unicode 17 are no \p{L} / \p{N} to the library, so they are
  // taken out of JavaScript's classes here. (A runtime knowing a newer Unicode still would differ on those letters.)
  const NEWER_LETTERS =
    "\\u{88F}\\u{C5C}\\u{CDC}\\u{A7CE}-\\u{A7CF}\\u{A7D2}\\u{A7D4}\\u{A7F1}\\u{10940}-\\u{10959}\\u{10EC5}-\\u{10EC7}" +
    "\\u{11DB0}-\\u{11DDB}\\u{16EA0}-\\u{16EB8}\\u{16EBB}-\\u{16ED3}\\u{16FF2}-\\u{16FF3}\\u{187F8}-\\u{187FF}" +
    "\\u{18D09}-\\u{18D1E}\\u{18D80}-\\u{18DF2}\\u{1E6C0}-\\u{1E6DE}\\u{1E6E0}-\\u{1E6E2}\\u{1E6E4}-\\u{1E6E5}" +
    "\\u{1E6E7}-\\u{1E6ED}\\u{1E6F0}-\\u{1E6F4}\\u{1E6FE}-\\u{1E6FF}\\u{2B73A}-\\u{2B73F}\\u{2CEA2}-\\u{2CEAD}" +
    "\\u{323B0}-\\u{33479}";
  const NEWER_NUMBERS = "\\u{11DE0}-\\u{11DE9}\\u{16FF4}-\\u{16FF6}";
  // Oniguruma's \s is Unicode's White_Space: JavaScript's \s adds U+FEFF and lacks U+0085 (NEL).
  const SPACE =
    "\\t\\n\\v\\f\\r \\u{85}\\u{A0}\\u{1680}\\u{2000}-\\u{200A}\\u{2028}\\u{2029}\\u{202F}\\u{205F}\\u{3000}";
  // The library's NFC (the Rust crate unicode-normalization-alignments) has older tables than JavaScript's
  // String.prototype.normalize: to it these combining marks (and the letters of compositions added since) are plain
  // characters with combining class 0 that never compose. normalize() treats each as a wall, as the library does.
  const NFC_WALLS = new RegExp(
    "([\\u{7FD}\\u{897}-\\u{89F}\\u{8CA}-\\u{8D3}\\u{9FE}\\u{C3C}\\u{D3B}-\\u{D3C}\\u{EBA}\\u{1715}" +
      "\\u{1ABF}-\\u{1ADD}\\u{1AE0}-\\u{1AEB}\\u{1DF6}-\\u{1DFA}\\u{A82C}\\u{105D2}\\u{105DA}" +
      "\\u{10D24}-\\u{10D27}\\u{10D69}-\\u{10D6D}\\u{10EAB}-\\u{10EAC}\\u{10EFA}-\\u{10EFB}" +
      "\\u{10EFD}-\\u{10EFF}\\u{10F46}-\\u{10F50}\\u{10F82}-\\u{10F85}\\u{11070}\\u{1133B}\\u{11382}" +
      "\\u{11384}\\u{1138B}\\u{11390}\\u{113B8}\\u{113BB}\\u{113C2}\\u{113C9}\\u{113CE}-\\u{113D0}" +
      "\\u{1145E}\\u{11839}-\\u{1183A}\\u{11930}\\u{11935}\\u{1193D}-\\u{1193E}\\u{11943}\\u{119E0}" +
      "\\u{11A34}\\u{11A47}\\u{11A99}\\u{11D42}\\u{11D44}-\\u{11D45}\\u{11D97}\\u{11F41}-\\u{11F42}" +
      "\\u{1611E}-\\u{16120}\\u{16129}\\u{1612F}\\u{16D63}\\u{16D67}\\u{16FF0}-\\u{16FF1}\\u{1E08F}" +
      "\\u{1E130}-\\u{1E136}\\u{1E2AE}\\u{1E2EC}-\\u{1E2EF}\\u{1E4EC}-\\u{1E4EF}\\u{1E5EE}-\\u{1E5EF}" +
      "\\u{1E6E3}\\u{1E6E6}\\u{1E6EE}-\\u{1E6EF}\\u{1E6F5}])",
    "u"
  );

  /** Text → NFC, as the library's normalizer: split at the walls (kept), each stretch normalized on its own. */
  function nfc(text) {
    if (!NFC_WALLS.test(text)) return text.normalize("NFC");
    return text.split(NFC_WALLS).map((part) => part.normalize("NFC")).join("");
  }

  /** An Oniguruma pattern → a JavaScript one (flag u) that matches the same: \s, \S, \p{L}, \p{N} rewritten. */
  function translatePattern(pattern) {
    let out = "";
    let cls = null; // the character class being read ("[...]"), with what it holds
    for (let i = 0; i < pattern.length; i++) {
      const c = pattern[i];
      let piece = c;
      if (c === "\\") {
        const prop = /^\\p\{([LN])\}/.exec(pattern.slice(i));
        const esc = prop ? prop[0] : pattern.slice(i, i + 2);
        i += esc.length - 1;
        if (esc === "\\s") piece = cls ? SPACE : `[${SPACE}]`;
        else if (esc === "\\S" && !cls) piece = `[^${SPACE}]`;
        else if (prop) {
          const newer = prop[1] === "L" ? NEWER_LETTERS : NEWER_NUMBERS;
          if (cls) cls.newer += newer;
          piece = cls ? esc : `[^\\P{${prop[1]}}${newer}]`; // L or N, less what the library does not know yet
        } else if (/^\\[A-Za-z0-9]$/.test(esc) && !/^\\[tnrfv]$/.test(esc)) {
          // \d, \w, \b, \p{…} of other kinds: Oniguruma's and JavaScript's differ, and the lab's pattern has none
          throw new Error(`tokenizer.js: the pattern escape ${esc} is not translated (only \\s \\S \\p{L} \\p{N})`);
        } else piece = esc; // an escaped symbol, \t, \n, …: the same in both
      } else if (c === "[" && !cls) {
        cls = { negated: pattern[i + 1] === "^", newer: "", body: "" };
        continue;
      } else if (c === "]" && cls && cls.body !== "" && cls.body !== "^") {
        // [^…\p{L}…]: the newer letters are outside the library's \p{L}, so such a class matches them too;
        // [… \p{L} …]: it must not
        const body = `[${cls.body}]`;
        if (!cls.newer) out += body;
        else out += cls.negated ? `(?:[${cls.newer}]|${body})` : `(?:(?![${cls.newer}])${body})`;
        cls = null;
        continue;
      }
      if (cls) cls.body += piece;
      else out += piece;
    }
    if (cls) throw new Error("tokenizer.js: the pattern has an unclosed character class");
    return new RegExp(out, "gu");
  }

  // ---- GPT-2's byte-level alphabet: each of the 256 bytes written as one printable character ------------------
  const BYTE_TO_CHAR = [];
  const CHAR_TO_BYTE = new Map();
  (function () {
    const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    let shifted = 0; // bytes that are no printable character become U+0100, U+0101, … in order
    for (let b = 0; b < 256; b++) {
      BYTE_TO_CHAR[b] = String.fromCharCode(printable(b) ? b : 256 + shifted++);
      CHAR_TO_BYTE.set(BYTE_TO_CHAR[b], b);
    }
  })();

  const utf8 = new TextEncoder();
  const lossy = new TextDecoder("utf-8", { ignoreBOM: true }); // a leading U+FEFF is kept, as Rust keeps it

  /** Length of the whole UTF-8 character starting at bytes[i], or 0 when none starts there. */
  function charLength(bytes, i) {
    const b = bytes[i];
    const cont = (k, lo = 0x80, hi = 0xbf) => i + k < bytes.length && bytes[i + k] >= lo && bytes[i + k] <= hi;
    if (b < 0x80) return 1;
    if (b >= 0xc2 && b <= 0xdf) return cont(1) ? 2 : 0;
    if (b >= 0xe0 && b <= 0xef) {
      // no overlong form, no surrogate
      const [lo, hi] = b === 0xe0 ? [0xa0, 0xbf] : b === 0xed ? [0x80, 0x9f] : [0x80, 0xbf];
      return cont(1, lo, hi) && cont(2) ? 3 : 0;
    }
    if (b >= 0xf0 && b <= 0xf4) {
      const [lo, hi] = b === 0xf0 ? [0x90, 0xbf] : b === 0xf4 ? [0x80, 0x8f] : [0x80, 0xbf]; // ≤ U+10FFFF
      return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
    }
    return 0;
  }

  /** Bytes as text, each byte that is no part of a whole UTF-8 character written "<0xNN>" (hf_tokenizer.show_bytes). */
  function showBytes(bytes) {
    let out = "";
    for (let i = 0; i < bytes.length; ) {
      const n = charLength(bytes, i);
      if (n) out += lossy.decode(bytes.subarray(i, i + n));
      else out += "<0x" + bytes[i].toString(16).toUpperCase().padStart(2, "0") + ">";
      i += n || 1;
    }
    return out;
  }

  /** The tokenizer of one parsed tokenizer.json of the lab's kind (a byte-level BPE). */
  function DSparkTokenizer(spec) {
    const model = spec.model || {};
    const steps = (spec.pre_tokenizer && spec.pre_tokenizer.pretokenizers) || [];
    const [split, byteLevel] = steps;
    const supported =
      model.type === "BPE" &&
      !model.byte_fallback &&
      !model.ignore_merges &&
      !model.continuing_subword_prefix &&
      !model.end_of_word_suffix &&
      !model.dropout &&
      spec.normalizer &&
      spec.normalizer.type === "NFC" &&
      spec.pre_tokenizer.type === "Sequence" &&
      steps.length === 2 &&
      split.type === "Split" &&
      split.behavior === "Isolated" &&
      !split.invert &&
      split.pattern.Regex !== undefined &&
      byteLevel.type === "ByteLevel" &&
      !byteLevel.add_prefix_space &&
      !byteLevel.use_regex &&
      spec.decoder &&
      spec.decoder.type === "ByteLevel" &&
      (spec.added_tokens || []).every((t) => t.special);
    if (!supported) {
      throw new Error("tokenizer.js reads a tokenizer.json of the lab's kind only: NFC, Split + ByteLevel, BPE");
    }

    // ids ↔ token strings: the BPE vocabulary and the added (special) tokens
    const vocab = new Map(Object.entries(model.vocab));
    const tokens = [];
    for (const [t, id] of vocab) tokens[id] = t;
    const specials = new Set();
    for (const t of spec.added_tokens || []) {
      tokens[t.id] = t.content;
      specials.add(t.id);
    }

    // merge ranks: rank[a].get(b) = the merge's place in the list (lower merges first)
    const rank = new Map();
    model.merges.forEach((m, r) => {
      const [a, b] = typeof m === "string" ? m.split(" ") : m; // "a b" (older files) or ["a", "b"]
      if (!rank.has(a)) rank.set(a, new Map());
      if (!rank.get(a).has(b)) rank.get(a).set(b, r);
    });

    const pattern = translatePattern(split.pattern.Regex);

    /** Split: every match of the pattern is a word, and so is every stretch between matches ("Isolated"). */
    function splitWords(text) {
      const words = [];
      let last = 0;
      for (const m of text.matchAll(pattern)) {
        if (m[0] === "") continue; // an empty match splits nothing
        if (m.index > last) words.push(text.slice(last, m.index));
        words.push(m[0]);
        last = m.index + m[0].length;
      }
      if (last < text.length) words.push(text.slice(last));
      return words;
    }

    /** BPE on one word (its byte-level characters): merge the adjacent pair of lowest rank, the leftmost of
     * equals, until no pair is a merge; each part is then a token of the vocabulary. */
    function bpe(word) {
      const parts = Array.from(word).filter((ch) => vocab.has(ch));
      for (;;) {
        let best = -1;
        let bestRank = Infinity;
        for (let i = 0; i + 1 < parts.length; i++) {
          const r = rank.has(parts[i]) ? rank.get(parts[i]).get(parts[i + 1]) : undefined;
          if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
        }
        if (best < 0) return parts.map((p) => vocab.get(p));
        parts.splice(best, 2, parts[best] + parts[best + 1]);
      }
    }

    /** The bytes a token stands for: its characters mapped back through the byte alphabet, or (a special token
     * such as "<eos>" holding a character outside it) its UTF-8. */
    function tokenBytes(id) {
      if (!Number.isInteger(id) || tokens[id] === undefined) {
        throw new Error(`token id ${id} is out of range: ids run 0..${tokens.length - 1}`);
      }
      const t = tokens[id];
      const chars = Array.from(t);
      if (chars.every((ch) => CHAR_TO_BYTE.has(ch))) return Uint8Array.from(chars, (ch) => CHAR_TO_BYTE.get(ch));
      return utf8.encode(t);
    }

    const cache = new Map(); // word → ids: words repeat a lot in a text

    return {
      vocabSize: tokens.length,
      normalize: nfc,
      split: splitWords, // an already normalized text → its words (the pre-tokenizer's Split)
      /** Text → ids: NFC, split into words, each word's UTF-8 bytes as byte-level characters, BPE. */
      encode(text) {
        const ids = [];
        for (const word of splitWords(nfc(text))) {
          let got = cache.get(word);
          if (got === undefined) {
            got = bpe(Array.from(utf8.encode(word), (b) => BYTE_TO_CHAR[b]).join(""));
            if (cache.size < 10000) cache.set(word, got);
          }
          ids.push(...got);
        }
        return ids;
      },
      /** Ids → text: every token's bytes in a row, read as UTF-8 (a stray byte becomes U+FFFD, as Rust's
       * from_utf8_lossy writes it); special tokens are written out. */
      decode(ids) {
        const parts = Array.from(ids, tokenBytes);
        const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
        let at = 0;
        for (const p of parts) {
          all.set(p, at);
          at += p.length;
        }
        return lossy.decode(all);
      },
      /** Ids → what `dspark-lab tokenize` shows for each: its text, a byte that is no part of a whole UTF-8
       * character written "<0xNN>"; a special token by its name. */
      pieces(ids) {
        return Array.from(ids, (id) => {
          const bytes = tokenBytes(id);
          return specials.has(id) ? tokens[id] : showBytes(bytes);
        });
      },
    };
  }

  return DSparkTokenizer;
});
