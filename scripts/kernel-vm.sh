#!/usr/bin/env bash
# Boot Debian's sched_ext kernel in qemu and measure propshare-scx against
# EEVDF. One command from a fresh clone (as root, or with sudo for apt-get):
#
#   scripts/kernel-vm.sh                 # full matrix, 10 s phases, 2 and 4 vCPUs
#   scripts/kernel-vm.sh --ci            # short phases, generous bounds (CI)
#   scripts/kernel-vm.sh --secs 5 --smp 2 --schedulers gr3mp,dwrr --workloads w123,inf
#   scripts/kernel-vm.sh --grouprun      # only issue 21's groups target (see kernel-vm/grouprun.sh)
#   scripts/kernel-vm.sh --smp 4 --workloads eq5 --repeat 3   # each workload's phases 3 times in turn
#
# Other options: --no-safety (skip the signal/panic tests), --no-prun (skip
# the `propshare run` phases), --check full|ci (the bounds the report
# enforces), --schedulers a,b (NAME@stock: the stock BPF side; NAME@exact:
# --exact-slices), --workloads (w123 inf mixed change flip pin all cg on 2
# vCPUs; eq5 w16 on 4).
#
# It installs its tools with apt-get, fetches the newest trixie-backports
# kernel that has CONFIG_SCHED_CLASS_EXT=y with a PRIVATE apt state (the
# system's sources are untouched), builds crates/propshare-scx, a busybox
# initramfs with the binary, its libraries and a static spinner, boots qemu
# (KVM if it really works, else TCG) and writes target/kernel-vm/report/
# report.md and report.json.
#
# Exit status: 0 ok, 1 a check failed, 2 bad usage, 77 skipped (tools or
# kernel unavailable: the reason is printed on a line starting with SKIP).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$ROOT/target/kernel-vm
GROUPRUN=0; CI=0; SECS=10; REPEAT=1; SMPS="2 4"; SCHEDS="gr3mp,dwrr,wfq+readjust,sfs"; WORKLOADS=""; SAFETY=1; PRUN=1; CHECK=full
while [ $# -gt 0 ]; do
  case "$1" in
    --ci) CI=1; SECS=6; SCHEDS="wfq+readjust"; WORKLOADS="w123,inf,mixed,cg,flip,eq5"; PRUN=0; CHECK=ci; shift ;;
    --secs) SECS=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --smp) SMPS=$2; shift 2 ;;
    --schedulers) SCHEDS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    --no-safety) SAFETY=0; shift ;;
    --no-prun) PRUN=0; shift ;;
    --check) CHECK=$2; shift 2 ;;
    --grouprun) GROUPRUN=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "kernel-vm.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$W"
log() { echo "kernel-vm: $*" >&2; }
skip() { echo "SKIP: kernel-vm: $*"; exit 77; }
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

# ---------------------------------------------------------------- 1. tools
command -v dpkg >/dev/null || skip "not a Debian-like system (no dpkg): install qemu, busybox-static, clang and libelf/zlib/libseccomp headers by hand"
need=()
for p in qemu-system-x86 busybox-static cpio zstd clang-19 libclang-19-dev libelf-dev zlib1g-dev libseccomp-dev gcc libc6-dev pkg-config binutils; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || skip "missing ${need[*]} and no apt-get"
  log "installing ${need[*]}"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; } \
    || skip "apt-get could not install ${need[*]}"
fi
BPF_CLANG=${BPF_CLANG:-$(command -v clang-19 || command -v clang)}
export BPF_CLANG

