#!/usr/bin/env python3
"""No function over 120 lines outside tests (issue 45).

Counts the lines of every `fn` in crates/*/src that hold code (blank lines
and comments do not count, as in clippy's `too_many_lines`), leaving out
tests: files named tests.rs or *_tests.rs, tests/ and benches/ folders, and
items under `#[cfg(test)]`. A text scan, not a parser: braces inside
strings, character literals and comments are skipped.

Usage: scripts/check-fn-length.py [--limit N] [--all] [ROOT...]
Exits 1 naming each function over the limit that is not in KNOWN; --all
lists every function over the limit, KNOWN ones included.
"""
import os
import re
import sys

LIMIT = 120

# Functions still over the limit, to be split (path:function). The list
# only shrinks: a function split below the limit leaves it. Empty since
# issue 45's last splits: every function outside tests is within the limit.
KNOWN: set = set()

FN = re.compile(
    r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"[^"]*"\s+)?fn\s+(\w+)'
)
CFG_TEST = re.compile(r"\s*#\[cfg\(test\)\]")
ITEM = re.compile(r"\s*(pub(\(.*\))?\s+)?(mod|fn|impl)\b")
CHAR = re.compile(r"'(\\.[^']*|[^\\'])'")
RAW = re.compile(r'r(#*)"')


class Scan:
    """Strips strings, character literals and comments from lines, keeping
    the state of block comments and strings across lines."""

    def __init__(self):
        self.block = 0
        self.string = False
        self.raw = None

    def code(self, line):
        out, i, n = [], 0, len(line)
        while i < n:
            c = line[i]
            if self.block:
                if line.startswith("*/", i):
                    self.block -= 1
                    i += 2
                elif line.startswith("/*", i):
                    self.block += 1
                    i += 2
                else:
                    i += 1
                continue
            if self.string:
                if c == "\\":
                    i += 2
                    continue
                if c == '"':
                    self.string = False
                i += 1
                continue
            if self.raw is not None:
                end = '"' + "#" * self.raw
                j = line.find(end, i)
                if j < 0:
                    i = n
                else:
                    i, self.raw = j + len(end), None
                continue
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                self.block += 1
                i += 2
                continue
            m = RAW.match(line, i)
            if m and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == "_")):
                self.raw = len(m.group(1))
                i = m.end()
                continue
            if c == '"':
                self.string = True
                i += 1
                continue
            if c == "'":
                m = CHAR.match(line, i)
                if m:
                    i = m.end()
                    continue
            out.append(c)
            i += 1
        return "".join(out)


def block_end(code, start):
    """The index of the line closing the block opened at or after `start`,
    or None for a declaration without a body."""
    depth, opened = 0, False
    for k in range(start, len(code)):
        c = code[k]
        if not opened and ";" in c and "{" not in c:
            return None
        depth += c.count("{") - c.count("}")
        opened = opened or "{" in c
        if opened and depth <= 0:
            return k
    return None


def long_functions(path, limit):
    """(lines, name, first line) of each function of `path` over `limit`."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    scan = Scan()
    code = [scan.code(line) for line in lines]
    tests = set()
    for i, line in enumerate(lines):
        if CFG_TEST.match(line):
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("#["):
                j += 1
            if j < len(lines) and ITEM.match(lines[j]):
                end = block_end(code, j)
                if end is not None:
                    tests.update(range(j, end + 1))
    found = []
    for i, c in enumerate(code):
        m = FN.match(c)
        if not m or i in tests:
            continue
        end = block_end(code, i)
        if end is None:
            continue
        n = sum(1 for k in range(i, end + 1) if code[k].strip())
        if n > limit:
            found.append((n, m.group(7), i + 1))
    return found


def is_test_file(path):
    name = os.path.basename(path)
    parts = path.split(os.sep)
    return name == "tests.rs" or name.endswith("_tests.rs") or "tests" in parts or "benches" in parts


def main(argv):
    limit, show_all, roots = LIMIT, False, []
    args = iter(argv)
    for a in args:
        if a == "--limit":
            limit = int(next(args))
        elif a == "--all":
            show_all = True
        else:
            roots.append(a)
    if not roots:
        roots = sorted(os.path.join("crates", c, "src") for c in os.listdir("crates"))
    over, known_seen = [], set()
    for root in roots:
        for dirpath, _, files in os.walk(root):
            for f in sorted(files):
                path = os.path.join(dirpath, f)
                if not f.endswith(".rs") or is_test_file(path):
                    continue
                for n, name, line in long_functions(path, limit):
                    key = f"{path}:{name}"
                    if key in KNOWN:
                        known_seen.add(key)
                        if not show_all:
                            continue
                    over.append((n, key, line))
    for n, key, line in sorted(over, reverse=True):
        path, name = key.rsplit(":", 1)
        tag = " (known)" if key in KNOWN else ""
        print(f"{path}:{line}: fn {name} has {n} lines of code, over {limit}{tag}")
    for key in sorted(KNOWN - known_seen):
        print(f"note: {key} is within {limit} lines now: remove it from KNOWN in {sys.argv[0]}")
    return 1 if any(key not in KNOWN for _, key, _ in over) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
