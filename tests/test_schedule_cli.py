"""`dspark-lab schedule` and `dspark-lab profile --sps` (lab/serving/cli.py, schedule.py, profile_sps.py): the JSON
contract, what the load simulation on the shipped data must show, a tiny real SPS measurement that
writes a valid table, the plots, and bad input. No test reads a timing value: only structure, and monotonicity
after forcing (or of the shipped, recorded data)."""

from __future__ import annotations

import contextlib
import io
import json

import plotly.graph_objects as go
import pytest
from rich.cells import cell_len
from rich.console import Console

from dspark_mini.scheduler import POLICIES
from lab.cli import main
from lab.serving import plots
from lab.serving.commands import render_schedule
from lab.serving.schedule import SHIPPED_STREAMS, SHIPPED_TABLE, read_table, tables_for
from lab.serving.simulate import load_streams, save_streams
from lab.serving.sps import load_table

REQUESTS = ["1", "2", "4", "8", "16", "32", "64", "128", "256"]
TABLES = ("measured", "smooth", "staircase")
K = 5


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def report():
    code, out, err = run("schedule", "--json")
    assert code == 0, err
    return json.loads(out)


def series(report, table: str, policy: str, key: str) -> list[float]:
    return [report["sim"][table][policy][r][key] for r in REQUESTS]


# ---- the JSON contract ------------------------------------------------------------------------------------------
def test_json_keys_and_shape(report):
    assert set(report) >= {"sim", "conditions", "scheduler_cost"}
    assert list(report["sim"]) == list(TABLES)
    for table in report["sim"].values():
        assert list(table) == list(POLICIES) == ["fixed", "threshold", "dspark", "dspark-async"]
        for per_r in table.values():
            assert list(per_r) == REQUESTS
            for v in per_r.values():
                assert {"throughput", "mean_verify_len", "tau"} <= set(v)
                assert v["throughput"] > 0 and 0 <= v["mean_verify_len"] <= K and 1 <= v["tau"] <= K + 1
    cond = report["conditions"]
    assert cond["requests"] == [int(r) for r in REQUESTS] and cond["policies"] == list(POLICIES)
    assert set(cond["tables"]) == set(TABLES)
    measured = cond["tables"]["measured"]
    assert measured["path"].endswith("sps_lab_cpu.json")
    assert {"cpu", "threads", "reps", "cache_length", "dtype"} <= set(measured["conditions"])
    s = cond["streams"]
    assert s["k"] == K and s["streams"] >= 48 and s["recorded"]["temperature"] == 1.0
    cost = report["scheduler_cost"]
    assert list(cost) == list(POLICIES)
    for per_r in cost.values():
        assert list(per_r) == ["1", "256"]
        for c in per_r.values():
            assert {"p50", "p95", "p99", "n"} <= set(c["plan_s"]) and c["plan_s"]["p50"] > 0
            assert c["verify_s"] > 0 and c["batch_tokens"] >= 1


def test_fixed_verifies_every_draft_and_the_fixed_batch_is_measured(report):
    table = read_table(None)
    assert table.batch_tokens[-1] >= 256 * (K + 1)  # R = 256 full blocks: a measured point, not an extrapolation
    for t in TABLES:
        assert series(report, t, "fixed", "mean_verify_len") == [float(K)] * len(REQUESTS)
    assert report["scheduler_cost"]["fixed"]["256"]["batch_tokens"] == 256 * (K + 1)


# ---- what the paper shows, on the shipped data ----------------------------------------------------------------
def test_small_load_costs_nothing_against_fixed(report):
    """R = 1: the load-aware policies lose at most 2 % against fixed (the static threshold at most 5 %: it cuts at
    survival 0.1 whatever the load), and verify more per request than under the heaviest load. (On this CPU a verify
    of 6 tokens already costs more than one of 1, so even R = 1 trims the unlikely drafts.)"""
    for t in ("measured", "smooth"):
        fixed = report["sim"][t]["fixed"]["1"]["throughput"]
        for p in POLICIES:
            one = report["sim"][t][p]["1"]
            assert one["throughput"] >= (0.95 if p == "threshold" else 0.98) * fixed, (t, p)
            assert one["mean_verify_len"] >= report["sim"][t][p]["256"]["mean_verify_len"], (t, p)


