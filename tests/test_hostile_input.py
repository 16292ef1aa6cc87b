"""Bounded input: a checkpoint's tokenizer.json, one loader for --checkpoint, the memory check, the page server.

A tokenizer.json is a file from elsewhere. Each case below builds the hostile file that once went wrong — a 60 MB
vocabulary read whole, a chain of Replace steps that multiplies a prompt into gigabytes, a pre-tokenizer regex
that backtracks into a Rust panic, a vocabulary with no unknown token, a FIFO, a folder, a dangling link, a link out
of the folder — and asserts the one clear error (and, where memory is the point, the resident memory of a child
process: its peak RSS, or an address-space limit it must live within), never the file's text in a message.

Every --checkpoint command opens its folder through one loader (`lab.realscale.folder.open_checkpoint`): config,
weights and tokenizer together, or one error naming what is missing; no command falls back to the lab's vocabulary.

The memory check before a real-width model takes the smallest of RLIMIT_AS, the cgroup's memory.max minus its
usage, and MemAvailable: tested with fake /proc and cgroup files and with a child whose RLIMIT_AS is set.

The presenter's server: a deadline for a whole request head (not a timeout that restarts on every byte), a cap on
connections, and `present` naming --port when its port is taken. Every wait is on a socket event under a large
safety bound, never on a clock.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dspark_mini.hf_tokenizer import (
    MAX_TOKENIZER_BYTES,
    MAX_TOKENIZER_IDS,
    HFTokenizer,
    folder_file,
)
from dspark_mini.tokenizer import TokenizerError, default_tokenizer
from dspark_mini.tokenizer_limits import MAX_GROWTH, MAX_TEXT_WORK

ROOT = Path(__file__).resolve().parents[1]
LAB_TOKENIZER = ROOT / "dspark_mini" / "lab_tokenizer" / "tokenizer.json"
SECRET = "SECRET-7f3a"  # planted in hostile files: no message may quote it
BACKTRACKS = r"(?:a|a)*(?=\d)"  # Oniguruma's retry limit ends it with an error, which `tokenizers` turns into a panic


def no_secret(text: str) -> None:
    assert SECRET not in text, text[:500]


def lab_doc() -> dict:
    """The lab's own tokenizer.json (a byte-level BPE of 8,192 ids), as a dict to make hostile variants of."""
    return json.loads(LAB_TOKENIZER.read_text(encoding="utf-8"))


def write_folder(folder: Path, doc: dict | str | bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = doc if isinstance(doc, bytes) else (doc if isinstance(doc, str) else json.dumps(doc)).encode()
    (folder / "tokenizer.json").write_bytes(data)
    return folder


def small_doc(model: dict, **parts) -> dict:
    """A tokenizer.json of the library's format around `model`, with optional normalizer / pre_tokenizer / decoder."""
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "post_processor": None}
    return doc | {"normalizer": None, "pre_tokenizer": None, "decoder": None} | parts | {"model": model}


