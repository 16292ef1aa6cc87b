"""Does `make weights` give the same bytes again? A set rebuilt elsewhere (a clean clone's lab/weights) set beside the
shipped one, file by file: docs/rebuild.json (the README quotes it).

    git clone <repo> /tmp/again && cd /tmp/again && make weights      # ≈ 65 min on 2 quiet cores
    python bench/rebuild_check.py --rebuilt /tmp/again/lab/weights --load "quiet" --out docs/rebuild.json

Each weight file's sha256 in both sets (from the files themselves, not the manifests) and whether they are equal;
the wall seconds of both runs (`train all`'s own report.json: target, cache, drafters, speed, total) with how
loaded the machine was (--load, said by whoever ran it: the shipped run's is --shipped-load), and the CPU.
report.json and manifest.json are not compared: report.json holds the runs' times, which differ run to run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dspark_mini.files import write_atomic  # noqa: E402
from lab.evaluation.conditions import cpu_model  # noqa: E402
from lab.weights import WEIGHTS_DIR, file_sha256, read_manifest  # noqa: E402


def compare(shipped: Path, rebuilt: Path) -> dict[str, dict[str, str | bool]]:
    """file name → {shipped, rebuilt (sha256), equal} for every weight file the shipped manifest lists."""
    if not rebuilt.is_dir():
        raise ValueError(f"--rebuilt {rebuilt} is not a folder: allowed the lab/weights of a second `make weights`")
    manifest = read_manifest(shipped)
    if manifest is None:
        raise ValueError(f"{shipped} has no manifest.json: allowed a weights folder `train all` wrote")
    out = {}
    for name in sorted(manifest):
        if not name.endswith(".safetensors"):
            continue
        other = rebuilt / name
        if not other.is_file():
            raise ValueError(f"--rebuilt {rebuilt} has no {name}: allowed a folder `make weights` wrote whole")
        a, b = file_sha256(shipped / name), file_sha256(other)
        out[name] = {"shipped": a, "rebuilt": b, "equal": a == b}
    return out


def seconds(folder: Path) -> dict[str, float]:
    return json.loads((folder / "report.json").read_text(encoding="utf-8"))["seconds"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rebuilt", type=Path, required=True, help="the lab/weights folder of a second `make weights`")
    p.add_argument("--load", required=True, help="how loaded the machine was during the second run, in words")
    p.add_argument("--shipped-load", default="other jobs also running", help="the same for the shipped run")
    p.add_argument("--out", type=Path, default=Path("docs/rebuild.json"))
    args = p.parse_args(argv)
    try:
        files = compare(WEIGHTS_DIR, args.rebuilt)
        record = {
            "files": files,
            "identical": all(f["equal"] for f in files.values()),
            "runs": {
                "shipped": {"seconds": seconds(WEIGHTS_DIR), "load": args.shipped_load},
                "second": {"seconds": seconds(args.rebuilt), "load": args.load},
            },
            "cpu": cpu_model(),
        }
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_atomic(args.out, (json.dumps(record, indent=1, ensure_ascii=False) + "\n").encode())
    same = sum(f["equal"] for f in files.values())
    print(f"wrote {args.out}: {same} of {len(files)} weight files identical")
    return 0 if record["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
