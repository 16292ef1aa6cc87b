"""docs/paper.md (English) and docs/paper.vi.md (Vietnamese): the paper in miniature, generated from
runs/paper/*.json. Every number on the pages is read from those records (the lab's and the paper's, with the
paper's section); the prose around them is fixed text in both languages. `dspark-lab paper --docs-only`
rewrites the pages from the JSON; tests/test_paper.py checks that the committed pages are what this writes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dspark_mini.jsonlimits import MAX_DATA_BYTES, JSONLimitError, read_json

from ..text import Texts, lang_string, lang_table
from .figures import CURVES, DRAFTER_LABEL, PAPER_LABEL, png_name
from .texts import T, is_toy, lab_domain, lab_domains, paper_domain, paper_pair

ITEMS = ("table1", "fig2", "fig3", "fig4", "fig5", "fig6", "fig7", "fig8", "appendix_a")
PAGES = lang_string("paper_page", "pages")

P = Texts(lang_table("paper_page", "p"), "paper docs")


def fmt(x: Any, digits: int = 2) -> str:
    """A number as the pages print it (— for a position never reached)."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    return f"{x:.{digits}f}"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out + [""]


def image(item: str, lang: str, pictures: Path | None, docs: Path) -> list[str]:
    if pictures is None or not (pictures / png_name(item, lang)).is_file():
        return []
    rel = os.path.relpath(pictures / png_name(item, lang), docs).replace(os.sep, "/")
    return [f"![{item}]({rel})", ""]


SECTION_WORDS = lang_table("messages", "paper")  # the paper's section words, translated in paper_values' names


def section(item: dict[str, Any], lang: str) -> str:
    """ "Paper: §4.2, Table 1." (the section as paper_values.json names it; its words in the page's language)."""
    name = item["section"]
    for key in ("table", "figure", "appendix"):
        name = name.replace(SECTION_WORDS[key]["en"], SECTION_WORDS[key][lang])
    return P("paper_section", lang, section=name)


def page_domains(domains: Sequence[str], lang: str) -> list[str]:
    """The lab's domains beside the paper's: the one place the page states which lab domain stands beside which
    paper domain (sums ↔ math, code ↔ code, en and vi ↔ chat; texts.PAPER_DOMAIN_OF)."""
    rows = [
        [
            f"{lab_domain(d, lang)} (`{d}`)",
            paper_domain(paper_pair(d), lang) if paper_pair(d) else "—",
            T(f"why_{d}", lang) if f"why_{d}" in T and paper_pair(d) else "—",
        ]
        for d in domains
    ]
    return [
        P("h_domains", lang),
        "",
        P("domains_note", lang),
        "",
        *table([P("lab_domain", lang), P("paper_domain", lang), P("in_common", lang)], rows),
    ]


def page_table1(it: dict[str, Any], lang: str) -> list[str]:
    lab, paper = it["lab"], it["paper"]
    domains = lab_domains(next(iter(lab["tau"].values())))
    head = [
        P("drafter", lang),
        *(lab_domain(d, lang) for d in domains),
        P("mean", lang),
        f"{P('mean', lang)} ({P('greedy', lang)})",
    ]
    rows = [
        [
            f"{DRAFTER_LABEL[n]} ({P('lab', lang)})",
            *(fmt(t[d]["t1"]) for d in domains),
            fmt(t["mean"]["t1"]),
            fmt(t["mean"]["greedy"]),
        ]
        for n, t in lab["tau"].items()
    ]
    by_target = paper["domain_means"]
    paper_domains = lab_domains(next(iter(next(iter(by_target.values())).values())))
    paper_head = [P("drafter", lang), *(paper_domain(d, lang) for d in paper_domains), P("mean", lang)]
    paper_rows = [
        [f"{PAPER_LABEL[n]} ({P('paper', lang)}, {target})", *(fmt(m[d]) for d in paper_domains), fmt(m["mean"])]
        for target, by in by_target.items()
        for n, m in by.items()
    ]
    ratio_rows = [
        [r, fmt(v["t1"]), fmt(v["greedy"]), *(fmt(paper["ratios"][t][r]) for t in paper["ratios"])]
        for r, v in lab["ratios"].items()
    ]
    ratio_head = [
        P("ratio", lang),
        f"{P('lab', lang)} T = 1",
        f"{P('lab', lang)} {P('greedy', lang)}",
        *(f"{P('paper', lang)} {t}" for t in paper["ratios"]),
    ]
    return [
        P("h_table1", lang),
        "",
        section(it, lang),
        P("table1_note", lang),
        "",
        *table(head, rows),
        *table(paper_head, paper_rows),
        *table(ratio_head, ratio_rows),
    ]


