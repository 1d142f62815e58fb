# test_cli.py: runs the packfn command line as a process (under a wrapper such as valgrind) and
# checks its output and exit codes for every command; .npy interop with NumPy when available.
#
# usage: test_cli.py --packfn BIN --echo-lib LIB --good-lib LIB --collide-lib LIB --workdir DIR
#                    [--tvm-lib LIB] [-- WRAPPER...]
# With --tvm-lib (a library built with TVM-FFI's export macro, tests/interop), only the cases
# of such a library run (test_cli_tvm_ffi, registered by tests/interop/modules.cmake).
import argparse
import concurrent.futures
import os
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading

try:
    import numpy as np
except ImportError:  # the interop cases are skipped
    np = None

OK, RAISED, USAGE = 0, 1, 2


class Cli:
    def __init__(self, opts):
        self.bin = opts.packfn
        self.wrapper = opts.wrapper
        self.echo = opts.echo_lib
        self.good = opts.good_lib
        self.tvm = opts.tvm_lib
        self.collide = opts.collide_lib
        self.dir = opts.workdir

    def run(self, *args, wrap=True, env=None, fsize=None):
        """Runs packfn ARGS in the work folder, under the wrapper unless wrap is False (for
        cases whose code paths others already take under it, to keep valgrind runs short), with
        `env` added to the environment and a file size limit of `fsize` bytes when given:
        (exit code, stdout, stderr)."""
        def limit():
            # SIGXFSZ as a shell leaves it (it kills by default): packfn itself ignores it, so
            # that a write past the limit fails with EFBIG and is reported
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        p = subprocess.run((self.wrapper if wrap else []) + [self.bin] + list(args), cwd=self.dir,
                           capture_output=True, text=True, timeout=240,
                           env=dict(os.environ, **env) if env else None,
                           preexec_fn=limit if fsize is not None else None)
        return p.returncode, p.stdout, p.stderr

    def run_bin(self, binary, *args):
        """Runs another copy of packfn (not under the wrapper): (exit code, stdout, stderr)."""
        p = subprocess.run([binary] + list(args), cwd=self.dir, capture_output=True, text=True,
                           timeout=240)
        return p.returncode, p.stdout, p.stderr

    def path(self, name):
        return os.path.join(self.dir, name)


class Failure(Exception):
    pass


def expect(cli, args, code, stdout=None, stderr=None, stdout_re=None, stderr_re=None, wrap=True,
           env=None, fsize=None):
    """Runs packfn and checks the exit code and, when given, the exact stdout / stderr or a
    regular expression they must contain. Returns stdout."""
    rc, out, err = cli.run(*args, wrap=wrap, env=env, fsize=fsize)
    problems = []
    if rc != code:
        problems.append(f"exit code {rc}, expected {code}")
    if stdout is not None and out != stdout:
        problems.append(f"stdout {out!r}, expected {stdout!r}")
    if stderr is not None and err != stderr:
        problems.append(f"stderr {err!r}, expected {stderr!r}")
    if stdout_re is not None and not re.search(stdout_re, out, re.M):
        problems.append(f"stdout {out!r} does not match {stdout_re!r}")
    if stderr_re is not None and not re.search(stderr_re, err, re.M):
        problems.append(f"stderr {err!r} does not match {stderr_re!r}")
    if problems:
        raise Failure(f"packfn {' '.join(args)}:\n  " + "\n  ".join(problems) +
                      f"\n  --- stdout:\n{out}  --- stderr:\n{err}")
    return out


CALL_USAGE = r"usage: packfn call \[--lib LIBRARY\]"


def test_version_and_help(cli):
    expect(cli, ["--version"], OK, stdout_re=r"^packfn \d+\.\d+\.\d+ \(ABI \d+\.\d+\)$")
    expect(cli, ["--help"], OK, stdout_re=r"^commands:$", stderr="")
    expect(cli, ["help"], OK, stdout_re=r"^  call NAME ARG\.\.\.", wrap=False)
    expect(cli, ["help", "call"], OK, stdout_re=CALL_USAGE, wrap=False)
    # help is a command too: it takes --help, and names itself (each was "unknown command",
    # exit 2, against "every command takes --help"; review)
    for arg in ("--help", "-h", "help"):
        expect(cli, ["help", arg], OK, stdout_re=r"^  help \[COMMAND\]", stderr="", wrap=False)
    expect(cli, ["call", "--help"], OK, stdout_re=r"float32\[2,3\]:1,2,3,4,5,6")
    expect(cli, ["list", "--help"], OK, stdout_re=r"^usage: packfn list \[LIBRARY\]$", wrap=False)
    # after LIBRARY too (it was "unknown option for list: --help", or "-h" a second LIBRARY)
    for late in ("--help", "-h"):
        expect(cli, ["list", cli.echo, late], OK, stdout_re=r"^usage: packfn list \[LIBRARY\]$",
               stderr="", wrap=False)
    expect(cli, ["info", "-h"], OK, stdout_re=r"^usage: packfn info$", wrap=False)
    expect(cli, ["bench", "--help"], OK, stdout_re=r"^usage: packfn bench \[--quick\]", wrap=False)
    # --help among the options of one function's timing, before or after NAME, as `call`
    # takes it (it was "unknown option --help", exit 2; review); after `--` it is an argument
    for late in (["--repeat", "3", "--help"], ["--lib", cli.echo, "cli_test.twice", "-h"],
                 ["cli_test.twice", "5", "--help", "--lib", cli.echo]):
        expect(cli, ["bench"] + late, OK, stdout_re=r"^usage: packfn bench \[--quick\]",
               stderr="", wrap=False)
    expect(cli, ["bench", "--lib", cli.echo, "cli_test.twice", "--", "--help"], RAISED,
           stdout="", wrap=False,
           stderr="TypeError: twice: argument 0 (x): expected int, got str\n")


