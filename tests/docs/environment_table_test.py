#!/usr/bin/env python3
"""The environment tables in the docs name exactly the variables the code reads.

Usage: environment_table_test.py SOURCE_DIR

Compares three lists: the names ps/runtime/config*.cc look up (string literals passed to
Lookup, or in the list of port variables), Config::kNames (the code's own list), and the
variable tables of README.md ("variable | ps-lite alias") and
docs/ps-lite-compatibility.md ("ps-lite | HerdPS"). Exits 1 naming every difference.
"""
import os
import re
import sys

NAME = r"(?:PS|DMLC)_[A-Z_]+|PORT"


def config_lookups(text):
    body = text.split("const char* const Config::kNames[]")[0]
    names = set()
    for call in re.findall(r"Lookup\(getenv,\s*([^)]*)\)", body):
        names.update(re.findall(r'"(' + NAME + r')"', call))
    for group in re.findall(r"for \(const char\* candidate : \{([^}]*)\}\)", body):
        names.update(re.findall(r'"(' + NAME + r')"', group))
    return names


def config_knames(text):
    m = re.search(r"Config::kNames\[\] = \{(.*?)\};", text, re.S)
    return set(re.findall(r'"(' + NAME + r')"', m.group(1))) if m else set()


def table_names(text, header):
    """Backticked variable names in the table that starts with `header`."""
    start = text.find(header)
    if start < 0:
        return None
    names = set()
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = line.split("|")[1:3]  # the two name columns
        for cell in cells:
            names.update(re.findall(r"`(" + NAME + r")(?:=[^`]*)?`", cell))
    return names


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = sys.argv[1]
    read = lambda p: open(os.path.join(src, p), encoding="utf-8").read()
    config = read("ps/runtime/config.cc")
    # Config::FromEnvironment reads through several files (config_fields.h).
    runtime = os.path.join(src, "ps/runtime")
    readers = sorted(f for f in os.listdir(runtime) if re.fullmatch(r"config\w*\.cc", f))
    everything = "".join(read(os.path.join("ps/runtime", f)) for f in readers if f != "config.cc")
    looked_up, knames = config_lookups(everything + config), config_knames(config)
    # PS_VERBOSE is also read by ps/logging.h (PS_VLOG); it is in the config too.
    readme = table_names(read("README.md"), "| variable | ps-lite alias |")
    compat = table_names(read("docs/ps-lite-compatibility.md"), "| ps-lite | HerdPS |")
    failures = []
    if not looked_up:
        failures.append("found no Lookup calls in ps/runtime/config*.cc")
    if looked_up != knames:
        failures.append(f"Config::kNames differs from what config*.cc read: only read "
                        f"{sorted(looked_up - knames)}, only listed {sorted(knames - looked_up)}")
    if readme is None or compat is None:
        failures.append("a table header was not found")
    else:
        if readme != knames:
            failures.append(f"README's table differs from the code: missing "
                            f"{sorted(knames - readme)}, not read {sorted(readme - knames)}")
        # The compat table lists every ps-lite name the code reads, and DMLC_RANK (set,
        # not read).
        pslite = {n for n in knames if n.startswith("DMLC_") or n == "PORT"} | {
            "PS_VERBOSE", "PS_HEARTBEAT_INTERVAL", "PS_HEARTBEAT_TIMEOUT", "PS_RESEND",
            "PS_RESEND_TIMEOUT", "PS_DROP_MSG"}
        missing = pslite - compat
        extra = compat - knames - {"DMLC_RANK"}
        if missing or extra:
            failures.append(f"docs/ps-lite-compatibility.md's table: missing {sorted(missing)}, "
                            f"not read by the code {sorted(extra)}")
    print(f"config.cc reads {len(looked_up)} names; README lists {len(readme or ())}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
