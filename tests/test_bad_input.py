"""Every bad input gets a clear error that names the option or argument and what is allowed — never a traceback,
never a hang, never a half-written file (docs/reliability.md).

The classes: NaN / ±inf where a float comes in · a bool where an int belongs · an unknown config field · a seed
outside 0 ≤ seed < 2**63 · an integer option outside its range · a language other than vi and en · a path that
cannot be used · Ctrl-C · a closed pipe · JSON that would hold NaN or Infinity · help and defaults that must agree
with the code.
The CLI cases run in-process (`lab.cli.main`) in an empty working folder that must stay unchanged; only the
closed pipe needs a real process.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import lab.cli as cli
import lab.style as style
import lab.training.cli as training_cli
from dspark_mini import get_config
from dspark_mini.config import ConfigError
from dspark_mini.sampling import token_distribution
from dspark_mini.speculative import generate_plain, generate_speculative
from dspark_mini.tokenizer import default_tokenizer
from dspark_mini.validate import check_float, check_int, check_seed, check_temperature
from lab.evaluation.profiling import profile
from lab.lesson.generation import compare
from lab.lesson.walk import run_walk
from lab.text import DEFAULT_PROMPT
from tests.helpers import english_left

ROOT = Path(__file__).resolve().parents[1]
# generate's room for new tokens: max_seq_len − the default prompt's tokens (the lab tokenizer's count of it)
ROOM = get_config("lab").max_seq_len - len(default_tokenizer().encode(DEFAULT_PROMPT))
NAN, INF = float("nan"), float("inf")

# (class, argv, the option the message must name, a fragment of what is allowed). Paths are relative to an
# empty working folder that holds one file, `a_file`.
CLI_CASES = [
    # ---- NaN / ±inf, and floats out of range ---------------------------------------------------------------
    ("non-finite", ["walk", "--temperature", "nan"], "--temperature", "finite number ≥ 1e-06"),
    ("non-finite", ["generate", "--temperature", "inf"], "--temperature", "0 (greedy)"),
    ("non-finite", ["generate", "--temperature=-inf"], "--temperature", "0 (greedy)"),
    ("non-finite", ["walk", "--temperature", "1e-320"], "--temperature", "≥ 1e-06"),
    ("non-finite", ["train", "target", "--lr", "nan", "--out", "t.safetensors"], "--lr", "> 0 and ≤ 1"),
    ("non-finite", ["train", "target", "--lr", "inf", "--out", "t.safetensors"], "--lr", "> 0 and ≤ 1"),
    ("range", ["train", "draft", "--lr", "0", "--out", "d.safetensors"], "--lr", "> 0"),
    ("range", ["train", "target", "--lr", "2"], "--lr", "≤ 1"),
    # ---- seeds: 0 ≤ seed < 2**63 in every subcommand ------------------------------------------------------
    ("seed", ["walk", "--seed", "-1"], "--seed", "0 ≤ seed < 2**63"),
    ("seed", ["inspect", "--seed", str(2**63)], "--seed", "0 ≤ seed < 2**63"),
    ("seed", ["generate", "--seed", str(2**64)], "--seed", "0 ≤ seed < 2**63"),
    ("seed", ["profile", "--seed", "-1"], "--seed", "0 ≤ seed < 2**63"),
    ("seed", ["train", "draft", "--seed", "-1", "--out", "d.safetensors"], "--seed", "0 ≤ seed < 2**63"),
    ("seed", ["train", "target", "--seed", str(2**63), "--out", "t.safetensors"], "--seed", "0 ≤ seed < 2**63"),
    ("seed", ["eval", "--seed", "-5"], "--seed", "0 ≤ seed < 2**63"),
    # ---- integer options: each names its range ------------------------------------------------------------
    ("range", ["profile", "--cache-length", "251"], "--cache-length", "1..250"),
    ("range", ["profile", "--cache-length", "0"], "--cache-length", "1..250"),
    ("range", ["profile", "--reps", "0"], "--reps", "1..1000"),
    ("range", ["profile", "--reps", "1001"], "--reps", "1..1000"),
    ("range", ["generate", "--max-new-tokens", "0"], "--max-new-tokens", f"1..{ROOM}"),
    ("range", ["generate", "--max-new-tokens", "9999"], "--max-new-tokens", f"1..{ROOM}"),
    ("range", ["eval", "--max-new-tokens", "241"], "--max-new-tokens", "1..240"),
    ("range", ["eval", "--prompts", "0"], "--prompts", "1..1000"),
    ("range", ["eval", "--prompts", "1001"], "--prompts", "1..1000"),
    ("range", ["eval", "--speed-prompts", "13"], "--speed-prompts", "1..12"),
    ("range", ["train", "target", "--steps", "0"], "--steps", "1..100000"),
    ("range", ["train", "draft", "--steps", "100001"], "--steps", "1..100000"),
    ("range", ["train", "all", "--steps", "5", "--out", "w"], "--steps", "`train all` follows its recipe"),
    ("range", ["train", "target", "--batch", "0"], "--batch", "1..256"),
    ("range", ["train", "target", "--batch", "257"], "--batch", "1..256"),
    ("range", ["train", "target", "--seq-len", "0"], "--seq-len", "1..256"),
    ("range", ["train", "target", "--seq-len", "257"], "--seq-len", "1..256"),
    ("range", ["train", "draft", "--kind", "dflash", "--seq-len", "4"], "--seq-len", "8..250"),
    ("range", ["train", "draft", "--kind", "mtp1", "--seq-len", "250"], "--seq-len", "1..249"),
    ("range", ["walk", "--verify-len", "0"], "--verify-len", "1..5"),
    ("range", ["generate", "--verify-len", "6"], "--verify-len", "1..5"),
    # ---- a language that is not the lab's: every command names --lang and what is allowed --------------------
    ("lang", ["data", "--lang", "fr", "--out", "corpus"], "--lang", "allowed 'vi', 'en'"),
    ("lang", ["data", "--json", "--lang", "de"], "--lang", "allowed 'vi', 'en'"),
    ("lang", ["train", "target", "--lang", "fr", "--out", "t.safetensors"], "--lang", "allowed 'vi', 'en'"),
    # ---- where the model runs: --device and --dtype (generate, profile, serve) ------------------------------
    ("device", ["generate", "--device", "gpu"], "--device", "allowed cpu, cuda or cuda:N"),
    ("device", ["profile", "--device", "cuda:x"], "--device", "allowed cpu, cuda or cuda:N"),
    ("device", ["serve", "--device", "tpu"], "--device", "allowed cpu, cuda or cuda:N"),
    ("device", ["generate", "--dtype", "float16"], "--dtype", "one of float64, float32, bfloat16"),
    ("device", ["serve", "--dtype", "fp32"], "--dtype", "one of float64, float32, bfloat16"),
    ("device", ["profile", "--sps", "--dtype", "float32"], "--dtype", "their defaults with --sps"),
    # ---- paths: a file where a folder should be, a missing file ---------------------------------------------
    ("path", ["data", "--out", "a_file"], "--out", "a folder"),
    ("path", ["data", "--out", "a_file/corpus"], "--out", "a_file/corpus"),
    ("path", ["eval", "--weights-dir", "missing"], "--weights-dir", "missing/target.safetensors"),
    ("path", ["eval", "--weights-dir", "a_file"], "--weights-dir", "a_file/target.safetensors"),
    ("path", ["train", "draft", "--target", "missing.safetensors", "--out", "d.safetensors"], "--target", "missing"),
    ("path", ["train", "target", "--out", "a_file/t.safetensors", "--steps", "1"], "--out", "a_file"),
]


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def flat(text: str) -> str:
    """The words of a text, on one line; a page's prose markers (<!--n:key-->12<!--/n-->) read as their numbers."""
    return " ".join(re.sub(r"<!--/?n(:[^>]*)?-->", "", text).split())


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working folder with one file in it; the default outputs (runs/…) would land here."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("a file, not a folder\n")
    return tmp_path


