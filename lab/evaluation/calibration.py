"""Sequential Temperature Scaling (STS) of the confidence head, and its per-position ECE.

The scheduler reads prefix survival a_i = Π_{j≤i} c_j, so that is what must be calibrated: on held-out
verified rounds, for i = 1..k in order, pick one temperature T_i (from a grid) that minimises the ECE of
a_i = Π_{j≤i} σ(z_j / T_j) against the observed "drafts 1..i all kept", with T_1..T_{i−1} already frozen.
Dividing a logit by T > 0 keeps the order of the confidences at each position (AUROC unchanged).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from dspark_mini.scheduler import survival as scheduler_survival
from dspark_mini.validate import check_int

DEFAULT_GRID = tuple(round(0.25 + 0.05 * i, 2) for i in range(76))  # 0.25 … 4.0


def _check(conf: torch.Tensor, n_accepted: torch.Tensor) -> None:
    if conf.dim() != 2 or n_accepted.dim() != 1 or conf.size(0) != n_accepted.size(0):
        raise ValueError(
            f"confidences must be [N, k] and n_accepted [N] (got {tuple(conf.shape)} and {tuple(n_accepted.shape)})"
        )
    if conf.size(0) == 0:
        raise ValueError("no rounds to calibrate on: allowed N ≥ 1")
    if bool(((conf < 0) | (conf > 1)).any()) or bool(torch.isnan(conf).any()):
        raise ValueError("confidences must lie in [0, 1]")
    if bool(((n_accepted < 0) | (n_accepted > conf.size(1))).any()):
        raise ValueError(f"n_accepted must lie in 0..{conf.size(1)}")


def to_logits(conf: torch.Tensor) -> torch.Tensor:
    """σ⁻¹(c), with c kept 1e-12 away from 0 and 1.  [N, k] → [N, k]"""
    c = conf.double().clamp(1e-12, 1 - 1e-12)
    return torch.log(c) - torch.log1p(-c)


def prefix_labels(n_accepted: torch.Tensor, k: int) -> torch.Tensor:
    """1 where drafts 1..i were all kept (i = 1..k).  n_accepted [N] → [N, k]"""
    return (n_accepted[:, None] > torch.arange(k)).double()


def ece(pred: torch.Tensor, label: torch.Tensor, n_bins: int = 20) -> float:
    """Expected calibration error with equal-width bins: Σ_b (n_b / N) · |mean pred_b − mean label_b|."""
    if pred.numel() == 0:
        raise ValueError("ece of no points: allowed at least one")
    check_int(n_bins, "n_bins", 1)
    pred, label = pred.double().flatten(), label.double().flatten()
    b = (pred * n_bins).long().clamp(0, n_bins - 1)
    total = 0.0
    for i in range(n_bins):
        m = b == i
        if bool(m.any()):
            total += float(m.sum()) * abs(float(pred[m].mean()) - float(label[m].mean()))
    return total / pred.numel()


def survival(logits: torch.Tensor, temperatures: Sequence[float]) -> torch.Tensor:
    """a_i = Π_{j≤i} σ(z_j / T_j) (the scheduler's `survival` of the calibrated confidences).  logits [N, k] → [N, k]"""
    t = torch.tensor(list(temperatures), dtype=torch.float64)
    return scheduler_survival(torch.sigmoid(logits.double() / t))


def fit_sts(
    conf: torch.Tensor, n_accepted: torch.Tensor, grid: Sequence[float] = DEFAULT_GRID, n_bins: int = 20
) -> list[float]:
    """One temperature per position, fitted left to right (conf [N, k] raw σ outputs, n_accepted [N])."""
    _check(conf, n_accepted)
    if not grid or any(not (isinstance(g, (int, float)) and g > 0 and math.isfinite(g)) for g in grid):
        raise ValueError("grid must be a non-empty list of temperatures > 0")
    z, y = to_logits(conf), prefix_labels(n_accepted, conf.size(1))
    temps: list[float] = []
    for i in range(conf.size(1)):
        best = min(grid, key=lambda t: (ece(survival(z[:, : i + 1], [*temps, t])[:, i], y[:, i], n_bins), abs(t - 1)))
        temps.append(float(best))
    return temps


def calibration_report(
    conf: torch.Tensor, n_accepted: torch.Tensor, temperatures: Sequence[float], n_bins: int = 20
) -> list[dict[str, Any]]:
    """Per position: ECE of the raw and of the STS survival against "drafts 1..i kept", the mean predicted and
    the observed survival, and the fitted temperature."""
    _check(conf, n_accepted)
    if len(temperatures) != conf.size(1):
        raise ValueError(f"temperatures has {len(temperatures)} entries: allowed exactly k = {conf.size(1)}")
    z, y = to_logits(conf), prefix_labels(n_accepted, conf.size(1))
    raw, cal = survival(z, [1.0] * conf.size(1)), survival(z, temperatures)
    return [
        {
            "position": i + 1,
            "temperature": float(temperatures[i]),
            "ece_before": ece(raw[:, i], y[:, i], n_bins),
            "ece_after": ece(cal[:, i], y[:, i], n_bins),
            "predicted_before": float(raw[:, i].mean()),
            "predicted_after": float(cal[:, i].mean()),
            "observed": float(y[:, i].mean()),
            "n": int(conf.size(0)),
        }
        for i in range(conf.size(1))
    ]