def test_usage_errors(cli):
    expect(cli, [], USAGE, stdout="", stderr_re=r"^packfn: missing COMMAND\nusage: packfn")
    expect(cli, ["frob"], USAGE, stderr_re=r"^packfn: unknown command frob$")
    expect(cli, ["--frob"], USAGE, stderr_re=r"^packfn: unknown option --frob$")
    expect(cli, ["help", "frob"], USAGE, stderr_re=r"unknown command frob", wrap=False)
    # extra words after --version and help COMMAND are refused, as after info (they were
    # ignored; review); --help anywhere is still help
    expect(cli, ["--version", "x"], USAGE, stdout="",
           stderr_re=r"^packfn: --version takes no arguments, got x$", wrap=False)
    expect(cli, ["help", "call", "x"], USAGE, stdout="",
           stderr_re=r"^packfn: help takes at most one COMMAND, got x$", wrap=False)
    expect(cli, ["help", "call", "--help"], OK, stdout_re=CALL_USAGE, wrap=False)
    expect(cli, ["info", "extra"], USAGE, stderr_re=r"info takes no arguments", wrap=False)
    expect(cli, ["list", "a", "b"], USAGE, stderr_re=r"at most one LIBRARY")
    # an empty LIBRARY is a usage error, as `call --lib ''` (it was a ValueError, exit 1)
    expect(cli, ["list", ""], USAGE, stdout="",
           stderr_re=r"^packfn: list needs a LIBRARY path, got an empty one\nusage: packfn")
    # an option is named as one wherever it stands (--lib x.so read as two libraries)
    expect(cli, ["list", "--lib", "x.so"], USAGE, stderr_re=r"unknown option for list: --lib")
    expect(cli, ["list", "x.so", "--frob"], USAGE, stderr_re=r"unknown option for list: --frob")
    expect(cli, ["call"], USAGE, stderr_re=r"missing the function NAME\n" + CALL_USAGE)
    expect(cli, ["call", "--frob", "f"], USAGE, stderr_re=r"unknown option '--frob'")
    expect(cli, ["call", "f", "--lib"], USAGE, stderr_re=r"option --lib needs a value")
    expect(cli, ["call", "--device", "gpu7", "f"], USAGE, stderr_re=r"bad --device 'gpu7'")
    # an empty NAME is no NAME: a usage error, with --lib too (a ValueError from
    # pf_module_get_function there, a KeyError without it)
    for lib in ([], ["--lib", cli.echo]):
        expect(cli, ["call"] + lib + ["", "1"], USAGE, stdout="", wrap=False,
               stderr_re=r"^packfn call: missing the function NAME \(got an empty one\)\n" +
               CALL_USAGE)
        expect(cli, ["bench"] + lib + [""], USAGE, stdout="", wrap=False,
               stderr_re=r"^packfn bench: missing the function NAME \(got an empty one\)\n")
    # an empty value is no value: a usage error naming the option, not an OSError
    for empty in (["--out="], ["--out", ""], ["--lib="]):
        expect(cli, ["call"] + empty + ["packfn.kernels.add_n", "float32[1]:1", "float32[1]",
                                        "1"], USAGE, stdout="", wrap=False,
               stderr_re=r"^packfn call: option --(out|lib) needs a value, got an empty one\n" +
               CALL_USAGE)


def test_bad_literals(cli):
    add_n = ["call", "packfn.kernels.add_n"]
    cases = [
        ("float32[2]:1,2,3", r"3 values for 2 elements"),
        ("float32[2]:1,x", r"'x' is not a number"),
        ("float32[2,]:1", r"bad shape"),
        ("float32[-1]", r"'-1' is not an extent"),
        ("float32[2", r"expected DTYPE\[SHAPE\]"),
        ("int8[2]:1,300", r"300 is out of range"),
        # past int64: out of range, not "not an integer"; past uint64 too (review)
        ("int64[1]:9223372036854775808", r"9223372036854775808 is out of range for its dtype"),
        ("uint64[1]:18446744073709551616", r"18446744073709551616 is out of range for its dtype"),
        ("bool[2]:true,2", r"'2' is not a bool"),
        ("float16[2]:1,2", r"inline values need"),
        ("int:abc", r"'int:abc': not an integer"),
        ("float:1e999", r"out of range for float64"),
        ("float32[1]:1e39", r"'1e39' is too large for float32"),
        ("float32[2]:1,-3.5e38", r"'-3.5e38' is too large for float32"),
        ("npy:", r"bad argument 'npy:': the path is empty"),
        ("bool:yes", r"expected true or false"),
        ("dtype:float33", r"bad argument 'dtype:float33'"),
        ("device:gpu", r"bad argument 'device:gpu'"),
        ("99999999999999999999", r"integer out of range"),
        ("missing.npy", r"missing\.npy"),
        ("garbage.npy", r"garbage\.npy"),
    ]
    with open(cli.path("garbage.npy"), "wb") as f:
        f.write(b"not an npy file at all")
    for i, (literal, message) in enumerate(cases):
        expect(cli, add_n + [literal], USAGE, stdout="",
               stderr_re=r"^packfn call: .*" + message + r".*\n" + CALL_USAGE, wrap=i % 3 == 0)
    # uint64 literals up to 2^64 - 1 are values (add_n then refuses the dtype: the literal parsed)
    for big in ("uint64[2]:0xffffffffffffffff,18446744073709551615", "uint64[1]:9223372036854775808"):
        expect(cli, add_n + [big, "uint64[2]", "0"], RAISED, stdout="",
               stderr_re=r"^TypeError: add_n: argument 0 \(x\): expected a float32 or float64 tensor, "
                         r"got uint64")
    # a missing .npy named by --out needs a tensor before it to be created like
    expect(cli, add_n + ["new.npy", "1", "--out", "new.npy"], USAGE,
           stderr_re=r"new\.npy does not exist, and no tensor argument comes before it")
    # its name's control characters show as '?', as in every message about a file (cli.md; the
    # name reached the terminal as it was, escape sequences included: review)
    crafted = "new\x1b]0;owned\x07\u009b2J.npy"
    expect(cli, add_n + [crafted, "1", "--out", crafted], USAGE,
           stderr_re=r"new\?\]0;owned\?\?2J\.npy does not exist")
    rc, _, err = cli.run(*(add_n + [crafted, "1", "--out", crafted]))
    assert rc == USAGE and not set("\x1b\x07\u009b") & set(err), repr(err)


def test_info(cli):
    out = expect(cli, ["info"], OK, stderr="")
    lines = out.splitlines()
    assert re.fullmatch(r"packfn \d+\.\d+\.\d+", lines[0]), out
    assert re.fullmatch(r"ABI version: \d+\.\d+", lines[1]), out
    assert re.fullmatch(r"CUDA devices: (\d+.*|CUDA support not built)", lines[2]), out
    assert re.fullmatch(r"allocators: cpu( \w+)*", lines[3]), out
    assert re.fullmatch(r"kernels: 6 \(CPU( and CUDA)? versions\); CPU loops: (avx512|avx2|sse2|base), "
                        r"threads per call: [0-9]+", lines[4]), out
    # kernel threads: every CPU the process may run on (at most 64) unless PACKFN_KERNEL_THREADS
    # says; and under a restricted affinity mask, that mask's count
    threads = int(lines[4].rsplit(" ", 1)[1])
    if "PACKFN_KERNEL_THREADS" not in os.environ:
        usable = len(os.sched_getaffinity(0))
        assert threads == min(usable, 64), (threads, usable)
        taskset = shutil.which("taskset")
        if usable > 1 and taskset:
            one = str(next(iter(os.sched_getaffinity(0))))
            p = subprocess.run([taskset, "-c", one, cli.bin, "info"], cwd=cli.dir,
                               capture_output=True, text=True, timeout=240)
            if p.returncode != 0 and "affinity" in p.stderr:
                print(f"test_info: affinity case SKIPPED: taskset could not set it: {p.stderr}")
            else:
                assert p.returncode == 0, p.stderr
                assert p.stdout.splitlines()[4].endswith("threads per call: 1"), p.stdout
        elif usable > 1:
            print("test_info: affinity case SKIPPED: no taskset on PATH")
    out3 = expect(cli, ["info"], OK, stderr="", env={"PACKFN_KERNEL_THREADS": "3"}, wrap=False)
    assert out3.splitlines()[4].endswith("threads per call: 3"), out3
    m = re.fullmatch(r"global functions: (\d+)", lines[5])
    assert m and int(m.group(1)) >= 6, out
    # a CUDA call without a device says so, as info does (not "driver version is insufficient")
    call = ["call", "--device", "cuda", "packfn.kernels.cuda.add_n", "float32[2]:1", "float32[2]",
            "1"]
    if lines[2] == "CUDA devices: 0 (no CUDA device)":
        expect(cli, call, RAISED, stdout="", stderr_re=r"failed: no CUDA device \(no GPU, or no "
               r"CUDA driver for it\) \(cudaError(NoDevice|InsufficientDriver)\)$")
    elif lines[2] == "CUDA devices: CUDA support not built":
        print("test_cli: test_info: CUDA cases skipped: CUDA support not built")


