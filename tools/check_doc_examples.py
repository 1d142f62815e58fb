#!/usr/bin/env python3
"""Compiles, links and runs the C examples of README.md and docs/*.md against a built packfn.

Every ```c block is one example, named by its file and the line of its opening fence:
  - a block that defines main() is a program: compiled, linked against libpackfn (and the other
    libraries given with --lib) and run; it fails on a compiler message or a non-zero exit;
  - a block without main() is a translation unit (a library source, declarations): compiled
    with -c only. One with no #include of its own is compiled after #include "packfn/packfn.h"
    (it shows declarations of that API); one with its own #includes is compiled as it stands;
  - a marker, an HTML comment on the line just before the fence (invisible once rendered),
    changes that:
      <!-- doc-check: body DECLS -->   the block is statements: compiled (-c only) as the body
          of `int doc_check_body(void)`, after <stdio.h>, "packfn/packfn.h" and DECLS (file
          scope declarations of what the block uses but does not declare, e.g.
          `DLTensor *x, *out;`). Its values are there for the reader to look at, so the unused
          variable warnings are off for bodies alone;
      <!-- doc-check: cuda -->         a CUDA C++ source (.cu): compiled (-c) with --nvcc
          (-std=c++17, host warnings as errors), or skipped, saying so, without --nvcc;
      <!-- doc-check: skip REASON -->  not compiled; the reason is printed.
Each source starts with a #line directive, so diagnostics name the markdown file and line.
Flags: -std=c11 -Wall -Wextra -Werror plus --cflag. Exit status 0 when every example passed.

Usage: check_doc_examples.py --root SRC --cc CC --include DIR... --lib LIBFILE...
                             [--cflag=F...] [--nvcc NVCC] [--only FILE:LINE] [--keep DIR]
                             [--verbose] [-- WRAPPER...]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^\s*<!--\s*doc-check:\s*(\S+)\s*(.*?)\s*-->\s*$")
ANY_MARKER = re.compile(r"doc-check:")
MAIN = re.compile(r"^\s*int\s+main\s*\(", re.M)
INCLUDE = re.compile(r"^\s*#\s*include\b", re.M)
STD_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
BODY_FLAGS = ["-Wno-unused-variable", "-Wno-unused-but-set-variable"]
RUN_TIMEOUT_S = 120


class Block:
    def __init__(self, path, line, text, kind, arg):
        self.path, self.line, self.text, self.kind, self.arg = path, line, text, kind, arg

    @property
    def name(self):
        return "%s:%d" % (self.path, self.line)


def extract(root, rel):
    """The ```c blocks of one markdown file, each with its marker; errors for stray markers."""
    blocks, errors = [], []
    lines = open(os.path.join(root, rel), encoding="utf-8").read().split("\n")
    pending = None  # (line number, kind, arg) of a marker not yet used by a fence
    i = 0
    while i < len(lines):
        line = lines[i]
        m = MARKER.match(line)
        if m:
            if pending:
                errors.append("%s:%d: doc-check marker not followed by a ```c block" %
                              (rel, pending[0]))
            if m.group(1) not in ("body", "cuda", "skip"):
                errors.append("%s:%d: unknown doc-check marker '%s'" % (rel, i + 1, m.group(1)))
            pending = (i + 1, m.group(1), m.group(2))
            i += 1
            continue
        if ANY_MARKER.search(line) and "<!--" in line:
            errors.append("%s:%d: malformed doc-check marker (one line: "
                          "<!-- doc-check: KIND ... -->)" % (rel, i + 1))
        if line.startswith("```"):
            fence_line = i + 1
            lang = line[3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if lang == "c":
                kind, arg = "auto", ""
                if pending:
                    if pending[0] != fence_line - 1:
                        errors.append("%s:%d: doc-check marker must be on the line just before "
                                      "the fence" % (rel, pending[0]))
                    kind, arg = pending[1], pending[2]
                    pending = None
                blocks.append(Block(rel, fence_line, "\n".join(lines[i + 1:j]) + "\n", kind, arg))
            elif pending:
                errors.append("%s:%d: doc-check marker not followed by a ```c block" %
                              (rel, pending[0]))
                pending = None
            i = j + 1
            continue
        if pending and line.strip():
            errors.append("%s:%d: doc-check marker not followed by a ```c block" %
                          (rel, pending[0]))
            pending = None
        i += 1
    if pending:
        errors.append("%s:%d: doc-check marker not followed by a ```c block" % (rel, pending[0]))
    return blocks, errors


def source_of(block):
    """(C source, extra flags, whether to link and run) for a block."""
    line_dir = '#line %d "%s"\n' % (block.line + 1, block.path)
    if block.kind == "body":
        src = ("#include <stdio.h>\n#include \"packfn/packfn.h\"\n#line %d \"%s\"\n%s\n"
               "int doc_check_body(void);\nint doc_check_body(void) {\n%s%s\nreturn 0;\n}\n" %
               (block.line - 1, block.path, block.arg, line_dir, block.text))
        return src, BODY_FLAGS, False
    if MAIN.search(block.text):
        return line_dir + block.text, [], True
    if INCLUDE.search(block.text):
        return line_dir + block.text, [], False
    return "#include \"packfn/packfn.h\"\n" + line_dir + block.text, [], False


def run_cmd(cmd, timeout=None):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return 124, (e.output or b"").decode(errors="replace") + "\n(timed out)\n"
    return p.returncode, p.stdout.decode(errors="replace")


def check(block, args, work, link_flags):
    """('run' | 'compiled', '') on success, ('FAIL', message) on failure."""
    stem = re.sub(r"[^A-Za-z0-9]+", "_", block.name)
    if block.kind == "cuda":
        cu_file = os.path.join(work, stem + ".cu")
        with open(cu_file, "w", encoding="utf-8") as f:
            f.write('#line %d "%s"\n%s' % (block.line + 1, block.path, block.text))
        rc, out = run_cmd([args.nvcc, "-std=c++17", "-Xcompiler=-Wall,-Wextra,-Werror"] +
                          ["-I" + d for d in args.include] +
                          ["-c", cu_file, "-o", os.path.join(work, stem + ".o")])
        return ("compiled", "") if rc == 0 else ("FAIL", out)
    src, extra, link = source_of(block)
    c_file = os.path.join(work, stem + ".c")
    with open(c_file, "w", encoding="utf-8") as f:
        f.write(src)
    incs = ["-I" + d for d in args.include]
    base = [args.cc] + STD_FLAGS + extra + args.cflag + incs
    if not link:
        rc, out = run_cmd(base + ["-c", c_file, "-o", os.path.join(work, stem + ".o")])
        return ("compiled", "") if rc == 0 and not out.strip() else ("FAIL", out)
    exe = os.path.join(work, stem)
    rc, out = run_cmd(base + [c_file, "-o", exe] + link_flags)
    if rc != 0 or out.strip():
        return "FAIL", out
    rc, out = run_cmd(args.wrapper + [exe], timeout=RUN_TIMEOUT_S)
    if rc != 0:
        return "FAIL", "%s\n(exit status %d)\n" % (out, rc)
    return "run", out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True, help="the source tree (README.md, docs/)")
    ap.add_argument("--cc", required=True, help="the C compiler of the build under test")
    ap.add_argument("--include", action="append", default=[], help="an include directory")
    ap.add_argument("--lib", action="append", default=[],
                    help="a shared library to link the programs against (libpackfn first)")
    ap.add_argument("--cflag", action="append", default=[], help="an extra compiler flag")
    ap.add_argument("--nvcc", help="nvcc, to compile the cuda blocks (skipped without it)")
    ap.add_argument("--only", help="check only the block at FILE:LINE (the fence's line)")
    ap.add_argument("--keep", help="write the sources and programs here, and keep them")
    ap.add_argument("--verbose", action="store_true", help="print each program's output")
    ap.add_argument("wrapper", nargs="*", help="after --: a command to run the programs under")
    args = ap.parse_args()

    files = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(args.root, "docs"))
                                   if f.endswith(".md"))
    blocks, errors = [], []
    for rel in files:
        b, e = extract(args.root, rel)
        blocks += b
        errors += e
    if args.only:
        blocks = [b for b in blocks if b.name == args.only]
        if not blocks:
            errors.append("no ```c block at " + args.only)

    link_flags = []
    for lib in args.lib:
        lib = os.path.abspath(lib)
        if not re.match(r"lib.+\.so", os.path.basename(lib)) or not os.path.isfile(lib):
            errors.append("--lib %s: expected a shared library libNAME.so" % lib)
            continue
        link_flags += [lib, "-Wl,-rpath," + os.path.dirname(lib)]
    link_flags += ["-lm", "-pthread"]

    work = args.keep or tempfile.mkdtemp(prefix="pf_doc_examples_")
    os.makedirs(work, exist_ok=True)
    counts = {"run": 0, "compiled": 0, "skipped": 0, "FAIL": 0}
    try:
        for block in blocks:
            if block.kind == "cuda" and not args.nvcc:
                counts["skipped"] += 1
                print("SKIP     %s: CUDA source, and no nvcc given (--nvcc)" % block.name)
                continue
            if block.kind == "skip":
                counts["skipped"] += 1
                print("SKIP     %s: %s" % (block.name, block.arg or "(no reason given)"))
                if not block.arg:
                    errors.append("%s: doc-check skip without a reason" % block.name)
                continue
            status, out = check(block, args, work, link_flags)
            counts[status] += 1
            print("%-8s %s" % ({"run": "RUN ok", "compiled": "CC ok"}.get(status, status),
                               block.name))
            if status == "FAIL" or (args.verbose and out.strip()):
                sys.stdout.write("".join("    " + l + "\n" for l in out.rstrip().split("\n")))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for e in errors:
        print("ERROR    " + e)
    print("%d blocks: %d run, %d compiled only, %d skipped, %d failed; %d marker errors" %
          (len(blocks), counts["run"], counts["compiled"], counts["skipped"], counts["FAIL"],
           len(errors)))
    return 1 if counts["FAIL"] or errors or not blocks else 0


if __name__ == "__main__":
    sys.exit(main())
