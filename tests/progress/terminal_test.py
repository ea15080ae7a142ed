#!/usr/bin/env python3
"""Progress bars (issue 14, scope 5) are drawn on a terminal and never anywhere else.

Piped (as every other test runs the CLI): `replay`, `bench-typing` and `mkmodel` write no '\\r'
at all, on a run long enough that a bar would have been drawn. On a terminal (a pty made by
util-linux `script`): the same `replay` and `bench-typing` draw their bar ("\\rreplay TRACE
[###...] N/M events ..."), wipe it before the result lines, and `replay -q` draws nothing.

  tests/progress/terminal_test.py LAYA_BINARY MODEL TRACE.jsonl
Exit 77 (skipped) when `script` or the trace is absent."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

laya, model, trace = sys.argv[1], sys.argv[2], sys.argv[3]
if not os.path.exists(trace):
    print(f"SKIP: no {trace}")
    sys.exit(77)
name = os.path.splitext(os.path.basename(trace))[0]
# 2-token suggestions: runs of a second or two (long enough for a bar, which
# waits 250 ms before its first draw), not the ten of full ones.
REPLAY = [laya, "replay", "--fast", "-t", "2", "--max-tokens", "2", "-m", model, trace]
TYPING = [laya, "bench-typing", "-t", "2", "--max-tokens", "2", "-m", model, trace]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


# 1. Through pipes: not a single '\r' on stdout or stderr.
tmp = tempfile.mkdtemp()
for cmd in (REPLAY, TYPING, [laya, "mkmodel", "--preset", "test-tiny", "-o", os.path.join(tmp, "m.gguf")]):
    r = subprocess.run(cmd, capture_output=True, timeout=300)
    check(r.returncode == 0, f"piped {cmd[1]} exits 0 (got {r.returncode}: {r.stderr[-500:]!r})")
    check(b"\r" not in r.stdout and b"\r" not in r.stderr, f"piped {cmd[1]} writes no '\\r'")
shutil.rmtree(tmp, ignore_errors=True)

if not shutil.which("script"):
    print("SKIP: no `script` (util-linux) for the terminal half")
    sys.exit(1 if failures else 77)


def on_terminal(cmd):
    """What the command wrote to a pty (stdout and stderr both), and its exit code."""
    # A pty made by `script` may report 0 columns (the bar then assumes 80): set 120.
    r = subprocess.run(["script", "-qec", "stty cols 120 2>/dev/null; " + shlex.join(cmd), "/dev/null"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=300, env=dict(os.environ, TERM="xterm"))
    return r.stdout.decode("utf-8", "replace"), r.returncode


# 2. On a terminal: the bar, then wiped ("\r<spaces>\r") before the result line.
for cmd, label, unit, result in ((REPLAY, "replay", "events", f"{name}: "), (TYPING, "bench-typing", "chars", name)):
    out, rc = on_terminal(cmd)
    check(rc == 0, f"{label} on a terminal exits 0 (got {rc}: {out[-500:]!r})")
    bars = list(re.finditer(r"\r" + re.escape(f"{label} {name} [") + r"[#.]+\] \d+/\d+ " + unit + r"  \d+%", out))
    check(len(bars) >= 1, f"{label} on a terminal draws its bar ({len(bars)} draws)")
    if bars:  # the next '\r' after the last draw starts the wipe; the result line follows it
        wipe = out.find("\r", bars[-1].end())
        check(wipe >= 0 and re.match(r"\r +\r", out[wipe:]) is not None and out.find(result, wipe) > wipe,
              f"{label}: the bar is wiped before the result line")
    if cmd is REPLAY:  # -q is one flag of every model command (EngineFlags): checked once
        out_q, rc_q = on_terminal(cmd + ["-q"])
        check(rc_q == 0 and f"\r{label} " not in out_q and "[#" not in out_q, f"{label} -q on a terminal draws no bar")

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("all progress checks passed")
