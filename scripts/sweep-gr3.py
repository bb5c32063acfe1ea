#!/usr/bin/env python3
"""The GR3 paper's service-error sweep (Caprita et al., USENIX ATC 2005, section 5):
experiments S1 (one client holds 10% of the total weight, Figs. 4-9) and S2
(50%, text only), on one CPU, over the paper's 45 (N, total weight) pairs,
N = 32 .. 8192 and total weight 16384 .. 262144 (powers of two: 9 x 5), with
2500 random weight sets per pair.

Each weight set is one run of our scenario layout (scenarios/papers/gr3/):
a class of N clients with `weight = { dist = "heavy", percent, total }` (the
heavy client first, the others a uniformly random composition of the rest),
quantum 1 ms, and a horizon of `total` quanta: the paper runs each schedule
until it repeats, which we do not; docs/ALGORITHMS.md (GR3) says what that
changes. Weight set k of a pair is the run with seed `--seed + k`.

Writes OUT/runs.csv (one row per run: experiment, N, total weight, seed,
scheduler, the run's service error range in quanta), OUT/pairs.csv (the
worst case per pair and scheduler) and OUT/summary.md (the worst case per
experiment and scheduler beside the paper's figure). Runs on all local
cores by default, or on Ray (`--backend ray [--address ADDR]`).

    scripts/sweep-gr3.py --out target/sweep-gr3              # the full sweep: about an hour on 2 cores
    scripts/sweep-gr3.py --sets 100 --out target/sweep-gr3   # 100 sets per pair
    scripts/sweep-gr3.py --ci                                # 2 sets per pair: under 2 min on 2 cores
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pandas as pd

import propshare

N_VALUES = [32 << k for k in range(9)]  # 32 .. 8192
TOTALS = [16384 << k for k in range(5)]  # 16384 .. 262144
EXPERIMENTS = {"S1": 10.0, "S2": 50.0}

# The paper's worst-case service error, quanta (min, max), per experiment and
# scheduler; None where the paper gives no number (S2 gives GR3's only).
PAPER = {
    ("S1", "gr3"): ((-2.5, 3.0), "Fig. 9"),
    ("S1", "wfq"): ((-1.0, 819.0), "Fig. 5"),
    ("S1", "sfq"): ((-819.0, 1.0), "Fig. 6"),
    ("S1", "wf2q"): ((-1.0, 1.0), "section 5 text"),
    ("S1", "vtrr"): ((-2129.0, 10079.0), "Fig. 7"),
    ("S1", "wrr"): ((-12067.0, 23593.0), "Fig. 4"),
    ("S1", "srr"): ((-369.0, 369.0), "Fig. 8"),
    ("S2", "gr3"): ((-2.3, 4.6), "section 5 text"),
}


def scenario(experiment: str, n: int, total: int, chunk: int, seed: int) -> propshare.Scenario:
    """`chunk` weight sets of one pair: runs with seeds seed .. seed + chunk."""
    return propshare.Scenario.from_dict(
        {
            "name": f"gr3-{experiment.lower()}-n{n}-w{total}",
            "schedulers": ["gr3"],
            "seed": seed,
            "repeat": chunk,
            "machine": {"cpus": 1, "quantum": "1ms", "horizon": f"{total}ms"},
            "class": [{"prefix": "c", "count": n,
                       "weight": {"dist": "heavy", "percent": EXPERIMENTS[experiment], "total": total}}],
        }
    )


def run(task):
    """One task: `chunk` weight sets of one pair on one scheduler."""
    scn = scenario(task["experiment"], task["n"], task["total"], task["chunk"], task["seed"])
    runs = propshare.simulate(scn, schedulers=[task["scheduler"]], lag=False).runs
    return runs[["scheduler", "seed", "service_error_min", "service_error_max"]]


def grid(experiments, ns, totals, schedulers, sets, chunk, seed):
    """One task per (experiment, pair, scheduler, chunk of sets); the big
    pairs first, so that the pool ends on small tasks."""
    tasks = []
    for e in experiments:
        for n in ns:
            for total in totals:
                for s in schedulers:
                    for first in range(0, sets, chunk):
                        tasks.append(dict(experiment=e, n=n, total=total, scheduler=s,
                                          seed=seed + first, chunk=min(chunk, sets - first)))
    tasks.sort(key=lambda t: -t["total"] * t["chunk"])
    return tasks


def summarise(runs: pd.DataFrame, out: str, header: str) -> str:
    pairs = (runs.groupby(["experiment", "n", "total", "scheduler"])
             .agg(sets=("seed", "count"), min=("service_error_min", "min"), max=("service_error_max", "max"))
             .reset_index())
    pairs.to_csv(os.path.join(out, "pairs.csv"), index=False)
    lines = [header, "",
             "| experiment | scheduler | pairs | sets per pair | ours: min .. max (quanta) | paper | source "
             "| runs below / above the paper's range |",
             "|---|---|---:|---:|---|---|---|---|"]
    for (e, s), g in pairs.groupby(["experiment", "scheduler"]):
        paper, source = PAPER.get((e, s), (None, ""))
        lo, hi = g["min"].min(), g["max"].max()
        sets = f"{g.sets.min()}" if g.sets.min() == g.sets.max() else f"{g.sets.min()}-{g.sets.max()}"
        paper_text = f"{paper[0]:+.1f} .. {paper[1]:+.1f}" if paper else "-"
        mine = runs[(runs.experiment == e) & (runs.scheduler == s)]
        outside = (f"{(mine.service_error_min < paper[0]).sum()} / {(mine.service_error_max > paper[1]).sum()} "
                   f"of {len(mine)}" if paper else "-")
        lines.append(f"| {e} | {s} | {len(g)} | {sets} | {lo:+.2f} .. {hi:+.2f} | {paper_text} | {source} "
                     f"| {outside} |")
    lines += ["", "Worst case per N (over its totals), min .. max:", ""]
    for (e, s), g in pairs.groupby(["experiment", "scheduler"]):
        per_n = g.groupby("n").agg(lo=("min", "min"), hi=("max", "max"))
        lines.append(f"* {e} {s}: " + ", ".join(f"N = {n}: {r.lo:+.2f} .. {r.hi:+.2f}" for n, r in per_n.iterrows()))
    lines += ["", "Worst pairs (where each extreme was reached):", ""]
    for (e, s), g in pairs.groupby(["experiment", "scheduler"]):
        lo, hi = g.loc[g["min"].idxmin()], g.loc[g["max"].idxmax()]
        lines.append(f"* {e} {s}: min {lo['min']:+.3f} at N = {lo.n}, total {lo.total}; "
                     f"max {hi['max']:+.3f} at N = {hi.n}, total {hi.total}")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as f:
        f.write(text)
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ci", action="store_true",
                   help="reduced grid for CI: all 45 pairs, 2 weight sets each, S1 and S2")
    p.add_argument("--experiments", default="S1,S2", help="S1, S2 or both (default both)")
    p.add_argument("--n", default=None, help="comma-separated N values (default: the paper's 9)")
    p.add_argument("--totals", default=None, help="comma-separated total weights (default: the paper's 5)")
    p.add_argument("--schedulers", default="gr3", help="comma-separated schedulers (default gr3)")
    p.add_argument("--sets", type=int, default=2500, help="weight sets per pair (default 2500, the paper's)")
    p.add_argument("--chunk", type=int, default=25, help="weight sets per task (default 25)")
    p.add_argument("--seed", type=int, default=1, help="seed of the first weight set (default 1)")
    p.add_argument("--backend", default="local", choices=["local", "process", "ray"])
    p.add_argument("--address", default=None, help="Ray cluster address (default: a local Ray)")
    p.add_argument("--workers", type=int, default=None, help="local workers (default: every core)")
    p.add_argument("--out", default="target/sweep-gr3", help="output folder (default target/sweep-gr3)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--merge", nargs="+", metavar="DIR",
                   help="run nothing: summarise the runs.csv of earlier sweeps (batches of seeds) into --out")
    a = p.parse_args(argv)
    if a.merge:
        runs = pd.concat([pd.read_csv(os.path.join(d, "runs.csv")) for d in a.merge], ignore_index=True)
        dup = runs.duplicated(["experiment", "n", "total", "scheduler", "seed"])
        if dup.any():
            p.error(f"--merge: {dup.sum()} runs appear twice (overlapping seeds)")
        os.makedirs(a.out, exist_ok=True)
        runs.to_csv(os.path.join(a.out, "runs.csv"), index=False)
        seeds = runs.groupby(["experiment", "n", "total", "scheduler"]).seed.agg(["min", "max", "count"])
        header = (f"GR3 service-error sweep, merged from {len(a.merge)} batches: {len(runs)} runs, "
                  f"{seeds['count'].min()}-{seeds['count'].max()} sets per pair (seeds {seeds['min'].min()}.."
                  f"{seeds['max'].max()}), horizon = total weight in quanta")
        print(summarise(runs, a.out, header))
        return 0
    experiments = [e.strip().upper() for e in a.experiments.split(",")]
    for e in experiments:
        if e not in EXPERIMENTS:
            p.error(f"--experiments: {e!r} is not S1 or S2")
    ns = [int(x) for x in a.n.split(",")] if a.n else N_VALUES
    totals = [int(x) for x in a.totals.split(",")] if a.totals else TOTALS
    sets = a.sets
    if a.ci:
        sets = 2
    schedulers = [s.strip() for s in a.schedulers.split(",") if s.strip()]
    for s in schedulers:
        propshare.check_scheduler(s)
    if sets < 1 or a.chunk < 1:
        p.error("--sets and --chunk must be at least 1")
    os.makedirs(a.out, exist_ok=True)
    tasks = grid(experiments, ns, totals, schedulers, sets, a.chunk, a.seed)
    start = time.monotonic()
    runs = propshare.sweep(tasks, run=run, backend=a.backend, workers=a.workers, address=a.address,
                           progress=not a.quiet)
    wall = time.monotonic() - start
    runs = runs.drop(columns=["chunk"]).sort_values(["experiment", "n", "total", "scheduler", "seed"])
    runs.to_csv(os.path.join(a.out, "runs.csv"), index=False)
    header = (f"GR3 service-error sweep: {len(runs)} runs, {len(ns)} N x {len(totals)} totals, {sets} sets per pair, "
              f"seeds {a.seed}..{a.seed + sets - 1}, horizon = total weight in quanta; {a.backend} backend, "
              f"{wall:.0f} s wall on {a.workers or os.cpu_count()} workers")
    print(summarise(runs, a.out, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
