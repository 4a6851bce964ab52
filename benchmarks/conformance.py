"""Does accuscope conclude what the real tool concludes? Every case of the conformance corpus (files
written by tpu-mlir, msprobe, Polygraphy, OpenVINO ... with each tool's own verdict: tests/support/conformance.py
says the layout and the rules), run through `accuscope compare`, held against the tool's verdict and
its per-row results. Prints, per tool: cases, verdicts that agree, rows that agree, each explained
departure (why accuscope is right there) and each disagreement (a bug); the last line:

    conformance: verdicts A/N · rows B/M · departures explained C/D · tools K

A: verdicts that agree, or differ only by explained departures; D: every row that differs. Exit 1
when anything disagrees.

    python benchmarks/conformance.py [--committed-only] [--tool NAME] [--case ID] [--quiet]

The committed cases (tests/fixtures/conformance/*/cases.json) are what CI holds; the cache
(~/.cache/accuscope-tests/conformance/, built by each tool's make_corpus.py) holds the rest.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import conformance  # noqa: E402


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--committed-only", action="store_true", help="the committed cases only (what CI has)")
    ap.add_argument("--tool", help="one tool's cases")
    ap.add_argument("--case", help="one case (its id)")
    ap.add_argument("--quiet", action="store_true", help="only the totals and the disagreements")
    args = ap.parse_args(argv)
    cases = [c for c in conformance.load_cases(args.committed_only)
             if (args.tool is None or c.tool == args.tool) and (args.case is None or c.id == args.case)]
    if not cases:
        print("no case found (build the corpus: tests/fixtures/conformance/*/make_corpus.py)")
        return 1
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, case in enumerate(cases):
            outcomes.append(conformance.run(case, Path(tmp) / f"t{k}"))
    for tool in sorted({o.case.tool for o in outcomes}):
        mine = [o for o in outcomes if o.case.tool == tool]
        sub = conformance.account(mine).replace("conformance:", f"{tool}:").rsplit(" · tools", 1)[0]
        print(f"{sub} · cases {len(mine)}")
        for o in mine:
            mark = "=" if o.verdict_agrees else ("~" if o.verdict_explained else "✗")
            if args.quiet and mark != "✗" and not o.disagreements:
                continue
            print(f"  {mark} {o.case.id}: tool {o.case.verdict}, accuscope {o.verdict} (exit {o.exit_code}) · rows "
                  f"{o.rows_agree}/{o.rows_total}")
            if not args.quiet:
                for d in o.departures[:5]:
                    print(f"      departure: {d}")
                if len(o.departures) > 5:
                    print(f"      … {len(o.departures) - 5} more departures")
            for d in o.disagreements[:10]:
                print(f"      DISAGREES: {d}")
            if len(o.disagreements) > 10:
                print(f"      … {len(o.disagreements) - 10} more disagreements")
    print(conformance.account(outcomes))
    return 1 if any(o.disagreements or not (o.verdict_agrees or o.verdict_explained) for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
