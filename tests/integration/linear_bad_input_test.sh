#!/usr/bin/env bash
# apps/linear on bad input: the job stops on its own (launcher status non-zero, not its
# timeout's 124), the output says what was wrong and where (file, line), and no node of
# the job is left running. A bad flag stops every node with status 2 before the job starts.
# Usage: linear_bad_input_test.sh LAUNCHER LINEAR
set -uo pipefail
launcher=$1
app=$(realpath "$2")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

failures=0
problems=()  # what the current case found wrong
out=""       # the current job's merged output
rc=0         # the current job's launcher exit status
seconds=0    # how long the current job took

# PIDs of live processes whose environment holds $1: this job's nodes only, even when
# other tests run the same binary at the same time.
nodes_with() {
  local env pid stat state
  grep -lsaF -- "$1" /proc/[0-9]*/environ | while read -r env; do
    pid=${env#/proc/}
    pid=${pid%/environ}
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
    state=${stat##*) }
    [[ ${state%% *} == Z ]] || echo "$pid"
  done
}

# run_job WORKERS ARGS...: runs LINEAR ARGS under the launcher with 1 server and
# WORKERS workers, then checks that the job failed by itself and left no node behind.
run_job() {
  local workers=$1
  shift
  local marker
  marker="HERDPS_TEST_MARKER=$(cat /proc/sys/kernel/random/uuid)"
  local start=$EPOCHREALTIME
  out=$(timeout -k 5 90 python3 "$launcher" -n "$workers" -s 1 --timeout 60 --env "$marker" \
        -- "$app" "$@" 2>&1)
  rc=$?
  seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  if ((rc == 0)); then problems+=("the launcher exited 0"); fi
  if ((rc == 124)); then problems+=("the job ran into its timeout instead of stopping"); fi
  # Generous: a failing node stops the job within seconds, but a loaded machine is slow
  # to start the nodes.
  if awk -v s="$seconds" 'BEGIN { exit !(s > 30) }'; then problems+=("the job took $seconds s"); fi
  sleep 0.5
  local left
  mapfile -t left < <(nodes_with "$marker")
  if ((${#left[@]} > 0)); then
    problems+=("nodes left running: ${left[*]}")
    kill -9 "${left[@]}" 2>/dev/null
  fi
}

# expect_output TEXT: the job's output holds TEXT (literally).
expect_output() {
  grep -qF -- "$1" <<<"$out" || problems+=("the output lacks: $1")
}

# finish NAME: prints PASS or FAIL for the case and resets the per-case state.
finish() {
  if ((${#problems[@]} == 0)); then
    echo "PASS $1 (exit status $rc, $seconds s)"
  else
    echo "FAIL $1 (exit status $rc, $seconds s)"
    printf '  - %s\n' "${problems[@]}"
    echo "  output (last 15 lines):"
    tail -n 15 <<<"$out" | sed 's/^/    | /'
    failures=$((failures + 1))
  fi
  problems=()
}

missing=$dir/no_such_train.csv
run_job 2 --train "$missing"
expect_output "linear: $missing: cannot open"
finish "a missing --train file is named in the error"

# Line 3 is blank: line numbers count every line of the file, as an editor does.
printf 'a,b,label\n1,2,0\n\n3,4,1\n5,6\n7,8,0\n' >"$dir/short_row.csv"
run_job 2 --train "$dir/short_row.csv"
expect_output "linear: $dir/short_row.csv: line 5: "
finish "a CSV line with a missing field is reported with file and line"

printf 'a,b,label\n1,2,0\n3,4,1\n5,6,2\n7,8,0\n' >"$dir/label_2.csv"
run_job 2 --train "$dir/label_2.csv"
expect_output "linear: $dir/label_2.csv: line 4: label \"2\" is not binary"
finish "a CSV label outside 0/1 and -1/+1 is reported with file and line"

printf '# a comment line\n+1 1:0.5 3:1\n-1 2:1 4=0.5\n+1 1:1\n' >"$dir/bad_token.svm"
run_job 2 --train "$dir/bad_token.svm"
expect_output "linear: $dir/bad_token.svm: line 3: malformed token \"4=0.5\""
finish "a malformed libsvm token is reported with file and line"

# The training data has features 0..3; the test data may not use a feature the model
# has no weight for.
printf '1 1:0.5 3:1\n0 0:1 2:1\n1 1:1\n0 2:2\n' >"$dir/train.svm"
printf '1 1:0.5\n0 2:1 9:1\n' >"$dir/test.svm"
run_job 2 --train "$dir/train.svm" --test "$dir/test.svm"
expect_output "linear: $dir/test.svm: line 2: feature index out of range: 9 >= max_features 4"
finish "a libsvm --test feature beyond the training features is out of range"

printf 'a,b,label\n1,2,0\n3,4,1\n5,6,0\n' >"$dir/three_rows.csv"
run_job 4 --train "$dir/three_rows.csv" --test_fraction 0
expect_output "of 4 gets no training rows: 3 rows are too few"
finish "3 rows for 4 workers: a worker with no rows stops the job"

# A bad flag is refused before ps::Start: the app alone, without any job environment,
# exits 2 at once, and so does every node under the launcher.
direct=$(timeout 10 "$app" --optimizer adamw 2>&1)
direct_rc=$?
((direct_rc == 2)) || problems+=("linear --optimizer adamw alone exited $direct_rc, not 2")
run_job 2 --optimizer adamw
((rc == 2)) || problems+=("the launcher exited $rc, not 2 (the nodes' status)")
message=$(grep -m1 -F "linear: --optimizer" <<<"$out"$'\n'"$direct")
if [[ -z $message ]]; then
  problems+=("no 'linear: --optimizer ...' message")
else
  for name in sgd momentum nesterov adagrad rmsprop adam amsgrad ftrl; do
    grep -qw -- "$name" <<<"$message" || problems+=("the message does not list $name: $message")
  done
fi
finish "--optimizer adamw exits 2 before the job starts and lists the valid names"

if ((failures > 0)); then
  echo "FAILED: $failures case(s)"
  exit 1
fi
echo "PASSED: all cases"
