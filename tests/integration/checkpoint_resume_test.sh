#!/usr/bin/env bash
# Servers checkpoint at the end of one job; a second job resumes from the checkpoints
# and continues training. The weights after both jobs must equal, bit for bit, a local
# replay of all pushes in order, which holds only if values, momentum state and step
# counts all came back exactly. Then a truncated checkpoint must stop the job with an
# error that names the file.
# Usage: checkpoint_resume_test.sh LAUNCHER APP
set -euo pipefail
launcher=$1
app=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() { python3 "$launcher" -n 2 -s 2 --timeout 60 -- "$app" --threads 2 --checkpoint_dir "$dir" "$@"; }

echo "== job 1: 600 pushes per worker, checkpoint at the end"
run --pushes 600 --save_checkpoint
ls -l "$dir"
[[ -f $dir/server-0.ckpt && -f $dir/server-1.ckpt ]] || { echo "FAILED: no checkpoints"; exit 1; }
if ls "$dir"/*.tmp >/dev/null 2>&1; then echo "FAILED: temporary files left"; exit 1; fi

echo "== job 2: resume, 600 more pushes per worker, compare with a replay of all 1200"
run --pushes 1200 --skip_pushes 600

echo "== job 3: a truncated checkpoint is refused with a clear error"
size=$(stat -c %s "$dir/server-1.ckpt")
truncate -s $((size / 2)) "$dir/server-1.ckpt"
set +e
out=$(run --pushes 10 2>&1)
rc=$?
set -e
echo "$out" | tail -5
if [[ $rc -eq 0 ]]; then echo "FAILED: the job ran on a truncated checkpoint"; exit 1; fi
if ! grep -q "checkpoint $dir/server-1.ckpt is unusable" <<<"$out"; then
  echo "FAILED: the error does not name the truncated file"
  exit 1
fi
echo "PASSED"
