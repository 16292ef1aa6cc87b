/* The lab model's weights back from a page's packed payload (lab/browser/weights_pack.py writes it).
 *
 *   const W = await DSparkWeights.unpack(payload, manifest);   // node: require("./weights_unpack.js")
 *   W["layers.0.attn.wq_a.weight"] -> {shape: [32, 128], data: Float64Array}
 *   a routed expert's weight      -> {shape, data, qdq: "fp4"}: data is already the MXFP4-QDQ'd tensor, use as is
 *   an Engram table packed as fp8 -> {shape, data, qdq: "fp8"}: data is already the FP8-QDQ'd table (only when the
 *                                    page was packed with engram_fp8)
 *
 * payload: the text of the page's <script type="application/octet-stream"> element (the page declared windows-1252:
 * each character stands for one byte; NUL, CR, "<" and the escape byte come as the escape + "0".."3"), or the zlib
 * stream itself as a Uint8Array. The stream is inflated with DecompressionStream("deflate") (Chrome 80, Firefox 113,
 * Safari 16.4, node 18), which also checks its Adler-32. Then per manifest entry:
 *   f64 / f32: byte planes (all first bytes, then all second bytes, ...) of little-endian values -> float64;
 *   fp4: E2M1 codes two a byte (even element in the low nibble) and one E8M0 byte per 32 values -> code * 2^(e - 127),
 *        exact in float64;
 *   fp8: E4M3 ("fn") codes one a byte and one E8M0 byte per 32 values -> code * 2^(e - 127), exact in float64.
 * No dependencies, no network; works in node and from file://. ASCII only, so that it can sit inline in the
 * windows-1252 page that carries the payload.
 */