# ---------------------------------------------------------------- 2. kernel
A="$W/apt"
mkdir -p "$A"/{lists/partial,cache/archives/partial,etc/sources.list.d,etc/preferences.d}
MIRROR=${DEBIAN_MIRROR:-$({ grep -rhE '^[[:space:]]*(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null || true; } \
  | grep -oE 'https?://[^ ]*/debian/?( |$)' | grep -v -- '-security' | head -1 | tr -d ' ' || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${MIRROR%/} trixie-backports main" > "$A/etc/sources.list"
APT=(-o "Dir::State::Lists=$A/lists" -o "Dir::Cache=$A/cache" -o "Dir::Etc::SourceList=$A/etc/sources.list"
     -o "Dir::Etc::SourceParts=$A/etc/sources.list.d" -o "Dir::Etc::Preferences=$A/etc/preferences"
     -o "Dir::Etc::PreferencesParts=$A/etc/preferences.d" -o "Dir::State::status=$A/status")
touch "$A/status"
apt-get "${APT[@]}" update -qq >/dev/null 2>&1 || skip "cannot reach the Debian mirror $MIRROR (trixie-backports)"
KV=$({ apt-cache "${APT[@]}" depends linux-image-amd64 2>/dev/null || true; } | sed -n 's/.*Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -1)
if [ -z "$KV" ]; then
  # Mirror unreachable (apt-get update only warns): use the newest kernel
  # already fetched, if any.
  KV=$(ls "$W/kernel" 2>/dev/null | grep -v '\.tmp$' | sort -V | tail -1 || true)
  [ -n "$KV" ] && [ -f "$W/kernel/$KV/vmlinuz" ] || skip "cannot resolve linux-image-amd64 in trixie-backports at $MIRROR (mirror unreachable?) and no kernel cached"
  log "cannot resolve trixie-backports' kernel at $MIRROR: using the cached $KV"
fi
K="$W/kernel/$KV"
if [ ! -f "$K/vmlinuz" ]; then
  log "fetching kernel $KV"
  rm -rf "$K.tmp"; mkdir -p "$K.tmp/deb" "$K.tmp/x"
  ( cd "$K.tmp/deb" && apt-get "${APT[@]}" download "linux-base-$KV" "linux-binary-unsigned-$KV" >/dev/null 2>&1 ) \
    || skip "cannot download linux-base-$KV / linux-binary-unsigned-$KV"
  for d in "$K.tmp"/deb/*.deb; do dpkg-deb -x "$d" "$K.tmp/x"; done
  cp "$K.tmp/x/usr/lib/modules/$KV/config" "$K.tmp/config"
  cp "$K.tmp/x/usr/lib/modules/$KV/vmlinuz.unsigned" "$K.tmp/vmlinuz"
  rm -rf "$K.tmp/x" "$K.tmp/deb"; rm -rf "$K"; mv "$K.tmp" "$K"
fi
grep -q '^CONFIG_SCHED_CLASS_EXT=y' "$K/config" || skip "kernel $KV lacks CONFIG_SCHED_CLASS_EXT=y"
log "kernel $KV (CONFIG_SCHED_CLASS_EXT=y)"
if [ "$GROUPRUN" = 1 ]; then . "$ROOT/scripts/kernel-vm/grouprun.sh"; grouprun_vm; exit $?; fi

# ---------------------------------------------------------------- 3. build
if ! command -v cargo >/dev/null && [ -f "$HOME/.cargo/env" ]; then . "$HOME/.cargo/env"; fi
command -v cargo >/dev/null || skip "no cargo"
log "building crates/propshare-scx (BPF_CLANG=$BPF_CLANG)"
cargo build -q --release --manifest-path "$ROOT/crates/propshare-scx/Cargo.toml" --target-dir "$ROOT/target/scx" --bins
BIN="$ROOT/target/scx/release"
if [ "$PRUN" = 1 ]; then cargo build -q --release --manifest-path "$ROOT/Cargo.toml" --bin propshare || PRUN=0; fi
gcc -O2 -static -Wall -o "$W/spin" "$ROOT/scripts/kernel-vm/spin.c"

# ---------------------------------------------------------------- 4. initramfs
IRD="$W/initramfs"
rm -rf "$IRD"; mkdir -p "$IRD"/{bin,proc,sys,dev,tmp,lib64,lib/x86_64-linux-gnu}
cp /bin/busybox "$IRD/bin/busybox"
for a in $("$IRD/bin/busybox" --list); do [ -e "$IRD/bin/$a" ] || ln -s busybox "$IRD/bin/$a"; done
objcopy --strip-debug "$BIN/propshare-scx" "$IRD/bin/propshare-scx"
[ "$PRUN" = 1 ] && objcopy --strip-debug "$ROOT/target/release/propshare" "$IRD/bin/propshare"
cp "$W/spin" "$IRD/bin/spin"
for b in "$IRD/bin/propshare-scx" "$IRD/bin/propshare"; do
  [ -e "$b" ] || continue
  ldd "$b" | grep -oE '/[^ ]+' | while read -r l; do mkdir -p "$IRD$(dirname "$l")"; cp -L "$l" "$IRD$l"; done
done
cp "$ROOT/scripts/kernel-vm/init.sh" "$IRD/init"; chmod +x "$IRD/init"
WL=(); [ -n "$WORKLOADS" ] && WL=(--workloads "$WORKLOADS")
PR=(); [ "$PRUN" = 1 ] && PR=(--prun)
for smp in $SMPS; do
  SF=(); [ "$SAFETY" = 1 ] && [ "$smp" = "$(echo $SMPS | cut -d' ' -f1)" ] && SF=(--safety)
  "$BIN/scx-harness" plan --smp "$smp" --secs "$SECS" --repeat "$REPEAT" --schedulers "$SCHEDS" "${WL[@]}" "${SF[@]}" "${PR[@]}" > "$IRD/plan-smp$smp.sh"
done
( cd "$IRD" && find . | cpio -o -H newc 2>/dev/null | gzip -1 ) > "$W/initramfs.cpio.gz"

# ---------------------------------------------------------------- 5. boot
qemu() { # smp plan timeout accel-args...
  local smp=$1 plan=$2 to=$3; shift 3
  timeout "$to" nice -n "${PROPSHARE_QEMU_NICE:-0}" qemu-system-x86_64 "$@" -machine q35 -smp "$smp" -m 1024 -display none -serial stdio -monitor none -no-reboot \
    -kernel "$K/vmlinuz" -initrd "$W/initramfs.cpio.gz" \
    -append "console=ttyS0 panic=-1 quiet loglevel=3 PS_PLAN=$plan" < /dev/null 2>&1
}
# PROPSHARE_QEMU_NICE=-10 runs qemu at that nice value: on a host shared
# with other work, the host then deschedules the vCPU threads less, and a
# descheduled vCPU's stolen time is charged by the guest to the task it was
# running (docs/KERNEL.md, Round 4). Default 0.
# Multi-threaded TCG by default (one host thread per vCPU: shares like a
# real SMP machine). It races the kernel's int3-based text patching (static
# keys flip at boot and when sched_ext is enabled or disabled): about one
# boot or detach in ten to forty Oopses with "int3". Such a boot is retried
# below. PROPSHARE_TCG_THREAD=single avoids the race, but qemu then runs the
# vCPUs in turn (slices up to 100 ms), which cost 1-2 points of fairness.
ACCEL=(-accel "tcg,thread=${PROPSHARE_TCG_THREAD:-multi}" -cpu max)
if [ -w /dev/kvm ] && qemu 1 none 60 -accel kvm -cpu host 2>/dev/null | grep -q ALL_DONE; then
  ACCEL=(-accel kvm -cpu host); log "KVM works: using it"
else
  log "KVM unusable here (or absent): using TCG (about 10x slower; shares stay meaningful)"
fi
LOGS=()
rm -f "$W"/console-*.log
for smp in $SMPS; do
  L="$W/console-smp$smp.log"
  log "booting with $smp vCPUs (plan: $(grep -c '^phase_begin\|^safety' "$IRD/plan-smp$smp.sh") phases)"
  t0=$(date +%s)
  for try in 1 2 3; do
    qemu "$smp" "/plan-smp$smp.sh" 1500 "${ACCEL[@]}" > "$L" || true
    # An "Oops: int3" is the emulator racing the kernel's text patching
    # (see docs/KERNEL.md), not our scheduler: boot again (3 tries), keeping
    # the crashed console. Any other Oops or panic counts as a failure.
    if ! grep -aq 'Oops: int3' "$L"; then break; fi
    cp "$L" "$W/console-smp$smp.int3-$try.log"
    log "  the guest kernel hit the TCG int3 text-patching race (try $try): booting again"
  done
  log "  $smp vCPUs done in $(( $(date +%s) - t0 )) s; console: $L"
  LOGS+=("$L")
done

# ---------------------------------------------------------------- 6. report
"$BIN/scx-harness" report --out "$W/report" --check "$CHECK" "${LOGS[@]}"