def child(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Python `code` in a fresh interpreter rooted at the repository (its own memory, its own fd 2)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def replace_chain(times: int, grow: int, part: str) -> dict:
    """`times` Replace steps, each writing `grow` copies of what it matches: ×grow**times in all."""
    key = "normalizers" if part == "normalizer" else "decoders"
    pattern = "a" if part == "normalizer" else "Ġ"
    steps = [{"type": "Replace", "pattern": {"String": pattern}, "content": pattern * grow}] * times
    return {"type": "Sequence", key: steps}


# ---- 1. size: a tokenizer.json over the cap is refused by its size, unread ---------------------------------------
def test_a_60_mb_tokenizer_json_is_refused_unread(tmp_path) -> None:
    """A 60 MB tokenizer.json (the lab's, its vocabulary padded with 1.9 M extra tokens: what once took ≈ 4.6 GB
    to read) is refused by its size before a byte is read: the child's peak RSS grows by less than the file."""
    doc = lab_doc()
    vocab = doc["model"]["vocab"]
    base = len(vocab)
    pad = 60 * 10**6 // 31  # ≈ 31 bytes an entry
    vocab.update({f"pad{i:010d}-{'x' * 12}": base + i for i in range(pad)})
    folder = write_folder(tmp_path / "big", doc)
    size = (folder / "tokenizer.json").stat().st_size
    assert size > 60 * 10**6 > MAX_TOKENIZER_BYTES == 32 * 2**20
    out = child(
        "import resource, sys\n"
        "from dspark_mini.hf_tokenizer import HFTokenizer\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n"
        f"    HFTokenizer.from_folder({str(folder)!r})\n"
        "except ValueError as e:\n"
        "    print(e)\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)\n"
    )
    assert out.returncode == 0, out.stderr[-2000:]
    message, grown = out.stdout.strip().splitlines()
    assert message == (
        f"{folder / 'tokenizer.json'}: not a readable tokenizer.json: it is {size:,} bytes: allowed at most "
        f"{32 * 2**20:,}"
    )
    assert int(grown) < size // 4, f"peak RSS grew by {int(grown):,} bytes reading a file it should refuse unread"


def test_a_tokenizer_of_too_many_ids_is_refused_before_its_vocabulary_is_derived(tmp_path) -> None:
    n = MAX_TOKENIZER_IDS + 1
    doc = small_doc({"type": "WordLevel", "vocab": {f"w{i}": i for i in range(n)}, "unk_token": "w0"})
    folder = write_folder(tmp_path / "ids", doc)
    with pytest.raises(TokenizerError) as e:
        HFTokenizer.from_folder(folder)
    assert str(e.value) == f"{folder / 'tokenizer.json'}: {n:,} token ids: allowed 1..{MAX_TOKENIZER_IDS:,}"


def test_a_tokenizer_of_another_size_than_the_config_is_refused_before_its_vocabulary_is_derived(tmp_path) -> None:
    folder = write_folder(tmp_path / "lab", LAB_TOKENIZER.read_bytes())
    with pytest.raises(TokenizerError, match=r"8,192 token ids, but config\.json says vocab_size = 129,280"):
        HFTokenizer.from_folder(folder, vocab_size=129_280)
    assert HFTokenizer.from_folder(folder, vocab_size=8192).vocab_size == 8192


def test_a_deep_tokenizer_json_goes_through_the_depth_cap(tmp_path) -> None:
    folder = write_folder(tmp_path / "deep", '{"model": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(TokenizerError, match="nested deeper than 64 levels"):
        HFTokenizer.from_folder(folder)
    (folder / "tokenizer.json").write_bytes(LAB_TOKENIZER.read_bytes())
    (folder / "tokenizer_config.json").write_text('{"eos_token": ' + "[" * 1000 + "]" * 1000 + "}")
    with pytest.raises(TokenizerError, match="tokenizer_config.json: not a readable tokenizer config: it is nested"):
        HFTokenizer.from_folder(folder)


# ---- 2. Replace chains: a normalizer or decoder that multiplies the text ------------------------------------------
@pytest.mark.parametrize("part", ["normalizer", "decoder"])
def test_a_chain_of_replace_steps_is_refused_within_a_memory_limit(tmp_path, part) -> None:
    """Ten Replace steps of ×10 turn "aaaa" into 40 GB (the process aborted inside the library). In a child whose
    address space is held to 1 GiB above what it has after its imports, reading the tokenizer and encoding a short
    prompt ends in one clear refusal naming the part and its 10,000,000,000× bound, and the child lives."""
    doc = lab_doc()
    doc[part] = replace_chain(10, 10, part)
    folder = write_folder(tmp_path / part, doc)
    out = child(
        "import re, resource\n"
        "from dspark_mini.hf_tokenizer import HFTokenizer\n"
        "size = int(re.search(r'VmSize:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)) * 1024\n"
        "resource.setrlimit(resource.RLIMIT_AS, (size + 2**30, resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
        "try:\n"
        f"    tok = HFTokenizer.from_folder({str(folder)!r})\n"
        "    print(tok.decode(tok.encode('aaaa ĠĠ aaaa')))\n"
        "except ValueError as e:\n"
        "    print('refused:', e)\n"
    )
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    kind = "Sequence"
    assert out.stdout.strip() == (
        f"refused: {folder / 'tokenizer.json'}: its {part} ({kind}) can make a text up to 10,000,000,000× longer "
        f"(+ 0 characters): allowed at most {MAX_GROWTH}× (Replace steps whose content is longer than what they "
        "replace multiply the text)"
    )


def test_replace_steps_that_do_not_grow_the_text_are_read(tmp_path) -> None:
    """Llama-style steps (a mark prepended, a space replaced by one mark, back again on decode) are no chain of
    growth: the tokenizer is read and round-trips."""
    doc = lab_doc()
    doc["normalizer"] = {
        "type": "Sequence",
        "normalizers": [{"type": "NFC"}, {"type": "Replace", "pattern": {"String": "\t"}, "content": " "}],
    }
    doc["decoder"] = {
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "Ġ"}, "content": "Ġ"},
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        ],
    }
    tok = HFTokenizer.from_folder(write_folder(tmp_path / "ok", doc))
    assert tok.decode(tok.encode("xin chào\tthe model")) == "xin chào the model"


def test_each_call_is_checked_against_what_it_may_write(tmp_path) -> None:
    """A normalizer within the bound (×200) on a text whose worst case is above MAX_TEXT_WORK: refused before the
    library runs, with the numbers; a text whose worst case fits is encoded."""
    doc = lab_doc()
    doc["normalizer"] = {"type": "Replace", "pattern": {"String": "q"}, "content": "q" * 200}
    doc["pre_tokenizer"] = None  # ×1: the bound of the whole encode is the normalizer's
    tok = HFTokenizer.from_folder(write_folder(tmp_path / "x200", doc))
    n = MAX_TEXT_WORK // 200 + 1
    with pytest.raises(TokenizerError) as e:
        tok.encode("b" * n)
    assert f"{n:,} characters, which its normalizer and pre-tokenizer may make up to {200 * n:,}" in str(e.value)
    assert f"allowed at most {MAX_TEXT_WORK:,}" in str(e.value)
    assert tok.encode("b" * 1000)


# ---- 3. a pre-tokenizer regex that backtracks: the library panics ------------------------------------------------
def backtracking_folder(tmp_path: Path) -> Path:
    doc = lab_doc()
    doc["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": BACKTRACKS}
    return write_folder(tmp_path / "backtracks", doc)