@pytest.mark.parametrize(
    "argv, option, allowed", [pytest.param(*c[1:], id=f"{c[0]}:{' '.join(c[1])}") for c in CLI_CASES]
)
def test_cli_refuses_with_a_clear_error(workdir, capsys, argv, option, allowed) -> None:
    before = snapshot(workdir)
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    err = flat(err)
    assert err.startswith("error: ") and err.count("error:") == 1, err
    assert option in err and allowed in err, err
    assert snapshot(workdir) == before  # refused: nothing written, nothing changed


def test_the_english_word_check_finds_english() -> None:
    assert english_left("error: --x = 'a b' is invalid: allowed cpu, cuda or cuda:N") == [
        "is",
        "invalid",
        "allowed",
        "or",
    ]
    assert english_left("lỗi: --x = 'a b' không hợp lệ: chỉ nhận `dspark-lab train all` trong 1..5 (max_seq_len)") == []


@pytest.mark.parametrize(
    "argv, option",
    [pytest.param(c[1], c[2], id=f"{c[0]}:{' '.join(c[1])}") for c in CLI_CASES if c[0] != "lang"],
)
def test_cli_refuses_in_vietnamese_under_lang_vi(workdir, capsys, argv, option) -> None:
    """The same refusals under --lang vi: one line in Vietnamese, naming the same option, no English frame left."""
    assert cli.main([*argv, "--lang", "vi"]) == 2
    err = flat(capsys.readouterr().err)
    assert err.startswith("lỗi: ") and option in err, err
    assert english_left(err) == [], err