def test_list(cli):
    out = expect(cli, ["list"], OK, stderr="")
    lines = out.splitlines()
    assert "packfn.kernels.rms_norm(x: Tensor, out: Tensor, eps: float) -> None" in lines, out
    assert "packfn.kernels.add_n(x: Tensor, out: Tensor, n: float) -> None" in lines, out
    names = [line.split("(")[0] for line in lines if not line.startswith(" ")]
    assert names == sorted(names), names
    out = expect(cli, ["list", cli.good], OK, stderr="")
    assert "greet(name: str) -> str\n    Says hello to name.\n" in out, out
    assert "scale(x: float, k: int) -> float\n    Multiplies x by k.\n" in out, out
    assert "add_ints\n" in out, out
    expect(cli, ["list", cli.path("nope.so")], RAISED, stdout="", stderr_re=r"^OSError: .*nope\.so")


def test_call_inline_tensors(cli):
    expect(cli, ["call", "packfn.kernels.add_n", "float32[2,3]:1,2,3,4,5,6", "float32[2,3]", "10"],
           OK, stdout="array([[11., 12., 13.],\n       [14., 15., 16.]], dtype=float32)\n",
           stderr="")
    # one value fills the tensor; float64 prints without dtype=, like NumPy
    expect(cli, ["call", "packfn.kernels.add_n", "float64[3]:0.5", "float64[3]", "-1"], OK,
           stdout="array([-0.5, -0.5, -0.5])\n")
    # the output argument can be named anywhere; options may come before NAME
    expect(cli, ["call", "--device", "cpu", "--", "packfn.kernels.add_n", "float64[2]:1,2",
                 "float64[2]", "0x10"], OK, stdout="array([17., 18.])\n")
    # several outputs print in argument order
    out = expect(cli, ["call", "packfn.kernels.kepler", "float64[2]:0,0", "float64[2]:0,0",
                       "float64[2]", "float64[2]"], OK)
    assert out == "array([0., 0.])\narray([1., 1.])\n", out
    # an output whose contents the call does not change, and no other output: None
    expect(cli, ["call", "packfn.kernels.add_n", "float32[1]:1", "float32[1]:1", "0"], OK,
           stdout="None\n")


def test_call_errors(cli):
    # a missing function is a KeyError, as pf_global_call's, with near names suggested
    expect(cli, ["call", "packfn.kernels.nope", "1"], RAISED, stdout="",
           stderr="KeyError: no global function is named 'packfn.kernels.nope'; "
                  "`packfn list` shows them\n")
    # the function is looked up before the outputs are laid out: a wrong name is said as such,
    # not as an output that cannot be prepared (nor after copying a large argument; review)
    expect(cli, ["call", "packfn.kernels.rms_nrom", "float32[4]", "--out", "no-such-dir/y.npy"],
           RAISED, stdout="", wrap=False,
           stderr_re=r"^KeyError: no global function is named 'packfn\.kernels\.rms_nrom'")
    expect(cli, ["call", "--lib", "no-such-lib.so", "f", "--out", "no-such-dir/y.npy"], RAISED,
           stdout="", wrap=False, stderr_re=r"no-such-lib\.so")
    # a tensor literal too large for memory (past any address space) is a MemoryError (exit 1),
    # not a usage error with the usage text (review)
    for cmd in (["call"], ["bench"]):
        expect(cli, cmd + ["packfn.kernels.add_n", "float32[100000000000000]", "float32[1]", "1"],
               RAISED, stdout="", wrap=False,  # (AddressSanitizer warns on stderr first)
               stderr_re=r"^MemoryError: pf_allocator\(cpu\): out of memory allocating "
               r"400000000000000 bytes\n\Z")
    expect(cli, ["call", "packfn.kernels.keplr", "1"], RAISED, stdout="",
           stderr="KeyError: no global function is named 'packfn.kernels.keplr' (did you mean "
                  "'packfn.kernels.kepler'?); `packfn list` shows them\n", wrap=False)
    expect(cli, ["call", "rms_norm"], RAISED, wrap=False,
           stderr_re=r"^KeyError: no global function is named 'rms_norm' \(did you mean "
                     r"'packfn\.kernels\.(cuda\.)?rms_norm'\?\); ")
    expect(cli, ["call", "--lib", cli.echo, "eco"], RAISED, wrap=False,
           stderr_re=r"^KeyError: " + re.escape(cli.echo) + r" has no function 'eco', nor has "
                     r"the global table \(did you mean 'echo'\?\); `packfn list ")
    expect(cli, ["call", "packfn.kernels.add_n", "float32[2]:1,2", "float32[3]", "1"], RAISED,
           stdout="", stderr_re=r"^ValueError: add_n: argument 1 \(out\): expected shape")
    expect(cli, ["call", "packfn.kernels.rms_norm", "float32[2]:1,2", "float64[2]", "1e-5"],
           RAISED, stderr_re=r"^TypeError: rms_norm: argument 1 \(out\)")
    expect(cli, ["call", "packfn.kernels.add_n", "float32[2]:1,2"], RAISED,
           stderr_re=r"^TypeError: add_n: expected 3 arguments, got 1$")
    expect(cli, ["call", "--lib", cli.good, "fail"], RAISED, stdout="",
           stderr="RuntimeError: fail: this kernel always fails\n")
    # a function that fails without raising: the runtime's error names it (defect 7)
    expect(cli, ["call", "--lib", cli.echo, "silent"], RAISED, stdout="",
           stderr="RuntimeError: silent returned -1 without raising an error\n")
    expect(cli, ["bench", "--lib", cli.echo, "silent"], RAISED, stdout="",
           stderr="RuntimeError: silent returned -1 without raising an error\n")
    expect(cli, ["call", "--lib", cli.good, "nope"], RAISED, stderr_re=r"^KeyError: .*'nope'")
    expect(cli, ["call", "--lib", cli.path("nope.so"), "f"], RAISED, stderr_re=r"^OSError: ")
    # more --out files than outputs
    expect(cli, ["call", "packfn.kernels.add_n", "float32[1]:1", "float32[1]", "1", "--out",
                 "a.npy", "--out", "b.npy"], USAGE,
           stderr_re=r"--out b\.npy: no tensor output left to write \(the call produced 1\)\n"
                     + CALL_USAGE)


