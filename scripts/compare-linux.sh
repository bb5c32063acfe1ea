#!/bin/sh
# Side by side: propshare's scheduler driving real processes versus Linux's own
# weighting (nice values; cgroup v1 cpu.shares + cpuset), on four workloads:
#   equal3    3 equal spinners on 2 CPUs
#   w123      weights 1:2:3 on 2 CPUs
#   infeas    one weight-10 and two weight-1 spinners on 2 CPUs (infeasible)
#   mix       two spinners (weights 2, 1) and two I/O-bound jobs (weight 1 and 2)
# Writes a markdown report with, per process, weight, ideal share, achieved
# share and max lag under each mode, and the controller's own CPU use.
#
# Needs root. Usage: scripts/compare-linux.sh [OUT.md]
# Environment: DURATION (default 10s), QUANTUM (10ms), CPUS (0,1),
#              SCHEDULER (wfq+readjust), CHARGE (cpu or slot), PROPSHARE (binary),
#              REPORT_ONLY=1 (only rewrite the report from an earlier run's JSON).
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-report/compare-linux.md}
DURATION=${DURATION:-10s}
QUANTUM=${QUANTUM:-10ms}
CPUS=${CPUS:-0,1}
SCHEDULER=${SCHEDULER:-wfq+readjust}
CHARGE=${CHARGE:-cpu}
if [ -z "${PROPSHARE:-}" ]; then
    cargo build --release -q -p propshare-cli
    PROPSHARE=target/release/propshare
fi
DIR=${OUT%.md}.d
mkdir -p "$DIR"

SPIN="sh -c 'while :; do :; done'"
# I/O-bound: a little computing, then a 20 ms sleep, forever.
IO="sh -c 'while :; do i=0; while [ \$i -lt 200 ]; do i=\$((i+1)); done; sleep 0.02; done'"

workload() {
    case $1 in
    equal3) echo "-w 1 -n s1 -- $SPIN ::: -w 1 -n s2 -- $SPIN ::: -w 1 -n s3 -- $SPIN" ;;
    w123) echo "-w 1 -n w1 -- $SPIN ::: -w 2 -n w2 -- $SPIN ::: -w 3 -n w3 -- $SPIN" ;;
    infeas) echo "-w 10 -n big -- $SPIN ::: -w 1 -n small1 -- $SPIN ::: -w 1 -n small2 -- $SPIN" ;;
    mix) echo "-w 2 -n cpu2 -- $SPIN ::: -w 1 -n cpu1 -- $SPIN ::: -w 1 -n io1 -- $IO ::: -w 2 -n io2 -- $IO" ;;
    esac
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
# REPORT_ONLY=1: rebuild the report from the JSON files of an earlier run.
[ -n "${REPORT_ONLY:-}" ] || for w in equal3 w123 infeas mix; do
    for mode in propshare nice shares; do
        case $mode in
        propshare) extra="--scheduler $SCHEDULER --charge $CHARGE" ;;
        *) extra="--baseline $mode" ;;
        esac
        echo "== $w / $mode" >&2
        eval "$PROPSHARE run --cpus $CPUS --quantum $QUANTUM --duration $DURATION $extra \
            --scenario $w --json $DIR/$w-$mode.json --trace $DIR/$w-$mode.jsonl $(workload $w)"
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$DIR" "$OUT" "$DURATION" "$QUANTUM" "$CPUS" "$SCHEDULER --charge $CHARGE" "$LOAD_BEFORE" "$LOAD_AFTER" <<'PY'
import json, sys, os
d, out, dur, q, cpus, sched, lb, la = sys.argv[1:]
modes = [("propshare", sched), ("nice", "Linux nice"), ("shares", "Linux cpu.shares")]
names = {"equal3": "3 equal spinners on 2 CPUs", "w123": "weights 1:2:3 on 2 CPUs",
         "infeas": "infeasible: weights 10:1:1 on 2 CPUs", "mix": "CPU-bound (2, 1) and I/O-bound (1, 2) on 2 CPUs"}
