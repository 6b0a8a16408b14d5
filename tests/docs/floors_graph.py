#!/usr/bin/env python3
"""The floors of the runtime, drawn from the build's own target graph.

Usage: floors_graph.py SOURCE_DIR --check   (a test: exit 1 naming every fault)
       floors_graph.py SOURCE_DIR --write   (rewrites docs/floors.dot, and docs/floors.png
                                             when Graphviz's dot is installed)

Configures SOURCE_DIR in a temporary folder with CMake's --graphviz (apps and tests off),
keeps the link edges between the floor targets (ps/CMakeLists.txt), and checks that
every edge runs down a floor: no arrow back up, none sideways (worker and server never
stand on each other), no circle. --check also compares the edges with those drawn in
docs/floors.dot, so that the picture in docs/architecture.md stays the build's.

Both modes also draw the floors from the code's own includes: every `#include "..."`
of a product file (the floors' folders) is resolved as the compiler would (the file's
own folder, then every floor's include folder) and counted per pair of floors; an
include from a floor to one that is not below it is a fault.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Target -> (floor number from the ground, folder, what it holds).
FLOORS = {
    "herdps_vocabulary": (1, "ps/vocabulary", "SArray, Status, Range, KVPairs,\\nMessage, hashing"),
    "herdps_van": (2, "van", "transport: ZeroMQ, CURVE,\\nshared memory"),
    "herdps_wire": (2, "ps/wire", "codec frames,\\nKV message parsing"),
    "herdps_runtime": (3, "ps/runtime", "Postoffice and its parts,\\nCustomer, Config, membership"),
    "herdps_services": (4, "ps/services", "clocks, orders, plugins,\\nSimpleApp"),
    "herdps_worker": (5, "worker", "KVWorker, request pipeline,\\ncodecs, OrderClient"),
    "herdps_server": (5, "server", "KVServer, OptimizerServer,\\nshards, checkpoints"),
    "herdps_facade": (6, "ps/facade", "ps/ps.h, ps/kv_app.h"),
}
EDGE = re.compile(r"//\s*(\S+)\s*->\s*(\S+)")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_arrows(source_dir):
    """{(from floor target, to floor target): count} over the product's includes."""
    folder_of = {target: folder for target, (_, folder, _) in FLOORS.items()}
    include_dirs = [(t, os.path.join(source_dir, f, "include")) for t, f in folder_of.items()]

    def floor_of(path):
        rel = os.path.relpath(path, source_dir)
        best = None
        for target, folder in folder_of.items():
            if rel.startswith(folder + os.sep) and (best is None or
                                                   len(folder) > len(folder_of[best])):
                best = target
        return best

    arrows = {}
    for target, folder in folder_of.items():
        for root, _, files in os.walk(os.path.join(source_dir, folder)):
            for name in files:
                path = os.path.join(root, name)
                if floor_of(path) != target or not name.endswith((".h", ".cc")):
                    continue
                for header in INCLUDE.findall(open(path, encoding="utf-8").read()):
                    candidates = [os.path.join(root, header)] + [
                        os.path.join(d, header) for _, d in include_dirs]
                    found = next((c for c in candidates if os.path.isfile(c)), None)
                    to = floor_of(found) if found else None
                    if to and to != target:
                        arrows[(target, to)] = arrows.get((target, to), 0) + 1
    return arrows