def test_literal_types(cli):
    expect(cli, ["call", "--lib", cli.echo, "types", "3", "-7", "0x10", "2.5", "1e-5", "nan",
                 "true", "False", "none", "hello", "str:42", "int:5", "float:3", "bool:true",
                 "float32", "dtype:int8x4", "cpu", "cuda:1", "device:cuda_host",
                 "float32[2]:1,2", "--", "--x"], OK,
           stdout="int int int float float float bool bool None str str int float bool "
                  "dtype dtype Device Device Device Tensor str\n")
    # a number behind a blank is no number, whichever blank: strtod skips them all, and " 5"
    # was a string while "\r5", "\v5" and "\f5" were floats (inline values alike)
    expect(cli, ["call", "--lib", cli.echo, "types", " 5", "\t5", "\n5", "\r5", "\v5", "\f5"],
           OK, stdout="str str str str str str\n", wrap=False)
    for blank in (" ", "\r", "\v"):
        expect(cli, ["call", "--lib", cli.echo, "types", "float64[1]:" + blank + "1"], USAGE,
               stderr_re=r"is not a number", wrap=False)
    expect(cli, ["call", "--lib", cli.echo, "echo", "3", "-2.5", "1e-05", "10.0", "true", "none",
                 "str:it's", "hello world", "float32", "cuda:1", "int64[3]:1,-2,3"], OK,
           stdout="[3, -2.5, 1e-05, 10.0, True, None, 'it\\'s', 'hello world', float32, "
                  "cuda:1, array([ 1, -2,  3])]\n")
    expect(cli, ["call", "--lib", cli.echo, "echo", "bool[3]:true,false,1", "uint8[2]:255",
                 "int8[]:-5"], OK,
           stdout="[array([ True, False,  True]), array([255, 255], dtype=uint8), "
                  "array(-5, dtype=int8)]\n")
    # control characters inside containers as Python's repr writes them
    expect(cli, ["call", "--lib", cli.echo, "echo", "a\tb\rc\nd\x01", "str:\x7f"], OK,
           stdout="['a\\tb\\rc\\nd\\x01', '\\x7f']\n")
    # float32 literals up to the largest float32 (values that round to it), infinities as given
    expect(cli, ["call", "--lib", cli.echo, "echo", "float32[3]:3.4028235e38,-inf,inf"], OK,
           stdout="[array([3.4028235e+38,          -inf,           inf], dtype=float32)]\n")
    expect(cli, ["call", "--lib", cli.echo, "summary"], OK,
           stdout="{'name': 'cli', 'shape': (2, 3), 'values': [1, 2.5]}\n")
    expect(cli, ["call", "--lib", cli.good, "greet", "str:world"], OK, stdout="hello, world\n")
    expect(cli, ["call", "--lib", cli.good, "greet", "world"], OK, stdout="hello, world\n")
    expect(cli, ["call", "--lib", cli.good, "scale", "2.5", "4"], OK, stdout="10.0\n")
    expect(cli, ["call", "--lib", cli.good, "add_ints", "1", "2", "0x10", "-7"], OK,
           stdout="12\n")
    expect(cli, ["call", "--lib", cli.good, "scale", "str:2", "1"], RAISED,
           stderr="TypeError: scale: argument 0 (x): expected float, got str\n")
    # a bare file name in the current folder is loaded as ./NAME
    shutil.copy(cli.echo, cli.path("libecho_copy.so"))
    expect(cli, ["call", "--lib", "libecho_copy.so", "types", "1"], OK, stdout="int\n")
    expect(cli, ["list", "libecho_copy.so"], OK,
           stdout_re=r"^echo\(\*args\) -> Array\n    Returns its arguments as an array\.\n")


def test_library_globals_and_function_results(cli):
    # what a library registers in the global table when it loads is listed and callable
    out = expect(cli, ["list", cli.echo], OK, stderr="")
    assert "\nregistered in the global table:\ncli_test.twice(x: int) -> int\n" in out, out
    assert "get_twice() -> Function\n    Returns the function twice.\n" in out, out
    expect(cli, ["call", "--lib", cli.echo, "cli_test.twice", "21"], OK, stdout="42\n", stderr="")
    expect(cli, ["call", "--lib", cli.echo, "cli_test.twice", "x"], RAISED,
           stderr="TypeError: twice: argument 0 (x): expected int, got str\n", wrap=False)
    # a function result prints with its signature
    expect(cli, ["call", "--lib", cli.echo, "get_twice"], OK,
           stdout="<function twice(x: int) -> int>\n", stderr="")
    expect(cli, ["call", "--lib", cli.echo, "echo", "--", "--lib"], OK, stdout="['--lib']\n",
           wrap=False)


def test_tensor_result_and_out(cli):
    expect(cli, ["call", "--lib", cli.echo, "ones", "3"], OK, stdout="array([1., 1., 1.])\n")
    expect(cli, ["call", "--lib", cli.echo, "ones", "2", "--out", "ones.npy"], OK,
           stdout="wrote ones.npy\n")
    # the file we wrote reads back, as a tensor argument
    expect(cli, ["call", "--lib", cli.echo, "echo", "ones.npy"], OK,
           stdout="[array([1., 1.])]\n")
    if np is not None:
        assert np.load(cli.path("ones.npy")).tolist() == [1.0, 1.0]


def test_npy_interop(cli):
    if np is None:
        print("test_cli: numpy not found, .npy interop cases skipped")
        return
    rng = np.random.default_rng(7)
    for dtype, order in (("float32", "C"), ("float64", "F")):
        x = np.asarray(rng.standard_normal((3, 5)), dtype=dtype, order=order)
        xs, ys = f"x_{dtype}.npy", f"y_{dtype}.npy"
        np.save(cli.path(xs), x)
        if os.path.exists(cli.path(ys)):
            os.remove(cli.path(ys))
        ref = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + 1e-5)
        tol = 1e-6 if dtype == "float32" else 1e-12
        # the example: y.npy does not exist yet, then it does (run twice)
        for again in (False, True):
            expect(cli, ["call", "packfn.kernels.rms_norm", xs, ys, "1e-5", "--out", ys], OK,
                   stdout=f"wrote {ys}\n", stderr="", wrap=not again)
            y = np.load(cli.path(ys))
            assert y.dtype == np.dtype(dtype) and y.shape == x.shape, (y.dtype, y.shape)
            np.testing.assert_allclose(y, ref, rtol=tol, atol=tol)
        # the argument and its --out spelled differently name one file (the argument was matched
        # by its text: "./y.npy" was read as an input that did not exist yet; review)
        os.remove(cli.path(ys))
        expect(cli, ["call", "packfn.kernels.rms_norm", xs, "./" + ys, "1e-5", "--out", ys], OK,
               stdout=f"wrote {ys}\n", stderr="", wrap=False)
        np.testing.assert_allclose(np.load(cli.path(ys)), ref, rtol=tol, atol=tol)
    # two outputs to two files, in order; inputs from NumPy files
    m = np.linspace(-3.0, 3.0, 7)
    e = np.full(7, 0.3)
    np.save(cli.path("m.npy"), m)
    np.save(cli.path("e.npy"), e)
    expect(cli, ["call", "packfn.kernels.kepler", "m.npy", "e.npy", "float64[7]", "float64[7]",
                 "--out", "sin.npy", "--out", "cos.npy"], OK, stdout="wrote sin.npy\nwrote cos.npy\n")
    s, c = np.load(cli.path("sin.npy")), np.load(cli.path("cos.npy"))
    big_e = np.arctan2(s, c)
    np.testing.assert_allclose(s * s + c * c, 1.0, atol=1e-12)
    np.testing.assert_allclose(big_e - e * np.sin(big_e), m, atol=1e-9)
    # printing matches NumPy's repr
    x = np.array([[0.25, -1.5], [3.0, 1e-3]])
    np.save(cli.path("p.npy"), x)
    expect(cli, ["call", "packfn.kernels.add_n", "p.npy", "float64[2,2]", "0"], OK,
           stdout=repr(x) + "\n")
    # a malformed .npy written by hand: truncated data
    with open(cli.path("p.npy"), "rb") as f:
        data = f.read()
    with open(cli.path("short.npy"), "wb") as f:
        f.write(data[:-8])
    expect(cli, ["call", "packfn.kernels.add_n", "short.npy", "float64[2,2]", "0"], USAGE,
           stderr_re=r"^packfn call: short\.npy: .*truncated")


