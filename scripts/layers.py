#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the order in which a program's modules call each other, from their object files.

A module is a folder of sources; a call is a symbol one module's object leaves undefined and
another's defines (nm). gpumd's modules (docs/architecture.md) are layered: each may call only
the modules below it in ORDER (files at the top of src/gpumd are the "daemon", the top), never
one above, so no circle of calls can form between them. libgpum's modules must call each other
in no circle.

Usage: layers.py BUILD_DIR                    check gpumd and libgpum in a build
       layers.py --objects DIR [--order A,B..] check the objects below DIR (the tests' own)
Prints each call against the order and exits 1 when there is one, 0 when all is in order.
"""
import collections
import os
import subprocess
import sys

GPUMD_ORDER = ["util", "sched", "ledger", "net", "devices", "cluster", "obs", "engine", "ops",
               "proto", "rest", "daemon"]


def read_objects(root, top_name, sources=None):
    """{module: (defined symbols, undefined symbols)} for the *.o below root. With sources (the
    folders a build compiles from), an object whose source is in none of them is left out: it
    is left over from a file since moved or removed. An object of a source outside the folder
    (CMake names its path "__/NAME/...") is in module NAME."""
    mods = collections.defaultdict(lambda: (set(), set()))
    for dirpath, _, names in os.walk(root):
        for n in sorted(names):
            if not n.endswith(".o"):
                continue
            rel = os.path.relpath(dirpath, root)
            up = os.path.join(*[".." if x == "__" else x for x in rel.split(os.sep)])
            if sources and not any(os.path.exists(os.path.join(d, up, n[:-2])) for d in sources):
                continue
            parts = [] if rel == "." else rel.split(os.sep)
            while parts and parts[0] == "__":
                parts.pop(0)
            mod = parts[0] if parts else top_name
            out = subprocess.run(["nm", os.path.join(dirpath, n)], capture_output=True,
                                 text=True, check=True).stdout
            defined, undefined = mods[mod]
            for line in out.splitlines():
                f = line.split()
                if len(f) == 3 and f[1] in "TDBRC":
                    defined.add(f[2])
                elif len(f) == 2 and f[0] == "U":
                    undefined.add(f[1])
    return mods


def calls(mods):
    """{(caller, callee): sorted symbols} between different modules."""
    owner = {}
    for m, (defined, _) in mods.items():
        for s in defined:
            owner[s] = m
    edges = collections.defaultdict(set)
    for m, (_, undefined) in mods.items():
        for s in undefined:
            o = owner.get(s)
            if o is not None and o != m:
                edges[(m, o)].add(s)
    return {k: sorted(v) for k, v in edges.items()}


def cycles(edges):
    """The strongly connected components of more than one module (Tarjan)."""
    graph = collections.defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(graph) | {b for bs in graph.values() for b in bs}):
        if v not in index:
            visit(v)
    return out


def check(name, root, top_name, order, sources=None):
    if not os.path.isdir(root):
        print(f"layers: {name}: no objects at {root} (build first)", file=sys.stderr)
        return 1
    mods = read_objects(root, top_name, sources)
    edges = calls(mods)
    bad = 0
    if order:
        rank = {m: i for i, m in enumerate(order)}
        for m in sorted(mods):
            if m not in rank:
                print(f"layers: {name}: module '{m}' is not in the order {','.join(order)}")
                bad += 1
        for (a, b), syms in sorted(edges.items()):
            if a in rank and b in rank and rank[a] < rank[b]:
                print(f"layers: {name}: {a} calls {b}, which is above it: {' '.join(syms[:8])}")
                bad += 1
    for comp in cycles(edges):
        print(f"layers: {name}: modules that call each other in a circle: {' '.join(comp)}")
        for (a, b), syms in sorted(edges.items()):
            if a in comp and b in comp:
                print(f"  {a} -> {b}: {' '.join(syms[:8])}")
        bad += 1
    if not bad:
        print(f"layers: {name}: {len(mods)} modules, {len(edges)} calls between them, in order")
    return 1 if bad else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "--objects":
        order = argv[4].split(",") if len(argv) >= 5 and argv[3] == "--order" else None
        return check("objects", argv[2], "top", order)
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build = argv[1]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rc = check("gpumd", os.path.join(build, "src/gpumd/CMakeFiles/gpumd_core.dir"), "daemon",
               GPUMD_ORDER, [os.path.join(repo, "src/gpumd"), os.path.join(build, "src/gpumd")])
    rc |= check("libgpum", os.path.join(build, "src/lib/CMakeFiles/gpum_objs.dir"), "top", None,
                [os.path.join(repo, "src/lib")])
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
