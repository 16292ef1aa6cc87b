"""ModelConfig: one dataclass for the tiny `lab` model and the real `flash` model.

Every field is documented where it is defined as `lab value | flash value`, with the name the real
checkpoint's `inference/config.json` uses. Toy and real sizes run through the same code; only these
numbers differ. `validate()` checks every field and raises `ConfigError` naming the field, the value
and what is allowed; nothing is clamped or fixed up silently. Every size-driving number has an upper bound
(`INT_RANGES`, far above `flash`), so a hostile config cannot ask for minutes of work before any check runs; a
value too long to print (a 400-digit number) is shown shortened. A bool is not a number here (`True` is no layer
id), a float must be finite, and an unknown field name in `replace` / `get_config` lists the valid ones.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from .validate import is_integer

MAX_SHOWN = 300  # characters of a value an error message shows (a hostile file's 400-digit number is cut)


def shown(value: Any, limit: int = MAX_SHOWN) -> str:
    """repr(value) for an error message, cut past `limit` characters; an integer of more than 20 digits as its
    first digits and its digit count (never thousands of characters, and no repr of an int past Python's limit)."""
    if is_integer(value) and abs(value) >= 10**20:
        digits = int(abs(value).bit_length() * math.log10(2))  # the digit count, or one less
        digits += abs(value) >= 10**digits
        return f"{'-' if value < 0 else ''}{abs(value) // 10 ** (digits - 12)}…({digits:,} digits)"
    try:
        text = repr(value)
    except ValueError:  # a container holding an integer past Python's str limit (4,300 digits)
        return f"a {type(value).__name__} too long to show"
    return text if len(text) <= limit else f"{text[:limit]}…({len(text):,} characters)"


class ConfigError(ValueError):
    """A config field has a value outside what the model allows."""

    def __init__(self, field_name: str, value: Any, allowed: str):
        self.field = field_name
        self.value = value
        self.allowed = allowed
        super().__init__(f"config field {shown(field_name)} = {shown(value)} is invalid: allowed {allowed}")


DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16}

# ---- upper bounds of the size-driving fields ---------------------------------------------------------------------
# Far above DeepSeek-V4.1-Flash (the largest model the lab describes), far below a config that takes minutes or
# gigabytes just to lay out, inspect or run (a hostile config.json). The bytes a config allocates are bounded on
# top of these, from all the numbers together: dspark_mini.checkpoint.check_size.
MAX_VOCAB = 2**24  # vocab_size, engram_compressed_vocab_size: 130× flash's 129,280 (ids stay exact in float32)
MAX_WIDTH = 2**17  # dim, moe_inter_dim, q/o LoRA ranks, dspark_markov_rank: 25× flash's dim 5,120
MAX_HEAD_DIM = 2**13  # head_dim, rope_head_dim, index_head_dim, engram_head_dim: 16× flash's 512
MAX_HEADS = 2**12  # n_heads, o_groups, index_n_heads: 64× flash's 64 query heads
MAX_LAYERS = 2**10  # n_layers: 25× flash's 40
MAX_MTP_LAYERS = 64  # n_mtp_layers: 21× flash's 3 draft layers
MAX_EXPERTS = 2**13  # n_routed_experts, n_activated_experts and the DSpark ones: 21× flash's 384
MAX_SHARED_EXPERTS = 64  # n_shared_experts: 64× flash's 1
MAX_EXPERT_SLOTS = 2**16  # routed experts over all layers, 3 tensors each to lay out and inspect: 4× flash's 15,744
MAX_SEQ_LEN = 2**24  # max_seq_len, original_seq_len, window_size: 16× flash's 1,048,576-token context
MAX_TOPK = 2**16  # index_topk, candidate_topk_blocks: 32× flash's 2,048 candidate blocks
MAX_BLOCK = 2**8  # candidate_block_size, dspark_block_size: 32× flash's 8
MAX_HC_MULT = 32  # hc_mult: 8× flash's 4 residual lanes (the mixes grow as hc_mult²)
MAX_SINKHORN_ITERS = 256  # hc_sinkhorn_iters: 12× flash's 20 (converged already); every forward runs them all
MAX_ENGRAM_VOCAB = 2**31  # engram_vocab_size: 134× flash's 16,000,000 bucket base (primes are drawn above it)
MAX_ENGRAM_HEADS = 64  # engram_n_heads: 8× flash's 8
MAX_NGRAM = 16  # engram_max_ngram_size: 4× flash's 4
MAX_ENGRAM_TABLES = 256  # Engram layers × orders × heads, one prime searched for each: 5× flash's 48
MAX_BETA = 2**16  # beta_fast, beta_slow: YaRN's ramp ends, in rotations over the original context (flash 32, 1)

