#!/usr/bin/env python3
"""Runs apps/order_replay on hand-checked cases, and on malformed ones.

  order_replay_check.py BUILD/apps/order_replay hand_checked|malformed

hand_checked: integer-valued gradients, so the float64 dot products are exact and the
output must equal the hand computation below exactly. malformed: every bad input must
exit 2 with a message on stderr that says what was wrong, and print nothing on stdout.
"""
import json
import os
import subprocess
import sys
import tempfile

# m = 2 workers, n = 5 examples (odd: the last visited example stays last), d = 2.
# Pair differences d = grads[2k][i] - grads[2k+1][i]:
#   worker 0: pair 0 [1,0]-[0,1] = [1,-1]   pair 1 [2,1]-[0,0] = [2,1]
#   worker 1: pair 0 [0,2]-[1,0] = [-1,2]   pair 1 [1,1]-[1,0] = [0,1]
# CD-GraB, one h, pair outer, worker inner:
#   (0,w0) <0,d> = 0 tie  -> +1, h = [1,-1]
#   (0,w1) <h,d> = -3     -> +1, h = [0,1]
#   (1,w0) <h,d> = 1 > 0  -> -1, h = [-2,0]
#   (1,w1) <h,d> = 0 tie  -> +1, h = [-2,1]
# ID-GraB, worker 1 alone: h = [-1,2] after pair 0, <h,[0,1]> = 2 > 0 -> -1 (differs).
# Next orders (slots k and n-2-k, the last example keeps slot 4):
#   w0 pi [3,0,4,1,2]: +1 -> 3 first, 0 fourth; -1 -> 1 second, 4 third: [3,1,4,0,2]
#   w1 pi [1,2,0,4,3]: CD +1,+1 -> [1,0,4,2,3]; ID +1,-1 -> [1,4,0,2,3]
HAND_CHECKED = [
    (
        {
            "m": 2, "n": 5, "d": 2,
            "orders": [[3, 0, 4, 1, 2], [1, 2, 0, 4, 3]],
            "grads": [[[1, 0], [0, 2]], [[0, 1], [1, 0]], [[2, 1], [1, 1]],
                      [[0, 0], [1, 0]], [[5, 5], [-1, 7]]],
            "note": "other keys are ignored",
        },
        {
            "cdgrab_signs": [[1, 1], [-1, 1]],
            "cdgrab_next_orders": [[3, 1, 4, 0, 2], [1, 0, 4, 2, 3]],
            "idgrab_next_orders": [[3, 1, 4, 0, 2], [1, 4, 0, 2, 3]],
        },
    ),
    # All-zero gradients: every <h,d> is a tie, so every sign is +1 and the next order is
    # the even positions in order, then the odd ones reversed.
    (
        {"m": 1, "n": 6, "d": 3, "orders": [[5, 4, 3, 2, 1, 0]],
         "grads": [[[0, 0, 0]]] * 6},
        {"cdgrab_signs": [[1], [1], [1]], "cdgrab_next_orders": [[5, 3, 1, 0, 2, 4]],
         "idgrab_next_orders": [[5, 3, 1, 0, 2, 4]]},
    ),
    # Non-integers that are exact in binary, and a negative zero.
    (
        {"m": 1, "n": 4, "d": 1, "orders": [[0, 1, 2, 3]],
         "grads": [[[0.5]], [[-0.0]], [[2.5e-1]], [[1E-1]]]},
        # pair 0: d = 0.5, tie -> +1, h = 0.5; pair 1: d = 0.25 - 0.1 > 0, <h,d> > 0 -> -1
        {"cdgrab_signs": [[1], [-1]], "cdgrab_next_orders": [[0, 3, 2, 1]],
         "idgrab_next_orders": [[0, 3, 2, 1]]},
    ),
    (
        {"m": 2, "n": 0, "d": 1, "orders": [[], []], "grads": []},
        {"cdgrab_signs": [], "cdgrab_next_orders": [[], []], "idgrab_next_orders": [[], []]},
    ),
]

GOOD = json.dumps(HAND_CHECKED[0][0])

