/* The lab's portable random generator in plain JavaScript: a twin of dspark_mini/portable_random.py, so that the same
 * (seed, stream, counter) gives the same float64 — and the same sampled token — in the browser as in Python.
 *
 *   const R = require("./random.js");             // a page: the global DSparkRandom
 *   R.uniform(seed, stream, counter)  → a float64 in [0, 1)
 *   const g = new R.PortableGenerator(seed);      // g.random(): the next draw; g.counter: draws made so far
 *   R.pick(row, u)                    → the index the sampling rule picks in a row of weights [V]
 *   R.sample(probs, g)                → one index per row of [V] or nested rows [..., V], row-major, one draw each
 *   R.acceptRatio(pt, pd), R.accept(ratio, g)   the accept test of speculative verify
 *
 * Draw `counter` of stream `stream` under `seed` is Philox4x32-10 (Random123) of the counter words
 * (counter mod 2**32, counter div 2**32, stream mod 2**32, stream div 2**32) under the key (seed mod 2**32,
 * seed div 2**32); of its four 32-bit words w, u = ((w[0] >>> 5) · 2**26 + (w[1] >>> 6)) / 2**53, exact in float64.
 * The 32-bit products: Math.imul gives the low half, four 16-bit partial products the high half; every step is
 * integer arithmetic a float64 holds exactly. The sampling rule and the accept test are written out in the Python
 * module's docstring; this file follows them operation for operation. Seeds, streams and counters are integers
 * 0 ≤ n < 2**63, given as a Number (a safe integer), a BigInt or a string of decimal digits (a Number cannot hold
 * every integer above 2**53). No dependencies, no network; node 20 and a page opened from file://.
 * tests/test_portable_random.py holds it equal to Python bit for bit.
 */
