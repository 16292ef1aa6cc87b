"""The shipped lab model with and without FP8 expert inputs (`expert_act_quant`) — a measurement, not a test.

  python bench/expert_act_quant.py [--json] [--out run.json] [--prompts 12] [--max-new-tokens 40] [--seed 0]
                                   [--threads 1]

The shipped weights (lab/weights, target + DSpark draft) were trained with the switch off; here the same weights run
once as shipped and once with every expert matmul's input FP8-QDQ'd as the reference's GEMMs read it. For each:
the held-out next-token loss and accuracy exactly as `train all` records them (`lab.training.evaluate` on the
recipe's validation stream, windows of `target_seq_len`), and DSpark τ at temperature 1 and greedy on the
evaluation's held-out prompts per domain and on the free-form prompts (`lab.evaluation.quality`,
`free_form_quality`; batch 1; seed 0 is the evaluation's). Deterministic: the same numbers on every run of the same
weights and seed. At temperature 1 a slightly different model samples other continuations, so τ(T = 1) moves with
the seed as well: compare the on − off difference with the spread over a few --seed values.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from dspark_mini import Transformer, build_model
from lab.evaluation.quality import MAX_NEW_TOKENS, N_PROMPTS, free_form_quality, quality
from lab.training.rebuild import Recipe
from lab.training.train import evaluate
from lab.weights import load_drafter, training_streams


def with_act_quant(model: Transformer, on: bool) -> Transformer:
    """The same weights in a model whose config has expert_act_quant = on (the STS temperatures carried over)."""
    cfg = model.cfg.replace(expert_act_quant=on)
    if cfg == model.cfg:
        return model
    out = build_model(cfg, init=False)
    out.load_state_dict(model.state_dict())
    if model.mtp is not None and model.mtp.confidence_temperatures is not None:
        out.mtp.set_confidence_temperatures(model.mtp.confidence_temperatures)
    return out.eval()


def measure(model: Transformer, drafter, prompts: int, max_new_tokens: int, seed: int) -> dict:
    recipe = Recipe()
    _, val_ids = training_streams(recipe.seed)
    t0 = time.perf_counter()
    loss, acc = evaluate(model, val_ids, recipe.target_seq_len)
    q = quality(model, drafter, n_prompts=prompts, max_new_tokens=max_new_tokens, seed=seed)
    free = free_form_quality(model, drafter, max_new_tokens, seed)
    tau = {label: {d: q[d][label]["tau"] for d in q} for label in ("t1", "greedy")}
    return {
        "heldout_loss": loss,
        "heldout_accuracy": acc,
        "tau": tau,
        "mean_tau": {label: sum(v.values()) / len(v) for label, v in tau.items()},
        "free_form_tau": {label: free[label]["tau"] for label in ("t1", "greedy")},
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=N_PROMPTS, help="held-out prompts per domain")
    ap.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS)
    ap.add_argument("--seed", type=int, default=0, help="sampling seed of the τ runs (0: the evaluation's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--out", type=Path, help="also write the JSON there")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, drafter = load_drafter("dspark")
    assert not model.cfg.expert_act_quant  # the shipped weights' config
    result = {
        "conditions": {
            "weights": "lab/weights (target + dspark)",
            "prompts_per_domain": args.prompts,
            "max_new_tokens": args.max_new_tokens,
            "threads": args.threads,
            "seed": args.seed,
            "torch": torch.__version__,
        },
        "off": measure(model, drafter, args.prompts, args.max_new_tokens, args.seed),
        "on": measure(with_act_quant(model, True), drafter, args.prompts, args.max_new_tokens, args.seed),
    }
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
        return 0
    head = f"{'expert_act_quant':18s} {'held-out acc':>12s} {'loss':>7s} {'τ t1':>6s} {'τ greedy':>8s}"
    print(f"{head} {'free t1':>8s} {'free greedy':>11s}")
    for name in ("off", "on"):
        r = result[name]
        print(
            f"{name:18s} {r['heldout_accuracy']:12.4f} {r['heldout_loss']:7.4f} {r['mean_tau']['t1']:6.3f}"
            f" {r['mean_tau']['greedy']:8.3f} {r['free_form_tau']['t1']:8.3f} {r['free_form_tau']['greedy']:11.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
