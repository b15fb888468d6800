"""A CPU-bound background load for the under-load benchmarks (ab.py --load, stages_ab.py --load).

`nice -n 19` loops, one per core, each compiling a small C++ file (<regex> in a template,
about 3-4 s of g++ -O2 per compile) over and over: work that wants the whole core but gives
way to normal-priority processes, as a background build does. Stopped (the whole process
group of each loop) when the `with` block ends, also on an exception or Ctrl-C.
"""
import os
import shutil
import signal
import subprocess
import tempfile

HEAVY_CC = r"""#include <regex>
#include <string>
template <int N> struct F { static int v(const std::string& s) { return std::regex_match(s, std::regex("a+b*" + std::to_string(N))) + F<N - 1>::v(s); } };
template <> struct F<0> { static int v(const std::string&) { return 0; } };
int run(const std::string& s) { return F<12>::v(s); }
"""

KINDS = ("none", "nice19")


class Load:
    """`with Load("nice19"):` runs the load inside the block; Load("none") does nothing."""

    def __init__(self, kind, loops=None, log=None):
        if kind not in KINDS:
            raise SystemExit(f"--load: unknown {kind!r}; known: {', '.join(KINDS)}")
        self.kind = kind
        self.loops = loops or os.cpu_count() or 1
        self.log = log or (lambda msg: None)
        self.procs = []
        self.dir = None

    def __enter__(self):
        if self.kind == "none":
            return self
        cxx = shutil.which("g++") or shutil.which("c++")
        if not cxx:
            raise SystemExit("--load nice19 needs g++ (apt-get install g++)")
        self.dir = tempfile.mkdtemp(prefix="decodekit_load_")
        src = os.path.join(self.dir, "heavy.cc")
        with open(src, "w") as f:
            f.write(HEAVY_CC)
        loop = f"while :; do {cxx} -O2 -c {src} -o /dev/null || exit 1; done"
        for _ in range(self.loops):
            self.procs.append(subprocess.Popen(["nice", "-n", "19", "sh", "-c", loop],
                                               start_new_session=True))
        self.log(f"load: {self.loops} x nice -n 19 g++ -O2 loops started")
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs:
            p.wait()
        if self.procs:
            self.log("load: stopped")
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def check(self):
        """Raises if a loop died (e.g. the compiler failed): a benchmark 'under load' without load."""
        for p in self.procs:
            if p.poll() is not None:
                raise SystemExit(f"load: a background loop exited ({p.returncode})")
