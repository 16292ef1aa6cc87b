"""The RNN head (paper eq. 6) against a naive recurrence; STS temperatures inside the draft; config checks."""

from __future__ import annotations

import pytest
import torch

from dspark_mini import ConfigError, Trace, build_model, get_config
from dspark_mini.model import draft
from dspark_mini.speculative import generate_plain, generate_speculative


@pytest.fixture(scope="module")
def rnn_model():
    m = build_model(get_config("lab", dspark_markov_kind="rnn"), seed=3)
    m.eval()
    return m


def naive_rnn(head, prev: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """s_0 = 0; z = [s; W1[x]; h]; g, c, o = split(A z + b); s = σ(g) s + (1 − σ(g)) tanh(c); bias = W2 tanh(o)."""
    B, k = prev.shape
    r = head.rank
    A, b = head.cell.weight, head.cell.bias  # [3r, 2r + D], [3r]
    W1, W2 = head.embed.weight, head.head.weight  # [V, r], [V, r]
    out = torch.zeros(B, k, W2.size(0), dtype=W2.dtype)
    for bi in range(B):
        s = torch.zeros(r, dtype=W2.dtype)
        for i in range(k):
            z = torch.cat([s, W1[prev[bi, i]], h[bi, i]])
            pre = A @ z + b
            g, c, o = pre[:r], pre[r : 2 * r], pre[2 * r :]
            s = torch.sigmoid(g) * s + (1 - torch.sigmoid(g)) * torch.tanh(c)
            out[bi, i] = W2 @ torch.tanh(o)
    return out


def test_rnn_head_matches_the_naive_recurrence(rnn_model):
    cfg = rnn_model.cfg
    head = rnn_model.mtp.markov_head
    g = torch.Generator().manual_seed(0)
    prev = torch.randint(0, cfg.vocab_size, (2, cfg.dspark_block_size), generator=g)
    h = torch.randn(2, cfg.dspark_block_size, cfg.dim, generator=g, dtype=torch.float64)
    with torch.no_grad():
        bias, e = head.teacher_forced(prev, h)  # [B, k, V], [B, k, r]
        assert bias.shape == (2, cfg.dspark_block_size, cfg.vocab_size)
        assert e.shape == (2, cfg.dspark_block_size, cfg.dspark_markov_rank)
        torch.testing.assert_close(bias, naive_rnn(head, prev, h), rtol=0, atol=1e-12)
        # the state carries more than the last token: same last token, different earlier prefix → other bias
        prev2 = prev.clone()
        prev2[:, 0] = (prev[:, 0] + 1) % cfg.vocab_size
        bias2, _ = head.teacher_forced(prev2, h)
        assert (bias2[:, -1] - bias[:, -1]).abs().max() > 1e-6


def test_rnn_draft_uses_the_same_recurrence_as_training(rnn_model):
    """Sampling step by step equals the teacher-forced pass fed the sampled tokens."""
    cfg = rnn_model.cfg
    tokens = torch.randint(4, cfg.vocab_size, (2, 10), generator=torch.Generator().manual_seed(1))
    cache = rnn_model.new_cache(2)
    tr = Trace()
    with torch.no_grad():
        rnn_model(tokens, cache=cache)
        anchor = torch.tensor([11, 12])
        d = draft(rnn_model, anchor, cache, cfg.dspark_block_size, 1.0, torch.Generator().manual_seed(2), tr)
        prev = torch.cat([anchor[:, None], d.tokens[:, :-1]], 1)
        bias, _ = rnn_model.mtp.markov_head.teacher_forced(prev, d.hidden)
        torch.testing.assert_close(d.logits, tr.get("6B", "base_logits") + bias, rtol=0, atol=1e-12)


@pytest.mark.parametrize("T", [0.0, 1.0])
def test_rnn_speculative_decoding_is_lossless_greedy_and_valid_sampled(rnn_model, T):
    prompt = torch.randint(4, rnn_model.cfg.vocab_size, (1, 9), generator=torch.Generator().manual_seed(3))
    spec = generate_speculative(rnn_model, prompt, 20, temperature=T, seed=4)
    if T == 0:
        assert spec.tokens == generate_plain(rnn_model, prompt, 20).tokens
    assert all(1 <= r.tau <= r.verify_len + 1 for rs in spec.rounds for r in rs)


def test_sts_temperatures_divide_the_confidence_logits():
    m = build_model(get_config("lab"), seed=1)
    with torch.no_grad():
        m.mtp.confidence_head.weight.normal_(0, 0.3, generator=torch.Generator().manual_seed(0))
    tokens = torch.randint(4, m.cfg.vocab_size, (1, 9), generator=torch.Generator().manual_seed(5))
    k = m.cfg.dspark_block_size

    def conf(temps):
        m.mtp.set_confidence_temperatures(temps)
        cache = m.new_cache(1)
        with torch.no_grad():
            m(tokens, cache=cache)
            return draft(m, torch.tensor([9]), cache, k).confidence[0]

    raw = conf(None)
    temps = [0.5 + 0.5 * i for i in range(k)]
    cal = conf(temps)
    z = torch.log(raw) - torch.log1p(-raw)
    torch.testing.assert_close(cal, torch.sigmoid(z / torch.tensor(temps, dtype=z.dtype)), rtol=0, atol=1e-12)
    for bad in ([1.0] * (k - 1), [0.0] * k, [-1.0] * k):
        with pytest.raises(ValueError, match=f"allowed {k} values, each > 0"):
            m.mtp.set_confidence_temperatures(bad)


def test_markov_kind_is_checked():
    with pytest.raises(ConfigError, match="dspark_markov_kind"):
        get_config("lab", dspark_markov_kind="lstm")
