#!/usr/bin/env bash
# ps-lite compatibility, seen from outside the tree: installs a built HerdPS into a
# scratch prefix, builds the ps-lite style apps of tests/compat/apps against it, and
# runs each as a job through tracker/launch. Exits 0 only if every step succeeds.
#
#   run_compat_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR" >&2
  exit 2
fi
build_dir=$(cd -- "$1" && pwd)
source_dir=$(cd -- "$2" && pwd)
launch=("python3" "$source_dir/tracker/launch")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/herdps-compat.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT

step() { printf '\n=== %s\n' "$*"; }
run() {
  printf '+ %s\n' "$*"
  "$@"
}

step "install and build the ps-lite style apps against $tmp/prefix"
run cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
# The package's sanitizer, if it has one, for the apps too.
mapfile -t sanitize < <("$source_dir/tests/sanitizer/app_flags" "$build_dir")
run cmake -S "$source_dir/tests/compat/apps" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "${sanitize[@]}" >/dev/null
run cmake --build "$tmp/build" -j "$(nproc)"

step "KV push / pull / push-pull, 2 workers, 2 servers"
out=$(run "${launch[@]}" -n 2 -s 2 --timeout 60 --env COMPAT_VERBOSE=1 -- "$tmp/build/kv_style" 2>&1) ||
  { echo "$out"; echo "compat: FAILED: the job failed" >&2; exit 1; }
echo "$out"
[[ $(grep -c 'worker [0-9]* error: 0$' <<<"$out") -eq 2 ]] || { echo "compat: FAILED: not every worker reported error 0" >&2; exit 1; }
[[ $(grep -c 'sliced error: 0$' <<<"$out") -eq 2 ]] || { echo "compat: FAILED: a custom slicer lost values" >&2; exit 1; }
# PS_VERBOSE=1 came through Environment::Init: the app's PS_VLOG(1) line is there.
grep -q 'worker 0: 1000 keys, 20 rounds' <<<"$out" || { echo "compat: FAILED: PS_VLOG(1) line missing" >&2; exit 1; }

step "SimpleApp: the scheduler asks every node, itself included, 100 times"
run "${launch[@]}" -n 2 -s 2 --timeout 60 -- "$tmp/build/simple_style"

step "several workers in one process: 4 workers in 2 processes, 1 server"
out=$(run "${launch[@]}" -n 4 -s 1 --workers-per-process 2 --timeout 60 -- \
  "$tmp/build/multi_workers_style" '{role}' 2>&1) ||
  { echo "$out"; echo "compat: FAILED: the job failed" >&2; exit 1; }
echo "$out"
[[ $(grep -c 'error: 0$' <<<"$out") -eq 4 ]] || { echo "compat: FAILED: not 4 customers with error 0" >&2; exit 1; }

for placement in range ring; do
  step "MXNet style (apps before StartAsync, SimpleApp commands, SArray views, key ranges), PS_KEY_PLACEMENT=$placement"
  out=$(run "${launch[@]}" -n 2 -s 2 --timeout 60 --env PS_KEY_PLACEMENT=$placement -- \
    "$tmp/build/mxnet_style" 2>&1) ||
    { echo "$out"; echo "compat: FAILED: the job failed" >&2; exit 1; }
  echo "$out"
  [[ $(grep -c " 0 wrong values, .*($placement placement), command OK" <<<"$out") -eq 2 ]] ||
    { echo "compat: FAILED: MXNet style under $placement" >&2; exit 1; }
done

echo
echo "compat test: OK"
