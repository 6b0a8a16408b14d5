#!/usr/bin/env bash
# apps/linear with 1 worker, 1 server, --batch_size 0, zeros and plain SGD, on the
# bundled HMDA data, against a double-precision full-batch gradient descent reference.
# Usage: linear_gd_reference_test.sh LAUNCHER LINEAR REFERENCE
set -euo pipefail
launcher=$1
app=$2
reference=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
flags=(--epochs 60 --batch_size 0 --optimizer sgd --lr 0.5 --init zeros --reg_l2 0.001)
python3 "$launcher" -n 1 -s 1 --timeout 120 -- "$app" "${flags[@]}" --save_model "$dir/model.txt"
"$reference" "${flags[@]}" --model "$dir/model.txt"