def read_bytes(cli, name):
    with open(cli.path(name), "rb") as f:
        return f.read()


def temporaries(cli):
    """The temporary files an --out of ax.npy or ay.npy left in the work folder (there should be
    none; other cases, running meanwhile, have their own)."""
    return [n for n in os.listdir(cli.dir) if re.fullmatch(r"\.a[xy]\.npy\..*\.tmp", n)]


def test_atomic_out(cli):
    # the documented idiom: y.npy is an input and the output; a write that fails (file size
    # limit) keeps the old y.npy whole, and leaves no temporary file
    expect(cli, ["call", "packfn.kernels.add_n", "float32[64,64]:0.5", "float32[64,64]", "0",
                 "--out", "ax.npy"], OK, stdout="wrote ax.npy\n", wrap=False)
    expect(cli, ["call", "packfn.kernels.add_n", "float32[64,64]:2", "float32[64,64]", "0",
                 "--out", "ay.npy"], OK, stdout="wrote ay.npy\n", wrap=False)
    old = read_bytes(cli, "ay.npy")
    expect(cli, ["call", "packfn.kernels.rms_norm", "ax.npy", "ay.npy", "1e-5", "--out", "ay.npy"],
           RAISED, stdout="", fsize=8192, wrap=False,
           stderr_re=r"^OSError: .*ay\.npy: write error: File too large$")
    assert read_bytes(cli, "ay.npy") == old, "ay.npy changed by a failed write"
    assert temporaries(cli) == [], temporaries(cli)
    # without the limit the same call replaces it
    expect(cli, ["call", "packfn.kernels.rms_norm", "ax.npy", "ay.npy", "1e-5", "--out", "ay.npy"],
           OK, stdout="wrote ay.npy\n")
    assert read_bytes(cli, "ay.npy") != old
    # several outputs, the last failing: none of the existing files changes
    expect(cli, ["call", "--lib", cli.echo, "fill_ones", "float32[4]", "float32[8192]", "--out",
                 "ay.npy", "--out", "ax.npy"], RAISED, stdout="", fsize=8192, wrap=False,
           stderr_re=r"^OSError: .*ax\.npy: write error")
    assert read_bytes(cli, "ax.npy")[128:] == bytes.fromhex("0000003f") * 4096, "ax.npy changed"
    assert len(read_bytes(cli, "ay.npy")) == 128 + 4 * 4096, "ay.npy changed"
    assert temporaries(cli) == [], temporaries(cli)
    # a device node is refused before the call, and left as it is
    expect(cli, ["call", "packfn.kernels.add_n", "float32[2]:1", "float32[2]", "1", "--out",
                 "/dev/null"], RAISED, stdout="",
           stderr="OSError: /dev/null: not a regular file (a character device): refusing to "
                  "replace it\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode), "/dev/null is no longer a device"
    # /dev/stdout (and /dev/fd/N, /proc/self/fd/N) names the stream, also when stdout is a
    # regular file: refused, where the file behind it was replaced by a rename (review: a
    # `>> log` lost its lines, the shell's descriptor kept the unlinked file)
    log = cli.path("stdout.log")
    for target in ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"):
        with open(log, "wb") as f:
            f.write(b"log line\n")
        inode = os.stat(log).st_ino
        with open(log, "ab") as f:
            p = subprocess.run([cli.bin, "call", "packfn.kernels.add_n", "float32[2]:1",
                                "float32[2]", "1", "--out", target], cwd=cli.dir, stdout=f,
                               stderr=subprocess.PIPE, text=True, timeout=240)
        want = (f"OSError: {target}: names an open file descriptor (/proc/PID/fd/N), not a file: "
                "refusing to replace what it is open on\n")
        if p.returncode != RAISED or p.stderr != want:
            raise Failure(f"--out {target} > stdout.log: exit {p.returncode}, stderr {p.stderr!r}")
        assert os.stat(log).st_ino == inode, f"--out {target}: stdout.log replaced"
        assert read_bytes(cli, "stdout.log") == b"log line\n", read_bytes(cli, "stdout.log")
    # a folder as target, a missing folder, the same file twice: refused before the call (the
    # call itself would fail with a TypeError: 1 argument for 3)
    expect(cli, ["call", "packfn.kernels.add_n", "float32[2]:1", "--out", "."], RAISED,
           stderr_re=r"^OSError: \.: not a regular file \(a directory\)", wrap=False)
    expect(cli, ["call", "packfn.kernels.add_n", "float32[2]:1", "--out", "nodir/y.npy"], RAISED,
           stderr_re=r"^OSError: nodir/y\.npy: cannot create a file in 'nodir': No such file",
           wrap=False)
    expect(cli, ["call", "packfn.kernels.add_n", "float32[2]:1", "--out", "ay.npy", "--out",
                 "./ay.npy"], USAGE, stderr_re=r"^packfn call: --out \./ay\.npy: the same file as "
                 r"--out ay\.npy$", wrap=False)
    # the same before the file exists: the folder and the name are compared (two outputs, which
    # were both written to the one file)
    here = os.path.basename(cli.dir)
    for other in ("./az.npy", f"../{here}/az.npy", cli.path("az.npy")):
        expect(cli, ["call", "--lib", cli.echo, "fill_ones", "float32[2]", "float32[2]", "--out",
                     "az.npy", "--out", other], USAGE, stdout="", wrap=False,
               stderr_re=r"^packfn call: --out " + re.escape(other) + r": the same file as "
                         r"--out az\.npy$")
        assert not os.path.exists(cli.path("az.npy"))
    assert temporaries(cli) == [], temporaries(cli)


def test_mapped_inputs(cli):
    # a .npy input the call writes into (not named by --out): the write stays in a private copy,
    # the argument is printed as an output, and the file keeps its contents
    expect(cli, ["call", "packfn.kernels.add_n", "float64[3]:1,2,3", "float64[3]", "0", "--out",
                 "mx.npy"], OK, stdout="wrote mx.npy\n", wrap=False)
    before = read_bytes(cli, "mx.npy")
    expect(cli, ["call", "packfn.kernels.add_n", "mx.npy", "mx.npy", "10"], OK,
           stdout="array([11., 12., 13.])\n")
    assert read_bytes(cli, "mx.npy") == before, "a mapped input was written through"
    # an input that is only read is not an output; writing the same values is no change
    expect(cli, ["call", "packfn.kernels.add_n", "mx.npy", "float64[3]", "0"], OK,
           stdout="array([1., 2., 3.])\n")
    expect(cli, ["call", "packfn.kernels.add_n", "mx.npy", "mx.npy", "0"], OK, stdout="None\n",
           wrap=False)
    # one value fills a tensor (in bulk); an output filled with one value and left so is none
    expect(cli, ["call", "--lib", cli.echo, "echo", "int16[2,3]:-7"], OK,
           stdout="[array([[-7, -7, -7],\n       [-7, -7, -7]], dtype=int16)]\n")
    expect(cli, ["call", "--lib", cli.echo, "types", "bool[882,1,3076,1]:01"], OK,
           stdout="Tensor\n", wrap=False)
    expect(cli, ["call", "packfn.kernels.add_n", "float32[5]:1", "float32[5]:2", "1"], OK,
           stdout="None\n")
    expect(cli, ["call", "packfn.kernels.add_n", "float32[5]:1", "float32[5]:1", "1"], OK,
           stdout="array([2., 2., 2., 2., 2.], dtype=float32)\n")


def npy_bytes(descr, shape, data):
    """A version 1.0 .npy file as NumPy writes it (no NumPy needed): descr such as '<f4'."""
    dims = "".join(f"{d}, " for d in shape).rstrip(" ") if len(shape) != 1 else f"{shape[0]},"
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}"
    text += " " * (63 - (10 + len(text)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode() + data


def npy_contents(cli, name):
    """(header dict with its padding stripped, data) of the .npy file `name` (version 1.0)."""
    raw = read_bytes(cli, name)
    assert raw[:8] == b"\x93NUMPY\x01\x00", raw[:8]
    end = 10 + struct.unpack("<H", raw[8:10])[0]
    return raw[10:end].decode().rstrip(), raw[end:]


def holds(cli, name, descr, shape, data):
    """Asserts that the .npy file `name` holds an array of this descr, shape and data."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    want = (f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}", data)
    got = npy_contents(cli, name)
    assert got == want, (name, got, want)
    return True


def write_file(cli, name, data):
    with open(cli.path(name), "wb") as f:
        f.write(data)


def f32(*values, order="<"):
    return struct.pack(order + "f" * len(values), *values)


def test_out_file_in_the_result(cli):
    # a result that holds the tensor written into an --out file (echo returns its arguments,
    # first its first one) prints from that file's map before the map goes (it crashed after)
    write_file(cli, "r1.npy", npy_bytes("<f4", (2,), f32(1.5, 2.5)))
    expect(cli, ["call", "--lib", cli.echo, "echo", "r1.npy", "--out", "r1.npy"], OK, stderr="",
           stdout="[array([1.5, 2.5], dtype=float32)]\nwrote r1.npy\n")
    assert holds(cli, "r1.npy", "<f4", (2,), f32(1.5, 2.5))
    # created for the call (missing), printed in the result, then written
    expect(cli, ["call", "--lib", cli.echo, "echo", "float32[2]:1", "r2.npy", "--out", "r2.npy"],
           OK, stdout="[array([1., 1.], dtype=float32), array([0., 0.], dtype=float32)]\n"
           "wrote r2.npy\n")
    assert holds(cli, "r2.npy", "<f4", (2,), f32(0, 0))
    # a tensor result that is the argument written into the file: one output, the file
    expect(cli, ["call", "--lib", cli.echo, "first", "r1.npy", "--out", "r1.npy"], OK,
           stdout="wrote r1.npy\n")
    assert holds(cli, "r1.npy", "<f4", (2,), f32(1.5, 2.5))
    # an --out that fails to be written: nothing printed, the file as it was
    expect(cli, ["call", "--lib", cli.echo, "echo", "r1.npy", "int4[2]", "--out", "r1.npy",
                 "--out", "r3.npy"], RAISED, stdout="",
           stderr="ValueError: r3.npy: cannot write a tensor of dtype int4: it has no .npy "
                  "equivalent\n")
    assert not os.path.exists(cli.path("r3.npy"))


def test_device_result_is_an_argument(cli):
    # with --device, a function returning its tensor argument returns that argument's copy on
    # the device: still one output, as without --device (the copy and the argument were two: the
    # tensor printed twice, or the result took the --out file and the argument printed beside
    # it). echo.c installs "vulkan", a stand-in device in host memory.
    write_file(cli, "d2.npy", npy_bytes("<f4", (2,), f32(1.5, 2.5)))
    for device in ([], ["--device", "vulkan"]):
        call = ["call", "--lib", cli.echo] + device + ["first"]
        expect(cli, call + ["float32[2]"], OK, stdout="array([0., 0.], dtype=float32)\n",
               stderr="")
        expect(cli, call + ["float32[2]", "--out", "d1.npy"], OK, stdout="wrote d1.npy\n",
               stderr="")
        assert holds(cli, "d1.npy", "<f4", (2,), f32(0, 0))
        expect(cli, call + ["d2.npy", "--out", "d2.npy"], OK, stdout="wrote d2.npy\n", stderr="")
        assert holds(cli, "d2.npy", "<f4", (2,), f32(1.5, 2.5))


def test_out_file_given_twice_as_argument(cli):
    # add_n(x, out, n) in place: both arguments are the --out file, one tensor, so the file gets
    # the sum (it kept its old contents, and the changed private copy printed)
    write_file(cli, "i1.npy", npy_bytes("<f4", (2, 3), f32(0, 1, 2, 3, 4, 5)))
    expect(cli, ["call", "packfn.kernels.add_n", "i1.npy", "i1.npy", "1", "--out", "i1.npy"], OK,
           stdout="wrote i1.npy\n", stderr="")
    assert holds(cli, "i1.npy", "<f4", (2, 3), f32(1, 2, 3, 4, 5, 6))
    # a file read rather than mapped (big-endian): the same, written in this host's order
    write_file(cli, "i2.npy", npy_bytes(">f4", (3,), f32(1, 2, 3, order=">")))
    expect(cli, ["call", "packfn.kernels.add_n", "npy:i2.npy", "i2.npy", "10", "--out", "i2.npy"],
           OK, stdout="wrote i2.npy\n", wrap=False)
    assert holds(cli, "i2.npy", "<f4", (3,), f32(11, 12, 13))
    # created (missing) and named twice: one zero tensor like the first argument
    expect(cli, ["call", "--lib", cli.echo, "fill_ones", "float32[2]", "i3.npy", "i3.npy",
                 "--out", "i3.npy"], OK, stdout="array([1., 1.], dtype=float32)\nwrote i3.npy\n",
           wrap=False)
    assert holds(cli, "i3.npy", "<f4", (2,), f32(1, 1))


def test_out_file_size_limit(cli):
    # a file size limit with SIGXFSZ at its default (which kills): packfn ignores the signal,
    # so the write fails with EFBIG, is reported, and leaves no temporary file
    expect(cli, ["call", "packfn.kernels.add_n", "float32[64,64]:1", "float32[64,64]", "0",
                 "--out", "fz.npy"], RAISED, stdout="", fsize=8192, wrap=False,
           stderr_re=r"^OSError: .*fz\.npy: write error: File too large$")
    assert not os.path.exists(cli.path("fz.npy"))
    assert [n for n in os.listdir(cli.dir) if n.startswith(".fz.npy.")] == []


def test_piped_inputs(cli):
    # a pipe (/dev/stdin) and a FIFO give their bytes once: read from the stream packfn opened
    data = npy_bytes("<f4", (2,), f32(4, 5))
    argv = (cli.wrapper or []) + [cli.bin, "call", "--lib", cli.echo, "echo", "npy:/dev/stdin"]
    p = subprocess.run(argv, cwd=cli.dir, input=data, capture_output=True, timeout=240)
    assert (p.returncode, p.stdout, p.stderr) == (
        OK, b"[array([4., 5.], dtype=float32)]\n", b""), (p.returncode, p.stdout, p.stderr)
    fifo = cli.path("p1.npy")
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as f:
            f.write(data)
    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        p = subprocess.run([cli.bin, "call", "--lib", cli.echo, "echo", "p1.npy"], cwd=cli.dir,
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as e:
        raise Failure("packfn call ... echo p1.npy (a FIFO) did not finish: it waits for "
                      "another writer") from e
    writer.join(5)
    assert (p.returncode, p.stdout) == (OK, "[array([4., 5.], dtype=float32)]\n"), (
        p.returncode, p.stdout, p.stderr)


def test_stdout_write_errors(cli):
    # what cannot be written to stdout is an error (exit 1, said on stderr), not success
    if not os.path.exists("/dev/full"):
        print("test_cli: test_stdout_write_errors SKIPPED: no /dev/full")
        return
    for args in (["list"], ["call", "--lib", cli.echo, "types", "1"], ["--version"]):
        with open("/dev/full", "w") as full:
            p = subprocess.run([cli.bin] + args, cwd=cli.dir, stdout=full,
                               stderr=subprocess.PIPE, text=True, timeout=240)
        assert p.returncode == RAISED, (args, p.returncode, p.stderr)
        assert p.stderr.endswith("packfn: cannot write to standard output: No space left on "
                                 "device\n"), (args, p.stderr)
    # output larger than stdio's buffer: the reason is that of the write that failed (it said
    # only "write error": the flush at exit no longer knows it; review)
    big = ["str:%0100d" % i for i in range(3000)]
    with open("/dev/full", "w") as full:
        p = subprocess.run([cli.bin, "call", "--lib", cli.echo, "echo"] + big, cwd=cli.dir,
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=240)
    assert p.returncode == RAISED, (p.returncode, p.stderr)
    assert p.stderr == "packfn: cannot write to standard output: No space left on device\n", \
        p.stderr


def test_outputs_without_npy_form(cli):
    # more dimensions than NumPy's 32 prints as a description; as an --out it is a ValueError
    expect(cli, ["call", "--lib", cli.echo, "deep", "40"], OK, stderr="",
           stdout="<Tensor float32 (" + ", ".join(["1"] * 40) + ") on cpu:0>\n")
    expect(cli, ["call", "--lib", cli.echo, "deep", "32"], OK,
           stdout="array(" + "[" * 32 + "1." + "]" * 32 + ",\n      dtype=float32)\n", wrap=False)
    expect(cli, ["call", "--lib", cli.echo, "deep", "40", "--out", "n1.npy"], RAISED, stdout="",
           stderr="ValueError: n1.npy: cannot write a tensor of 40 dimensions (.npy has 32 at "
                  "most)\n")
    expect(cli, ["call", "--lib", cli.echo, "echo", "int4[2]", "--out", "n2.npy"], RAISED,
           stderr="ValueError: n2.npy: cannot write a tensor of dtype int4: it has no .npy "
                  "equivalent\n", wrap=False)
    assert not os.path.exists(cli.path("n1.npy")) and not os.path.exists(cli.path("n2.npy"))
    # a strided view is written as a C-order copy
    expect(cli, ["call", "--lib", cli.echo, "transpose", "float32[2,3]:1,2,3,4,5,6", "--out",
                 "n3.npy"], OK, stdout="wrote n3.npy\n")
    assert holds(cli, "n3.npy", "<f4", (3, 2), f32(1, 4, 2, 5, 3, 6))


def test_registration_failures(cli):
    # a library whose registration fails as it loads: pf_module_load refuses it
    expect(cli, ["list", cli.collide], RAISED, stdout="",
           stderr_re=r"raised an error while initialising.*\n.*'cli_test\.collide' is already "
                     r"registered")
    # preloaded (a failure before main): list and info say a function is missing, exit 1
    env = {"LD_PRELOAD": cli.collide}
    expect(cli, ["list"], RAISED, wrap=False, env=env,
           stdout_re=r"^packfn\.kernels\.add_n\(",
           stderr="packfn: 1 function could not be registered when its library loaded "
                  "(ValueError: pf_global_set: function 'cli_test.collide' is already "
                  "registered (pass allow_override=1 to replace it)); it is missing from the "
                  "global table\n")
    expect(cli, ["info"], RAISED, wrap=False, env=env, stdout_re=r"^global functions: \d+$",
           stderr_re=r"^packfn: 1 function could not be registered")


BENCH_RESULT = (r"^measured: pf_function_call with (\d+) arguments? parsed once .*; 3 repetitions "
                r"of \d+ calls?, after one call not timed\nmedian: [0-9.]+ ns per call "
                r"\(min [0-9.]+, max [0-9.]+\)$")


def test_bench_function(cli):
    out = expect(cli, ["bench", "--repeat", "3", "packfn.kernels.add_n", "float64[16]:1",
                       "float64[16]", "1"], OK, stderr="")
    assert out.startswith("function: packfn.kernels.add_n(x: Tensor, out: Tensor, n: float) "
                          "-> None\n"), out
    assert re.search(BENCH_RESULT, out, re.M).group(1) == "3", out
    # a user's own function: exported, or registered by the library
    out = expect(cli, ["bench", "--lib", cli.echo, "--repeat", "3", "cli_test.twice", "5"], OK)
    assert out.startswith("function: cli_test.twice(x: int) -> int from "), out
    assert re.search(BENCH_RESULT, out, re.M).group(1) == "1", out
    # the --opt=VALUE forms, as `call` takes them (they ran the suite instead; review)
    out = expect(cli, ["bench", "--repeat=3", "--lib=" + cli.echo, "cli_test.twice", "5"], OK)
    assert re.search(BENCH_RESULT, out, re.M).group(1) == "1", out
    # options after NAME, as `call` takes them (they were passed to the function; review), and
    # `--` ending them
    out = expect(cli, ["bench", "packfn.kernels.add_n", "float64[16]:1", "float64[16]", "1",
                       "--repeat", "3"], OK, stderr="", wrap=False)
    assert re.search(BENCH_RESULT, out, re.M).group(1) == "3", out
    out = expect(cli, ["bench", "cli_test.twice", "--repeat=3", "5", "--lib=" + cli.echo], OK,
                 wrap=False)
    assert out.startswith("function: cli_test.twice(x: int) -> int from "), out
    assert re.search(BENCH_RESULT, out, re.M).group(1) == "1", out
    expect(cli, ["bench", "--lib", cli.echo, "cli_test.twice", "--", "--repeat"], RAISED,
           wrap=False, stdout="",
           stderr="TypeError: twice: argument 0 (x): expected int, got str\n")
    expect(cli, ["bench", "cli_test.twice", "5", "--repeats", "3"], USAGE, wrap=False,
           stderr_re=r"^packfn bench: unknown option --repeats$")
    expect(cli, ["bench", "--repeat=", "f"], USAGE, wrap=False,
           stderr_re=r"^packfn bench: --repeat expects a count from 1 to 1000, got $")
    # failing paths: the first call fails, a missing name, bad options
    expect(cli, ["bench", "--lib", cli.echo, "cli_test.twice", "x"], RAISED, stdout="",
           stderr="TypeError: twice: argument 0 (x): expected int, got str\n")
    expect(cli, ["bench", "packfn.kernels.keplr"], RAISED, stdout="", wrap=False,
           stderr_re=r"^KeyError: .*did you mean 'packfn\.kernels\.kepler'\?")
    expect(cli, ["bench", "--repeat", "0", "f"], USAGE, wrap=False,
           stderr_re=r"^packfn bench: --repeat expects a count from 1 to 1000, got 0$")
    # a count behind a blank is no count, as ' 5' is no number for `call` (strtol skipped it)
    for blank in (" ", "\t", "\n"):
        expect(cli, ["bench", "--repeat", blank + "3", "f"], USAGE, wrap=False,
               stderr_re=r"^packfn bench: --repeat expects a count from 1 to 1000, got \s3$")
    expect(cli, ["bench", "--lib"], USAGE, wrap=False, stderr_re=r"option --lib needs a value")
    expect(cli, ["bench", "--lib", cli.echo], USAGE, wrap=False,
           stderr_re=r"missing the function NAME")
    expect(cli, ["bench", "add_n", "float32[2]:x"], USAGE, wrap=False,
           stderr_re=r"^packfn bench: bad tensor literal")


def stage_bench_trees(cli):
    """Writes the executables test_bench_suite_lookup runs, before any test thread starts.

    A file still open for writing cannot be executed (ETXTBSY), and a child forked by another
    test thread inherits the writer's descriptor until it execs: copying a binary in one thread
    while another starts a process made the later run fail at random. Staging the copies while
    the process has one thread leaves no such window."""
    bare = cli.path("bare")
    os.makedirs(bare, exist_ok=True)
    shutil.copy(cli.bin, os.path.join(bare, "packfn"))
    tree = cli.path("tree")
    benchdir = os.path.join(tree, "bench")
    os.makedirs(os.path.join(tree, "cli"), exist_ok=True)
    os.makedirs(benchdir, exist_ok=True)
    shutil.copy(cli.bin, os.path.join(tree, "cli", "packfn"))
    with open(os.path.join(benchdir, "run_suite.sh"), "w") as f:
        f.write('echo "suite $*"\nexit 3\n')
    with open(os.path.join(benchdir, "packfn_bench"), "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(os.path.join(benchdir, "packfn_bench"), 0o755)


def test_bench_suite_lookup(cli):
    # the suite runs from a build tree only, found relative to the executable (../bench): a copy
    # of packfn in a bare folder (as an installed one is) says the suite is not there; beside a
    # bench/ folder it runs what is there (stand-ins here: the real suite is slow, and bench/
    # has its own tests); stage_bench_trees wrote both folders
    bare = cli.path("bare")
    rc, out, err = cli.run_bin(os.path.join(bare, "packfn"), "bench", "--quick")
    assert rc == USAGE and out == "", (rc, out, err)
    assert re.match(r"^packfn bench: the benchmark suite runs from a build tree only \(configured "
                    r"with -DPF_BUILD_BENCH=ON: run BUILD/cli/packfn bench\); it needs "
                    r"run_suite\.sh and packfn_bench in .*/bare/\.\./bench\. ", err), err
    tree = cli.path("tree")
    rc, out, err = cli.run_bin(os.path.join(tree, "cli", "packfn"), "bench", "--quick")
    assert rc == 3 and err == "", (rc, out, err)
    assert re.fullmatch(r"suite --bench .*/tree/cli/\.\./bench/packfn_bench --quick\n", out), out
    # the suite's options are packfn bench's: --out=DIR as --out DIR (run_suite.sh took it for
    # an unknown option), --help anywhere is packfn bench's help, and anything else is a usage
    # error of packfn bench, the suite not run (it went to run_suite.sh: "run_suite.sh: unknown
    # option '--device'", "parameter not set" for --out alone, --bench replaced the program; an
    # installed packfn said the suite was missing)
    rc, out, err = cli.run_bin(os.path.join(tree, "cli", "packfn"), "bench", "--out=res",
                               "--quick")
    assert rc == 3 and err == "", (rc, out, err)
    assert re.fullmatch(r"suite --bench .*/packfn_bench --out res --quick\n", out), out
    rc, out, err = cli.run_bin(os.path.join(tree, "cli", "packfn"), "bench", "--quick", "--help")
    assert rc == OK and out.startswith("usage: packfn bench [--quick]") and err == "", (rc, out)
    for folder in (os.path.join(tree, "cli"), bare):
        for argv, msg in ((["--device", "cuda", "packfn.kernels.add_n", "float32[1]", "float32[1]",
                            "1"], "unknown option --device"),
                          (["--quick", "--bench", "/bin/true"], "unknown option --bench"),
                          (["-x"], "unknown option -x"),
                          (["--out"], "option --out needs a value"),
                          (["--out="], "option --out needs a value")):
            rc, out, err = cli.run_bin(os.path.join(folder, "packfn"), "bench", *argv)
            assert rc == USAGE and out == "", (argv, rc, out, err)
            assert err.startswith("packfn bench: " + msg + "\nusage: packfn bench"), (argv, err)


TESTS = [test_version_and_help, test_usage_errors, test_bad_literals, test_info, test_list,
         test_call_inline_tensors, test_call_errors, test_literal_types,
         test_tensor_result_and_out, test_npy_interop, test_library_globals_and_function_results,
         test_bench_function, test_bench_suite_lookup, test_atomic_out, test_mapped_inputs,
         test_registration_failures, test_out_file_in_the_result,
         test_out_file_given_twice_as_argument, test_device_result_is_an_argument,
         test_out_file_size_limit, test_piped_inputs,
         test_stdout_write_errors, test_outputs_without_npy_form]


def test_tvm_ffi_library(cli):
    # a library built against TVM-FFI's C++ headers: __tvm_ffi_<name> exports, no packfn stamp
    expect(cli, ["call", "--lib", cli.tvm, "add_ints", "40", "2"], OK, stdout="42\n", stderr="")
    expect(cli, ["call", "--lib", cli.tvm, "greet", "str:packfn"], OK,
           stdout="hello, packfn\n")
    expect(cli, ["call", "--lib", cli.tvm, "halve", "5.0"], OK, stdout="2.5\n")
    expect(cli, ["call", "--lib", cli.tvm, "add_int", "1", "2"], RAISED, stdout="",
           stderr_re=r"^KeyError: .*has no function 'add_int'.*did you mean 'add_ints'")
    expect(cli, ["list", cli.tvm], OK, stdout_re=r"^add_ints$")
    # errors the library raises into TVM-FFI's slot, reported by packfn (one slot once joined)
    expect(cli, ["call", "--lib", cli.tvm, "halve", "-1.0"], RAISED, stdout="",
           stderr_re=r"^ValueError: halve: negative input -1")
    expect(cli, ["call", "--lib", cli.tvm, "add_ints", "str:x", "1"], RAISED,
           stderr_re=r"^TypeError: ")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--packfn", required=True)
    parser.add_argument("--echo-lib", required=True)
    parser.add_argument("--good-lib", required=True)
    parser.add_argument("--collide-lib", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--tvm-lib")
    parser.add_argument("wrapper", nargs="*")
    opts = parser.parse_args()
    shutil.rmtree(opts.workdir, ignore_errors=True)
    os.makedirs(opts.workdir)
    cli = Cli(opts)
    tests = [test_tvm_ffi_library] if opts.tvm_lib else TESTS
    if test_bench_suite_lookup in tests:
        stage_bench_trees(cli)
    failures = 0
    # the cases are independent (distinct file names): run them side by side, which matters
    # under valgrind
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = {pool.submit(t, cli): t.__name__ for t in tests}
        for future in concurrent.futures.as_completed(futures):
            name = futures[future]
            try:
                future.result()
                print(f"ok   {name}")
            except (Failure, AssertionError) as e:
                failures += 1
                print(f"FAIL {name}: {e}")
    print(f"test_cli: {len(tests) - failures}/{len(tests)} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