def page_fig2(it: dict[str, Any], lang: str) -> list[str]:
    lab, paper = it["lab"]["cond_accept"]["t1"], it["paper"]["cond_accept"]
    domains = lab_domains(lab)
    k = len(lab[domains[0]]["dspark"])
    out = [P("h_fig2", lang), "", section(it, lang), P("fig2_note", lang, k=k), ""]
    n = max(k, max(len(v) for d in paper.values() for v in d.values()))
    head = [P("drafter", lang), *(str(i) for i in range(1, n + 1))]
    for d in domains:
        pd = paper_pair(d)
        rows = [
            [
                f"{DRAFTER_LABEL[m]} ({P('lab', lang)})",
                *(fmt(c) for c in lab[d][m]),
                *("" for _ in range(n - len(lab[d][m]))),
            ]
            for m in ("dspark", "dflash", "eagle3")
        ]
        rows += [
            [f"{PAPER_LABEL[m]} ({P('paper', lang)}, {paper_domain(pd, lang)})", *(fmt(c, 3) for c in cs)]
            for m, cs in (paper[pd].items() if pd in paper else ())
        ]
        pair = f" · {P('paper', lang)}: {paper_domain(pd, lang)}" if pd in paper else ""
        out += [f"**{lab_domain(d, lang)}**{pair}", "", *table(head, rows)]
    return out


def dflash_whose(lab: dict[str, Any], lang: str) -> str:
    """Whose depth the DFlash of Figures 3 and 4 has: the shipped DFlash's (`dflash_depth` in the record) or, in
    records written before it was recorded, the lab's."""
    return P("depth_shipped" if "dflash_depth" in lab else "depth_lab", lang)


def not_shipped(it: dict[str, Any], lang: str) -> list[str]:
    """Why a variant of Figures 3 and 4 has another τ than the shipped drafter of its depth and block in Table 1."""
    prompts = it.get("conditions", {}).get("budget", {}).get("draft", {}).get("distill_prompts")
    return [] if prompts is None else [P("variants_not_shipped", lang, prompts=f"{prompts:,}"), ""]


def page_fig3(it: dict[str, Any], lang: str) -> list[str]:
    lab, paper = it["lab"], it["paper"]
    runs = lab["runs"]
    first = next(iter(runs.values()))
    out = [
        P("h_fig3", lang),
        "",
        section(it, lang),
        P(
            "fig3_note",
            lang,
            layers=", ".join(str(x) for x in lab["layers"]),
            depth=lab.get("dflash_depth", lab["depth"]),
            whose=dflash_whose(lab, lang),
            block=lab["block"],
            hash=f"`{first['target_cache_hash']}`",
            steps=first["steps"],
            tokens=f"{first['tokens_seen']:,}",
        ),
        "",
    ]
    out += not_shipped(it, lang)
    domains = lab_domains(next(iter(lab["tau"].values())))
    head = [
        "",
        *(lab_domain(d, lang) for d in domains),
        f"{P('mean', lang)} T = 1",
        f"{P('mean', lang)} {P('greedy', lang)}",
        P("params", lang),
    ]
    rows = [
        [
            n,
            *(fmt(t[d]["t1"]) for d in domains),
            fmt(t["mean"]["t1"]),
            fmt(t["mean"]["greedy"]),
            f"{runs[n]['draft_parameters']:,}",
        ]
        for n, t in lab["tau"].items()
    ]
    out += table(head, rows)
    out += table(
        [P("paper", lang), *paper["columns"]],
        [[P("mean", lang), *(fmt(paper["column_means"][c]) for c in paper["columns"])]],
    )
    df = lab.get("dflash_depth", lab["depth"])
    two, base = lab["tau"].get("dspark_2L"), lab["tau"][f"dflash_{df}L"]
    cols = paper["column_means"]
    if two is not None:
        out += [
            P(
                "two_beats",
                lang,
                depth=df,
                lab=P("yes" if two["mean"]["t1"] > base["mean"]["t1"] else "no", lang),
                paper=P("yes" if cols["dspark_2_layers"] > cols["dflash_5_layers"] else "no", lang),
            ),
            "",
        ]
    return out


def page_fig4(it: dict[str, Any], lang: str) -> list[str]:
    lab, paper = it["lab"], it["paper"]
    depth = lab["depth"]
    note = P("fig4_note", lang, depth=depth, dflash=lab.get("dflash_depth", depth), whose=dflash_whose(lab, lang))
    out = [P("h_fig4", lang), "", section(it, lang), note, "", *not_shipped(it, lang)]
    domains = lab_domains(lab["gain_percent"][str(lab["blocks"][0])]["t1"])
    head = [P("block_k", lang), "τ DSpark", "τ DFlash", *(f"{lab_domain(d, lang)} %" for d in domains)]
    rows = [
        [
            k,
            fmt(lab["tau"][str(k)]["dspark"]["mean"]["t1"]),
            fmt(lab["tau"][str(k)]["dflash"]["mean"]["t1"]),
            *(fmt(lab["gain_percent"][str(k)]["t1"][d], 1) for d in domains),
        ]
        for k in lab["blocks"]
    ]
    out += table(head, rows)
    g = paper["gain_over_dflash_percent"]
    out += table(
        [P("paper_length", lang), *(f"{paper_domain(d, lang)} %" for d in g)],
        [[n, *(g[d][i] for d in g)] for i, n in enumerate(paper["lengths"])],
    )
    return out