@pytest.mark.parametrize("table", ["measured", "smooth"])
def test_dspark_cuts_the_verify_length_and_beats_fixed_as_load_grows(report, table):
    lens = series(report, table, "dspark", "mean_verify_len")
    # R = 1 and R = 2 replay different rows (64 rounds of 1 stream vs of 2), so their ℓ differ by which rounds they
    # drew as much as by the load (shipped streams: +0.01 on the smooth table, +0.11 on the measured one): monotone
    # from R = 2 on
    assert all(b <= a for a, b in zip(lens[1:], lens[2:], strict=False)), lens
    assert lens[-1] <= lens[0] - 3.0
    d, f = (series(report, table, p, "throughput") for p in ("dspark", "fixed"))
    assert d[-1] >= f[-1]  # what docs/serving.md states: dspark ≥ fixed at R = 256
    assert d[-1] > 1.3 * f[-1]
    assert all(a > b for a, b in zip(d[4:], f[4:], strict=True))  # R ≥ 16: the cut pays
    asy = series(report, table, "dspark-async", "throughput")
    assert asy[-1] > 1.3 * f[-1]


def test_the_static_threshold_ignores_the_load(report):
    """The threshold reads only each draft's confidences, so its mean ℓ moves with R only because each R replays
    other rounds: 64·R of them (at R = 1, 64 rounds from the start of a few streams: a standard error of ≈ 0.15
    on a spread of ≈ 1.2). From R = 8 on (≥ 512 rounds) the means agree within 0.2, below that within 0.4 —
    while `dspark`, which reads the load, falls by more than 2."""
    th = dict(zip(REQUESTS, series(report, "measured", "threshold", "mean_verify_len"), strict=True))
    many = [th[r] for r in REQUESTS if int(r) >= 8]
    assert max(many) - min(many) < 0.2
    assert all(abs(th[r] - th["256"]) < 0.4 for r in REQUESTS)
    assert series(report, "measured", "dspark", "mean_verify_len")[-1] < min(th.values()) - 2


def test_early_stop_stalls_on_the_staircase_and_the_async_search_does_not(report):
    stair = report["sim"]["staircase"]
    stalled = [r for r in REQUESTS if stair["dspark"][r]["mean_verify_len"] == 0.0]
    assert stalled, "the early stop never stalled on the staircase"
    for r in stalled:
        assert stair["dspark-async"][r]["mean_verify_len"] >= 1.0
        assert stair["dspark-async"][r]["throughput"] > stair["dspark"][r]["throughput"]
    assert stair["dspark-async"]["256"]["throughput"] > 1.5 * stair["fixed"]["256"]["throughput"]


# ---- terminal, plots, other options -----------------------------------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "vi"])
def test_tables_read_at_80_columns_without_colour(report, lang):
    buf = io.StringIO()
    render_schedule(Console(file=buf, width=80, no_color=True, color_system=None), report, lang)
    text = buf.getvalue()
    assert max(cell_len(line) for line in text.splitlines()) <= 80
    assert ("throughput" if lang == "en" else "thông lượng") in text
    for p in POLICIES:
        assert p in text
    assert "dspark-async still verifies" in text or "dspark-async vẫn verify" in text


def test_plots_draw_every_policy_and_table(report):
    for lang in ("en", "vi"):
        fig = plots.throughput_vs_requests(report, lang)
        assert isinstance(fig, go.Figure) and len(fig.data) == len(TABLES) * len(POLICIES)
        fig = plots.verify_len_vs_requests(report, lang, tables=["measured"])
        assert [tr.name for tr in fig.data] == list(POLICIES)
        assert list(fig.data[0].y) == series(report, "measured", "fixed", "mean_verify_len")
    fig = plots.sps_curves(tables_for(read_table(None)))
    assert {tr.name for tr in fig.data} >= set(TABLES)
    with pytest.raises(ValueError, match="table 'gpu' is not in the simulation"):
        plots.throughput_vs_requests(report, tables=["gpu"])
    with pytest.raises(ValueError, match="sim must be"):
        plots.verify_len_vs_requests({"sim": {}})


def test_requests_policies_and_a_given_table(tmp_path):
    table = load_table(SHIPPED_TABLE)
    path = tmp_path / "sps.json"
    path.write_text(json.dumps(table.to_dict()))
    code, out, err = run(
        "schedule",
        "--json",
        "--requests",
        "2,1",
        "--policies",
        "dspark,fixed",
        "--rounds",
        "4",
        "--sps-table",
        str(path),
    )
    assert code == 0, err
    rep = json.loads(out)
    assert list(rep["sim"]["measured"]) == ["dspark", "fixed"] and list(rep["sim"]["smooth"]["fixed"]) == ["1", "2"]
    assert rep["conditions"]["tables"]["measured"]["path"] == str(path)


