#!/bin/sh
# /init of the test guest built by scripts/kernel-vm.sh. Runs the plan named
# by PS_PLAN (kernel command line), prints PHASE_BEGIN / RESULT / PHASE_END /
# SAFETY lines on the console, then ALL_DONE, and powers off.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /tmp && mount -t tmpfs tmp /tmp
mkdir -p /sys/fs/bpf && mount -t bpf bpf /sys/fs/bpf 2>/dev/null

scx_state() { cat /sys/kernel/sched_ext/state 2>/dev/null || echo missing; }
ctxt() { while read -r k v; do [ "$k" = ctxt ] && echo "$v"; done < /proc/stat; }
sum() { read -r a b c < "/proc/$1/schedstat" 2>/dev/null && echo "$a" || echo 0; }
wait_enabled() {
  i=0
  while [ "$(scx_state)" != enabled ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  [ "$(scx_state)" = enabled ] || echo "SCX_NOT_ENABLED state=$(scx_state)"
}
phase_begin() {
  C0=$(ctxt); T0=$(/bin/spin now)
  echo "PHASE_BEGIN id=$1 sched=$2"
}
phase_end() {
  sleep 0.2
  echo "PHASE_END id=$1 sched=$2 rc=$3 ctxt=$(( $(ctxt) - C0 )) ms=$(( $(/bin/spin now) - T0 )) state=$(scx_state)"
}
# safety HOW SCHED: two SCHED_EXT spinners; the scheduler attaches, then is
# stopped by SIGINT / SIGTERM / SIGKILL or panics; sched_ext must return to
# disabled and both spinners must keep running.
safety() {
  how=$1; sc=${2%@*}; side=own
  case "$2" in *@*) side=${2#*@} ;; esac
  S=$(( $(/bin/spin now) + 100 )); E=$((S + 60000))
  /bin/spin -N sa -e -S $S -E $E > /dev/null & A=$!
  /bin/spin -N sb -e -S $S -E $E > /dev/null & B=$!
  if [ "$how" = panic ]; then
    /bin/propshare-scx --scheduler "$sc" --bpf "$side" --panic-after 1500ms 2>/tmp/s.err & P=$!
  else
    /bin/propshare-scx --scheduler "$sc" --bpf "$side" 2>/tmp/s.err & P=$!
  fi
  wait_enabled; en=$(scx_state)
  sleep 1.5
  [ "$how" != panic ] && kill -"$how" $P
  wait $P; rc=$?
  i=0; while [ "$(scx_state)" != disabled ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  st=$(scx_state)
  a0=$(sum $A); b0=$(sum $B); sleep 0.5; a1=$(sum $A); b1=$(sum $B)
  alive=0; kill -0 $A 2>/dev/null && kill -0 $B 2>/dev/null && alive=1
  prog=0; [ "$a1" -gt "$a0" ] && [ "$b1" -gt "$b0" ] && prog=1
  ok=0; [ "$en" = enabled ] && [ "$st" = disabled ] && [ $alive = 1 ] && [ $prog = 1 ] && ok=1
  echo "SAFETY how=$how sched=$sc enabled_before=$en state_after=$st rc=$rc tasks_alive=$alive tasks_progress=$prog ok=$ok"
  [ $ok = 1 ] || sed 's/^/  scx: /' /tmp/s.err
  kill $A $B 2>/dev/null; wait $A $B 2>/dev/null
}

# cgroup_setup NAME:WEIGHT ...: cgroup v2 with the cpu controller, one cgroup
# per argument under the root with that cpu.weight (EEVDF and propshare-scx
# --cgroups phases then place their tasks in them).
cgroup_setup() {
  mkdir -p /sys/fs/cgroup
  [ -f /sys/fs/cgroup/cgroup.controllers ] || mount -t cgroup2 none /sys/fs/cgroup
  echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
  for g in "$@"; do
    mkdir -p "/sys/fs/cgroup/${g%%:*}"
    echo "${g#*:}" > "/sys/fs/cgroup/${g%%:*}/cpu.weight"
  done
  echo "CGROUPS $(cat /sys/fs/cgroup/cgroup.subtree_control) $*"
}

echo "GUEST kernel=$(uname -r) cpus=$(nproc) scx=$(scx_state) plan=$PS_PLAN"
if [ -n "$PS_PLAN" ] && [ -f "$PS_PLAN" ]; then
  . "$PS_PLAN"
fi
echo "DMESG_SCX_BEGIN"
dmesg | grep -i -E "sched_ext|scx|watchdog|stall" | tail -n 20
echo "DMESG_SCX_END"
echo "ALL_DONE"
poweroff -f
