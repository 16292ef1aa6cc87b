"""STS calibration: ECE against a naive loop, temperature recovery on synthetic rounds, order preservation."""

from __future__ import annotations

import pytest
import torch

from lab.evaluation.calibration import calibration_report, ece, fit_sts, prefix_labels, survival, to_logits


def naive_ece(pred: list[float], label: list[float], n_bins: int) -> float:
    bins: dict[int, list[tuple[float, float]]] = {}
    for p, y in zip(pred, label, strict=True):
        bins.setdefault(min(int(p * n_bins), n_bins - 1), []).append((p, y))
    return sum(
        len(v) * abs(sum(p for p, _ in v) / len(v) - sum(y for _, y in v) / len(v)) for v in bins.values()
    ) / len(pred)


def test_ece_matches_a_naive_loop() -> None:
    g = torch.Generator().manual_seed(0)
    pred = torch.rand(500, generator=g, dtype=torch.float64)
    label = (torch.rand(500, generator=g, dtype=torch.float64) < pred**2).double()
    for n_bins in (1, 5, 20):
        assert abs(ece(pred, label, n_bins) - naive_ece(pred.tolist(), label.tolist(), n_bins)) < 1e-12
    assert ece(torch.tensor([0.3, 0.3]), torch.tensor([0.0, 1.0]), 10) == pytest.approx(0.2)


def synthetic_rounds(n: int, true_t: list[float], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rounds whose true conditional acceptance is σ(z_i / T*_i) while the head reports σ(z_i)."""
    g = torch.Generator().manual_seed(seed)
    k = len(true_t)
    z = torch.randn(n, k, generator=g, dtype=torch.float64) * 2.5 + 0.5  # raw head logits
    p_true = torch.sigmoid(z / torch.tensor(true_t, dtype=torch.float64))
    kept = torch.rand(n, k, generator=g, dtype=torch.float64) < p_true
    n_acc = torch.cumprod(kept.long(), dim=1).sum(1)  # the first rejection ends the prefix
    return torch.sigmoid(z), n_acc


def test_sts_recovers_the_temperatures_and_lowers_the_ece() -> None:
    true_t = [2.0, 1.5, 0.8]
    conf, n_acc = synthetic_rounds(20_000, true_t, seed=1)
    temps = fit_sts(conf, n_acc)
    for got, want in zip(temps, true_t, strict=True):
        assert abs(got - want) < 0.25 * want
    report = calibration_report(conf, n_acc, temps)
    for row in report:
        assert row["ece_after"] < row["ece_before"]
        assert abs(row["predicted_after"] - row["observed"]) < 0.02
    # a head that is already calibrated keeps temperatures near 1
    conf1, n1 = synthetic_rounds(20_000, [1.0, 1.0, 1.0], seed=2)
    assert all(abs(t - 1.0) <= 0.2 for t in fit_sts(conf1, n1))


def test_temperature_scaling_keeps_the_order_at_each_position() -> None:
    conf, n_acc = synthetic_rounds(300, [1.7, 0.6], seed=3)
    z = to_logits(conf)
    raw, cal = torch.sigmoid(z), torch.sigmoid(z / torch.tensor([1.7, 0.6], dtype=torch.float64))
    for i in range(2):
        assert torch.equal(torch.argsort(raw[:, i]), torch.argsort(cal[:, i]))
    # survival is the running product and never increases along the block
    a = survival(z, [1.7, 0.6])
    assert torch.allclose(a[:, 1], cal[:, 0] * cal[:, 1]) and bool((a[:, 1] <= a[:, 0]).all())
    assert prefix_labels(torch.tensor([0, 2, 1]), 2).tolist() == [[0, 0], [1, 1], [1, 0]]


def test_bad_input_names_the_problem() -> None:
    conf, n_acc = synthetic_rounds(10, [1.0, 1.0], seed=4)
    with pytest.raises(ValueError, match=r"\[N, k\]"):
        fit_sts(conf[:, 0], n_acc)
    with pytest.raises(ValueError, match="n_accepted must lie in 0..2"):
        fit_sts(conf, n_acc + 3)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fit_sts(conf * 3, n_acc)
    with pytest.raises(ValueError, match="grid"):
        fit_sts(conf, n_acc, grid=[0.0, 1.0])
    with pytest.raises(ValueError, match="exactly k = 2"):
        calibration_report(conf, n_acc, [1.0])
    with pytest.raises(ValueError, match="no rounds"):
        fit_sts(conf[:0], n_acc[:0])