def page_fig5(it: dict[str, Any], lang: str) -> list[str]:
    lab, paper = it["lab"], it["paper"]
    out = [P("h_fig5", lang), "", section(it, lang), P("fig5_note", lang), ""]
    sweep = lab["sweep"]
    domains = lab_domains(sweep)
    ends = (0, len(sweep[domains[0]]) - 1)

    def head(who: str, at: Sequence[str]) -> list[str]:
        return [
            who,
            *(f"{P('verified', lang)}, {P('threshold', lang)} {t}" for t in at),
            *(f"{P('verify_rate', lang)}, {P('threshold', lang)} {t}" for t in at),
        ]

    rows = [  # one row a lab domain
        [
            lab_domain(d, lang),
            *(fmt(sweep[d][i]["verified_per_round"]) for i in ends),
            *(f"{100 * sweep[d][i]['verify_rate']:.1f} %" for i in ends),
        ]
        for d in domains
    ]
    vr = paper["verify_rate_percent"]
    paper_rows = [  # one row a paper domain, at the paper's thresholds 0.0 and 0.9
        [
            paper_domain(d, lang),
            fmt(paper["verified_at_0"]),
            fmt(paper["verified_at_0_9"][d]),
            f"{vr[d][0]} %",
            f"{vr[d][1]} %",
        ]
        for d in vr
    ]
    yes = lambda flags: P("yes" if all(flags.values()) else "no", lang)  # noqa: E731
    return (
        out
        + table(head(P("lab_domain", lang), [fmt(sweep[domains[0]][i]["threshold"], 1) for i in ends]), rows)
        + table(head(P("paper_domain", lang), ["0.0", "0.9"]), paper_rows)
        + [P("monotone", lang, v=yes(lab["verified_non_increasing"]), r=yes(lab["verify_rate_non_decreasing"])), ""]
    )


def page_fig6(it: dict[str, Any], lang: str) -> list[str]:
    lab, paper = it["lab"], it["paper"]
    out = [P("h_fig6", lang), "", section(it, lang), P("fig6_note", lang, n=lab.get("rounds", 0)), ""]
    rows = [[r["position"], fmt(100 * r["ece_raw"], 1), fmt(100 * r["ece_sts"], 1)] for r in lab.get("ece", [])]
    out += table(
        [P("position", lang), f"{P('lab', lang)} {P('before', lang)}", f"{P('lab', lang)} {P('after', lang)}"], rows
    )
    prow = [
        [p, fmt(b, 1), fmt(a, 1)]
        for p, b, a in zip(paper["positions"], paper["ece_before_percent"], paper["ece_after_percent"], strict=True)
    ]
    return out + table(
        [P("position", lang), f"{P('paper', lang)} {P('before', lang)}", f"{P('paper', lang)} {P('after', lang)}"], prow
    )


def page_fig7(it: dict[str, Any], lang: str) -> list[str]:
    lab, paper = it["lab"], it["paper"]
    sim = lab["simulation"]
    out = [
        P("h_fig7", lang),
        "",
        section(it, lang),
        P("fig7_note", lang, r0=sim["requests"][0], r1=sim["requests"][-1], table=f"`{sim['sps_table']}`"),
        "",
    ]
    plo, phi = paper["per_user_gain_at_matched_throughput_percent"]
    for policy in ("dspark", "dspark-async"):
        name = curve_label(f"dspark/{policy}", lang)
        rng = lab["gain_range_percent"][policy]
        out.append(
            P("no_overlap", lang, name=name)
            if rng is None
            else P("gain_line", lang, name=name, lo=fmt(rng[0], 0), hi=fmt(rng[1], 0), plo=plo, phi=phi)
        )
    return out + [""]


def page_fig8(it: dict[str, Any], lang: str) -> list[str]:
    lab, paper = it["lab"], it["paper"]
    lo, hi = paper["dspark_budget_low_load"]
    out = [
        P("h_fig8", lang),
        "",
        section(it, lang),
        P(
            "fig8_note",
            lang,
            lo=lo,
            hi=hi,
            below=paper["low_load_below_requests"],
            high=paper["dspark_budget_high_load"],
            mtp=paper["mtp1_budget"],
        ),
        "",
    ]
    budget = lab["budget"]
    names = list(budget)
    rs = [p["requests"] for p in budget[names[0]]]
    rows = [[r, *(fmt(budget[n][i]["verify_budget"]) for n in names)] for i, r in enumerate(rs)]
    return out + table(["R", *(curve_label(n, lang) for n in names)], rows)


