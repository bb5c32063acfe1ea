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
#              SCHEDULER (wfq+readjust), CHARGE (cpu or slot), PROPSHARE (binary).
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
DIR=$(dirname "$OUT")/compare-linux
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
for w in equal3 w123 infeas mix; do
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
L.append("Shares are % of the managed CPUs over the run; *diff* is achieved minus ideal in percentage points; "
         "max lag is the largest |ideal - received| (ms) against the fluid reference with readjustment. "
         "The ideal for I/O-bound jobs uses the blocking the host saw (our scheduler: its block/wake events; "
         "baselines: inferred from CPU use and thread states each quantum).\n")
summary = []
for w in ["equal3", "w123", "infeas", "mix"]:
    rs = {}
    for m, _ in modes:
        p = f"{d}/{w}-{m}.json"
        if os.path.exists(p):
            rs[m] = json.load(open(p))
    if not rs:
        continue
    L.append(f"\n## {names[w]}\n")
    hdr = "| client | weight |" + "".join(f" {lbl}: ideal % | achieved % | diff pp | max lag ms |" for m, lbl in modes if m in rs)
    L.append(hdr)
    L.append("|" + "---|" * (2 + 4 * len(rs)))
    first = next(iter(rs.values()))
    for i, c in enumerate(first["clients"]):
        row = f"| {c['name']} | {c['weight']} |"
        for m, _ in modes:
            if m not in rs:
                continue
            k = rs[m]["clients"][i]
            row += f" {100*k['ideal_share']:.2f} | {100*k['achieved_share']:.2f} | {100*(k['achieved_share']-k['ideal_share']):+.2f} | {k['max_lag_ns']/1e6:.1f} |"
        L.append(row)
    L.append("")
    for m, lbl in modes:
        if m not in rs:
            continue
        r = rs[m]
        worst = max(abs(k['achieved_share'] - k['ideal_share']) for k in r["clients"]) * 100
        lag = max(k['max_lag_ns'] for k in r["clients"]) / 1e6
        ctl = 100 * r["controller_cpu_ns"] / max(r["wall_ns"], 1)
        used = sum(k['received_ns'] for k in r["clients"]) / max(r["wall_ns"], 1) / len(r["cpus"]) * 100
        L.append(f"* {lbl}: worst |diff| {worst:.2f} pp, max lag {lag:.1f} ms, CPUs busy with the jobs {used:.1f}%, "
                 f"controller CPU {ctl:.2f}% of one CPU, accounting {r['accounting']}")
        summary.append((w, lbl, worst, lag, ctl))
L.append("\n## Summary\n")
L.append("| workload | mode | worst diff pp | max lag ms | controller CPU % |")
L.append("|---|---|---|---|---|")
for w, lbl, worst, lag, ctl in summary:
    L.append(f"| {w} | {lbl} | {worst:.2f} | {lag:.1f} | {ctl:.2f} |")
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
open(out, "w").write("\n".join(L) + "\n")
print(out)
PY
