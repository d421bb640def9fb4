#!/usr/bin/env python3
"""Prints what failed in a go test log (hack/gotest.sh runs it when go test fails).

Usage: hack/gotest_summary.py LOG [GOROOT]

The log holds go test's text output, or its -json events (then the
summary is made from the text the events carry). For each failed package
it prints:
  - each failed test with its messages; with -v go test prints a test's
    messages before its "--- FAIL" line, so the lines after "=== RUN",
    "=== NAME" or "=== CONT TestX" are kept for TestX and printed with
    its "--- FAIL" line (a passing test's lines are dropped);
  - a test that started (-v: "=== RUN") and never finished, with its lines;
  - the package's own unindented lines (TestMain's log.Fatal, os.Exit);
  - a panic with its message and where it happened: the first stack frame
    outside runtime., testing. and GOROOT; at a timeout, also the frames
    where the running tests, fuzz targets and examples were;
  - the "# pkg" blocks go prints for build, vet and setup failures.
Goroutine dumps and passing packages are left out. A block longer than
MAX_LINES keeps its first and last HEAD_LINES lines and says how many
lines the log has between them; a line longer than MAX_CHARS is cut.
"""

import json
import re
import sys

MAX_LINES = 40
HEAD_LINES = 20
MAX_CHARS = 500

STATUS = re.compile(r"^(ok  |FAIL|\?   )\t(\S+)(.*)$")
TEST_START = re.compile(r"^=== (RUN|NAME|CONT)\s+(\S+)")
TEST_END = re.compile(r"^\s*--- (FAIL|PASS|SKIP): (\S+)")
# Lines that follow a "# pkg" header: compiler, vet and module errors
# ("file.go:12:3: ...") and their indented continuations.
BUILD_LINE = re.compile(r"^(\s|\S+\.(go|s|c|h|mod):\d+|vet: |note: |go: |too many errors)")
NOISE = re.compile(r"^(PASS|FAIL|=== (PAUSE|RUN|NAME|CONT)\b.*|testing: warning: no tests to run|coverage: .*|)$")
RUNNERS = ("testing.tRunner(", "testing.fRunner(", "testing.runExample(")


def cut(line):
    """The line, cut to MAX_CHARS characters with a marker saying how many were cut."""
    if len(line) <= MAX_CHARS:
        return line
    return line[:MAX_CHARS] + " ... [%d more characters cut]" % (len(line) - MAX_CHARS)


