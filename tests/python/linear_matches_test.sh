#!/usr/bin/env bash
# python/examples/linear.py (numpy) against apps/linear (C++), one worker and one
# server, the same settings: the training loss printed after every epoch must be the
# same to the 6 decimals both print, in two configurations (minibatch Adam with L2,
# full-batch SGD). Also runs the numpy app with 3 workers and 2 servers to the end.
#
#   linear_matches_test.sh SOURCE_DIR LINEAR_BINARY PYTHON PYTHONPATH
set -euo pipefail
[[ $# -eq 4 ]] || { echo "usage: $0 SOURCE_DIR LINEAR_BINARY PYTHON PYTHONPATH" >&2; exit 2; }
source_dir=$1 linear=$2 python=$3 package=$4
launch=("$python" "$source_dir/tracker/launch" --timeout 120)
losses() { grep -o 'epoch [0-9]*/[0-9]*: train_loss [0-9.]*' || true; }

for settings in "--epochs 20 --reg_l2 0.001" "--epochs 10 --batch_size 0 --optimizer sgd --lr 0.5"
do
  read -r -a flags <<<"$settings"
  numpy=$(PYTHONPATH=$package "${launch[@]}" -n 1 -s 1 -- \
    "$python" "$source_dir/python/examples/linear.py" "${flags[@]}" 2>&1 | losses)
  cpp=$("${launch[@]}" -n 1 -s 1 -- "$linear" "${flags[@]}" --test_fraction 0 2>&1 | losses)
  epochs=$(grep -c . <<<"$cpp" || true)
  if [[ $numpy != "$cpp" || $epochs -lt 10 ]]; then
    echo "FAILED with $settings: numpy (left) and apps/linear (right) differ:" >&2
    diff <(echo "$numpy") <(echo "$cpp") >&2 || true
    exit 1
  fi
  echo "same losses over $epochs epochs with $settings: $(tail -n 1 <<<"$cpp")"
done

out=$(PYTHONPATH=$package "${launch[@]}" -n 3 -s 2 -- \
  "$python" "$source_dir/python/examples/linear.py" --epochs 5 2>&1 | losses)
grep -q 'epoch 5/5: train_loss' <<<"$out" || { echo "FAILED: 3 workers: $out" >&2; exit 1; }
echo "3 workers, 2 servers: $(tail -n 1 <<<"$out")"