# field → (lowest, highest) value of every integer field bounded on its own
INT_RANGES = {
    "vocab_size": (1, MAX_VOCAB),
    "dim": (1, MAX_WIDTH),
    "n_layers": (1, MAX_LAYERS),
    "n_mtp_layers": (0, MAX_MTP_LAYERS),
    "n_heads": (1, MAX_HEADS),
    "head_dim": (1, MAX_HEAD_DIM),
    "rope_head_dim": (1, MAX_HEAD_DIM),
    "q_lora_rank": (1, MAX_WIDTH),
    "o_groups": (1, MAX_HEADS),
    "o_lora_rank": (1, MAX_WIDTH),
    "window_size": (1, MAX_SEQ_LEN),
    "candidate_topk_blocks": (1, MAX_TOPK),
    "candidate_block_size": (1, MAX_BLOCK),
    "index_n_heads": (1, MAX_HEADS),
    "index_head_dim": (1, MAX_HEAD_DIM),
    "index_topk": (1, MAX_TOPK),
    "original_seq_len": (1, MAX_SEQ_LEN),
    "max_seq_len": (1, MAX_SEQ_LEN),
    "n_routed_experts": (1, MAX_EXPERTS),
    "n_activated_experts": (1, MAX_EXPERTS),
    "n_shared_experts": (0, MAX_SHARED_EXPERTS),
    "moe_inter_dim": (1, MAX_WIDTH),
    "hc_mult": (1, MAX_HC_MULT),
    "hc_sinkhorn_iters": (1, MAX_SINKHORN_ITERS),
    "engram_vocab_size": (1, MAX_ENGRAM_VOCAB),
    "engram_n_heads": (1, MAX_ENGRAM_HEADS),
    "engram_head_dim": (1, MAX_HEAD_DIM),
    "engram_compressed_vocab_size": (1, MAX_VOCAB),
    "dspark_block_size": (1, MAX_BLOCK),
    "dspark_markov_rank": (1, MAX_WIDTH),
    "dspark_n_routed_experts": (1, MAX_EXPERTS),
    "dspark_n_activated_experts": (1, MAX_EXPERTS),
    "beta_fast": (1, MAX_BETA),
    "beta_slow": (1, MAX_BETA),
    "engram_max_ngram_size": (1, MAX_NGRAM),
}
TAP_MIXES = ("mean", "concat_proj")
MARKOV_KINDS = ("vanilla", "rnn")


