#!/usr/bin/env bash
# The installed package, seen from outside the tree: installs a built HerdPS into a
# scratch prefix, builds tests/install/consumer against it with find_package(HerdPS),
# and runs the consumer as a real job (1 scheduler, 1 server, 2 workers) under
# tracker/launch, and the consistency checker (tests/integration/clock_guarantees.cc)
# built the same way under SSP(2). Exits 0 only if every step succeeds.
#
#   run_install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR" >&2
  exit 2
fi
build_dir=$(cd -- "$1" && pwd)
source_dir=$(cd -- "$2" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/herdps-install.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT

step() { printf '\n=== %s\n' "$*"; }
run() {
  printf '+ %s\n' "$*"
  "$@"
}
fail() {
  echo "install test: FAILED: $*" >&2
  exit 1
}

step "install $build_dir into $tmp/prefix"
run cmake --install "$build_dir" --prefix "$tmp/prefix"

step "check that the installed package points into the prefix only"
# An exported path into the source or build tree works here and breaks on every
# other machine.
mapfile -t package_files < <(find "$tmp/prefix" -path '*/cmake/HerdPS/*.cmake')
[[ ${#package_files[@]} -gt 0 ]] || fail "no <libdir>/cmake/HerdPS/*.cmake installed"
for f in "${package_files[@]}"; do
  if grep -nF -e "$source_dir" -e "$build_dir" "$f"; then
    fail "$f refers to the source or build tree (lines above)"
  fi
done

step "configure the consumer against the prefix"
# No package registry: the only HerdPS it may find is the one just installed.
# The package's sanitizer, if it has one, for the apps too.
mapfile -t sanitize < <("$source_dir/tests/sanitizer/app_flags" "$build_dir")
run cmake -S "$source_dir/tests/install/consumer" -B "$tmp/build" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "${sanitize[@]}"
found=$(sed -n 's/^HerdPS_DIR:PATH=//p' "$tmp/build/CMakeCache.txt")
[[ $found == "$tmp/prefix/"* ]] || fail "found HerdPS in '$found', not in $tmp/prefix"

step "build the consumer"
run cmake --build "$tmp/build" -j "$(nproc)"
if ! ldd "$tmp/build/consumer" | grep -F "$tmp/prefix/" >/dev/null; then
  ldd "$tmp/build/consumer" >&2
  fail "the consumer does not load libherdps from $tmp/prefix"
fi

step "run the consumer as a job: 1 scheduler, 1 server, 2 workers"
run python3 "$source_dir/tracker/launch" -n 2 -s 1 --timeout 60 -- "$tmp/build/consumer"

step "check SSP(2) from outside: 3 workers, 1 server, 300 clocks"
run python3 "$source_dir/tracker/launch" -n 3 -s 1 --timeout 120 --env PS_CONSISTENCY=ssp:2 \
  -- "$tmp/build/clock_guarantees" --staleness 2 --clocks 300

echo
echo "install test: OK"