def test_a_backtracking_pre_tokenizer_is_one_tokenizer_error(tmp_path) -> None:
    tok = HFTokenizer.from_folder(backtracking_folder(tmp_path))
    assert tok.encode("a1")  # a short text is within Oniguruma's limit
    with pytest.raises(TokenizerError, match="cannot encode the text: the library gave up on it"):
        tok.encode("a" * 40 + "!")


def test_the_cli_prints_one_line_for_a_panicking_tokenizer(tmp_path) -> None:
    """`dspark-lab tokenize --checkpoint DIR` on that tokenizer, in a real process (Rust writes its panic straight
    to fd 2): exit 2, and stderr is exactly one line — no panic message, no backtrace (RUST_BACKTRACE=1 is set)."""
    folder = backtracking_folder(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT), RUST_BACKTRACE="1", COLUMNS="400")
    out = subprocess.run(
        [sys.executable, "-m", "lab", "tokenize", "--checkpoint", str(folder), "a" * 40 + "!"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "gave up on it" in lines[0], out.stderr[-2000:]
    assert "panicked" not in out.stderr and out.stdout == ""


# ---- 4. no unknown token for a symbol the vocabulary lacks ---------------------------------------------------------
VOCAB = {"a": 0, "b": 1, "c": 2, " ": 3}


@pytest.mark.parametrize(
    "model",
    [
        {"type": "BPE", "vocab": VOCAB, "merges": []},  # no unk_token: the library drops the symbol, silently
        {"type": "BPE", "vocab": VOCAB, "merges": [], "unk_token": "<unk>"},  # an unk_token missing from the vocab
        {"type": "WordLevel", "vocab": VOCAB, "unk_token": "<unk>"},
        {"type": "Unigram", "vocab": [[t, -1.0] for t in VOCAB], "unk_id": None},
    ],
    ids=["bpe-no-unk", "bpe-unk-missing", "wordlevel", "unigram"],
)
def test_a_symbol_the_vocabulary_lacks_is_named(tmp_path, model) -> None:
    pre = {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": False}
    if model["type"] == "WordLevel":
        pre = {"type": "Split", "pattern": {"Regex": "."}, "behavior": "Isolated", "invert": False}
    tok = HFTokenizer.from_folder(write_folder(tmp_path / "unk", small_doc(model, pre_tokenizer=pre)))
    assert tok.decode(tok.encode("ab c")).replace(" ", "") == "abc"
    with pytest.raises(TokenizerError) as e:
        tok.encode("ab 🙂c")
    assert "character 3 ('🙂', U+1F642) is not in its vocabulary and it has no unknown token" in str(e.value)


def test_a_symbol_the_normalizer_removes_is_not_unseen(tmp_path) -> None:
    model = {"type": "BPE", "vocab": VOCAB, "merges": []}
    norm = {"type": "Replace", "pattern": {"String": "x"}, "content": ""}
    tok = HFTokenizer.from_folder(write_folder(tmp_path / "rm", small_doc(model, normalizer=norm)))
    assert tok.encode("axb") == [0, 1]


def test_the_cli_names_an_unseen_symbol_in_one_line(tmp_path, capsys) -> None:
    from lab.cli import main

    folder = write_folder(tmp_path / "unk", small_doc({"type": "WordLevel", "vocab": VOCAB, "unk_token": "<unk>"}))
    assert main(["tokenize", "--checkpoint", str(folder), "ab🙂"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "character 2 ('🙂', U+1F642) is not in its vocabulary" in err, err


# ---- 5. what tokenizer.json is: a FIFO, a folder, a dangling link, a link out of the folder ---------------------
def refused_without_blocking(folder: Path) -> str:
    """from_folder's error, called in a thread: a reader that opened the FIFO would wait for a writer forever, so
    after a generous bound the FIFO is opened for writing (which frees it) and the test fails."""
    result: list[BaseException | None] = []

    def call() -> None:
        try:
            HFTokenizer.from_folder(folder)
            result.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            result.append(e)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(120)
    if t.is_alive():
        with open(os.open(folder / "tokenizer.json", os.O_WRONLY | os.O_NONBLOCK), "wb"):
            pass
        t.join(120)
        pytest.fail("from_folder blocked reading a FIFO")
    assert isinstance(result[0], TokenizerError), result
    return str(result[0])


def test_a_fifo_a_folder_or_a_dangling_link_is_a_clear_error(tmp_path) -> None:
    path = tmp_path / "fifo" / "tokenizer.json"
    path.parent.mkdir()
    os.mkfifo(path)
    assert refused_without_blocking(path.parent) == f"{path}: is a FIFO (named pipe): allowed a regular file"
    path = tmp_path / "dir" / "tokenizer.json"
    path.mkdir(parents=True)
    assert refused_without_blocking(path.parent) == f"{path}: is a folder: allowed a regular file"
    path = tmp_path / "dangling" / "tokenizer.json"
    path.parent.mkdir()
    path.symlink_to(tmp_path / "nowhere.json")
    assert refused_without_blocking(path.parent) == (
        f"{path}: a link to nothing (dangling): allowed a regular file in the folder"
    )
    assert folder_file(tmp_path / "dangling", "tokenizer_config.json") is None  # absent is not an error here


def test_a_link_out_of_the_checkpoint_folder_is_refused(tmp_path) -> None:
    outside = tmp_path / "elsewhere" / "tokenizer.json"
    outside.parent.mkdir()
    shutil.copy(LAB_TOKENIZER, outside)
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "tokenizer.json").symlink_to(outside)
    with pytest.raises(TokenizerError, match="a link that leads outside the checkpoint folder"):
        HFTokenizer.from_folder(folder)
    (folder / "tokenizer.json").unlink()
    (folder / "sub").mkdir()
    shutil.copy(LAB_TOKENIZER, folder / "sub" / "real.json")
    (folder / "tokenizer.json").symlink_to(folder / "sub" / "real.json")  # a link inside the folder is followed
    assert HFTokenizer.from_folder(folder).vocab_size == 8192


# ---- 6. no error quotes the file -----------------------------------------------------------------------------------
def test_no_tokenizer_error_quotes_the_file(tmp_path) -> None:
    lab = lab_doc()
    secret_step = {"type": "Replace", "pattern": {"String": "a"}, "content": SECRET * 100}
    cases = {
        "unknown model type": small_doc({"type": SECRET}),
        "string where a number goes": small_doc({"type": "WordLevel", "vocab": {"a": SECRET}, "unk_token": "a"}),
        "not JSON": '{"model": "' + SECRET,
        "not UTF-8": SECRET.encode() + b"\xff\xfe",
        "a growing step": lab | {"normalizer": secret_step},
        "a growing decoder": lab | {"decoder": secret_step},
    }
    for what, doc in cases.items():
        folder = write_folder(tmp_path / what.replace(" ", "-"), doc)
        with pytest.raises(TokenizerError) as e:
            HFTokenizer.from_folder(folder)
        assert str(folder / "tokenizer.json") in str(e.value), what
        no_secret(str(e.value))
    folder = write_folder(tmp_path / "config", LAB_TOKENIZER.read_bytes())
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": SECRET}), encoding="utf-8")
    with pytest.raises(TokenizerError, match="eos_token names no token of the tokenizer") as e:
        HFTokenizer.from_folder(folder)
    no_secret(str(e.value))


# ---- one loader for --checkpoint DIR: config, weights and tokenizer together --------------------------------------
OTHER_VOCAB = 300  # the vocabulary of bpe_checkpoint: a byte-level BPE trained here, not the lab's 8,192 ids
OTHER_LINES = [
    "Xin chào các bạn, hôm nay chúng ta học về DSpark.",
    "the model predicts the next token",
    "def f(x):\n    return x + 1",
    "tiếng Việt và tiếng Anh",
] * 50


@pytest.fixture(scope="module")
def bpe_checkpoint(tmp_path_factory) -> tuple[Path, HFTokenizer]:
    """A small model of another vocabulary than the lab's: a byte-level BPE of 300 ids trained here (a folder whose
    ids the lab tokenizer does not give), exported with its tokenizer.json and tokenizer_config.json beside its
    shards."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from dspark_mini import build_model, get_config
    from lab.realscale import export_checkpoint

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = ["<bos>", "<eos>", "<pad>", "<noise>"]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=OTHER_VOCAB, special_tokens=specials, initial_alphabet=alphabet, show_progress=False
    )
    bpe.train_from_iterator(OTHER_LINES, trainer)
    source = tmp_path_factory.mktemp("other-tokenizer")
    bpe.save(str(source / "tokenizer.json"))
    names = {f"{n}_token": t for n, t in zip(("bos", "eos", "pad", "noise"), specials, strict=True)}
    (source / "tokenizer_config.json").write_text(json.dumps(names), encoding="utf-8")
    tok = HFTokenizer.from_folder(source)
    assert tok.vocab_size == OTHER_VOCAB
    cfg = get_config("lab").replace(
        vocab_size=tok.vocab_size,
        engram_compressed_vocab_size=tok.compressed_vocab_size,
        engram_pad_id=tok.pad,
        dspark_noise_token_id=tok.noise,
    )
    path = export_checkpoint(build_model(cfg, seed=3), tmp_path_factory.mktemp("bpe") / "ckpt", shards=2)
    assert not (path / "tokenizer.json").exists()  # not the lab's vocabulary: the export writes no tokenizer
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, path / name)
    return path, tok


@pytest.fixture(scope="module")
def lab_checkpoint(tmp_path_factory) -> Path:
    """The shipped lab model exported: the lab's own vocabulary, its tokenizer.json and tokenizer_config.json written
    beside the weights, and config.json naming the lab's vocabulary."""
    from lab.cli import main

    out = tmp_path_factory.mktemp("labckpt") / "ckpt"
    assert main(["checkpoint", "export", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def older_lab_checkpoint(lab_checkpoint, tmp_path_factory) -> Path:
    """A lab export as written before exports carried the lab tokenizer: no tokenizer.json, config.json names the
    lab's vocabulary."""
    out = shutil.copytree(lab_checkpoint, tmp_path_factory.mktemp("older") / "ckpt", symlinks=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (out / name).unlink()
    return out


def cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    from lab.cli import main

    capsys.readouterr()
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def copy_of(folder: Path, where: Path) -> Path:
    shutil.copytree(folder, where, symlinks=True)
    return where


COMMANDS = {
    "walk": ["walk", "--step", "1A", "--json"],
    "generate": ["generate", "--max-new-tokens", "2", "--json"],
    "serve": ["serve", "--requests", "2", "--max-new-tokens", "2", "--json"],
    "profile": ["profile", "--reps", "1", "--json"],
}


def test_walk_reads_the_folders_tokenizer(bpe_checkpoint, capsys) -> None:
    """walk --checkpoint once encoded with the lab tokenizer whatever the folder held, then failed at step 6B (an
    id out of range): now its tokens are the folder's tokenizer's, and every 6B check holds."""
    path, tok = bpe_checkpoint
    prompt = "Xin chào các bạn"
    rc, out, err = cli(
        capsys, ["walk", "--step", "1A", "--step", "6B", "--json", "--checkpoint", str(path), "--prompt", prompt]
    )
    assert rc == 0, err
    walk = json.loads(out)
    assert walk["tokens"] == tok.encode(prompt)
    assert walk["tokens"] != default_tokenizer().encode(prompt)  # the lab tokenizer's ids would differ
    assert all(c["ok"] for c in walk["steps"]["6B"]["checks"])


def test_serve_reads_the_folders_tokenizer(bpe_checkpoint, tmp_path, capsys) -> None:
    """serve --checkpoint on a folder with a tokenizer.json once raised AttributeError: now each prompt is encoded
    and each result decoded by that tokenizer (and the default held-out prompts are re-encoded by it)."""
    path, tok = bpe_checkpoint
    prompts = ["Xin chào các bạn", "the model predicts"]
    (tmp_path / "p.txt").write_text("\n".join(prompts) + "\n", encoding="utf-8")
    argv = ["serve", "--checkpoint", str(path), "--prompts-file", str(tmp_path / "p.txt")]
    rc, out, err = cli(capsys, argv + ["--requests", "2", "--max-new-tokens", "3", "--json"])
    assert rc == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    requests = sorted((r for r in rows if r["kind"] == "request"), key=lambda r: r["index"])
    assert [r["prompt_tokens"] for r in requests] == [len(tok.encode(p)) for p in prompts]
    assert all(r["text"] == tok.decode(r["tokens"]) for r in requests)
    rc, out, err = cli(
        capsys, ["serve", "--checkpoint", str(path), "--requests", "4", "--max-new-tokens", "1", "--json"]
    )
    assert rc == 0, err


MISSING = {
    "en": "error: {path!r} is missing: a checkpoint folder holds the tokenizer of its vocabulary (300 ids) there "
    "(its config.json does not name the lab's vocabulary: a folder `dspark-lab checkpoint export` wrote from the lab "
    "model does)",
    "vi": "lỗi: {path!r} không có: thư mục checkpoint giữ bộ tách từ của bộ từ vựng (300 id) ở đó (config.json "
    "của nó không ghi bộ từ vựng của lab: thư mục do `dspark-lab checkpoint export` ghi từ mô hình lab thì có)",
}


@pytest.mark.parametrize("lang", ["en", "vi"])
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_names_a_missing_tokenizer(bpe_checkpoint, tmp_path, capsys, command, lang) -> None:
    """A folder of another vocabulary than the lab's without its tokenizer.json: each command stops with the same
    one line naming the file, in --lang (none encodes with the lab's vocabulary instead)."""
    path = copy_of(bpe_checkpoint[0], tmp_path / "ckpt")
    (path / "tokenizer.json").unlink()
    rc, out, err = cli(capsys, [*COMMANDS[command], "--checkpoint", str(path), "--lang", lang])
    assert rc == 2 and out == "", err
    assert err.strip().splitlines() == [MISSING[lang].format(path=str(path / "tokenizer.json"))]


BROKEN = {
    "fifo": ("is a FIFO (named pipe): allowed a regular file", "là một FIFO (ống có tên): chỉ nhận một tệp thường"),
    "folder": ("is a folder: allowed a regular file", "là một thư mục: chỉ nhận một tệp thường"),
    "dangling": (
        "a link to nothing (dangling): allowed a regular file in the folder",
        "một liên kết không trỏ tới đâu: chỉ nhận một tệp thường trong thư mục",
    ),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("what", BROKEN)
def test_a_broken_tokenizer_json_is_never_replaced_by_the_lab_vocabulary(
    lab_checkpoint, tmp_path, capsys, command, what
) -> None:
    """A lab-vocabulary export whose config.json names the lab's vocabulary could run without a tokenizer.json; one
    that holds a FIFO, a folder or a dangling link under that name is an error naming it (English, and Vietnamese
    with --lang vi), not the lab's vocabulary in its place."""
    path = copy_of(lab_checkpoint, tmp_path / "ckpt")
    target = path / "tokenizer.json"
    target.unlink()  # the export's own, replaced by what is not a regular file
    {"fifo": os.mkfifo, "folder": os.mkdir, "dangling": lambda p: p.symlink_to(tmp_path / "gone")}[what](target)
    for lang, why in zip(("en", "vi"), BROKEN[what], strict=True):
        rc, out, err = cli(capsys, [*COMMANDS[command], "--checkpoint", str(path), "--lang", lang])
        assert rc == 2 and out == "", err
        assert err.strip().splitlines() == [f"{'lỗi' if lang == 'vi' else 'error'}: {target}: {why}"]


def test_a_lab_export_runs_on_the_lab_vocabulary_only_when_its_config_names_it(
    lab_checkpoint, older_lab_checkpoint, tmp_path, capsys
) -> None:
    from dspark_mini.tokenizer import LAB_TOKENIZER_DIR
    from lab.realscale.export import LAB_VOCABULARY

    config = json.loads((lab_checkpoint / "config.json").read_text())
    assert config["dspark_lab"]["tokenizer"] == LAB_VOCABULARY  # written by the export
    for name in ("tokenizer.json", "tokenizer_config.json"):  # … and the lab tokenizer's files, byte for byte
        assert (lab_checkpoint / name).read_bytes() == (LAB_TOKENIZER_DIR / name).read_bytes()
    runs = {}
    for folder in (lab_checkpoint, older_lab_checkpoint):
        rc, out, err = cli(capsys, ["generate", "--max-new-tokens", "2", "--json", "--checkpoint", str(folder)])
        assert rc == 0, err
        runs[folder] = json.loads(out)
    new, old = runs[lab_checkpoint], runs[older_lab_checkpoint]
    assert str(lab_checkpoint / "tokenizer.json") in new["tokenizer"]  # the folder's own file, read first
    assert str(LAB_TOKENIZER_DIR / "tokenizer.json") in old["tokenizer"]  # none there: the lab's, as config names
    assert new["prompt_ids"] == old["prompt_ids"] and new["plain"]["tokens"] == old["plain"]["tokens"]
    path = copy_of(older_lab_checkpoint, tmp_path / "unnamed")
    config["dspark_lab"]["tokenizer"] = None
    (path / "config.json").write_text(json.dumps(config))
    rc, out, err = cli(capsys, ["generate", "--max-new-tokens", "2", "--checkpoint", str(path)])
    assert rc == 2 and "tokenizer.json' is missing" in err and "(8,192 ids)" in err, err


def test_a_missing_config_is_named_before_any_work(bpe_checkpoint, tmp_path, capsys) -> None:
    path = copy_of(bpe_checkpoint[0], tmp_path / "ckpt")
    (path / "config.json").unlink()
    for command in COMMANDS.values():
        rc, out, err = cli(capsys, [*command, "--checkpoint", str(path)])
        assert rc == 2 and err.strip().splitlines() == [
            f"error: {str(path / 'config.json')!r} is missing: a checkpoint folder needs its config.json"
        ], err


def test_profile_runs_on_a_checkpoint_of_another_vocabulary(bpe_checkpoint, capsys) -> None:
    """profile --checkpoint: the checkpoint's config and weights; its prompts are random ids of the checkpoint's
    vocabulary (the held-out corpus prompts are lab ids), so no id is out of its range."""
    rc, out, err = cli(capsys, ["profile", "--reps", "1", "--json", "--checkpoint", str(bpe_checkpoint[0])])
    assert rc == 0, err
    report = json.loads(out)
    assert report["parity"]["max_abs_diff"] <= report["parity"]["threshold"]


# ---- the memory check before a real-width model: every limit the host states --------------------------------------
GIB = 2**30


def fake_host(tmp_path: Path, cgroup: dict[str, str], proc_cgroup: str, mem_available: int = 64 * GIB) -> dict:
    """A /proc/meminfo, a /proc/self/cgroup and a cgroup tree of our own (file path → text)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "meminfo").write_text(f"MemTotal: 1 kB\nMemAvailable: {mem_available // 1024} kB\n")
    (tmp_path / "cgroup").write_text(proc_cgroup)
    (tmp_path / "status").write_text("Name: python\nVmSize:  1048576 kB\n")  # 1 GiB mapped
    for rel, text in cgroup.items():
        f = tmp_path / "fs" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    (tmp_path / "fs").mkdir(exist_ok=True)
    return {
        "meminfo": tmp_path / "meminfo",
        "cgroup_root": tmp_path / "fs",
        "proc_cgroup": tmp_path / "cgroup",
        "status": tmp_path / "status",
    }


def test_memory_rooms_read_every_limit(tmp_path) -> None:
    from lab.realscale.placement import Room, memory_rooms

    unlimited = -1  # resource.RLIM_INFINITY
    # cgroup v2, two levels: the leaf's 6 GiB limit with 5 GiB used, 1 GiB of it reclaimable file cache → 2 GiB;
    # its parent says "max"
    v2 = fake_host(
        tmp_path / "v2",
        {
            "a/b/memory.max": str(6 * GIB),
            "a/b/memory.current": str(5 * GIB),
            "a/b/memory.stat": f"anon 1\ninactive_file {GIB}\n",
            "a/memory.max": "max",
        },
        "0::/a/b\n",
        mem_available=8 * GIB,
    )
    assert memory_rooms(**v2, rlimit_as=unlimited) == [Room(8 * GIB, "MemAvailable"), Room(2 * GIB, "memory.max")]
    # RLIMIT_AS of 4 GiB with 1 GiB mapped already → 3 GiB
    assert Room(3 * GIB, "RLIMIT_AS") in memory_rooms(**v2, rlimit_as=4 * GIB)
    # cgroup v1: the leaf's own limit 3 GiB but a parent's 2.5 GiB (hierarchical_memory_limit), 1 GiB used → 1.5 GiB
    v1 = fake_host(
        tmp_path / "v1",
        {
            "memory/x/memory.limit_in_bytes": str(3 * GIB),
            "memory/x/memory.usage_in_bytes": str(GIB),
            "memory/x/memory.stat": f"hierarchical_memory_limit {5 * GIB // 2}\ntotal_inactive_file 0\n",
        },
        "5:cpu:/x\n4:memory:/x\n",
    )
    assert memory_rooms(**v1, rlimit_as=unlimited)[1:] == [Room(3 * GIB // 2, "memory.limit_in_bytes")]
    # a container's own subtree mounted at the controller's root (the path in /proc/self/cgroup is the host's);
    # the kernel's "no limit" (2**63 − a page) is no limit
    inside = fake_host(
        tmp_path / "ns",
        {"memory/memory.limit_in_bytes": "9223372036854771712", "memory/memory.usage_in_bytes": str(GIB)},
        "4:memory:/process_api/abc\n",
    )
    assert memory_rooms(**inside, rlimit_as=unlimited) == [Room(64 * GIB, "MemAvailable")]
    (tmp_path / "ns" / "fs" / "memory" / "memory.limit_in_bytes").write_text(str(2 * GIB))
    assert memory_rooms(**inside, rlimit_as=unlimited)[1:] == [Room(GIB, "memory.limit_in_bytes")]


@pytest.mark.parametrize("lang", ["en", "vi"])
def test_a_preset_over_the_cgroup_limit_is_refused_before_anything_is_built(tmp_path, monkeypatch, capsys, lang):
    """walk --preset flash-cpu under a (fake) cgroup of 3 GiB with 1 GiB used: one line naming --preset, the need
    (at least the bytes of its parameters, counted here on a `meta` build) and the 2.00 GiB that memory.max leaves —
    and no model is built (build_model is replaced by a failure)."""
    import re
    import types

    import lab.realscale.placement as placement
    import lab.runtime.run as run_mod
    import lab.weights as weights_mod
    from dspark_mini import build_model, get_config

    host = fake_host(tmp_path, {"g/memory.max": str(3 * GIB), "g/memory.current": str(GIB)}, "0::/g\n")
    monkeypatch.setattr(placement, "MEMINFO", host["meminfo"])
    monkeypatch.setattr(placement, "CGROUP_ROOT", host["cgroup_root"])
    monkeypatch.setattr(placement, "PROC_CGROUP", host["proc_cgroup"])
    no_limit = types.SimpleNamespace(RLIMIT_AS=0, RLIM_INFINITY=-1, getrlimit=lambda _: (-1, -1))
    monkeypatch.setattr(placement, "resource", no_limit)

    def no_build(*a, **k):
        raise AssertionError("a model was built before the memory check refused")

    monkeypatch.setattr(run_mod, "build_model", no_build)
    monkeypatch.setattr(weights_mod, "build_model", no_build)
    rc, out, err = cli(capsys, ["walk", "--preset", "flash-cpu", "--lang", lang])
    assert rc == 2 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    if lang == "en":
        head, leaves = "error: --preset flash-cpu does not fit: it needs ", "memory.max minus its usage leaves 2.00 GiB"
    else:
        head, leaves = (
            "lỗi: --preset flash-cpu không vừa bộ nhớ: cần ",
            "memory.max của cgroup trừ phần đã dùng chỉ còn 2.00 GiB",
        )
    assert lines[0].startswith(head) and leaves in lines[0], lines[0]
    need = float(re.search(r"([\d,.]+) GiB", lines[0][len(head) :]).group(1).replace(",", ""))
    meta = build_model(get_config("flash-cpu"), device="meta")
    params = sum(p.numel() * p.element_size() for p in meta.parameters()) / GIB
    assert need >= round(params, 2) > 2.0


def test_a_preset_over_rlimit_as_is_refused_in_a_child_that_lives_within_it() -> None:
    """`generate --preset flash-cpu` in a process whose address space is limited to 4 GiB (RLIMIT_AS, set before it
    starts): the old check read MemAvailable only and went on to allocate ~12 GB. Now: exit 2, one line naming
    --preset, RLIMIT_AS and what it leaves (below 4 GiB: the interpreter and torch map some already)."""
    import re

    limit = 4 * GIB

    def limited() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="400")
    out = subprocess.run(
        [sys.executable, "-m", "lab", "generate", "--preset", "flash-cpu", "--max-new-tokens", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=limited,
    )
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --preset flash-cpu does not fit: it needs "), out.stderr
    left = re.search(r"leaves ([\d,.]+) GiB", lines[0])
    assert left and 0 < float(left.group(1)) < 4.0, lines[0]
    mem_available = int(re.search(r"MemAvailable:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1)) * 1024
    if mem_available > limit:  # the host has more than the limit free: the limit is what refuses
        assert "RLIMIT_AS (ulimit -v) minus what the process maps already" in lines[0], lines[0]


# ---- the presenter's server: a deadline for the request head, a cap on connections, --port named ----------------
BOUND_S = 120.0  # a safety bound on every wait: far beyond what each takes, and below the idle timeout used here
PAGE = "<!doctype html><p>presenter</p>"


@pytest.fixture
def page_server():
    """A presenter server on 127.0.0.1 with a 0.5 s deadline for the request head, an idle timeout (300 s) far above
    BOUND_S — so a connection closed within BOUND_S was closed by the deadline — and at most 8 connections."""
    from lab.present import presenter

    server = presenter.make_server(PAGE, "127.0.0.1", 0, head_deadline=0.5, idle_timeout=300.0, max_connections=8)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def read_to_end(sock) -> bytes:
    sock.settimeout(BOUND_S)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_clients_sending_one_byte_are_closed_by_the_deadline_and_a_request_is_served(page_server) -> None:
    """40 clients each send one byte of a request line and stop (every one of the 8 handler threads held, the rest
    queued): the page is still served to a normal request, and every slow client is closed by the server."""
    import socket

    slow = [socket.create_connection(page_server.server_address[:2], timeout=BOUND_S) for _ in range(40)]
    try:
        for s in slow:
            s.sendall(b"G")
        with socket.create_connection(page_server.server_address[:2], timeout=BOUND_S) as normal:
            normal.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
            reply = read_to_end(normal)
        assert reply.startswith(b"HTTP/1.0 200") and reply.endswith(PAGE.encode())
        assert [read_to_end(s) for s in slow] == [b""] * 40  # closed, nothing answered
    finally:
        for s in slow:
            s.close()


def test_a_client_trickling_its_headers_is_closed_by_the_deadline(page_server) -> None:
    """A client that sends a byte of its headers whenever 50 ms pass without an answer — the socket timeout alone
    restarts on every byte and would keep it for ever. The deadline closes it: the server's EOF ends the loop
    (BOUND_S is the safety bound, far beyond the 0.5 s deadline)."""
    import select
    import socket

    with socket.create_connection(page_server.server_address[:2], timeout=BOUND_S) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n")
        for _ in range(int(BOUND_S / 0.05)):
            try:
                sock.sendall(b"X")
            except OSError:  # the server has closed it (a reset after its close)
                break
            if select.select([sock], [], [], 0.05)[0]:
                try:
                    assert sock.recv(1) == b""
                except ConnectionResetError:
                    pass
                break
        else:
            pytest.fail("the server kept a connection whose headers trickled in, past its deadline")


@pytest.mark.parametrize("lang", ["en", "vi"])
@pytest.mark.parametrize("entry", ["dspark-lab present", "python -m lab.present"])
def test_present_names_port_when_it_is_taken(monkeypatch, capsys, lang, entry) -> None:
    """Another program listens on the port: one line naming --port and what is allowed, before the page is built."""
    import socket

    import lab.cli as lab_cli
    from lab.present import presenter

    def no_model(*a, **k):
        pytest.fail("built the page though the port is taken")

    monkeypatch.setattr(presenter, "build_data", no_model)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["--port", str(port), "--lang", lang]
        capsys.readouterr()
        rc = presenter.main(argv) if entry.startswith("python") else lab_cli.main(["present", *argv])
    out, err = capsys.readouterr()
    want = {
        "en": f"error: --port = {port} is taken on 127.0.0.1 (another program, or another presenter, listens there): "
        "allowed a free port, or --port 0 (any free port)",
        "vi": f"lỗi: --port = {port} đang bị chiếm trên 127.0.0.1 (một chương trình khác, hay một trang trình chiếu "
        "khác, đang nghe ở đó): chỉ nhận một cổng còn trống, hoặc --port 0 (bất kỳ cổng trống nào)",
    }
    assert rc == 2 and out == "" and err.strip().splitlines() == [want[lang]], err


def test_deeply_nested_json_in_a_folder_manifest_a_paper_run_or_a_cache_header_is_refused(tmp_path):
    """Every JSON read from a folder a user hands the lab goes through the bounded parser: a document nested
    100,000 deep is one clear refusal, never a RecursionError or an unbounded parse."""
    import torch
    from safetensors.torch import save_file

    from dspark_mini.files import OWNER, read_owner
    from lab.paper.docs import read_items
    from lab.training.target_cache import CacheError, load_cache

    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / OWNER).write_text(deep, encoding="utf-8")
    assert read_owner(tmp_path) is None  # not the lab's folder
    run = tmp_path / "run"
    run.mkdir()
    from lab.paper.docs import ITEMS

    for name in ITEMS:
        (run / f"{name}.json").write_text(deep if name == ITEMS[0] else "{}", encoding="utf-8")
    with pytest.raises(ValueError, match="is not readable run data: it .*nest"):
        read_items(run)
    save_file(
        {"sequences": torch.zeros(1, 4, dtype=torch.int16), "windows": torch.zeros(1, 1, 4, dtype=torch.int16)},
        str(tmp_path / "cache.safetensors"),
        metadata={"format": "dspark-lab-target-cache", "spec": deep},
    )
    with pytest.raises(CacheError, match="is not a readable target cache"):
        load_cache(tmp_path / "cache.safetensors")