def test_a_given_streams_file_is_replayed(tmp_path):
    streams = load_streams(SHIPPED_STREAMS)[:4]
    path = save_streams(tmp_path / "s.json", streams, {"note": "four streams"})
    code, out, err = run("schedule", "--json", "--requests", "1,4", "--rounds", "4", "--streams", str(path))
    assert code == 0, err
    rep = json.loads(out)
    assert rep["conditions"]["streams"]["streams"] == 4 and rep["conditions"]["streams"]["recorded"]["note"]


# ---- profile --sps ----------------------------------------------------------------------------------------------
def test_profile_sps_writes_a_monotone_table_that_load_table_reads(tmp_path):
    out = tmp_path / "sps.json"
    code, text, err = run("profile", "--sps", "--batch-tokens", "12,1,6", "--reps", "1", "--out", str(out), "--json")
    assert code == 0, err
    printed = json.loads(text)
    assert printed["path"] == str(out)
    table = load_table(out)
    assert table.batch_tokens == (1, 6, 12) and table.name == "measured"
    sps = table.forced_steps_per_s
    assert all(b <= a for a, b in zip(sps, sps[1:], strict=False))  # forced monotone
    assert all(s["n"] == 1 for s in table.step_stats)
    c = table.conditions
    assert c["reps"] == 1 and c["cache_length"] == 32 and c["threads"] == 1 and c["rows_per_request"] == K + 1
    assert {"cpu", "torch", "dtype", "source", "monotone"} <= set(c)


def test_profile_sps_terminal_output_names_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, text, err = run("profile", "--sps", "--batch-tokens", "1,6", "--reps", "1")
    assert code == 0, err
    assert (tmp_path / "runs" / "sps.json").is_file() and "runs/sps.json" in text
    assert load_table(tmp_path / "runs" / "sps.json").batch_tokens == (1, 6)


def test_the_shipped_table_is_valid_and_monotone():
    t = load_table(SHIPPED_TABLE)
    assert t.batch_tokens[0] == 1 and t.interpolation == "linear"
    sps = t.forced_steps_per_s
    assert all(b <= a for a, b in zip(sps, sps[1:], strict=False))
    assert {"cpu", "threads", "reps", "cache_length", "source"} <= set(t.conditions)


# ---- bad input --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, needle",
    [
        (["schedule", "--requests", "0"], "--requests = 0 is invalid: allowed an integer in 1..1024"),
        (["schedule", "--requests", "1,-4"], "--requests = -4 is invalid"),
        (["schedule", "--requests", "1,two"], "--requests = '1,two' is invalid: allowed comma-separated integers"),
        (["schedule", "--requests", ","], "--requests is empty"),
        (["schedule", "--requests", "2,2"], "--requests repeats a value"),
        (["schedule", "--requests", "2000"], "--requests = 2000 is invalid: allowed an integer in 1..1024"),
        (
            ["schedule", "--policies", "greedy"],
            "--policies: 'greedy' is not a policy: allowed fixed, threshold, dspark",
        ),
        (["schedule", "--policies", "retrospective"], "--policies: 'retrospective' is not a policy"),
        (["schedule", "--threshold", "1.5"], "--threshold = 1.5 is invalid: allowed a finite number ≥ 0 and ≤ 1"),
        (["schedule", "--threshold=-0.1"], "--threshold = -0.1 is invalid"),
        (["schedule", "--threshold", "nan"], "--threshold = nan is invalid"),
        (["schedule", "--rounds", "0"], "--rounds = 0 is invalid"),
        (["schedule", "--seed", "-1"], "--seed = -1 is invalid"),
        (["schedule", "--lang", "fr"], "unknown language 'fr'"),
        (["profile", "--out", "x.json"], "--out applies to `profile --sps` only"),
        (["profile", "--batch-tokens", "1,6"], "--batch-tokens applies to `profile --sps` only"),
        (["profile", "--sps", "--batch-tokens", "7"], "--batch-tokens = 7 is invalid: allowed distinct integers 1..6"),
        (["profile", "--sps", "--batch-tokens", "0"], "--batch-tokens = 0 is invalid"),
        (["profile", "--sps", "--batch-tokens", "6000"], "--batch-tokens = 6000 is invalid"),
        (["profile", "--sps", "--batch-tokens", "6,6"], "--batch-tokens repeats a size"),
        (["profile", "--sps", "--batch-tokens", "a"], "--batch-tokens = 'a' is invalid"),
        (["profile", "--sps", "--reps", "0"], "--reps = 0 is invalid"),
        (["profile", "--sps", "--cache-length", "251"], "--cache-length = 251 is invalid"),
    ],
)
def test_bad_options_name_the_option(tmp_path, monkeypatch, argv, needle):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(*argv)
    assert code == 2
    assert needle in " ".join(err.split())
    assert list(tmp_path.iterdir()) == []  # nothing measured, nothing written


