# Sourced by scripts/kernel-vm.sh for `--grouprun` (after its kernel step):
# the groups target of issue 21 on real processes in the guest, where cgroup
# v2 has the cpu controller (this host binds cpu to cgroup v1). A 2-level
# tree, weights 1:3 at the top with 1 and 8 CPU-bound processes under them,
# on 2 vCPUs, run for GR_SECS seconds each:
#
#   ours     propshare run --jobs tree.toml                (our scheduler, wfq+readjust)
#   cgroup2  propshare run --jobs tree.toml --baseline cgroup2   (Linux's cpu.weight)
#   watch    propshare run --cgroup2 /sys/fs/cgroup/t      (the same tree made by hand
#            as cgroups A (cpu.weight 100) and B (300), read and enforced by ours)
#
# Each run's --json is printed on the console; target/kernel-vm/grouprun/
# report.md gets per group its ideal and achieved share of the 2 CPUs and
# of the CPU time the jobs got, and the error in percentage points against
# the hierarchical ideal. Exit status 1 if a group of `ours` or `watch` is
# more than GR_TOL_PP (default 1) points off the ideal of the jobs' CPU time.
grouprun_vm() {
  local G="$W/grouprun" secs=${GR_SECS:-20} tol=${GR_TOL_PP:-1}
  mkdir -p "$G"
  log "grouprun: building propshare (release)"
  cargo build -q --release --manifest-path "$ROOT/Cargo.toml" --bin propshare
  local IRD="$G/initramfs"
  rm -rf "$IRD"; mkdir -p "$IRD"/{bin,proc,sys,dev,tmp,lib64,lib/x86_64-linux-gnu}
  cp /bin/busybox "$IRD/bin/busybox"
  for a in $("$IRD/bin/busybox" --list); do [ -e "$IRD/bin/$a" ] || ln -s busybox "$IRD/bin/$a"; done
  objcopy --strip-debug "$ROOT/target/release/propshare" "$IRD/bin/propshare"
  ldd "$IRD/bin/propshare" | grep -oE '/[^ ]+' | while read -r l; do mkdir -p "$IRD$(dirname "$l")"; cp -L "$l" "$IRD$l"; done
  cp "$ROOT/scripts/kernel-vm/init.sh" "$IRD/init"; chmod +x "$IRD/init"
  {
    echo 'SPIN="while :; do :; done"'
    echo 'mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup'
    echo 'echo "GROUPRUN controllers=$(cat /sys/fs/cgroup/cgroup.controllers)"'
    echo 'printf "[[group]]\nname = \"A\"\nweight = 1\n[[group]]\nname = \"B\"\nweight = 3\n" > /tmp/tree.toml'
    echo 'printf "[[job]]\nname = \"a0\"\ngroup = \"A\"\ncmd = [\"sh\", \"-c\", \"%s\"]\n" "$SPIN" >> /tmp/tree.toml'
    echo 'for k in 0 1 2 3 4 5 6 7; do printf "[[job]]\nname = \"b%s\"\ngroup = \"B\"\ncmd = [\"sh\", \"-c\", \"%s\"]\n" $k "$SPIN" >> /tmp/tree.toml; done'
    echo "run() { m=\$1; shift; /bin/propshare run --cpus 0,1 --duration ${secs}s --json /tmp/\$m.json --report \"\$@\"; echo \"GROUPRUN_RC mode=\$m rc=\$?\"; echo \"GROUPRUN_JSON_BEGIN mode=\$m\"; cat /tmp/\$m.json; echo GROUPRUN_JSON_END; }"
    echo 'run ours --jobs /tmp/tree.toml'
    echo 'run cgroup2 --jobs /tmp/tree.toml --baseline cgroup2 --cgroup2-dir /sys/fs/cgroup'
    echo 'echo "GROUPRUN left=$(ls /sys/fs/cgroup | grep -c propshare)"'
    # SIGTERM in the middle of a baseline run: its cgroups must go too.
    echo '/bin/propshare run --cpus 0,1 --duration 600s --jobs /tmp/tree.toml --baseline cgroup2 --cgroup2-dir /sys/fs/cgroup 2>/dev/null & R=$!'
    echo 'sleep 3; during=$(ls /sys/fs/cgroup | grep -c propshare); kill -TERM $R; wait $R; rc=$?'
    echo 'echo "GROUPRUN sigterm rc=$rc during=$during left=$(ls /sys/fs/cgroup | grep -c propshare)"'
    echo 'T=/sys/fs/cgroup/t; mkdir $T; echo +cpu > /sys/fs/cgroup/cgroup.subtree_control; echo +cpu > $T/cgroup.subtree_control'
    echo 'mkdir $T/A $T/B; echo 100 > $T/A/cpu.weight; echo 300 > $T/B/cpu.weight'
    echo 'P=""; sh -c "$SPIN" & echo $! > $T/A/cgroup.procs; P="$P $!"'
    echo 'for k in 0 1 2 3 4 5 6 7; do sh -c "$SPIN" & echo $! > $T/B/cgroup.procs; P="$P $!"; done'
    echo 'run watch --cgroup2 $T'
    echo 'kill $P; wait 2>/dev/null'
  } > "$IRD/plan-grouprun.sh"
  ( cd "$IRD" && find . | cpio -o -H newc 2>/dev/null | gzip -1 ) > "$G/initramfs.cpio.gz"
  local accel=(-accel "tcg,thread=${PROPSHARE_TCG_THREAD:-multi}" -cpu max)
  # KVM only if a guest really boots with it (some hosts' KVM fails with
  # "emulation failure"), as kernel-vm.sh checks it.
  if [ -w /dev/kvm ] && timeout 60 qemu-system-x86_64 -accel kvm -cpu host -machine q35 -smp 1 -m 512 -display none \
      -serial stdio -monitor none -no-reboot -kernel "$K/vmlinuz" -initrd "$G/initramfs.cpio.gz" \
      -append "console=ttyS0 panic=-1 quiet loglevel=3 PS_PLAN=none" < /dev/null 2>&1 | grep -aq ALL_DONE; then
    accel=(-accel kvm -cpu host)
  fi
  log "grouprun: booting with 2 vCPUs (${accel[1]}), 3 runs of $secs s"
  local L="$G/console.log" t0; t0=$(date +%s)
  for try in 1 2 3; do
    timeout $((secs * 3 * 6 + 300)) qemu-system-x86_64 "${accel[@]}" -machine q35 -smp 2 -m 1024 -display none \
      -serial stdio -monitor none -no-reboot -kernel "$K/vmlinuz" -initrd "$G/initramfs.cpio.gz" \
      -append "console=ttyS0 panic=-1 quiet loglevel=3 PS_PLAN=/plan-grouprun.sh" < /dev/null > "$L" 2>&1 || true
    if ! grep -aq ALL_DONE "$L" && [ "${accel[1]}" = kvm ]; then
      accel=(-accel "tcg,thread=${PROPSHARE_TCG_THREAD:-multi}" -cpu max)
      log "grouprun: KVM did not work here: booting again under TCG"; continue
    fi
    grep -aq 'Oops: int3' "$L" || break
    log "grouprun: the guest hit the TCG int3 text-patching race (try $try): booting again"
  done
  log "grouprun: done in $(( $(date +%s) - t0 )) s; console: $L"
  python3 - "$L" "$G/report.md" "$tol" <<'EOF'
import json, re, sys
log, out, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
text = open(log, errors="replace").read().replace("\r", "")
runs = {m: json.loads(b) for m, b in re.findall(r"GROUPRUN_JSON_BEGIN mode=(\w+)\n(.*?)\nGROUPRUN_JSON_END", text, re.S) if b.strip().startswith("{")}
ctl = re.search(r"GROUPRUN controllers=(.*)", text)
lines = ["# Groups on real processes: ours against Linux cgroup v2 (scripts/kernel-vm.sh --grouprun)", "",
         f"Guest cgroup v2 controllers: {ctl.group(1) if ctl else '?'}; " + (re.search(r'GUEST (.*)', text) or [None, '?'])[1], "",
         "Tree: A (weight 1) with 1 spinner, B (weight 3) with 8, 2 vCPUs; ideal from the hierarchical fluid reference.", "",
         "| run | group | ideal % of 2 CPUs | achieved % | error pp | ideal % of jobs' CPU | achieved % | error pp | max lag q | jobs' CPU use % | controller CPU % |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
bad = []
for mode in ("ours", "cgroup2", "watch"):
    r = runs.get(mode)
    if not r:
        lines.append(f"| {mode} | (no report) |||||||||| ")
        bad.append(f"{mode}: no report")
        continue
    p = len(r["cpus"])
    used = sum(c["received_ns"] for c in r["clients"]) / (r["wall_ns"] * p)
    for g in r.get("groups", []):
        e = 100 * (g["share"] - g["ideal_share"]) / p
        en = 100 * (g["norm_achieved_share"] - g["norm_ideal_share"])
        lag = max(abs(g["max_lag"]), abs(g["min_lag"]))
        lines.append(f"| {mode} ({r['scheduler']}) | {g['group']} | {100*g['ideal_share']/p:.2f} | {100*g['share']/p:.2f} | {e:+.2f} | "
                     f"{100*g['norm_ideal_share']:.2f} | {100*g['norm_achieved_share']:.2f} | {en:+.2f} | {lag:.1f} | {100*used:.1f} | {100*r['controller_cpu_ns']/r['wall_ns']:.2f} |")
        if mode != "cgroup2" and abs(en) > tol:
            bad.append(f"{mode} group {g['group']}: {en:+.2f} pp")
left = re.search(r"GROUPRUN left=(\d+)", text)
term = re.search(r"GROUPRUN sigterm rc=(\d+) during=(\d+) left=(\d+)", text)
if not term or term.group(2) == "0" or term.group(3) != "0":
    bad.append("SIGTERM during --baseline cgroup2: " + (term.group(0) if term else "no result"))
lines += ["", f"cgroups left behind by --baseline cgroup2: {left.group(1) if left else '?'}",
          "SIGTERM 3 s into a --baseline cgroup2 run: " + (f"exit status {term.group(1)}, its cgroup present during the run: {term.group(2)}, left after: {term.group(3)}" if term else "no result"),
          f"Check (ours and watch within {tol} pp of the jobs' CPU time per group): " + ("ok" if not bad else "FAILED: " + "; ".join(bad))]
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(1 if bad or (left and left.group(1) != "0") else 0)
EOF
}
