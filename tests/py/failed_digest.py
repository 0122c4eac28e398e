#!/usr/bin/python3
"""Prints, for each failed test in a ctest LastTest.log, the lines that say why it failed.

Why: CI keeps only the tail of the test command's output, and ctest ends with a list of failed
test names; the reason sits hundreds of lines above. scripts/test.sh calls this last on a
failure. Failure lines: GoogleTest's `file:line: Failure` and the lines after it, our scripts'
`FAIL ...` lines, `error:`/Traceback lines, and a timeout; else the output's last lines.
Usage: failed_digest.py Testing/Temporary/LastTest.log [--lines N]
"""
import re
import sys

MARK = re.compile(r"(: Failure$|^FAIL\b|\bFAIL |error:|^Traceback|Exception|timed out|NOT BUILT)")


def blocks(text):
    """(name, output lines, passed) of every test in the log."""
    for m in re.finditer(r'^\d+/\d+ Test: (.+?)\n(.*?)^Test (Passed|Failed|Fail|Timeout|Not Run)', text, re.S | re.M):
        out = m.group(2).split("Output:\n", 1)[-1].splitlines()
        yield m.group(1), out, m.group(3) == "Passed"


def digest(out, budget):
    picked = []
    for i, line in enumerate(out):
        if MARK.search(line):
            picked.extend(out[i:i + 6] if line.endswith(": Failure") or line.startswith("FAIL") else [line])
    picked = list(dict.fromkeys(picked)) or [s for s in out if s.strip() and not s.startswith("---")][-budget:]
    return picked[:budget]


def main():
    path = sys.argv[1]
    budget = int(sys.argv[sys.argv.index("--lines") + 1]) if "--lines" in sys.argv else 12
    text = open(path, encoding="utf-8", errors="replace").read()
    failed = [(name, out) for name, out, ok in blocks(text) if not ok]
    for name, out in failed:
        print(f"-- {name}")
        for line in digest(out, budget):
            print("   " + line[:300])
    print(f"== {len(failed)} failed test(s): {', '.join(n for n, _ in failed) or 'none found in ' + path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