class Summary:
    def __init__(self, log, goroot):
        self.log = log
        self.goroot = goroot.rstrip("/") + "/" if goroot else None
        self.out = []
        self.build = []  # "# pkg" blocks: [header, lines, printed]
        self.reset()

    def reset(self):
        self.tests = {}  # name -> lines kept for it
        self.started = []  # tests with "=== RUN" and no "--- " line yet
        self.failed = []  # (the "--- FAIL" line, name)
        self.current = None  # the test that the next lines belong to
        self.finished = False  # current has had its "--- " line
        self.other = []  # the package's own lines
        self.panic = None  # lines of the panic message
        self.stack = None  # goroutines: lists of (function, file:line)
        self.block = None  # the "# pkg" block being read

    def emit(self, lines, indent=""):
        if len(lines) > MAX_LINES:
            left = len(lines) - 2 * HEAD_LINES
            lines = (lines[:HEAD_LINES]
                     + ["... %d lines left out, they are in %s ..." % (left, self.log)]
                     + lines[-HEAD_LINES:])
        for line in lines:
            self.out.append(cut(indent + line))

    # --- reading lines

    def line(self, line):
        if self.block is not None:
            # The header's first line is its own (a setup error can read
            # "no Go files in ..."); then only lines that look like errors.
            if BUILD_LINE.match(line) or not (self.block[1] or STATUS.match(line) or line.startswith("# ")):
                self.block[1].append(line)
                return
            self.block = None
        m = STATUS.match(line)
        if m:
            self.status(line, m.group(1).strip(), m.group(2), m.group(3))
            return
        if line.startswith("# "):
            self.block = [line, [], False]
            self.build.append(self.block)
            return
        if self.stack is not None:
            self.frame(line)
            return
        if self.panic is not None and not line.startswith("goroutine "):
            if line:
                self.panic.append(line)
            return
        if line.startswith("panic: "):
            self.panic = [line]
            return
        if line.startswith("goroutine ") and line.endswith(":"):
            self.stack = [[]]
            return
        m = TEST_START.match(line)
        if m:
            self.current, self.finished = m.group(2), False
            if m.group(1) == "RUN":
                self.started.append(self.current)
            self.tests.setdefault(self.current, [])
            return
        if line.startswith("=== "):  # PAUSE
            return
        m = TEST_END.match(line)
        if m:
            name = m.group(2)
            if name in self.started:
                self.started.remove(name)
            self.tests.setdefault(name, [])
            if m.group(1) == "FAIL":
                self.failed.append((line, name))
            self.current, self.finished = name, True
            return
        if line in ("PASS", "FAIL"):
            self.current = None
            return
        indented = line[:1] in (" ", "\t")
        # After a test's "--- " line only its indented messages follow;
        # before it (-v) everything up to the next "=== " line is its.
        if self.current is not None and (indented or not self.finished):
            self.tests[self.current].append(line)
            return
        if not indented and not NOISE.match(line):
            self.other.append(line)

    def frame(self, line):
        if line.startswith("goroutine ") and line.endswith(":"):
            self.stack.append([])
        elif line.startswith("\t") and self.stack[-1]:
            fn, _ = self.stack[-1][-1]
            self.stack[-1][-1] = (fn, line.strip().split(" +0x")[0])
        elif line:
            self.stack[-1].append((line, ""))

    def mine(self, fn, where):
        """Whether a frame is the project's code: not runtime, testing, GOROOT or the generated test main."""
        if fn.startswith(("runtime.", "testing.", "created by ", "panic(", "main.main(")):
            return False
        if where.split(":")[0].endswith("_testmain.go"):
            return False
        return not (self.goroot and where.startswith(self.goroot))

    def first_mine(self, goroutine):
        for fn, where in goroutine:
            if self.mine(fn, where):
                return "%s  %s" % (re.sub(r"\(.*\)$", "(...)", fn), where)
        return None

    # --- at a package's end

    def status(self, line, word, pkg, rest):
        self.block = None
        if word == "FAIL":
            self.failed_package(line, pkg)
        self.reset()

    def failed_package(self, line, pkg):
        for fail, name in self.failed:
            self.out.append(cut(fail))
            self.emit(self.tests.get(name, []))
        for name in self.started:
            lines = self.tests.get(name, [])
            self.out.append("    %s started and did not finish%s" % (name, "; its output:" if lines else ""))
            self.emit(lines, "        ")
        if self.other:
            self.emit(self.other)
        if self.panic:
            self.emit(self.panic)
        if self.stack:
            at = self.first_mine(self.stack[0])
            if at:
                self.out.append("    panicked at " + cut(at))
            if self.panic and self.panic[0].startswith("panic: test timed out"):
                seen = []
                for g in self.stack[1:]:
                    at = self.first_mine(g) if any(fn.startswith(RUNNERS) for fn, _ in g) else None
                    if at and at not in seen:
                        seen.append(at)
                for at in seen:
                    self.out.append("    was running " + cut(at))
        if line is None:
            return
        if "[build failed]" in line or "[setup failed]" in line:
            for block in self.build:
                if not block[2] and self.names(block[0], pkg):
                    block[2] = True
                    self.out.append(cut(block[0]))
                    self.emit(block[1])
        self.out.append(cut(line))

    @staticmethod
    def names(header, pkg):
        """Whether a "# ..." header is about package pkg (or its tests)."""
        words = header[2:].replace("[", " ").replace("]", " ").split()
        return any(w in (pkg, pkg + "_test", pkg + ".test") for w in words)

    def finish(self):
        # Lines after the last package: go's own errors (a bad flag, no module).
        if self.failed or self.started or self.other or self.panic:
            self.failed_package(None, "")
        for block in self.build:
            if not block[2] and block[1]:
                self.out.append(cut(block[0]))
                self.emit(block[1])


def text_lines(f):
    """The log's lines; from -json events, the text output they carry."""
    first = f.readline()
    if not first.startswith('{"'):
        yield first.rstrip("\n")
        for line in f:
            yield line.rstrip("\n")
        return
    pending = {}  # package -> its output so far
    for raw in [first] + list(f):
        try:
            ev = json.loads(raw)
        except ValueError:
            yield raw.rstrip("\n")
            continue
        if ev.get("Action") == "build-output":
            yield ev.get("Output", "").rstrip("\n")
            continue
        pkg = ev.get("Package")
        if pkg is None:
            continue
        pending[pkg] = pending.get(pkg, "") + ev.get("Output", "")
        if ev.get("Action") in ("pass", "fail", "skip") and not ev.get("Test"):
            yield from pending.pop(pkg).splitlines()
    for text in pending.values():
        yield from text.splitlines()


def main():
    log = sys.argv[1]
    s = Summary(log, sys.argv[2] if len(sys.argv) > 2 else "")
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in text_lines(f):
            s.line(line)
    s.finish()
    if not s.out:
        s.out.append("(nothing recognised; see the whole output in %s)" % log)
    print("\n".join(s.out))


if __name__ == "__main__":
    main()
