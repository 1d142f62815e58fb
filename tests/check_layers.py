#!/usr/bin/env python3
"""check_layers.py LIBRARY.a: no two source files of the library call each other.

Reads the static library's members with `nm`, draws an edge from each object file to every
member that defines a symbol it uses, and fails (exit 1, printing the cycle) when the graph has
a cycle: a layer calling a layer above it. Prints the graph either way."""
import subprocess
import sys


def members(archive):
    out = subprocess.run(["nm", "-A", archive], check=True, capture_output=True, text=True).stdout
    defined, used = {}, {}
    for line in out.splitlines():
        where, _, rest = line.rpartition(":")
        member = where.rsplit(":", 1)[-1].removesuffix(".o").removesuffix(".c")
        parts = rest.split()
        defined.setdefault(member, set())
        used.setdefault(member, set())
        if len(parts) == 3 and parts[1] in "TDBRVW":
            defined[member].add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used[member].add(parts[1])
    return defined, used


def main():
    defined, used = members(sys.argv[1])
    owner = {sym: m for m, syms in defined.items() for sym in syms}
    edges = {m: sorted({owner[s] for s in used[m] if s in owner and owner[s] != m}) for m in used}
    for m in sorted(edges):
        print(f"{m} -> {', '.join(edges[m]) or '(nothing)'}")
    state, path = {}, []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in edges[m]:
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            cycle = visit(m)
            if cycle:
                print("cycle: " + " -> ".join(cycle))
                return 1
    print(f"{len(edges)} source files, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