@dataclass(frozen=True)
class ModelConfig:
    # ---- vocabulary and widths ------------------------------------------------------------------
    name: str = "lab"  # preset name, for display only
    vocab_size: int = 0  # lab: size of the lab tokenizer (a byte-level BPE of 8,192 ids) | flash: 129,280
    dim: int = 128  # hidden size | 5120
    n_layers: int = 8  # backbone layers, encoder + decoder | 40 (20 + 20)
    n_mtp_layers: int = 3  # DSpark draft layers (checkpoint `mtp.*`) | 3
    # ---- attention (4A) -----------------------------------------------------------------------
    n_heads: int = 4  # query heads; one shared KV latent for all of them (MQA) | 64
    head_dim: int = 64  # width of the shared latent = K = V | 512 (448 nope + 64 rope)
    rope_head_dim: int = 8  # rotated tail of every head / latent | 64
    q_lora_rank: int = 32  # q LoRA bottleneck (wq_a → q_norm → wq_b) | 1280
    o_groups: int = 2  # groups of the block-diagonal output LoRA | 8
    o_lora_rank: int = 32  # per-group rank of wo_a | 1024
    window_size: int = 8  # sliding-window ring slots in every layer | 128
    # ---- CED schedule and CSA2 (3A-3C) ----------------------------------------------------------
    # (0 = window only, 2 = ratio-2 pooled KV, 1 = ratio-1 projected KV; backbone then draft layers)
    compress_ratios: tuple[int, ...] = (
        0,
        2,
        2,
        2,
        1,
        1,
        1,
        1,
        0,
        0,
        0,
    )  # cache each layer reads | [0,0]+[2]*18+[1]*20+[0]*3
    kv_source_layers: tuple[int, ...] = (1, 3, 4)  # layers that own a compressor | (2, 8, 14, 20)
    index_source_layers: tuple[int, ...] = (1, 3, 4, 6)  # layers that run an indexer | (2, 8, ..., 36)
    candidate_source_layer: int = 4  # publishes candidate blocks; must be a KV source | 20
    candidate_topk_blocks: int = 8  # blocks kept by the candidate filter | 2048
    candidate_block_size: int = 2  # compressed positions per candidate block | 8
    index_n_heads: int = 2  # lightning-indexer heads | 32
    index_head_dim: int = 32  # indexer q/k width | 128
    index_topk: int = 8  # compressed positions each query attends to | 512
    # ---- RoPE (θ, YaRN) --------------------------------------------------------------------------
    rope_theta: float = 10000.0  # θ of ratio-0 layers (no YaRN) | 10000
    compress_rope_theta: float = 160000.0  # θ of ratio>0 layers (with YaRN) | 160000
    rope_factor: float = 4.0  # YaRN factor | 16
    original_seq_len: int = 32  # YaRN original context | 65536
    beta_fast: int = 32  # YaRN β_fast | 32
    beta_slow: int = 1  # YaRN β_slow | 1
    max_seq_len: int = 256  # longest sequence the caches hold | runtime (1,048,576 max)
    # ---- MoE (5A) -------------------------------------------------------------------------------
    n_routed_experts: int = 8  # routed experts per layer | 384
    n_activated_experts: int = 2  # experts chosen per token (top-k) | 6
    n_shared_experts: int = 1  # always-on shared expert | 1
    moe_inter_dim: int = 32  # expert SwiGLU width | 2304
    score_func: str = "sqrtsoftplus"  # router scores a = sqrt(softplus(s)) | same
    route_scale: float = 1.5  # routed_scaling_factor applied after normalizing top-k | 1.5
    gate_temp: float = 1.0  # router logits divided by this | 1.0
    swiglu_limit: float = 10.0  # clamp: up branch to ±limit, gate branch only from above | 10.0
    # ---- mHC (2A) -------------------------------------------------------------------------------
    hc_mult: int = 4  # residual copies (lanes) | 4
    hc_sinkhorn_iters: int = 20  # Sinkhorn iterations for the comb matrix | 20
    hc_eps: float = 1e-6  # added in the Sinkhorn split | 1e-6
    norm_eps: float = 1e-20  # every RMSNorm, hc mixes included | 1e-20
    # ---- Engram (1B) ----------------------------------------------------------------------------
    engram_layer_ids: tuple[int, ...] = (0, 3)  # blocks that get an Engram before them | (1, 14)
    engram_max_ngram_size: int = 4  # n-gram orders 2..max | 4
    engram_vocab_size: int = 832  # bucket base: primes are drawn above this | 16,000,000
    engram_n_heads: int = 2  # hash heads per order | 8
    engram_head_dim: int = 32  # width of one table row | 256
    engram_pad_id: int = 2  # raw token id whose compressed id pads missing history | 2
    engram_compressed_vocab_size: int = 0  # size of the folded vocabulary | 99,092
    # ---- DSpark (6B) ----------------------------------------------------------------------------
    dspark_block_size: int = 5  # draft block [anchor, noise × (k-1)] | 5
    dspark_noise_token_id: int = 0  # id of the noise token filling the block | 128,799
    dspark_target_layer_ids: tuple[int, ...] = (3, 4)  # tap layers (attention inputs) | (37, 38, 39)
    dspark_tap_mix: str = "mean"  # "mean": equal mix of taps | "concat_proj": concat → main_proj
    dspark_markov_rank: int = 64  # rank r of the Markov head (lab: V/128 of 8,192 ids) | 256
    dspark_markov_kind: str = "vanilla"  # "vanilla": bias = W2·W1[x_{k−1}] | "rnn": a gated state (paper eq. 6)
    dspark_n_routed_experts: int = 4  # draft-layer routed experts | 128
    dspark_n_activated_experts: int = 1  # draft-layer top-k | 3
    # ---- numerics -------------------------------------------------------------------------------
    dtype: str = "float64"  # compute dtype | "bfloat16" (fp32 for mHC, router, head as the reference)
    kv_quant: bool = True  # simulate FP8 window / FP4 compressed KV / FP4 index keys (QDQ) | True
    expert_quant: bool = True  # simulate MXFP4 routed-expert weights (QDQ) | True
    # the reference's GEMMs quantize their inputs: x before w1/w3 and h before w2, routed and shared experts, E4M3
    # with a power-of-two scale per 32 values. Off in `lab`: its shipped weights were trained without it
    expert_act_quant: bool = False  # simulate FP8 inputs of the expert matmuls (QDQ) | True
    engram_table_quant: bool = True  # simulate FP8 Engram table rows (E8M0 per 32) | True
    extra: dict = field(default_factory=dict, compare=False)  # free notes, ignored by the model

    # ---- derived --------------------------------------------------------------------------------
    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def n_encoder_layers(self) -> int:
        """CED: the encoder ends at the last ratio-2 layer; the decoder starts at the ratio-1 source."""
        ratio1 = [i for i in self.kv_source_layers if self.compress_ratios[i] == 1]
        return ratio1[0] if ratio1 else self.n_layers

    @property
    def nope_head_dim(self) -> int:
        return self.head_dim - self.rope_head_dim

    @property
    def engram_orders(self) -> tuple[int, ...]:
        return tuple(range(2, self.engram_max_ngram_size + 1))

    @property
    def engram_n_hash_cols(self) -> int:
        """Table ids per token per Engram layer: (max_ngram - 1) orders × heads."""
        return (self.engram_max_ngram_size - 1) * self.engram_n_heads

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed, validated."""
        return dataclasses.replace(self, **check_field_names(changes)).validate()

    def with_draft_layers(self, n: int) -> ModelConfig:
        """The same backbone with `n` draft layers (each reads its sliding window only, ratio 0): drafters of
        different depths share one target (the paper sets a 2-layer DSpark against a 5-layer DFlash)."""
        return self.replace(n_mtp_layers=n, compress_ratios=self.compress_ratios[: self.n_layers] + (0,) * n)

    # ---- validation -----------------------------------------------------------------------------
    def validate(self) -> ModelConfig:  # noqa: C901 - one check per field, flat on purpose
        def is_finite(v: Any) -> bool:
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                return False
            try:
                return math.isfinite(v)
            except OverflowError:  # an integer beyond any float (a 400-digit number)
                return False

        def need(ok: bool, name: str, allowed: str) -> None:
            if not ok:
                raise ConfigError(name, getattr(self, name), allowed)

        def bounded_int(name: str, lo: int, hi: int) -> None:
            v = getattr(self, name)
            need(is_integer(v) and lo <= v <= hi, name, f"an integer ≥ {lo} and ≤ {hi:,}")

        for name, (lo, hi) in INT_RANGES.items():
            bounded_int(name, lo, hi)
        for name in (
            "rope_theta",
            "compress_rope_theta",
            "rope_factor",
            "route_scale",
            "gate_temp",
            "swiglu_limit",
            "hc_eps",
            "norm_eps",
        ):
            v = getattr(self, name)
            need(is_finite(v) and v > 0, name, "a finite number > 0 (not NaN or ±inf)")
        for name in ("kv_quant", "expert_quant", "expert_act_quant", "engram_table_quant"):
            need(isinstance(getattr(self, name), bool), name, "True or False")
        for name in ("name", "score_func", "dtype", "dspark_tap_mix", "dspark_markov_kind"):
            need(isinstance(getattr(self, name), str), name, "a string")
        need(isinstance(self.extra, dict), "extra", "a dict of free notes")
        need(self.n_layers >= 2, "n_layers", "an integer ≥ 2 (an encoder and a decoder)")
        slots = self.n_layers * self.n_routed_experts + self.n_mtp_layers * self.dspark_n_routed_experts
        need(
            slots <= MAX_EXPERT_SLOTS,
            "n_routed_experts",
            f"at most {MAX_EXPERT_SLOTS:,} routed experts over all layers "
            f"(n_layers × n_routed_experts + n_mtp_layers × dspark_n_routed_experts = {slots:,})",
        )
        need(
            self.rope_head_dim % 2 == 0 and self.rope_head_dim < self.head_dim,
            "rope_head_dim",
            f"an even number < head_dim ({self.head_dim})",
        )
        need(self.index_head_dim > self.rope_head_dim, "index_head_dim", f"> rope_head_dim ({self.rope_head_dim})")
        need(self.n_heads % self.o_groups == 0, "o_groups", f"a divisor of n_heads ({self.n_heads})")
        need(self.beta_fast > self.beta_slow, "beta_fast", f"> beta_slow ({self.beta_slow})")
        need(
            self.n_activated_experts <= self.n_routed_experts,
            "n_activated_experts",
            f"1..n_routed_experts ({self.n_routed_experts})",
        )
        need(
            self.dspark_n_activated_experts <= self.dspark_n_routed_experts,
            "dspark_n_activated_experts",
            f"1..dspark_n_routed_experts ({self.dspark_n_routed_experts})",
        )
        need(self.score_func == "sqrtsoftplus", "score_func", "'sqrtsoftplus'")
        need(self.dtype in DTYPES, "dtype", f"one of {sorted(DTYPES)}")
        need(self.max_seq_len >= self.window_size, "max_seq_len", f"≥ window_size ({self.window_size})")

        # quantization groups: FP8 blocks of 32, FP4 groups of 16 (compressed KV) and 32 (index keys)
        if self.kv_quant:
            need(self.head_dim % 32 == 0, "head_dim", "a multiple of 32 when kv_quant is on")
            need(self.index_head_dim % 32 == 0, "index_head_dim", "a multiple of 32 when kv_quant is on")
        for switch in ("expert_quant", "expert_act_quant"):
            if getattr(self, switch):
                need(self.dim % 32 == 0, "dim", f"a multiple of 32 when {switch} is on")
                need(self.moe_inter_dim % 32 == 0, "moe_inter_dim", f"a multiple of 32 when {switch} is on")
        if self.engram_table_quant:
            need(self.engram_head_dim % 32 == 0, "engram_head_dim", "a multiple of 32 when engram_table_quant is on")

        # the CED / CSA2 schedule (3A)
        L, total = self.n_layers, self.n_layers + self.n_mtp_layers
        r = self.compress_ratios
        need(
            isinstance(r, tuple) and len(r) == total,
            "compress_ratios",
            f"a tuple of n_layers + n_mtp_layers = {total} entries",
        )
        need(all(is_integer(x) and x in (0, 1, 2) for x in r), "compress_ratios", "entries in {0, 1, 2}")
        need(
            all(x == 0 for x in r[L:]),
            "compress_ratios",
            "0 for every draft layer (entries after n_layers): draft layers read the window only",
        )

        def layer_ids(name: str, hi: int) -> tuple[int, ...]:
            ids = getattr(self, name)
            need(isinstance(ids, tuple) and all(is_integer(i) for i in ids), name, "a tuple of layer ids (integers)")
            need(all(0 <= i < hi for i in ids), name, f"layer ids in 0..{hi - 1}")
            need(list(ids) == sorted(set(ids)), name, "strictly increasing layer ids")
            return ids

        kv = layer_ids("kv_source_layers", L)
        idx = layer_ids("index_source_layers", L)
        need(len(kv) >= 1, "kv_source_layers", "at least one KV source")
        need(
            all(r[i] > 0 for i in kv),
            "kv_source_layers",
            "layers whose compress ratio is > 0 (a source owns the cache it is read through)",
        )
        need(all(r[i] > 0 for i in idx), "index_source_layers", "layers whose compress ratio is > 0")
        need(
            set(kv) <= set(idx),
            "index_source_layers",
            f"a superset of kv_source_layers {kv}: every KV source owns the index keys",
        )
        for i in range(L):
            if r[i] > 0:
                src = [s for s in kv if s <= i]
                need(bool(src), "compress_ratios", f"0 at layer {i}: no KV source at or before it (sources {kv})")
                need(
                    r[src[-1]] == r[i],
                    "compress_ratios",
                    f"at layer {i} equal to its KV source layer {src[-1]}'s ratio {r[src[-1]]}",
                )
        ratio1 = [i for i in kv if r[i] == 1]
        need(len(ratio1) <= 1, "kv_source_layers", "at most one ratio-1 source (the CED boundary)")
        need(
            not ratio1 or ratio1[0] == kv[-1],
            "kv_source_layers",
            "the ratio-1 source as the last KV source (the decoder reads only its projection)",
        )
        need(
            is_integer(self.candidate_source_layer) and self.candidate_source_layer in kv,
            "candidate_source_layer",
            f"one of kv_source_layers {kv}",
        )
        need(
            self.index_topk <= self.candidate_topk_blocks * self.candidate_block_size,
            "index_topk",
            f"≤ candidate pool {self.candidate_topk_blocks * self.candidate_block_size}",
        )

        # Engram (1B)
        eng = layer_ids("engram_layer_ids", L)
        need(len(eng) >= 1, "engram_layer_ids", "at least one layer")
        need(
            eng[-1] <= kv[-1],
            "engram_layer_ids",
            f"layers at or before the last KV source ({kv[-1]}), as decoder replay requires",
        )
        need(self.engram_max_ngram_size >= 2, "engram_max_ngram_size", "an integer ≥ 2")
        tables = len(eng) * self.engram_n_hash_cols
        need(
            tables <= MAX_ENGRAM_TABLES,
            "engram_n_heads",
            f"at most {MAX_ENGRAM_TABLES} Engram tables in all "
            f"(Engram layers × (engram_max_ngram_size − 1) × engram_n_heads = {tables:,})",
        )
        need(
            is_integer(self.engram_pad_id) and 0 <= self.engram_pad_id < self.vocab_size,
            "engram_pad_id",
            f"a token id in 0..{self.vocab_size - 1}",
        )

        # DSpark (6B)
        taps = layer_ids("dspark_target_layer_ids", L)
        need(len(taps) >= 1, "dspark_target_layer_ids", "at least one tap layer")
        need(self.dspark_tap_mix in TAP_MIXES, "dspark_tap_mix", f"one of {TAP_MIXES}")
        need(self.dspark_markov_kind in MARKOV_KINDS, "dspark_markov_kind", f"one of {MARKOV_KINDS}")
        need(
            is_integer(self.dspark_noise_token_id) and 0 <= self.dspark_noise_token_id < self.vocab_size,
            "dspark_noise_token_id",
            f"a token id in 0..{self.vocab_size - 1}",
        )
        need(self.dspark_block_size <= self.window_size, "dspark_block_size", f"1..window_size ({self.window_size})")
        return self


def check_field_names(changes: dict[str, Any]) -> dict[str, Any]:
    """`changes` unchanged if every key is a ModelConfig field; else a ConfigError listing the valid fields."""
    valid = [f.name for f in dataclasses.fields(ModelConfig)]
    for name, value in changes.items():
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(name, value, f"a ModelConfig field ({hint}the fields: {', '.join(valid)})")
    return changes


def lab_config(vocab_size: int, compressed_vocab_size: int, noise_token_id: int, **changes: Any) -> ModelConfig:
    """The default teaching model; the vocabulary numbers come from the lab tokenizer."""
    cfg = ModelConfig(
        vocab_size=vocab_size,
        engram_compressed_vocab_size=compressed_vocab_size,
        dspark_noise_token_id=noise_token_id,
    )
    return dataclasses.replace(cfg, **check_field_names(changes)).validate()


def flash_config(**changes: Any) -> ModelConfig:
    """DeepSeek-V4.1-Flash at real size (the published config.json)."""
    cfg = ModelConfig(
        name="flash",
        vocab_size=129_280,
        dim=5120,
        n_layers=40,
        n_mtp_layers=3,
        n_heads=64,
        head_dim=512,
        rope_head_dim=64,
        q_lora_rank=1280,
        o_groups=8,
        o_lora_rank=1024,
        window_size=128,
        compress_ratios=(0, 0) + (2,) * 18 + (1,) * 20 + (0,) * 3,
        kv_source_layers=(2, 8, 14, 20),
        index_source_layers=(2, 8, 14, 20, 24, 28, 32, 36),
        candidate_source_layer=20,
        candidate_topk_blocks=2048,
        candidate_block_size=8,
        index_n_heads=32,
        index_head_dim=128,
        index_topk=512,
        rope_theta=10000.0,
        compress_rope_theta=160000.0,
        rope_factor=16.0,
        original_seq_len=65536,
        beta_fast=32,
        beta_slow=1,
        max_seq_len=4096,
        n_routed_experts=384,
        n_activated_experts=6,
        n_shared_experts=1,
        moe_inter_dim=2304,
        route_scale=1.5,
        swiglu_limit=10.0,
        hc_mult=4,
        hc_sinkhorn_iters=20,
        hc_eps=1e-6,
        norm_eps=1e-20,
        engram_layer_ids=(1, 14),
        engram_max_ngram_size=4,
        engram_vocab_size=16_000_000,
        engram_n_heads=8,
        engram_head_dim=256,
        engram_pad_id=2,
        engram_compressed_vocab_size=99_092,
        dspark_block_size=5,
        dspark_noise_token_id=128_799,
        dspark_target_layer_ids=(37, 38, 39),
        dspark_tap_mix="concat_proj",
        dspark_markov_rank=256,
        dspark_n_routed_experts=128,
        dspark_n_activated_experts=3,
        dtype="bfloat16",
        expert_act_quant=True,
    )
    return dataclasses.replace(cfg, **check_field_names(changes)).validate()


# what `flash-cpu` changes in `flash`: counts only (layers, experts, Engram rows, the context it is built for);
# every width stays real. 4 backbone layers keep the CED shape (a window-only layer, a ratio-2 encoder source, the
# ratio-1 decoder source and a reader of it), the taps sit at the last three layers as in flash (37, 38, 39); one
# Engram layer (flash: 1 and 14) on the encoder source, with tables drawn above 4,000 rows (flash: 16,000,000);
# 3 routed experts, top-2, and the shared one per layer (flash: 384, top-6; draft layers 128, top-3).
FLASH_CPU_CHANGES: dict[str, Any] = {
    "name": "flash-cpu",
    "n_layers": 4,
    "n_mtp_layers": 1,
    "compress_ratios": (0, 2, 1, 1, 0),
    "kv_source_layers": (1, 2),
    "index_source_layers": (1, 2),
    "candidate_source_layer": 2,
    "max_seq_len": 1024,
    "n_routed_experts": 3,
    "n_activated_experts": 2,
    "engram_layer_ids": (1,),
    "engram_vocab_size": 4_000,
    "dspark_target_layer_ids": (1, 2, 3),
    "dspark_n_routed_experts": 3,
    "dspark_n_activated_experts": 2,
}


def flash_cpu_config(**changes: Any) -> ModelConfig:
    """DeepSeek-V4.1-Flash at every real width with few layers, experts and Engram rows: the real-width model that
    fits one CPU host (`FLASH_CPU_CHANGES`)."""
    return flash_config(**{**FLASH_CPU_CHANGES, **check_field_names(changes)})