(function (root, factory) {
  const DSparkRandom = factory();
  if (typeof module === "object" && module && module.exports) module.exports = DSparkRandom;
  else root.DSparkRandom = DSparkRandom;
})(typeof globalThis !== "undefined" ? globalThis : this, function () {
  "use strict";

  const M0 = 0xd2511f53; // the two round multipliers
  const M1 = 0xcd9e8d57;
  const W0 = 0x9e3779b9; // the key's per-round increments
  const W1 = 0xbb67ae85;
  const ROUNDS = 10;
  const TWO26 = 67108864;
  const TWO53 = 9007199254740992;
  const LIMIT = 1n << 63n; // 0 ≤ seed, stream, counter < 2**63
  const ACCEPT_FLOOR = 1e-12; // the floor on p_d of speculative.verify_block

  /** The high 32 bits of a · b (a, b unsigned 32-bit), from 16-bit halves: every partial sum stays below 2**53. */
  function mulhi(a, b) {
    const al = a & 0xffff;
    const ah = a >>> 16;
    const bl = b & 0xffff;
    const bh = b >>> 16;
    const lh = al * bh;
    const hl = ah * bl;
    const mid = ((al * bl) >>> 16) + (lh & 0xffff) + (hl & 0xffff); // the carry into bit 32 is mid >>> 16
    return (ah * bh + (lh >>> 16) + (hl >>> 16) + (mid >>> 16)) >>> 0;
  }

  /** Philox4x32-10: counter [4] and key [2], unsigned 32-bit words → [4] words (as philox4x32_10 in Python). */
  function philox4x32_10(counter, key) {
    let [c0, c1, c2, c3] = counter.map((w) => w >>> 0);
    let [k0, k1] = key.map((w) => w >>> 0);
    for (let r = 0; r < ROUNDS; r++) {
      if (r) {
        k0 = (k0 + W0) >>> 0;
        k1 = (k1 + W1) >>> 0;
      }
      const hi0 = mulhi(M0, c0);
      const lo0 = Math.imul(M0, c0) >>> 0;
      const hi1 = mulhi(M1, c2);
      const lo1 = Math.imul(M1, c2) >>> 0;
      [c0, c1, c2, c3] = [(hi1 ^ c1 ^ k0) >>> 0, lo1, (hi0 ^ c3 ^ k1) >>> 0, lo0];
    }
    return [c0, c1, c2, c3];
  }

  /** A seed, stream or counter as a BigInt in 0..2**63 − 1, or a clear error naming it. */
  function checkIndex(value, name) {
    const allowed = `allowed an integer in 0..9223372036854775807 (0 ≤ ${name} < 2**63)`;
    const shown = typeof value === "string" ? JSON.stringify(value) : String(value);
    let n;
    if (typeof value === "bigint") n = value;
    else if (typeof value === "number" && Number.isSafeInteger(value)) n = BigInt(value);
    else if (typeof value === "number" && Number.isInteger(value) && Math.abs(value) < 2 ** 64)
      throw new RangeError(`${name} = ${shown} is invalid: ${allowed}; above 2**53 give a BigInt or a decimal string`);
    else if (typeof value === "string" && /^[0-9]{1,20}$/.test(value)) n = BigInt(value);
    else throw new RangeError(`${name} = ${shown} is invalid: ${allowed}`);
    if (n < 0n || n >= LIMIT) throw new RangeError(`${name} = ${shown} is invalid: ${allowed}`);
    return n;
  }

  const words = (n) => [Number(n & 0xffffffffn), Number(n >> 32n)]; // a BigInt 0 ≤ n < 2**64 → [lo, hi]

  /** The float64 of the words [4] a block gave: 27 high bits of w[0], then 26 of w[1], times 2**−53. */
  function toFloat(w) {
    return ((w[0] >>> 5) * TWO26 + (w[1] >>> 6)) / TWO53;
  }

  /** Draw `counter` of stream `stream` under `seed`: a float64 in [0, 1), a multiple of 2**−53. */
  function uniform(seed, stream, counter) {
    const key = words(checkIndex(seed, "seed"));
    const [s0, s1] = words(checkIndex(stream, "stream"));
    const [n0, n1] = words(checkIndex(counter, "counter"));
    return toFloat(philox4x32_10([n0, n1, s0, s1], key));
  }

  /** (seed, stream) and the counter of the next draw, kept as 32-bit words. */
  class PortableGenerator {
    constructor(seed = 0, stream = 0, counter = 0) {
      this.seed = checkIndex(seed, "seed"); // BigInt
      this.stream = checkIndex(stream, "stream");
      this.key = words(this.seed);
      this.streamWords = words(this.stream);
      [this.lo, this.hi] = words(checkIndex(counter, "counter"));
    }
    /** The counter of the next draw (= draws made since counter 0), as a BigInt. */
    get counter() {
      return (BigInt(this.hi) << 32n) | BigInt(this.lo);
    }
    /** The next draw: a float64 in [0, 1). */
    random() {
      if (this.hi === 0x7fffffff && this.lo === 0xffffffff) {
        const allowed = "allowed 0 ≤ counter < 2**63 − 1 (this stream is used up)";
        throw new RangeError(`counter = ${this.counter} is invalid: ${allowed}`);
      }
      const w = philox4x32_10([this.lo, this.hi, this.streamWords[0], this.streamWords[1]], this.key);
      this.lo = (this.lo + 1) >>> 0;
      if (this.lo === 0) this.hi += 1;
      return toFloat(w);
    }
    /** rand(): the draws as a function, where a page passes a `rand` around (as its samplers and verifier do). */
    rand() {
      return () => this.random();
    }
  }

  /** A row's weights checked (finite, ≥ 0) and its cumulative sums, strictly left to right. [V] → [V] */
  function cumulative(row, where) {
    if (!row || typeof row.length !== "number" || row.length === 0)
      throw new RangeError(`${where}: a row [V] with V ≥ 1 is needed`);
    const cum = new Float64Array(row.length);
    let c = 0;
    for (let v = 0; v < row.length; v++) {
      const p = row[v];
      if (typeof p !== "number" || !Number.isFinite(p) || !(p >= 0))
        throw new RangeError(`${where}[${v}] = ${p} is invalid: allowed a finite number ≥ 0`);
      c += p;
      cum[v] = c;
    }
    if (!(Number.isFinite(c) && c > 0))
      throw new RangeError(`${where} sums to ${c}: allowed a finite total > 0 (a weight > 0, and no overflow)`);
    return cum;
  }

  /** The sampling rule on one checked row [V] with its cumulative sums cum [V]: the smallest i with u · total < c_i;
   * if none (a subnormal total that u · total rounds up to), the last i with weight. */
  function pickChecked(row, cum, u) {
    const t = u * cum[cum.length - 1];
    let lo = 0;
    let hi = cum.length; // binary search: the first i with t < cum[i] (cum never decreases)
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (t < cum[mid]) hi = mid;
      else lo = mid + 1;
    }
    if (lo < cum.length) return lo;
    for (let v = row.length - 1; ; v--) if (row[v] > 0) return v;
  }

  /** The index the sampling rule picks in one row of weights [V] (not necessarily normalised) for u in [0, 1). */
  function pick(row, u, where = "row") {
    if (typeof u !== "number" || !(u >= 0 && u < 1))
      throw new RangeError(`u = ${u} is invalid: allowed a number in [0, 1)`);
    return pickChecked(row, cumulative(row, where), u);
  }

  /** One index per row: probs [V] → an index; nested rows [..., V] → nested indices, row-major, one draw a row
   * (every row is checked before the first draw, as Python checks the whole batch). */
  function sample(probs, generator) {
    if (!(generator instanceof PortableGenerator))
      throw new TypeError(`generator = ${generator} is invalid: allowed a PortableGenerator`);
    const isRow = (x) => x && typeof x.length === "number" && (x.length === 0 || typeof x[0] === "number");
    const check = (x, where) =>
      isRow(x) ? { row: x, cum: cumulative(x, where) } : Array.from(x, (y, i) => check(y, `${where}[${i}]`));
    const draw = (c) => (Array.isArray(c) ? c.map(draw) : pickChecked(c.row, c.cum, generator.random()));
    return draw(check(probs, "probs"));
  }

  /** min(1, p_t / max(p_d, 1e−12)) in float64, as speculative.verify_block. */
  function acceptRatio(pt, pd) {
    for (const [name, p] of [["p_t", pt], ["p_d", pd]])
      if (typeof p !== "number" || !Number.isFinite(p) || !(p >= 0))
        throw new RangeError(`${name} = ${p} is invalid: allowed a finite number ≥ 0`);
    return Math.min(1, pt / Math.max(pd, ACCEPT_FLOOR));
  }

  /** The verify draw: one draw u (always); the draft is kept when u < ratio. */
  function accept(ratio, generator) {
    if (!(generator instanceof PortableGenerator))
      throw new TypeError(`generator = ${generator} is invalid: allowed a PortableGenerator`);
    if (typeof ratio !== "number" || Number.isNaN(ratio))
      throw new RangeError(`ratio = ${ratio} is invalid: allowed a number (acceptRatio's min(1, p_t / p_d))`);
    return generator.random() < ratio;
  }

  return { philox4x32_10, uniform, PortableGenerator, pick, sample, acceptRatio, accept, checkIndex };
});
