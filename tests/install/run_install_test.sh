#!/usr/bin/env bash
# The installed package, seen from outside the tree: installs a built HerdPS into a
# scratch prefix, builds tests/install/consumer against it with find_package(HerdPS),
# and runs the consumer as a real job (1 scheduler, 1 server, 2 workers) under
# tracker/launch, and the consistency checker (tests/integration/clock_guarantees.cc)
# built the same way under SSP(2). Exits 0 only if every step succeeds.
#
# With PYTHON (the interpreter the herdps Python package was built for), it also runs
# tests/python/kv_app.py from a folder outside the tree as `python3 app.py` under the
# installed herdps-launch, which must find the installed package by itself.
#
#   run_install_test.sh BUILD_DIR SOURCE_DIR [PYTHON]
set -euo pipefail

if [[ $# -ne 2 && $# -ne 3 ]]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR [PYTHON]" >&2
  exit 2
fi
build_dir=$(cd -- "$1" && pwd)
source_dir=$(cd -- "$2" && pwd)
python=${3:-}

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

step "build the consumer with pkg-config instead of CMake, and run it"
pc_dir=$(dirname -- "$(find "$tmp/prefix" -name herdps.pc | head -n 1)")
[[ -f $pc_dir/herdps.pc ]] || fail "no herdps.pc installed under $tmp/prefix"
sanitize_link=()  # a sanitizer build's flag, for g++ itself
for arg in "${sanitize[@]}"; do
  [[ $arg == -DCMAKE_CXX_FLAGS=* ]] && sanitize_link+=("${arg#-DCMAKE_CXX_FLAGS=}")
done
read -r -a pc_flags <<<"$(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs herdps)"
run g++ -O1 "$source_dir/tests/install/consumer/app.cc" -o "$tmp/consumer_pc" "${pc_flags[@]}" \
  "${sanitize_link[@]}"
ldd "$tmp/consumer_pc" | grep -F "$tmp/prefix/" >/dev/null ||
  fail "the pkg-config build does not load libherdps from $tmp/prefix"
run python3 "$source_dir/tracker/launch" -n 1 -s 1 --timeout 60 -- "$tmp/consumer_pc"

step "run the consumer as a job: 1 scheduler, 1 server, 2 workers"
run python3 "$source_dir/tracker/launch" -n 2 -s 1 --timeout 60 -- "$tmp/build/consumer"

step "check SSP(2) from outside: 3 workers, 1 server, 300 clocks"
run python3 "$source_dir/tracker/launch" -n 3 -s 1 --timeout 120 --env PS_CONSISTENCY=ssp:2 \
  -- "$tmp/build/clock_guarantees" --staleness 2 --clocks 300

step "the installed tools run outside the tree"
(cd "$tmp" && run "$tmp/prefix/bin/herdps-launch" --help > /dev/null) ||
  fail "the installed herdps-launch --help failed"
(cd "$tmp" && run "$tmp/prefix/bin/herdps-plot" --help > /dev/null) ||
  fail "the installed herdps-plot --help failed"

step "the app template, copied out of the installed package, under herdps-launch"
cp -r "$tmp/prefix/share/herdps/template" "$tmp/myapp"
run cmake -S "$tmp/myapp" -B "$tmp/myapp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "${sanitize[@]}"
run cmake --build "$tmp/myapp/build" -j "$(nproc)"
output=$(cd "$tmp/myapp" && "$tmp/prefix/bin/herdps-launch" -n 4 -s 1 --timeout 120 -- \
  build/myapp --epochs 20 2>&1) || { echo "$output"; fail "the template app failed"; }
echo "$output" | grep -v ' I[0-9]\{8\} ' | tail -n 3
distance=$(sed -n 's/.*done: 4 workers, distance to the true weights \([0-9.]*\).*/\1/p' \
  <<<"$output")
[[ -n $distance ]] || fail "the template app printed no final line"
awk -v d="$distance" 'BEGIN { exit !(d < 0.05) }' ||
  fail "the template app ended $distance from the true weights (want < 0.05)"

if [[ -n $python ]]; then
  step "a Python app outside the tree: herdps-launch -n 2 -s 1 -- python3 app.py"
  package=$(find "$tmp/prefix" -path '*/site-packages/herdps/__init__.py' -printf '%h\n')
  [[ -n $package ]] || fail "no herdps Python package installed under $tmp/prefix"
  mkdir "$tmp/app" "$tmp/app/pids"
  cp "$source_dir/tests/python/kv_app.py" "$tmp/app/app.py"
  # python3 is the interpreter the package was built for; PYTHONPATH comes only from
  # herdps-launch.
  output=$(cd "$tmp/app" && env -u PYTHONPATH PATH="$(dirname -- "$python"):$PATH" \
    "$tmp/prefix/bin/herdps-launch" -n 2 -s 1 --timeout 60 -- python3 app.py pids 2>&1) ||
    { echo "$output"; fail "the Python app failed under the installed herdps-launch"; }
  echo "$output" | grep -v ' I[0-9]\{8\} '
  for rank in 0 1; do
    grep -qF "worker $rank: OK (herdps from $package)" <<<"$output" ||
      fail "worker $rank did not pass with the installed package $package"
  done
fi

echo
echo "install test: OK"