# ---- the Python API: (class, call, error type, the argument's name, a fragment of what is allowed) ----------
def lab_prompt() -> torch.Tensor:
    return torch.tensor([[5, 6, 7]])


API_CASES = [
    ("non-finite", lambda m: compare(temperature=NAN), ValueError, "temperature", "finite"),
    ("non-finite", lambda m: compare(temperature=-INF), ValueError, "temperature", "finite"),
    ("non-finite", lambda m: generate_plain(m, lab_prompt(), 4, temperature=INF), ValueError, "temperature", "0"),
    ("non-finite", lambda m: generate_speculative(m, lab_prompt(), 4, temperature=NAN), ValueError, "temperature", ""),
    ("non-finite", lambda m: token_distribution(torch.zeros(3), NAN), ValueError, "temperature", "finite"),
    ("non-finite", lambda m: run_walk(temperature=INF), ValueError, "temperature", "finite"),
    ("non-finite", lambda m: check_float(NAN, "lr", 0.0, 1.0, lo_open=True), ValueError, "lr", "> 0 and ≤ 1"),
    ("type", lambda m: compare(temperature="1"), TypeError, "temperature", "0 (greedy)"),
    ("type", lambda m: run_walk(temperature="1"), TypeError, "temperature", "0 (greedy)"),
    ("type", lambda m: check_temperature(None), TypeError, "temperature", "0 (greedy)"),
    ("seed", lambda m: compare(seed=-1), ValueError, "seed", "0 ≤ seed < 2**63"),
    ("seed", lambda m: compare(seed=2**64), ValueError, "seed", "0 ≤ seed < 2**63"),
    ("seed", lambda m: generate_plain(m, lab_prompt(), 4, seed=-1), ValueError, "seed", "0 ≤ seed < 2**63"),
    ("seed", lambda m: generate_speculative(m, lab_prompt(), 4, seed=2**63), ValueError, "seed", "< 2**63"),
    ("bool", lambda m: generate_plain(m, lab_prompt(), 4, seed=True), TypeError, "seed", "an integer"),
    ("bool", lambda m: check_int(True, "steps", 1, 10), TypeError, "steps", "1..10"),
    ("bool", lambda m: check_float(False, "lr", 0.0), TypeError, "lr", "finite"),
    ("type", lambda m: check_seed(1.5), TypeError, "seed", "0 ≤ seed"),
    ("seed", lambda m: profile(seed=-1), ValueError, "seed", "0 ≤ seed < 2**63"),
    ("range", lambda m: profile(reps=0), ValueError, "reps", "≥ 1"),
    ("range", lambda m: profile(cache_len=10_000), ValueError, "cache_len", "1..250"),
    ("non-finite", lambda m: profile(temperature=NAN), ValueError, "temperature", "finite"),
]

