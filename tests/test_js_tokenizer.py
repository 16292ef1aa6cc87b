"""lab/browser/tokenizer.js, the lab tokenizer in JavaScript, is Python's tokenizer (dspark_mini/hf_tokenizer.py, the
`tokenizers` library): on hundreds of texts (prose in English and Vietnamese, NFC and NFD, code, sums, emoji, CJK,
"<eos>" typed as text, whitespace, a seeded random sample) node gives the same ids, the same decoded text and the
same pieces as `dspark-lab tokenize`; it decodes any ids as Python does; and its normalization and word splitting
agree with the library's on every Unicode code point. One node process runs every check."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from dspark_mini.hf_tokenizer import UNICODE_TO_BYTE
from dspark_mini.tokenizer import LAB_TOKENIZER_DIR, default_tokenizer
from lab.realtext import documents, everyday
from lab.realtext.cli import tokenize

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "lab" / "browser" / "tokenizer.js"
SPEC = LAB_TOKENIZER_DIR / "tokenizer.json"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed: cannot run lab/browser/tokenizer.js")

# node harness.js TOKENIZER_JS TOKENIZER_JSON IN OUT: IN = {texts, ids, all_code_points, probes}; OUT = per text
# [ids, decoded, pieces]; per id list [decoded, pieces]; the words of the all-code-points string; each probe string
# normalized; [NFD, normalized] of every code point JavaScript decomposes; the ids a tokenizer whose merges are
# reversed gives each text; and whether the script, run as a page's script, defines the global DSparkTokenizer.
HARNESS = r"""
const fs = require("fs");
const vm = require("vm");
const [, , script, specPath, inPath, outPath] = process.argv;
const DSparkTokenizer = require(script);
const spec = JSON.parse(fs.readFileSync(specPath, "utf8"));
const job = JSON.parse(fs.readFileSync(inPath, "utf8"));
const tok = DSparkTokenizer(spec);
const broken = DSparkTokenizer({ ...spec, model: { ...spec.model, merges: [...spec.model.merges].reverse() } });
const decomposed = [];
for (let c = 0; c < 0x110000; c++) {
  if (c >= 0xd800 && c <= 0xdfff) continue;
  const nfd = String.fromCodePoint(c).normalize("NFD");
  if (nfd !== String.fromCodePoint(c)) decomposed.push([nfd, tok.normalize(nfd)]);
}
const page = { TextEncoder, TextDecoder };  // a page's globals: no `module`
vm.runInNewContext(fs.readFileSync(script, "utf8"), page);
const out = {
  texts: job.texts.map((t) => { const ids = tok.encode(t); return [ids, tok.decode(ids), tok.pieces(ids)]; }),
  ids: job.ids.map((ids) => [tok.decode(ids), tok.pieces(ids)]),
  words: tok.split(job.all_code_points),
  probes: Object.fromEntries(Object.entries(job.probes).map(([k, s]) => [k, tok.normalize(s)])),
  decomposed,
  broken: job.texts.map((t) => broken.encode(t)),
  page_global: typeof page.DSparkTokenizer === "function" && page.DSparkTokenizer(spec).encode("a b").length === 2,
};
fs.writeFileSync(outPath, JSON.stringify(out));
"""

CODE_POINTS = [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]  # every scalar value
# strings around each code point c that show its normalization: whether it decomposes, whether it combines, how it
# orders among marks (U+0301 class 230, U+0323 220, U+0316 220, U+0334 1); joined by "|", which no normalization moves
PROBES = {  # name: (before c, after c)
    "alone": ("", ""),
    "then acute": ("", "\u0301"),
    "between a and acute": ("a", "\u0301"),
    "among marks": ("a\u0323", "\u0316"),
    "before overlay": ("", "\u0334"),
    "after overlay": ("a\u0334", ""),
}

VIETNAMESE = [
    "Hôm nay trời đẹp",
    "Tiếng Việt có sáu thanh điệu: ngang, huyền, sắc, hỏi, ngã, nặng.",
    "Người ta nói rằng “học, học nữa, học mãi” — Ông bà ơi!",
    "Đường phố Hà Nội vào mùa thu thật yên bình và thơ mộng.",
]
FIXED = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "It's John's book; they'll come, we're here, I've seen it, I'd go, I'm in. DON'T SHOUT'S",
    "'s 'll 're 've 'm 'd 't ''s",
    *VIETNAMESE,
    *(unicodedata.normalize("NFD", s) for s in VIETNAMESE),
    "e\u0301 o\u0302\u0301 A\u030a \u1ea1\u0306",  # combining marks that NFC composes
    "def f(x):\n\treturn x  +  1\n\n\n    # comment\r\n\tif x:\n\t\tpass   \n",
    "for i in range(10):\n    print(i ** 2)  # squares\n",
    "  leading and trailing spaces  ",
    " ",
    "    ",
    "\n",
    "\n\n\n",
    "\t \n \t\n",
    " \u00a0\u3000\u2003 ",
    "a\u0085b \u0085 \ufeffc\ufeff d",  # NEL is white space to the library and not to JavaScript; BOM the reverse
    "\ufeffleading byte order mark",
    "12345 + 67890 = 80235",
    "3.14159 2,718 1e10 0x1F ¾ ½ Ⅻ ٣ ४",
    "998 + 2 = 1000; 4096 - 1 = 4095",
    "😀 👍🏽 👨‍👩‍👧‍👦 🇻🇳 ❤️",
    "中文字符和日本語のテキスト、한국어 텍스트",
    "Mixed: hello 世界 xin chào 🌏!",
    "<eos>",
    "<bos>Hello<eos><pad><noise>",
    "text <eos> inside",
    "!!! ??? ... --- ### $$$ %%% ^^^ &&& *** ((( )))",
    "a\u200bb\u200cc\u200dd",  # zero-width characters
    "Ελληνικά Русский עברית العربية",
    "x\u088f'll \U0001e6c0's \U00011de5're",  # letters and a digit of Unicode 17, unknown to the library: no \p{L}
    "a\u0323\u1dfa\u0301 b\u0301\u1aeb",  # marks newer than the library's NFC tables
    "\U00011935\U00011930",  # a composition newer than the library's NFC tables
]


def corpus_texts() -> list[str]:
    """A few thousand characters of each corpus source, and the everyday paragraphs."""
    texts = [documents(source)[0][1][:4000] for source in ("en", "vi", "code", "sums", "lesson")]
    return texts + everyday("en") + everyday("vi")


def random_texts(n: int = 300) -> list[str]:
    """n seeded random strings mixing ASCII, Vietnamese (NFC and NFD), punctuation, white space, digits, emoji, CJK,
    combining marks and random code points (any plane, no surrogates)."""
    rng = random.Random(0)
    viet = "ăâđêôơưàảãáạằẳẵắặầẩẫấậèẻẽéẹềểễếệìỉĩíịòỏõóọồổỗốộờởỡớợùủũúụừửữứựỳỷỹýỵĂÂĐÊÔƠƯ"
    kinds = [
        lambda: chr(rng.randint(0x20, 0x7E)),
        lambda: rng.choice(viet),
        lambda: unicodedata.normalize("NFD", rng.choice(viet)),
        lambda: rng.choice(".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&`~…“”‘’«»—"),
        lambda: rng.choice([" ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u0085", "\ufeff"]),
        lambda: str(rng.randint(0, 99999)),
        lambda: rng.choice(["😀", "🎉", "👍🏽", "❤️", "🇻🇳", "👨‍👩‍👧"]),
        lambda: chr(rng.randint(0x4E00, 0x9FFF)),
        lambda: chr(rng.randint(0x0300, 0x036F)),
        lambda: rng.choice(["'s", "'ll", "'re", "'ve", "<eos>", "<bos>"]),
        lambda: chr(rng.choice(CODE_POINTS)),
    ]
    return ["".join(rng.choice(kinds)() for _ in range(rng.randint(0, 40))) for _ in range(n)]


def random_ids(vocab_size: int, n: int = 300) -> list[list[int]]:
    """n seeded random id lists: half of them single bytes (ids 4..259: stray pieces of characters, ill-formed UTF-8
    of every kind) and special tokens, half any ids."""
    rng = random.Random(1)
    pools = [[*range(4), *range(4, 260)], list(range(vocab_size))]
    return [[rng.choice(pools[k % 2]) for _ in range(rng.randint(0, 12))] for k in range(n)]


@pytest.fixture(scope="module")
def tok():
    return default_tokenizer()


@pytest.fixture(scope="module")
def job(tok) -> dict:
    texts = FIXED + corpus_texts() + random_texts()
    chars = list(map(chr, CODE_POINTS))
    return {
        "texts": texts,
        "ids": random_ids(tok.vocab_size),
        "all_code_points": "".join(chars),
        "probes": {k: a + f"{b}|{a}".join(chars) + b for k, (a, b) in PROBES.items()},
    }


@pytest.fixture(scope="module")
def js(job, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("js-tokenizer")
    harness, source, result = folder / "harness.js", folder / "in.json", folder / "out.json"
    harness.write_text(HARNESS, encoding="utf-8")
    source.write_text(json.dumps(job), encoding="utf-8")
    subprocess.run([NODE, str(harness), str(SCRIPT), str(SPEC), str(source), str(result)], check=True, timeout=600)
    return json.loads(result.read_text(encoding="utf-8"))


def differences(tok, texts: list[str], got: list[list[int]]) -> list[str]:
    """Where JavaScript's ids for each text differ from Python's: one line each."""
    lines = []
    for text, ids in zip(texts, got, strict=True):
        if ids != (python := tok.encode(text)):
            lines.append(f"{text[:60]!r}: Python {python[:12]}, JS {ids[:12]}")
    return lines


def test_js_gives_pythons_ids_decoded_text_and_pieces(tok, job, js):
    assert len(job["texts"]) >= 350
    assert differences(tok, job["texts"], [ids for ids, _, _ in js["texts"]]) == []
    for text, (ids, decoded, pieces) in zip(job["texts"], js["texts"], strict=True):
        report = tokenize(text, tok)  # what `dspark-lab tokenize TEXT --json` prints
        assert (decoded, pieces) == (tok.decode(ids), [t["text"] for t in report["tokens"]]), text
        assert decoded == tok.tokenizer.normalizer.normalize_str(text)  # the lab's tokenizer round-trips


def test_js_decodes_any_ids_as_python(tok, job, js):
    """Special tokens, stray bytes (U+FFFD in the text, <0xNN> in the pieces) and whole tokens, in any order."""
    for ids, (decoded, pieces) in zip(job["ids"], js["ids"], strict=True):
        assert (decoded, pieces) == (tok.decode(ids), [tok.piece(i) for i in ids]), ids
    assert any("\ufffd" in decoded for decoded, _ in js["ids"])
    assert any("<0x" in "".join(pieces) for _, pieces in js["ids"])


def test_js_splits_every_code_point_into_the_librarys_words(tok, job, js):
    """The Split pattern (white space, letters, numbers, the rest) reads every code point as the library does."""
    words = tok.tokenizer.pre_tokenizer.pre_tokenize_str(job["all_code_points"])  # byte-level characters
    python = [bytes(UNICODE_TO_BYTE[c] for c in w).decode("utf-8") for w, _ in words]
    assert len(python) > 3000
    assert js["words"] == python


def test_js_normalizes_every_code_point_as_the_library(tok, job, js):
    """NFC around every code point (alone, among combining marks) and of every decomposed character is the
    library's, though the library's Unicode tables are older than JavaScript's."""
    normalize = tok.tokenizer.normalizer.normalize_str
    for kind, probe in job["probes"].items():
        python, got = normalize(probe), js["probes"][kind]
        if python != got:
            bad = [
                f"U+{c:04X}" for c, p, g in zip(CODE_POINTS, python.split("|"), got.split("|"), strict=False) if p != g
            ]
            pytest.fail(f"{kind}: JavaScript normalizes differently around {bad[:10]}")
    assert len(js["decomposed"]) > 13_000  # every precomposed character, decomposed, composes back the same
    assert [nfd for nfd, got in js["decomposed"] if normalize(nfd) != got] == []


def test_a_wrong_merge_order_is_caught(tok, job, js):
    """The comparison is not vacuous: the same script with its merges reversed gives other ids, and is caught."""
    caught = differences(tok, job["texts"], js["broken"])
    assert len(caught) >= 100 and caught[0].startswith("'Hello, world!'"), caught[:3]


def test_the_script_defines_a_global_in_a_page(js):
    assert js["page_global"] is True
