"""Letter bias of a small model and what position debiasing does to it, on the demo.

    python bench/letter_bias.py [--model smollm2]

Runs the workflow on the demo (under results/bench/letter_bias/) with `blind` (structured JSON answer),
`blind_letter` (arg-max of the four letters' first-token log-probabilities) and `blind_debiased` (the same
summed over the four cyclic orderings of the options), then prints, side by side, each run's predicted-letter
distribution, its largest letter share, a chi-square test against the uniform distribution, accuracy, and
the total-variation distance between the letter and debiased distributions. Model calls are cached under the
work folder, so a second invocation only re-prints.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
from scipy.stats import chisquare  # installed with the dev extra

REPO = Path(__file__).resolve().parents[1]
LETTERS = "ABCD"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--workdir", default=str(REPO / "results" / "bench" / "letter_bias"))
    args = parser.parse_args()
    workdir = Path(args.workdir)
    methods = ["blind", "blind_letter", "blind_debiased"]
    overrides = f"method=[{','.join(methods)}] model=[{args.model}]"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), "-c2",
                    "--quiet", "--config", f"overrides={overrides}"], check=True, env=env)

    positions = pl.read_parquet(workdir / "results/tables/answer_positions.parquet")
    main_table = pl.read_parquet(workdir / "results/tables/main.parquet")
    truth = positions.filter(pl.col("method") == "(ground truth)").row(0, named=True)
    print(f"ground truth letters: {[truth[letter] for letter in LETTERS]} (n={truth['n']})\n")
    print(f"{'run':<16} {'A':>4} {'B':>4} {'C':>4} {'D':>4} {'none':>5} {'max share':>10} {'chi2 p':>9} {'Total':>6}")
    distributions = {}
    for method in methods:
        row = positions.filter((pl.col("method") == method) & (pl.col("model") == args.model)).row(0, named=True)
        counts = [row[letter] for letter in LETTERS]
        distributions[method] = [c / max(1, sum(counts)) for c in counts]
        total = main_table.filter(pl.col("method") == method)["total"][0]
        p_value = chisquare(counts).pvalue if sum(counts) else float("nan")
        print(f"{method:<16} {counts[0]:>4} {counts[1]:>4} {counts[2]:>4} {counts[3]:>4} {row['none']:>5} "
              f"{max(counts) / max(1, sum(counts)):>10.2f} {p_value:>9.2g} {total:>6}")
    tv = 0.5 * sum(abs(a - b) for a, b in zip(distributions["blind_letter"], distributions["blind_debiased"]))
    print(f"\ntotal-variation distance, blind_letter vs blind_debiased: {tv:.2f}")


if __name__ == "__main__":
    main()
