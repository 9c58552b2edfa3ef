"""How often `dlperf compare` says each verdict on repeated runs of the same code, and on a real change.

    python benchmarks/compare_false_alarms.py A                # A: a results folder with many repeats a case
    python benchmarks/compare_false_alarms.py A B              # B: the same code run again later (or a change)
    python benchmarks/compare_false_alarms.py A B --draws 2000 --repeats 3 --threshold 0.05

With one folder, each draw takes 2 x --repeats distinct repeats of a case at random and compares one half with the
other; with two, --repeats of A against --repeats of B. Each compare is verdict.compare_repeats on the repeats'
timed windows, as `dlperf compare` calls it. Prints, per case, the repeats available, the fraction of draws giving
each verdict, and the false-alarm fraction (slower or faster) with its binomial 95 % interval. The draws reuse a
handful of repeats, so they are not independent: the interval is a floor on the uncertainty, and the fraction
estimates what a user comparing such folders would see, machine drift between the folders included.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from dlperf.reporting.compare import repeats
from dlperf.reporting.verdict import VERDICTS, compare_repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", type=Path)
    parser.add_argument("new", type=Path, nargs="?")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="repeats a side in each compare")
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    base = repeats(args.base)
    new = repeats(args.new) if args.new else base
    k = args.repeats
    print(f"{args.draws} draws of {k} vs {k} repeats, threshold {args.threshold:.0%}")
    print(f"{'case':<40} {'repeats':>8} " + " ".join(f"{v:>12}" for v in VERDICTS) + "  false alarms (95 % CI)")
    for key in sorted(base.keys() & new.keys()):
        b, n = base[key].windows, new[key].windows
        if (len(b) < 2 * k and not args.new) or min(len(b), len(n)) < k:
            print(f"{' '.join(key):<40} too few repeats ({len(b)}, {len(n)})")
            continue
        counts: Counter[str] = Counter()
        for _ in range(args.draws):
            if args.new:
                left = [b[i] for i in rng.choice(len(b), k, replace=False)]
                right = [n[i] for i in rng.choice(len(n), k, replace=False)]
            else:
                picked = rng.choice(len(b), 2 * k, replace=False)
                left, right = [b[i] for i in picked[:k]], [b[i] for i in picked[k:]]
            counts[compare_repeats(left, right, args.threshold).verdict] += 1
        alarms = counts["slower"] + counts["faster"]
        ci = binomtest(alarms, args.draws).proportion_ci()
        shares = " ".join(f"{counts[v] / args.draws:>12.1%}" for v in VERDICTS)
        print(
            f"{' '.join(key):<40} {len(b):>3}/{len(n):<4} {shares}  "
            f"{alarms / args.draws:.1%} [{ci.low:.1%}, {ci.high:.1%}]"
        )


if __name__ == "__main__":
    main()
