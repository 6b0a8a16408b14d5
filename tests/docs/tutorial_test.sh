#!/usr/bin/env bash
# docs/tutorial.md, run as a reader would: installs BUILD_DIR into a scratch prefix (the
# tutorial's own install step, which needs the source tree, is the one not run), then
# runs every ```sh block after the marker line, in order, in one shell, in an empty
# folder, with HERDPS set to the prefix (its `export HERDPS=...` line is skipped) and
# `python3` the interpreter the herdps package was built for. Each block must succeed,
# and the ```text block that follows it, if any, must appear in its output: line by
# line, in order, other lines allowed in between ("..." stands for any lines), every
# number matching any number.
#
#   tutorial_test.sh BUILD_DIR SOURCE_DIR PYTHON
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 BUILD_DIR SOURCE_DIR PYTHON" >&2; exit 2; }
build_dir=$1 source_dir=$2 python=$3
tutorial=$source_dir/docs/tutorial.md
tmp=$(mktemp -d "${TMPDIR:-/tmp}/herdps-tutorial.XXXXXX")
current=""  # the output file of the block running now
on_exit() {
  local rc=$?
  if [[ $rc -ne 0 && -n $current ]]; then
    cat "$current"
    echo "tutorial test: FAILED: the block above exited with status $rc" >&2
  fi
  rm -rf -- "$tmp"
  exit "$rc"
}
trap on_exit EXIT

cmake --install "$build_dir" --prefix "$tmp/prefix" > /dev/null
mkdir "$tmp/work" "$tmp/blocks"

# Split the tutorial into blocks/N.sh and blocks/N.expected (the text after block N).
"$python" - "$tutorial" "$tmp/blocks" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
marker = "<!-- the tutorial test runs every sh block below"
if marker not in text:
    sys.exit("tutorial_test: no marker line in %s" % sys.argv[1])
text = text.split(marker, 1)[1]
n = 0
for m in re.finditer(r"^```(\w+)\n(.*?)^```\n", text, re.S | re.M):
    kind, body = m.group(1), m.group(2)
    if kind == "sh":
        n += 1
        body = "\n".join(l for l in body.splitlines() if not l.startswith("export HERDPS="))
        open("%s/%d.sh" % (sys.argv[2], n), "w").write(body + "\n")
    elif kind == "text" and n:
        open("%s/%d.expected" % (sys.argv[2], n), "w").write(body)
if n == 0:
    sys.exit("tutorial_test: no sh blocks after the marker")
PY

# Each block runs in this one shell, so that cd and variables carry to the next.
export HERDPS=$tmp/prefix
export PATH=$(dirname -- "$python"):$PATH
unset PYTHONPATH
cd "$tmp/work"
for script in $(ls "$tmp/blocks"/*.sh | sort -V); do
  n=$(basename "$script" .sh)
  echo "=== block $n"
  sed 's/^/  | /' "$script"
  # Not in a condition, so that set -e stops the test at a block's first failing
  # command (on_exit shows the block's output).
  current=$tmp/blocks/$n.out
  { source "$script"; } > "$current" 2>&1
  current=""
  { grep -v ' I[0-9]\{8\} ' "$tmp/blocks/$n.out" || true; } | sed 's/^/  > /' | head -n 40
  if [[ -f $tmp/blocks/$n.expected ]]; then
    "$python" - "$tmp/blocks/$n.expected" "$tmp/blocks/$n.out" <<'PY' || exit 1
import re, sys
shape = lambda line: re.sub(r"\d+(\.\d+)?", "#", line.rstrip())
want = [shape(l) for l in open(sys.argv[1]).read().splitlines() if l.strip() != "..."]
got = [shape(l) for l in open(sys.argv[2]).read().splitlines()]
at = 0
for line in want:
    while at < len(got) and got[at] != line:
        at += 1
    if at == len(got):
        sys.exit("tutorial test: FAILED: the output lacks, in order: %r" % line)
    at += 1
PY
  fi
done
echo "tutorial test: OK"
