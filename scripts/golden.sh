#!/usr/bin/env bash
# Fingerprint every decision: run every scenario under scenarios/ (its own
# schedulers, and every registered scheduler on the small ones) and print one
# sha256 per output file (traces, metrics, CSV, plots). A refactor that must
# keep decisions byte-identical is checked by diffing this before and after:
#
#   scripts/golden.sh > /tmp/before.txt; (change); scripts/golden.sh > /tmp/after.txt
#   diff /tmp/before.txt /tmp/after.txt && echo identical
#
# Usage: scripts/golden.sh [PROPSHARE_BINARY]   (default: target/release/propshare)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/propshare}
[ -x "$bin" ] || cargo build -q --release -p propshare-cli
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
find scenarios -name '*.toml' | sort | while read -r f; do
  name=${f#scenarios/}; name=${name%.toml}
  "$bin" simulate "$f" --quiet --out "$out/own/$name" >/dev/null
  # All but the six largest also run under every registered scheduler.
  case $name in
    */s1-n8192-*|*/s2-n8192-*|*/s3-gr3mp-p8|*/n2048-p128|*/lag-16-on-8) continue ;;
  esac
  if [ "$(stat -c %s "$f")" -lt 4000 ]; then
    "$bin" simulate "$f" --all --quiet --out "$out/all/$name" >/dev/null 2>&1 || echo "all-failed $name"
  fi
done
(cd "$out" && find . -type f | sort | xargs sha256sum)
