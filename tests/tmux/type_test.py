#!/usr/bin/env python3
"""End to end: `laya type` in a real terminal (tmux). Types two lines with send-keys, waits for the
suggestion to appear as dim ghost text after the cursor (capture-pane -e shows the SGR 2 "dim"
attribute), accepts it with Tab, saves with Ctrl-S, quits with Ctrl-Q, and checks that the saved file
is exactly the typed text plus the ghost text that was shown.

  tests/tmux/type_test.py LAYA_BINARY MODEL
Exit 77 (skipped) when tmux is not installed."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

if not shutil.which("tmux"):
    print("SKIP: tmux is not installed (scripts/deps.sh installs it)")
    sys.exit(77)
laya, model = sys.argv[1], sys.argv[2]
sock = f"laya-type-test-{os.getpid()}"


def tmux(*args, check=True):
    return subprocess.run(["tmux", "-L", sock, *args], check=check, capture_output=True, text=True).stdout


def wait_for(pred, what, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pane = tmux("capture-pane", "-t", "t", "-p", "-e")
        got = pred(pane)
        if got is not None:
            return got
        time.sleep(0.1)
    raise SystemExit(f"FAIL: timed out waiting for {what}; the pane:\n{tmux('capture-pane', '-t', 't', '-p')}")


DIM = re.compile(r"\x1b\[2m([^\x1b]*)")  # dim until the next attribute change or the line end
SGR = re.compile(r"\x1b\[[0-9;]*m")
tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "add.py")
try:
    tmux("new-session", "-d", "-s", "t", "-x", "100", "-y", "12", "env", "TERM=xterm-256color",
         laya, "type", "-m", model, "-t", "2", "--awake-ms", "0", path)
    wait_for(lambda p: True if "laya type" in p else None, "the editor to start")
    tmux("send-keys", "-t", "t", "-l", "def add(a, b):")
    tmux("send-keys", "-t", "t", "Enter")
    tmux("send-keys", "-t", "t", "-l", "    return")

    def ghost(pane):
        for line in pane.splitlines():
            if "    return" in line:
                m = DIM.search(line)
                if m and m.group(1):
                    return m.group(1)
        return None

    shown = wait_for(ghost, "dim ghost text after '    return'")
    print(f"ghost text: {shown!r}")
    tmux("send-keys", "-t", "t", "Tab")
    # Accepted: the text is on the line before any dim part (a new ghost may follow it).
    wait_for(lambda p: True if any(("    return" + shown) in SGR.sub("", l.split("\x1b[2m")[0])
                                   for l in p.splitlines()) else None,
             "the accepted text as normal text")
    tmux("send-keys", "-t", "t", "C-s")
    wait_for(lambda p: True if "saved" in p else None, "the saved message")
    tmux("send-keys", "-t", "t", "C-q")
    end = time.monotonic() + 10
    while time.monotonic() < end and "t" in tmux("list-sessions", "-F", "#S", check=False).split():
        time.sleep(0.1)
    with open(path, encoding="utf-8") as f:
        saved = f.read()
    want = "def add(a, b):\n    return" + shown
    if saved != want:
        raise SystemExit(f"FAIL: saved {saved!r}, expected {want!r}")
    print(f"ok: saved {saved!r}")
finally:
    subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
