"""Training: the tiny target on the real-text corpus (lab/realtext), then every drafter against the frozen target.

train.py      the target (next-token cross-entropy, QAT through the FP8/FP4 simulation) and the DSpark-family
              drafters (DSpark, DSpark-RNN, DFlash: anchors and blocks, the paper's three losses)
baselines.py  the baseline drafters: Eagle3-lite (training-time test) and MTP-1
rebuild.py    `train all`: the recipe that rebuilds every shipped weight file, calibrates, evaluates, reports
cli.py        `dspark-lab train …` and `dspark-lab data` (its handler: lab/realtext/describe.py)
"""