(function (root, factory) {
  const api = factory();
  if (typeof module === "object" && module && module.exports) module.exports = api;
  else root.DSparkWeights = api;
})(typeof globalThis !== "undefined" ? globalThis : this, function () {
  "use strict";

  const FORMAT = "dspark-lab-weights-pack";
  const VERSION = 1;
  const BLOCK = 32;
  // WHATWG windows-1252: the characters of bytes 0x80-0x9F (every other byte b is U+00b)
  const HIGH = [
    0x20ac, 0x81, 0x201a, 0x192, 0x201e, 0x2026, 0x2020, 0x2021, 0x2c6, 0x2030, 0x160, 0x2039, 0x152, 0x8d, 0x17d,
    0x8f, 0x90, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014, 0x2dc, 0x2122, 0x161, 0x203a, 0x153, 0x9d,
    0x17e, 0x178,
  ];
  // character -> byte; U+0080-U+009F also stand for their own byte, so a latin-1 reading of the page (node's
  // TextDecoder("windows-1252") reads it so) decodes the same
  const BYTE_OF = new Int16Array(0x10000).fill(-1);
  for (let b = 0; b < 256; b++) BYTE_OF[b] = b;
  for (let b = 0x80; b < 0xa0; b++) BYTE_OF[HIGH[b - 0x80]] = b;
  const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];
  const E4M3 = new Float64Array(256); // sign bit 7, exponent bits 6-3 (bias 7), mantissa bits 2-0; 0x7f/0xff NaN
  for (let c = 0; c < 256; c++) {
    const e = (c >> 3) & 15;
    const m = c & 7;
    const mag = e === 0 ? (m / 8) * 2 ** -6 : (1 + m / 8) * 2 ** (e - 7);
    E4M3[c] = (c & 0x7f) === 0x7f ? NaN : c & 0x80 ? -mag : mag;
  }
  const POW2 = new Float64Array(256); // E8M0 code -> 2^(code - 127), built from its bits (exact); 255 is NaN
  {
    const bits = new BigUint64Array(POW2.buffer);
    for (let e = 0; e < 255; e++) bits[e] = BigInt(e - 127 + 1023) << 52n;
    POW2[255] = NaN;
  }
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) {
    throw new Error("weights_unpack.js needs a little-endian machine");
  }

  function hex(c) {
    return "U+" + c.toString(16).toUpperCase().padStart(4, "0");
  }

  /** The page element's characters -> the zlib stream (undoing the windows-1252 reading and the escapes). */
  function textToBytes(text, escape, escaped) {
    const out = new Uint8Array(text.length);
    let n = 0;
    for (let i = 0; i < text.length; i++) {
      let b = BYTE_OF[text.charCodeAt(i)];
      if (b < 0) {
        throw new Error(
          `weights payload: character ${hex(text.charCodeAt(i))} at ${i}: allowed windows-1252 characters only ` +
            "(is the page saved and declared as windows-1252?)",
        );
      }
      if (b === escape) {
        const k = i + 1 < text.length ? text.charCodeAt(++i) - 0x30 : -1;
        if (!(k >= 0 && k < escaped.length)) {
          throw new Error(`weights payload: the escape at ${i - 1} is not followed by 0-${escaped.length - 1}`);
        }
        b = escaped[k];
      }
      out[n++] = b;
    }
    return out.subarray(0, n);
  }

  /** A zlib stream -> its bytes (DecompressionStream checks the Adler-32). */
  async function inflate(bytes) {
    if (typeof DecompressionStream !== "function") {
      throw new Error("this browser has no DecompressionStream: allowed Chrome >= 80, Firefox >= 113, Safari >= 16.4");
    }
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  /** n values of `width` bytes stored as byte planes at raw[offset...] -> their bytes, value after value. */
  function planes(raw, offset, n, width) {
    const bytes = new Uint8Array(n * width);
    for (let p = 0; p < width; p++) {
      const src = raw.subarray(offset + p * n, offset + (p + 1) * n);
      for (let i = 0, j = p; i < n; i++, j += width) bytes[j] = src[i];
    }
    return bytes.buffer;
  }

  function decode(raw, e) {
    const n = e.shape.reduce((a, d) => a * d, 1);
    const want = { f64: 8 * n, f32: 4 * n, fp4: n / 2 + n / BLOCK, fp8: n + n / BLOCK }[e.rep];
    const blocked = e.rep === "fp4" || e.rep === "fp8";
    if (want === undefined || e.bytes !== want || e.offset + e.bytes > raw.length || (blocked && n % BLOCK)) {
      throw new Error(
        `weights manifest entry ${e.name}: rep ${e.rep}, shape [${e.shape}], ${e.bytes} bytes at ${e.offset} ` +
          "do not agree (rep: f64, f32, fp4 or fp8)",
      );
    }
    if (e.rep === "f64") return new Float64Array(planes(raw, e.offset, n, 8));
    if (e.rep === "f32") return Float64Array.from(new Float32Array(planes(raw, e.offset, n, 4)));
    const data = new Float64Array(n);
    if (e.rep === "fp8") {
      const codes = raw.subarray(e.offset, e.offset + n);
      const scales = raw.subarray(e.offset + n, e.offset + e.bytes);
      for (let i = 0; i < n; i++) data[i] = E4M3[codes[i]] * POW2[scales[(i / BLOCK) | 0]];
      return data;
    }
    const codes = raw.subarray(e.offset, e.offset + n / 2);
    const scales = raw.subarray(e.offset + n / 2, e.offset + e.bytes);
    for (let blk = 0, i = 0; blk < n / BLOCK; blk++) {
      const s = POW2[scales[blk]];
      for (let k = 0; k < BLOCK / 2; k++, i += 2) {
        const c = codes[i >> 1];
        data[i] = E2M1[c & 15] * s;
        data[i + 1] = E2M1[c >> 4] * s;
      }
    }
    return data;
  }

  /** payload (the element's text, or the zlib stream as a Uint8Array), manifest -> {name: {shape, data, qdq?}}. */
  async function unpack(payload, manifest) {
    if (!manifest || manifest.format !== FORMAT || manifest.version !== VERSION) {
      const got = manifest ? `${manifest.format} version ${manifest.version}` : manifest;
      throw new Error(`weights manifest: format ${got}; allowed ${FORMAT} version ${VERSION}`);
    }
    const t = manifest.text;
    const zbytes = typeof payload === "string" ? textToBytes(payload, t.escape, t.escaped) : payload;
    if (!(zbytes instanceof Uint8Array)) {
      throw new Error("weights payload: allowed a string (the element's text) or a Uint8Array (the zlib stream)");
    }
    const raw = await inflate(zbytes);
    if (raw.length !== manifest.raw_bytes) {
      throw new Error(`weights payload: ${raw.length} bytes inflated, manifest.raw_bytes is ${manifest.raw_bytes}`);
    }
    const out = {};
    for (const e of manifest.tensors) {
      out[e.name] = { shape: e.shape.slice(), data: decode(raw, e) };
      if (e.qdq) out[e.name].qdq = e.qdq;
    }
    return out;
  }

  return { unpack, textToBytes, inflate };
});
