"""What the shipped lab model can and cannot do, measured: docs/model_card.json (docs/model.md quotes it).

    python bench/model_card.py --out docs/model_card.json     # ≈ 1–2 min on one core

  perplexity  the trained target on the real-text corpus's held-out `test` documents of each source and on the
              everyday English and Vietnamese paragraphs that are not in the corpus (lab/realtext/everyday/), beside
              the unigram baseline fitted on the set's training split (add-one), as `dspark-lab eval --perplexity`
  sums        how often greedy decoding completes a held-out sum ("53 + 5282 =") with exactly its answer
  samples     greedy and T = 0.8 (seed 0) continuations of short English, Vietnamese, code and sum prompts: plain
              decoding, float64, so `tests/test_model_card.py` regenerates the greedy ones exactly

Nothing here is timed: every number is a property of the weights, the same on every machine (float64).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dspark_mini import get_tokenizer  # noqa: E402
from dspark_mini.checkpoint import load_model  # noqa: E402
from dspark_mini.files import write_atomic  # noqa: E402
from dspark_mini.speculative import generate_plain  # noqa: E402
from lab import realtext  # noqa: E402
from lab.evaluation.perplexity import perplexity, unigram_log_probs  # noqa: E402
from lab.weights import file_sha256, report, training_streams, verified, weight_file  # noqa: E402

# (name, language, prompt): everyday openings a class might type, and one line of each other domain
PROMPTS: tuple[tuple[str, str, str], ...] = (
    ("en_austen", "en", "It was a fine morning, and Elizabeth"),
    ("en_everyday", "en", "My favourite thing about school is"),
    ("vi_help", "vi", "Để chèn một bảng vào tài liệu,"),
    ("vi_everyday", "vi", "Hôm nay trời đẹp, chúng tôi"),
    ("code", "code", "def forward(self, x):"),
    ("sums", "sums", "487 + 256 ="),
)
MAX_NEW_TOKENS = 32
SAMPLE_TEMPERATURE = 0.8
SAMPLE_SEED = 0


def continuation(model, tok, prompt: str, temperature: float, max_new_tokens: int = MAX_NEW_TOKENS) -> str:
    """The text plain decoding adds to `prompt` (float64, `SAMPLE_SEED`)."""
    ids = torch.tensor([tok.encode(prompt)])  # [1, S]
    out = generate_plain(model, ids, max_new_tokens, temperature, SAMPLE_SEED)
    return tok.decode(out.tokens[0])


def samples(model, tok) -> list[dict]:
    return [
        {
            "name": name,
            "lang": lang,
            "prompt": prompt,
            "greedy": continuation(model, tok, prompt, 0.0),
            "t08": continuation(model, tok, prompt, SAMPLE_TEMPERATURE),
        }
        for name, lang, prompt in PROMPTS
    ]


OPS = {"+": "add", "-": "sub", "*": "mul"}
SUM_LINES = 200  # held-out sums the model answers (the first lines of the `test` documents)


def sums(model, tok, n: int = SUM_LINES) -> dict:
    """How often greedy decoding completes a held-out sum exactly: "a op b =" → the digits up to the line's end."""
    lines = [ln for doc in realtext.texts("sums", "test") for ln in doc.splitlines() if " = " in ln][:n]
    by_op: dict[str, list[int]] = {}
    for line in lines:
        question, answer = line.split(" = ")
        ids = torch.tensor([tok.encode(question + " =")])  # [1, S]
        want = tok.encode(" " + answer + "\n")
        out = generate_plain(model, ids, len(want), 0.0, SAMPLE_SEED)
        op = OPS[question.split()[1]]
        by_op.setdefault(op, [0, 0])
        by_op[op][0] += out.tokens[0] == want
        by_op[op][1] += 1
    right = sum(r for r, _ in by_op.values())
    return {
        "lines": len(lines),
        "exact": right,
        "rate": right / len(lines),
        "by_op": {op: {"exact": r, "lines": t, "rate": r / t} for op, (r, t) in sorted(by_op.items())},
    }


def perplexities(model, tok) -> dict[str, dict]:
    seed = report()["recipe"]["seed"]
    unigram = unigram_log_probs(training_streams(seed)[0], model.cfg.vocab_size)
    out = {}
    for source in realtext.DOMAINS:
        text = "\n\n".join(realtext.texts(source, "test"))
        out[f"test_{source}"] = perplexity(model, tok, text, unigram)
    for lang in ("en", "vi"):
        out[f"everyday_{lang}"] = perplexity(model, tok, "\n\n".join(realtext.everyday(lang)), unigram)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="docs/model_card.json")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    target = weight_file("target")
    verified(target)
    model = load_model(target)
    tok = get_tokenizer(model.cfg)
    card = {
        "target_sha256": file_sha256(target)[:16],
        "max_new_tokens": MAX_NEW_TOKENS,
        "temperature": SAMPLE_TEMPERATURE,
        "seed": SAMPLE_SEED,
        "perplexity": perplexities(model, tok),
        "samples": samples(model, tok),
        "sums": sums(model, tok),
    }
    write_atomic(Path(args.out), json.dumps(card, ensure_ascii=False, indent=1) + "\n")
    for k, v in card["perplexity"].items():
        print(f"{k:16s} model {v['model_ppl']:9.2f}  unigram {v['unigram_ppl']:9.2f}  ratio {v['ratio']:.3f}")
    print("sums exact:", card["sums"]["exact"], "/", card["sums"]["lines"], card["sums"]["by_op"])
    for s in card["samples"]:
        print(f"[{s['name']}] {s['prompt']!r}\n  greedy: {s['greedy']!r}\n  T=0.8:  {s['t08']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