BAD_TABLES = {
    "not_json.json": ("{points", "not valid JSON"),
    "other_format.json": ('{"format": "other"}', "format = 'other' is invalid"),
    "no_points.json": ('{"format": "dspark-lab/sps-table", "version": 1, "points": []}', "points is missing or empty"),
    "negative.json": (
        '{"format": "dspark-lab/sps-table", "version": 1, "points": [{"batch_tokens": 1, "steps_per_s": -3}]}',
        "points[0].steps_per_s = -3 is invalid",
    ),
    "descending.json": (
        '{"format": "dspark-lab/sps-table", "version": 1, "points": [{"batch_tokens": 4, "steps_per_s": 3},'
        ' {"batch_tokens": 2, "steps_per_s": 4}]}',
        "allowed strictly ascending sizes",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_TABLES))
def test_a_malformed_sps_table_names_the_option(tmp_path, name):
    text, needle = BAD_TABLES[name]
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run("schedule", "--sps-table", str(path))
    err = " ".join(err.split())
    assert code == 2 and f"--sps-table = '{path}' is invalid" in err and needle in err


def test_a_missing_sps_table_names_the_option(tmp_path):
    code, _, err = run("schedule", "--sps-table", str(tmp_path / "none.json"))
    assert code == 2 and "--sps-table" in err and "dspark-lab profile --sps" in " ".join(err.split())


BAD_STREAMS = {
    "not_json.json": ("[[", "--streams"),
    "other_format.json": ('{"format": "x", "streams": []}', "format is invalid"),
    "empty.json": ('{"format": "dspark-lab/verify-rows", "streams": []}', "streams is empty"),
    "bad_row.json": (
        '{"format": "dspark-lab/verify-rows", "streams": [[{"confidence": [0.5, 2.0], "n_accepted": 1}]]}',
        "is invalid: allowed values in [0, 1]",
    ),
    "no_key.json": ('{"format": "dspark-lab/verify-rows", "streams": [[{"confidence": [0.5]}]]}', "n_accepted"),
    "not_rows.json": ('{"format": "dspark-lab/verify-rows", "streams": 5}', "--streams"),
}


@pytest.mark.parametrize("name", sorted(BAD_STREAMS))
def test_a_malformed_streams_file_names_the_option(tmp_path, name):
    text, needle = BAD_STREAMS[name]
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run("schedule", "--streams", str(path))
    err = " ".join(err.split())
    assert code == 2 and f"--streams = '{path}'" in err and needle in err


def test_a_missing_streams_file_names_the_option(tmp_path):
    code, _, err = run("schedule", "--streams", str(tmp_path / "none.json"))
    err = " ".join(err.split())
    assert code == 2 and "--streams" in err and "no such file" in err and "--record" in err


def test_help_defaults_are_the_code_s():
    from dspark_mini import scheduler
    from lab import cli as lab_cli
    from lab.serving import cli, profile_sps, schedule

    assert cli.DEFAULT_THRESHOLD == scheduler.DEFAULT_THRESHOLD
    assert cli.SIM_REQUESTS_TEXT == ",".join(map(str, schedule.SIM_REQUESTS))
    assert (
        "1,6,12,24,48,96,192,384,768,1536"
        in lab_cli.parser()._subparsers._group_actions[0].choices["profile"].format_help()
    )
    assert ",".join(map(str, profile_sps.DEFAULT_BATCH_TOKENS)) == "1,6,12,24,48,96,192,384,768,1536"
    assert profile_sps.MAX_BATCH_TOKENS == 3072 and schedule.MAX_REQUESTS == 1024


@pytest.mark.parametrize("command", ["schedule", "profile"])
def test_help_has_examples(command):
    code = None
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as e:
        main([command, "--help"])
    code = e.value.code
    text = " ".join(out.getvalue().split())
    assert code == 0 and "examples:" in text
    if command == "schedule":
        for word in ("--requests", "--policies", "--sps-table", "--streams", "--record", "--threshold", "[0, 1]"):
            assert word in text
    else:
        assert "--sps" in text and "--batch-tokens" in text and "dspark-lab profile --sps" in text
