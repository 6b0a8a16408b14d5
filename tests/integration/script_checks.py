"""Small helpers shared by the test scripts that drive apps and tracker tools: named
checks that print PASS / FAIL and collect the failures, bounded command runs, CSV reading.
"""
import csv
import subprocess

failures = []  # what failed, in order


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def run(cmd, timeout=120, env=None):
    """Runs cmd (stdin closed, output merged); returns (exit status, output)."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    return r.returncode, r.stdout


def tail(out, n=20):
    return "\n".join("    | " + line for line in out.splitlines()[-n:])


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
