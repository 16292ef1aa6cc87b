"""Speculative vs plain decoding in wall-clock tokens/s on the trained `lab` model (a benchmark, not a test).

  python bench/bench_speculative.py [--prompts 4] [--new-tokens 64] [--reps 3] [--drafters dspark,dflash]
Each repetition decodes every held-out prompt (batch 1) plainly and speculatively, interleaved, and checks
that greedy speculative output equals plain output. Prints tokens/s p50 over repetitions and the ratio, with
the run conditions.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from dspark_mini.speculative import generate_plain, generate_speculative
from lab.corpus import DOMAINS
from lab.evaluation import eval_prompts
from lab.profiling import cpu_model, percentiles
from lab.weights import load_drafter


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=4, help="held-out prompts per domain")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--drafters", default="dspark,dflash")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    prompts = torch.cat([eval_prompts(d, a.prompts, 16, seed=5) for d in DOMAINS])
    out = {
        "conditions": {
            "prompts": int(prompts.size(0)),
            "new_tokens": a.new_tokens,
            "reps": a.reps,
            "temperature": a.temperature,
            "batch": 1,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "cpu": cpu_model(),
            "weights": "shipped lab/weights",
        },
        "drafters": {},
    }
    for name in a.drafters.split(","):
        model, drafter = load_drafter(name)
        plain_rates, spec_rates, taus = [], [], []
        for rep in range(a.reps):
            tp = ts = 0.0
            n_rounds = 0
            for i in range(prompts.size(0)):
                p = prompts[i : i + 1]
                t0 = time.perf_counter()
                plain = generate_plain(model, p, a.new_tokens, a.temperature, seed=rep)
                tp += time.perf_counter() - t0
                t0 = time.perf_counter()
                spec = generate_speculative(
                    model, p, a.new_tokens, temperature=a.temperature, seed=rep, drafter=drafter
                )
                ts += time.perf_counter() - t0
                n_rounds += len(spec.rounds)
                if a.temperature == 0 and spec.tokens != plain.tokens:
                    raise SystemExit(f"{name}: speculative output differs from plain decoding (prompt {i})")
            n = prompts.size(0) * a.new_tokens
            plain_rates.append(n / tp)
            spec_rates.append(n / ts)
            taus.append((n - prompts.size(0)) / max(1, n_rounds))
        out["drafters"][name] = {
            "plain_tok_s": percentiles(plain_rates)["p50"],
            "spec_tok_s": percentiles(spec_rates)["p50"],
            "ratio": percentiles(spec_rates)["p50"] / percentiles(plain_rates)["p50"],
            "tokens_per_round": sum(taus) / len(taus),
        }
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print("conditions:", ", ".join(f"{k} {v}" for k, v in out["conditions"].items()))
    for name, r in out["drafters"].items():
        print(
            f"{name:10s} plain {r['plain_tok_s']:6.1f} tok/s · speculative {r['spec_tok_s']:6.1f} tok/s · "
            f"ratio {r['ratio']:.2f}× · {r['tokens_per_round']:.2f} tokens per round"
        )


if __name__ == "__main__":
    main()
