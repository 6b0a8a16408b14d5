#!/usr/bin/env python3
"""Runs a command and checks how it ended: its exit status and lines of its output.

Usage: expect_output.py --exit N [--line REGEX]... [--timeout S] -- COMMAND...

Passes when COMMAND exits with status N within S seconds (default 120) and every REGEX
matches some line of its merged output; prints the output and what failed otherwise.
"""
import argparse
import re
import sys

from script_checks import check, failures, run, tail


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--exit", type=int, required=True, dest="status")
    p.add_argument("--line", action="append", default=[])
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command")
    status, out = run(command, timeout=args.timeout)
    print(out, end="")
    check(status == args.status, f"exit status {status}, expected {args.status}")
    for pattern in args.line:
        check(any(re.search(pattern, line) for line in out.splitlines()),
              f"a line matches {pattern!r}")
    if failures:
        print(tail(out))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