def curve_label(name: str, lang: str) -> str:
    """A load curve's name as the figures label it (DSpark + Algorithm 1, …, MTP-1)."""
    return T(dict(CURVES)[name], lang)


def page_appendix(it: dict[str, Any], lang: str) -> list[str]:
    lab, paper = it["lab"], it["paper"]
    vec = lambda xs, d=3: "(" + ", ".join(fmt(x, d) for x in xs) + ")"  # noqa: E731
    out = [
        P("h_appendix", lang),
        "",
        section(it, lang),
        P(
            "appendix_note",
            lang,
            c1=paper["c1"],
            sps=vec(paper["steps_per_s"], 2),
            pt=vec(paper["p_t"], 1),
            pd=vec(paper["p_d"], 1),
        ),
        "",
    ]
    for tok, br in lab["branches"].items():
        out.append(
            P(
                "theta_line",
                lang,
                tok=tok,
                c2=fmt(br["c2"], 1),
                lab=vec(br["theta"]),
                paper=vec([*paper["theta"], paper["theta2"][tok]]),
            )
        )
    for policy, key, want in (("dspark", "early", "exact_output"), ("retrospective", "retro", "retrospective_output")):
        p = lab["policies"][policy]
        out.append(
            P(
                "policy_line",
                lang,
                policy=P(key, lang),
                la=p["verify_len"]["A"],
                lb=p["verify_len"]["B"],
                exact=vec(p["exact"], 2),
                sampled=vec(p["sampled"], 3),
                n=f"{p['samples']:,}",
                paper=vec(paper[want], 2),
            )
        )
    return out + [""]


PAGES_OF = {
    "table1": page_table1,
    "fig2": page_fig2,
    "fig3": page_fig3,
    "fig4": page_fig4,
    "fig5": page_fig5,
    "fig6": page_fig6,
    "fig7": page_fig7,
    "fig8": page_fig8,
    "appendix_a": page_appendix,
}


def read_items(folder: Path) -> dict[str, dict[str, Any]]:
    """runs/paper/*.json, every item; a missing one is an error naming the file."""
    out = {}
    for name in ITEMS:
        path = folder / f"{name}.json"
        if not path.is_file():
            raise ValueError(f"{path} is missing: allowed a folder written by `dspark-lab paper`")
        try:  # a file from the run folder: bounded (size, nesting, integer digits) before it is parsed
            out[name] = read_json(path, MAX_DATA_BYTES, regular_only=True)
        except JSONLimitError as e:
            raise ValueError(f"{path} is not readable run data: it {e}") from None
    return out


def render(items: dict[str, dict[str, Any]], lang: str, pictures: Path | None, docs: Path) -> str:
    """One page (en or vi) from the items."""
    c = items["table1"]["conditions"]
    domains = lab_domains(next(iter(items["table1"]["lab"]["tau"].values())))
    weights = ", ".join(
        f"{k.split('.')[0]} `{v}`" for k, v in c["weights_sha256"].items() if k.endswith(".safetensors")
    )
    lines = [
        P("title", lang),
        "",
        P("back", lang),
        "",
        P(
            "intro_toy" if is_toy(domains) else "intro",
            lang,
            vocab=f"{c['model']['vocab_size']:,}",
            layers=c["model"]["draft_layers"],
        ),
        "",
        P(
            "run",
            lang,
            budget=c["budget"]["name"],
            seed=c["seed"],
            jobs=c["jobs"],
            seconds=c["run_seconds"],
            cpu=c["cpu"],
            torch=c["torch"],
            weights=weights,
        ),
        *(
            [
                "",
                P(
                    "small_budget",
                    lang,
                    budget=c["budget"]["name"],
                    steps=c["budget"]["draft"]["steps"],
                    prompts=c["budget"]["prompts"],
                ),
            ]
            if c["budget"]["name"] != "full"
            else []
        ),
        "",
        *page_domains(domains, lang),
    ]
    for name in ITEMS:
        lines += PAGES_OF[name](items[name], lang) + image(name, lang, pictures, docs)
    return "\n".join(lines).rstrip() + "\n"


def write_pages(folder: Path, docs: Path) -> list[Path]:
    """docs/paper.md and docs/paper.vi.md from the JSON in `folder` (its PNGs linked when present)."""
    from dspark_mini.files import write_atomic

    items = read_items(folder)
    docs.mkdir(parents=True, exist_ok=True)
    paths = []
    for lang, page in PAGES.items():
        path = docs / page
        write_atomic(path, render(items, lang, folder, docs).encode("utf-8"))
        paths.append(path)
    return paths
