"""The mini DeepSpec evaluation: how good a drafter is and what verifying costs, measured the way the paper does.

quality.py      τ and acceptance per domain at T = 1 and greedy, batch 1, held-out prompts; the threshold sweep
calibration.py  Sequential Temperature Scaling of the confidence head, ECE before and after
profiling.py    step 6B profiling: logit parity, the tap check, acceptance by position, verify(k) vs k decode steps
conditions.py   p50 / p95 / p99 and the run conditions every timing reports
cli.py          `dspark-lab eval`
"""