def build_edges(source_dir):
    if not shutil.which("cmake"):
        sys.exit("floors_graph.py: cmake is not installed")
    with tempfile.TemporaryDirectory(prefix="herdps-floors-") as build:
        with open(os.path.join(build, "CMakeGraphVizOptions.cmake"), "w") as f:
            f.write("set(GRAPHVIZ_EXTERNAL_LIBS FALSE)\n"
                    "set(GRAPHVIZ_GENERATE_PER_TARGET FALSE)\n"
                    "set(GRAPHVIZ_GENERATE_DEPENDERS FALSE)\n")
        dot = os.path.join(build, "targets.dot")
        run = subprocess.run(
            ["cmake", "-S", source_dir, "-B", build, "-DHERDPS_BUILD_TESTS=OFF",
             "-DHERDPS_BUILD_APPS=OFF", "--graphviz=" + dot],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if run.returncode != 0:
            sys.exit("floors_graph.py: cmake failed:\n" + run.stdout)
        text = open(dot, encoding="utf-8").read()
    return edges_in(text)


def edges_in(dot_text):
    return sorted({(a, b) for a, b in EDGE.findall(dot_text) if a in FLOORS and b in FLOORS})


def faults(edges):
    found = []
    for a, b in edges:
        if FLOORS[b][0] >= FLOORS[a][0]:
            found.append(f"{a} ({FLOORS[a][1]}, floor {FLOORS[a][0]}) stands on {b} "
                         f"({FLOORS[b][1]}, floor {FLOORS[b][0]}): not a floor below")
    standing = {b for _, b in edges} | {a for a, _ in edges}
    for target in FLOORS:
        if target not in standing:
            found.append(f"{target} is in no edge: is it still a target?")
    return found


def draw(edges):
    lines = ["// The floors of the runtime, from the build's own target graph (CMake",
             "// --graphviz). Made by tests/docs/floors_graph.py SOURCE_DIR --write; the",
             "// test docs.floors_are_the_builds_graph compares it with the build.",
             "digraph floors {",
             '  rankdir = TB; nodesep = 0.4; ranksep = 0.5;',
             '  node [shape = box, style = "rounded,filled", fillcolor = "#eef3fb", '
             'fontname = "Helvetica", fontsize = 11];',
             '  edge [color = "#555555", arrowsize = 0.7];']
    for floor in sorted({f for f, _, _ in FLOORS.values()}, reverse=True):
        names = [t for t, (f, _, _) in FLOORS.items() if f == floor]
        lines.append("  { rank = same; " + " ".join(f'"{t}";' for t in names) + " }")
    for target, (floor, folder, holds) in FLOORS.items():
        lines.append(f'  "{target}" [label = "{folder}/\\n{holds}\\n(floor {floor})"];')
    for a, b in edges:
        lines.append(f'  "{a}" -> "{b}";  // {a} -> {b}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("--check", "--write"):
        print(__doc__, file=sys.stderr)
        return 2
    source_dir = os.path.abspath(sys.argv[1])
    drawn_path = os.path.join(source_dir, "docs", "floors.dot")
    edges = build_edges(source_dir)
    problems = faults(edges)
    arrows = include_arrows(source_dir)
    for (a, b), n in sorted(arrows.items()):
        if FLOORS[b][0] >= FLOORS[a][0]:
            problems.append(f"{n} include(s) from {FLOORS[a][1]} (floor {FLOORS[a][0]}) to "
                            f"{FLOORS[b][1]} (floor {FLOORS[b][0]}): not a floor below")
    if sys.argv[2] == "--write":
        with open(drawn_path, "w", encoding="utf-8") as f:
            f.write(draw(edges))
        if shutil.which("dot"):
            subprocess.run(["dot", "-Tpng", "-Gdpi=110", drawn_path, "-o",
                            os.path.join(source_dir, "docs", "floors.png")], check=True)
        else:
            print("floors_graph.py: Graphviz's dot is not installed; docs/floors.png not redrawn")
    else:
        drawn = edges_in(open(drawn_path, encoding="utf-8").read()) if os.path.exists(
            drawn_path) else []
        if drawn != edges:
            problems.append("docs/floors.dot is not the build's graph: only in the build "
                            f"{sorted(set(edges) - set(drawn))}, only drawn "
                            f"{sorted(set(drawn) - set(edges))}; rerun with --write")
    print("links (the build's target graph):")
    for a, b in edges:
        print(f"  {FLOORS[a][1]:>13} (floor {FLOORS[a][0]}) -> {FLOORS[b][1]} (floor {FLOORS[b][0]})")
    print("includes between floors (from the code):")
    for (a, b), n in sorted(arrows.items(), key=lambda kv: (-FLOORS[kv[0][0]][0], kv[0])):
        print(f"  {FLOORS[a][1]:>13} (floor {FLOORS[a][0]}) -> {FLOORS[b][1]} "
              f"(floor {FLOORS[b][0]}): {n}")
    for p in problems:
        print("FAULT: " + p, file=sys.stderr)
    print(f"{len(edges)} link edges and {len(arrows)} include arrows among {len(FLOORS)} "
          f"floors, {len(problems)} faults")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
