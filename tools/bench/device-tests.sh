#!/usr/bin/env bash
# On a GPU machine: every integration test that opens a GPU, from the binaries that
# device-pack.sh built here, with WEBMAMBA_REQUIRE_GPU=1 (no adapter is a failure, not a skip).
# Prints one line per test binary and the adapter the tests opened; each binary's whole output
# goes to $OUT/tests.log (or target/device/tests.log).
#
#   tools/bench/device-tests.sh [TEST ...]      (default: every binary in the pack)
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/bench/device-env.sh
OUT=${OUT:-target/device}
DEV=${DEV:-/tmp/webmamba-dev}
mkdir -p "$OUT" "$DEV"
[ -x "$DEV/webmamba" ] || tar -xJf .dev/pack.tar.xz -C "$DEV" ||
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .dev/pack.tar.xz "$DEV"
# The tests read fixtures at the path they were built at.
built=$(cat .dev/manifest_dir)
if [ ! -e "$built" ]; then mkdir -p "$(dirname "$built")" && ln -s "$PWD" "$built"; fi
export WEBMAMBA_REQUIRE_GPU=1
log="$OUT/tests.log"
: >"$log"
failed=0
for bin in ${@:-$(ls "$DEV/tests")}; do
  start=$(date +%s%N)
  timeout "${TEST_TIMEOUT:-240}" "$DEV/tests/$bin" --test-threads="${TEST_THREADS:-8}" --nocapture >"$DEV/$bin.log" 2>&1
  rc=$?
  secs=$(( ($(date +%s%N) - start) / 1000000 ))e-3
  { echo "===== $bin (rc $rc, ${secs}s)"; cat "$DEV/$bin.log"; } >>"$log"
  result=$(grep '^test result:' "$DEV/$bin.log" | tail -1)
  printf '%-16s rc %-3s %6.1fs  %s\n' "$bin" "$rc" "$secs" "${result:-no result line}"
  [ "$rc" = 0 ] || failed=$((failed + 1))
done
grep -h -m1 'running on' "$DEV"/*.log | head -1
echo "binaries failed: $failed"
[ "$failed" = 0 ]