# ---- configs: (class, changes, field, fragment of what is allowed) --------------------------------------------
CONFIG_CASES = [
    ("non-finite", {"norm_eps": NAN}, "norm_eps", "finite number > 0"),
    ("non-finite", {"rope_factor": INF}, "rope_factor", "finite number > 0"),
    ("non-finite", {"hc_eps": -INF}, "hc_eps", "finite number > 0"),
    ("non-finite", {"compress_rope_theta": NAN}, "compress_rope_theta", "finite number > 0"),
    ("bool", {"rope_theta": True}, "rope_theta", "finite number > 0"),
    ("bool", {"kv_source_layers": (True, 3, 4)}, "kv_source_layers", "integers"),
    (
        "bool",
        {"compress_ratios": tuple(True if i == 4 else r for i, r in enumerate(get_config("lab").compress_ratios))},
        "compress_ratios",
        "{0, 1, 2}",
    ),
    ("bool", {"kv_quant": 1}, "kv_quant", "True or False"),
    ("bool", {"dim": True}, "dim", "integer ≥ 1"),
    ("unknown-field", {"norm_epsilon": 1e-6}, "norm_epsilon", "did you mean 'norm_eps'?"),
    ("unknown-field", {"layers": 4}, "layers", "vocab_size, dim, n_layers"),
]


@pytest.mark.parametrize(
    "call, error, name, allowed", [pytest.param(*c[1:], id=f"{c[0]}-{i}") for i, c in enumerate(API_CASES)]
)
def test_api_refuses_with_a_clear_error(lab_model, call, error, name, allowed) -> None:
    with pytest.raises(error) as info:
        call(lab_model)
    message = str(info.value)
    assert message.startswith(f"{name} = ") and "is invalid: allowed" in message and allowed in message, message


@pytest.mark.parametrize("changes, field, allowed", [pytest.param(*c[1:], id=f"{c[0]}-{c[2]}") for c in CONFIG_CASES])
def test_config_refuses_with_a_clear_error(changes, field, allowed) -> None:
    for make in (lambda: get_config("lab").replace(**changes), lambda: get_config("lab", **changes)):
        with pytest.raises(ConfigError) as info:
            make()
        assert info.value.field == field and f"'{field}'" in str(info.value) and allowed in str(info.value)


def test_unknown_config_field_lists_every_valid_one() -> None:
    import dataclasses

    from dspark_mini.config import ModelConfig

    with pytest.raises(ConfigError) as info:
        get_config("flash", n_expert=8)
    assert all(f.name in str(info.value) for f in dataclasses.fields(ModelConfig))


def test_enough_cases_and_every_class() -> None:
    classes = {c[0] for c in CLI_CASES + API_CASES + CONFIG_CASES}
    assert {"non-finite", "bool", "type", "unknown-field", "seed", "range", "path", "device"} <= classes
    assert len(CLI_CASES) + len(API_CASES) + len(CONFIG_CASES) >= 40


# ---- Ctrl-C: one line, exit 130, nothing half-written ------------------------------------------------------
def interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def test_ctrl_c_in_walk_is_one_line_and_130(workdir, capsys, monkeypatch) -> None:
    monkeypatch.setattr("lab.lesson.walk.run_walk", interrupt)
    assert cli.main(["walk", "--json"]) == 130
    out, err = capsys.readouterr()
    assert err == "interrupted\n" and out == ""


def test_ctrl_c_during_training_leaves_no_checkpoint(workdir, capsys, monkeypatch) -> None:
    monkeypatch.setattr("lab.training.commands.train_target", interrupt)
    before = snapshot(workdir)
    argv = ["train", "target", "--steps", "2", "--seq-len", "16", "--out", "t.safetensors"]
    assert cli.main(argv) == 130
    assert flat(capsys.readouterr().err) == "interrupted"
    assert snapshot(workdir) == before