L = []
L.append("# propshare vs Linux: real processes\n")
L.append(f"Command: `scripts/compare-linux.sh` (DURATION={dur} QUANTUM={q} CPUS={cpus} SCHEDULER={sched}), "
         f"`{os.uname().sysname} {os.uname().release}`, load average before {lb}, after {la}.\n")
L.append("Shares are % over each process's lifetime, ideal from the fluid reference with readjustment; "
         "*diff* is achieved minus ideal in percentage points; max lag is the largest |ideal - received| (ms). "
         "'Jobs' CPU' figures measure the division of the CPU time the jobs got together "
         "(ideal_i / sum of ideals, times what they got), so other load on the machine cancels out; "
         "'CPUs' figures are against the whole managed CPUs. "
         "The ideal for I/O-bound jobs uses the blocking the host saw (our scheduler: its block/wake events; "
         "baselines: inferred from CPU use and thread states each quantum).\n")
summary = []
def table(rs, first, kind):
    pre = "norm_" if kind == "norm" else ""
    hdr = "| client | weight |" + "".join(f" {lbl} ideal % | got % | max lag ms |" for m, lbl in modes if m in rs)
    out = [hdr, "|" + "---|" * (2 + 3 * len(rs))]
    for i, c in enumerate(first["clients"]):
        row = f"| {c['name']} | {c['weight']} |"
        for m, _ in modes:
            if m in rs:
                k = rs[m]["clients"][i]
                row += f" {100*k[pre+'ideal_share']:.2f} | {100*k[pre+'achieved_share']:.2f} | {k[pre+'max_lag_ns']/1e6:.1f} |"
        out.append(row)
    return out
for w in ["equal3", "w123", "infeas", "mix"]:
    rs = {}
    for m, _ in modes:
        p = f"{d}/{w}-{m}.json"
        if os.path.exists(p):
            rs[m] = json.load(open(p))
    if not rs:
        continue
    first = next(iter(rs.values()))
    L.append(f"\n## {names[w]}\n")
    L.append("Shares of the CPU time the jobs got together (how it was divided):\n")
    L += table(rs, first, "norm")
    L.append("\nShares of the managed CPUs (includes what other processes on the machine took):\n")
    L += table(rs, first, "abs")
    L.append("")
    for m, lbl in modes:
        if m not in rs:
            continue
        r = rs[m]
        cl = r["clients"]
        nworst = max(abs(k['norm_achieved_share'] - k['norm_ideal_share']) for k in cl) * 100
        nlag = max(k['norm_max_lag_ns'] for k in cl) / 1e6
        worst = max(abs(k['achieved_share'] - k['ideal_share']) for k in cl) * 100
        lag = max(k['max_lag_ns'] for k in cl) / 1e6
        ctl = 100 * r["controller_cpu_ns"] / max(r["wall_ns"], 1)
        used = sum(k['received_ns'] for k in cl) / max(r["wall_ns"], 1) / len(r["cpus"]) * 100
        L.append(f"* {lbl}: of the jobs' CPU time: worst |diff| {nworst:.2f} pp, max lag {nlag:.1f} ms; "
                 f"of the CPUs: worst |diff| {worst:.2f} pp, max lag {lag:.1f} ms; jobs used {used:.1f}% of the CPUs; "
                 f"controller CPU {ctl:.2f}% of one CPU ({r['accounting']})")
        summary.append((w, lbl, nworst, nlag, worst, lag, used, ctl))
L.append("\n## Summary\n")
L.append("| workload | mode | worst diff pp (jobs' CPU) | max lag ms (jobs' CPU) | worst diff pp (CPUs) | max lag ms (CPUs) | jobs' CPU % | controller CPU % |")
L.append("|---|---|---|---|---|---|---|---|")
for w, lbl, nworst, nlag, worst, lag, used, ctl in summary:
    L.append(f"| {w} | {lbl} | {nworst:.2f} | {nlag:.1f} | {worst:.2f} | {lag:.1f} | {used:.1f} | {ctl:.2f} |")
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
open(out, "w").write("\n".join(L) + "\n")
print(out)
PY