# (what is wrong, input text or None for "no such file", a phrase the message must contain)
MALFORMED = [
    ("truncated JSON", GOOD[:-10], "not valid JSON at line 1"),
    ("a syntax error on line 3", '{"m": 1,\n "n": 2,\n "d": 1 "orders": []}', "line 3"),
    ("text after the value", GOOD + " x", "after the JSON value"),
    ("not an object", "[1, 2]", "must be a JSON object"),
    ("a missing key", GOOD.replace('"grads"', '"gradients"'), 'missing key "grads"'),
    ("a duplicate key", GOOD.replace('"n": 5', '"n": 5, "n": 5'), 'duplicate key "n"'),
    ("m zero", GOOD.replace('"m": 2', '"m": 0'), "m must be an integer >= 1"),
    ("n not an integer", GOOD.replace('"n": 5', '"n": 4.5'), "n must be an integer"),
    ("one order too few", GOOD.replace('"m": 2', '"m": 3'), "orders has 2 entries, expected 3"),
    ("a short order", GOOD.replace("[3, 0, 4, 1, 2]", "[3, 0, 4, 1]"),
     "orders[0] has 4 entries, expected 5"),
    ("an order that is not a permutation", GOOD.replace("[3, 0, 4, 1, 2]", "[3, 0, 4, 1, 1]"),
     "not a permutation"),
    ("an example out of range", GOOD.replace("[3, 0, 4, 1, 2]", "[3, 0, 4, 1, 5]"),
     "not a permutation"),
    ("a step too few", GOOD.replace(", [[5, 5], [-1, 7]]", ""), "grads has 4 entries, expected 5"),
    ("a gradient of the wrong dimension", GOOD.replace("[[5, 5], [-1, 7]]", "[[5, 5], [-1]]"),
     "grads[4][1] has 1 entries, expected 2"),
    ("a string for a number", GOOD.replace("[[5, 5], [-1, 7]]", '[[5, 5], [-1, "7"]]'),
     "grads[4][1] must be a number"),
    ("a number beyond float", GOOD.replace("[[5, 5], [-1, 7]]", "[[5, 5], [-1, 1e39]]"),
     "does not fit in a float"),
    ("a number beyond double", GOOD.replace("[[5, 5], [-1, 7]]", "[[5, 5], [-1, 1e999]]"),
     "out of range"),
    ("a difference that overflows",
     GOOD.replace("[[1, 0], [0, 2]], [[0, 1], [1, 0]]",
                  "[[3e38, 0], [0, 2]], [[-3e38, 1], [1, 0]]"),
     "non-finite"),
    ("NaN", GOOD.replace("[[5, 5], [-1, 7]]", "[[5, 5], [-1, NaN]]"), "unexpected character"),
    ("an empty file", "", "unexpected end of input"),
    ("no such file", None, "cannot open"),
]


def run(binary, text, tmp):
    path = os.path.join(tmp, "case.json")
    if text is None:
        path = os.path.join(tmp, "missing.json")
    else:
        with open(path, "w") as f:
            f.write(text)
    return subprocess.run([binary, path], capture_output=True, text=True, timeout=60)


def parsed(text):
    try:
        return json.loads(text)
    except ValueError:
        return "not JSON: " + text


def hand_checked(binary, tmp):
    failures = 0
    for number, (case, want) in enumerate(HAND_CHECKED):
        got = run(binary, json.dumps(case), tmp)
        if got.returncode != 0 or got.stderr:
            print(f"case {number}: exit {got.returncode}, stderr: {got.stderr}")
            failures += 1
            continue
        if parsed(got.stdout) != want:
            print(f"case {number}: got\n{got.stdout}\nwant\n{json.dumps(want)}")
            failures += 1
    # Standard input works too.
    got = subprocess.run([binary, "-"], input=json.dumps(HAND_CHECKED[0][0]),
                         capture_output=True, text=True, timeout=60)
    if got.returncode != 0 or parsed(got.stdout) != HAND_CHECKED[0][1]:
        print(f"from stdin: exit {got.returncode}\n{got.stdout}{got.stderr}")
        failures += 1
    return failures


def malformed(binary, tmp):
    failures = 0
    for what, text, phrase in MALFORMED:
        got = run(binary, text, tmp)
        if got.returncode != 2 or got.stdout or phrase not in got.stderr:
            print(f"{what}: exit {got.returncode} (want 2), stdout {got.stdout!r}, "
                  f"stderr {got.stderr!r} (want it to contain {phrase!r})")
            failures += 1
    got = subprocess.run([binary], capture_output=True, text=True, timeout=60)
    if got.returncode != 2 or "usage" not in got.stderr:
        print(f"no arguments: exit {got.returncode}, stderr {got.stderr!r}")
        failures += 1
    return failures


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("hand_checked", "malformed"):
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        check = hand_checked if sys.argv[2] == "hand_checked" else malformed
        failures = check(sys.argv[1], tmp)
    print(f"{sys.argv[2]}: {'FAILED' if failures else 'passed'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