# ---- a closed pipe (`dspark-lab walk --json | head`): quiet, exit 141 ----------------------------------------
@pytest.mark.parametrize("argv", [["walk", "--json"], ["walk"]], ids=["json", "tables"])
def test_closed_pipe_is_quiet(argv) -> None:
    """The reader is gone before the first byte is written (the read end is closed at once), so the write fails
    on every run, however fast either side is: a quiet stop with 141, no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lab", *argv, "--step", "1A"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == "", err


# ---- JSON: never NaN or Infinity ---------------------------------------------------------------------------
def strict_json(text: str):
    def refuse(constant: str):
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_json_output_is_strict_and_says_where_numbers_were_not_finite(workdir, capsys, monkeypatch) -> None:
    monkeypatch.setattr(
        "lab.evaluation.profiling.profile", lambda *a, **k: {"ratio": INF, "rows": [1.0, NAN], "ok": 0.5}
    )
    assert cli.main(["profile", "--json"]) == 0
    report = strict_json(capsys.readouterr().out)
    assert report["ratio"] is None and report["rows"] == [1.0, None] and report["ok"] == 0.5
    assert report["non_finite"]["at"] == ["ratio = inf", "rows[1] = nan"]


def test_json_of_a_finite_report_has_no_note(capsys) -> None:
    style.print_json({"a": [1.0, 2], "b": {"c": "x"}})
    assert strict_json(capsys.readouterr().out) == {"a": [1.0, 2], "b": {"c": "x"}}


# ---- help and defaults agree with the code and the README --------------------------------------------------
def help_of(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    return flat(capsys.readouterr().out)


def test_eval_defaults_are_the_readmes(capsys) -> None:
    import inspect

    from lab.evaluation.quality import evaluate_drafters
    from lab.training.rebuild import Recipe

    args = cli.parser().parse_args(["eval"])
    assert (args.prompts, args.max_new_tokens) == (12, 40) == (Recipe().eval_prompts, Recipe().max_new_tokens)
    params = inspect.signature(evaluate_drafters).parameters
    assert (params["n_prompts"].default, params["max_new_tokens"].default) == (12, 40)
    assert "12 held-out prompts per domain × 40 new" in flat(
        (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    )
    assert "(default 12)" in help_of(capsys, "eval") and "(default 40)" in help_of(capsys, "eval")


def test_train_help_states_each_kinds_steps(capsys) -> None:
    from lab.training.rebuild import Recipe
    from lab.weights import BASELINE_DRAFTERS, MODEL_DRAFTERS

    r = Recipe()
    want = {"target": r.target_steps, **dict.fromkeys(MODEL_DRAFTERS + BASELINE_DRAFTERS, r.draft_steps)}
    assert training_cli.TRAIN_STEPS == want  # one budget for every drafter (the same windows of one target cache)
    text = help_of(capsys, "train")
    assert f"target {r.target_steps}" in text and f"every drafter {r.draft_steps}" in text
    for kind, steps in training_cli.TRAIN_STEPS.items():  # and the run uses them when --steps is not given
        argv = ["train", "target"] if kind == "target" else ["train", "draft", "--kind", kind]
        args = cli.parser().parse_args(argv)
        cli.check_args(args)
        assert args.steps == steps


def test_top_level_help_says_what_train_trains(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = flat(capsys.readouterr().out)
    assert "train the tiny target, one drafter against it, or every shipped file" in text
    assert "train target|draft|all" in cli.__doc__


def test_help_ranges_match_the_model(capsys) -> None:
    from lab.evaluation.quality import PROMPT_TOKENS

    cfg = get_config("lab")
    assert f"1..{cfg.max_seq_len - cfg.dspark_block_size - 1} " in help_of(capsys, "profile")
    assert f"1..{cfg.max_seq_len - PROMPT_TOKENS} " in help_of(capsys, "eval")
    assert "0 ≤ seed < 2**63" in help_of(capsys, "walk")
    data = help_of(capsys, "data")  # the real-text corpus is what it is: no size, no seed to choose
    assert "--out FOLDER" in data and "--json" in data and "vi or en" in data
    assert "--lines" not in data and "--seed" not in data and "--lines" not in help_of(capsys, "train")


@pytest.mark.parametrize(
    "argv", [["data", "--lines", "5"], ["data", "--seed", "1"], ["train", "target", "--lines", "5"]]
)
def test_data_and_train_take_no_corpus_size_or_seed(capsys, argv) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err


def test_the_largest_cache_length_runs(lab_model) -> None:
    """--cache-length's maximum is real: the verify of anchor + block still fits in max_seq_len there."""
    cfg, model = lab_model.cfg, lab_model
    n = cfg.max_seq_len - cfg.dspark_block_size - 1
    cache = model.new_cache(1)
    with torch.no_grad():
        model(torch.randint(4, cfg.vocab_size, (1, n)), cache=cache)
        out = model(torch.randint(4, cfg.vocab_size, (1, cfg.dspark_block_size + 1)), cache=cache, commit=False)
    assert math.isfinite(float(out.logits.abs().max()))
