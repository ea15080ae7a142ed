#!/usr/bin/env python3
"""Runs hostile command-line cases through the `laya` binary (issue 11).

Every case is a command a hostile or careless user could type. A case passes when
  - the process ends by itself within its timeout (no hang) and not by a signal (no crash),
  - its exit code is the expected one (by default: non-zero, 1..125),
  - stderr matches the case's pattern (the message names the thing and what is wrong),
  - every victim file is byte-identical afterwards (no lost data).

Cases live in tests/hostile/cases_*.py, each defining CASES = [Case(...), ...].
Placeholders in args, victims and files: {tmp} (a fresh folder per case), {model}
(the default model), {fixtures} (../shared/fixtures), {laya} (the binary).

  tests/hostile/hostile.py --laya build/laya tests/hostile/cases_cli.py
  tests/hostile/hostile.py --laya build/laya --table /tmp/table.md tests/hostile/cases_*.py

Exit 0: all passed; 1: a case failed; 2: bad usage. Cases that need something absent
(the fixtures) are skipped with a message; when every case of the run was skipped the
exit code is 77 (ctest's SKIP_RETURN_CODE).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import inspect
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Union

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class Case:
    name: str                      # short, unique in its file
    klass: str                     # crash | hang | silent | lost | message | limit
    args: list                     # argv after the binary; placeholders expanded
    expect_rc: Optional[int] = None  # None: any failure exit (1..125); 0: must succeed
    expect_msg: str = ""           # regex searched in stderr (re.S | re.I)
    files: dict = dataclasses.field(default_factory=dict)  # relative to {tmp}: str | bytes
    victims: list = dataclasses.field(default_factory=list)  # must be byte-identical after
    needs: list = dataclasses.field(default_factory=list)    # 'fixtures', 'model'
    timeout: float = 30.0
    stdin: Optional[bytes] = None
    setup: Optional[Callable] = None  # setup(tmp) or setup(tmp, ctx): make a FIFO, a folder, copy the model
    fsize_limit: Optional[int] = None  # RLIMIT_FSIZE in bytes for the child (failed writes)
    check: Optional[Callable[[Path, "subprocess.CompletedProcess"], Optional[str]]] = None
    # check(tmp, proc) -> None when fine, else what is wrong (extra assertions)


class Ctx:
    def __init__(self, laya: Path, fixtures: Path, model: Path):
        self.laya, self.fixtures, self.model = laya, fixtures, model


def expand(s: str, tmp: Path, ctx: Ctx) -> str:
    return (s.replace("{tmp}", str(tmp)).replace("{model}", str(ctx.model))
             .replace("{fixtures}", str(ctx.fixtures)).replace("{laya}", str(ctx.laya)))


def digest(p: Path) -> Optional[str]:
    try:
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError:
        return None


def first_line(b: bytes) -> str:
    for line in b.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def run_case(c: Case, ctx: Ctx) -> tuple[str, str, Optional[int], str]:
    """Returns (verdict 'pass'|'FAIL'|'skip', why, exit code, first line of stderr)."""
    if "fixtures" in c.needs and not ctx.fixtures.is_dir():
        return "skip", f"needs {ctx.fixtures}", None, ""
    if "model" in c.needs and not ctx.model.is_file():
        return "skip", f"needs the default model {ctx.model}", None, ""
    tmp = Path(tempfile.mkdtemp(prefix=f"laya-hostile-{c.name}-"))
    try:
        for rel, content in c.files.items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(content if isinstance(content, bytes) else expand(content, tmp, ctx).encode())
        if c.setup:  # setup(tmp) or setup(tmp, ctx): ctx.model, ctx.fixtures, ctx.laya
            if len(inspect.signature(c.setup).parameters) >= 2:
                c.setup(tmp, ctx)
            else:
                c.setup(tmp)
        victims = [Path(expand(v, tmp, ctx)) for v in c.victims]
        before = {v: digest(v) for v in victims}
        argv = [str(ctx.laya)] + [expand(a, tmp, ctx) for a in c.args]

        def limits():
            if c.fsize_limit is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (c.fsize_limit, c.fsize_limit))
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails with EFBIG

        start = time.monotonic()
        try:
            proc = subprocess.run(argv, input=c.stdin, stdin=None if c.stdin is not None else subprocess.DEVNULL,
                                  capture_output=True, timeout=c.timeout, preexec_fn=limits, cwd=tmp)
        except subprocess.TimeoutExpired as e:
            return "FAIL", f"hang: no exit within {c.timeout:g} s", None, first_line(e.stderr or b"")
        secs = time.monotonic() - start
        err = first_line(proc.stderr).replace(str(tmp), "{tmp}")
        rc = proc.returncode
        if rc < 0:
            return "FAIL", f"killed by signal {-rc} ({signal.Signals(-rc).name})", rc, err
        if c.expect_rc is None and not (1 <= rc <= 125):
            return "FAIL", f"exit {rc}, expected a failure exit", rc, err
        if c.expect_rc is not None and rc != c.expect_rc:
            return "FAIL", f"exit {rc}, expected {c.expect_rc}", rc, err
        if c.expect_msg and not re.search(c.expect_msg, proc.stderr.decode("utf-8", "replace"), re.S | re.I):
            return "FAIL", f"stderr does not match /{c.expect_msg}/: {proc.stderr.decode('utf-8', 'replace')[:300]!r}", rc, err
        for v in victims:
            if digest(v) != before[v]:
                return "FAIL", f"victim {v} changed (lost data)", rc, err
        if c.check:
            why = c.check(tmp, proc)
            if why:
                return "FAIL", why, rc, err
        if b"terminate called" in proc.stderr or b"json.exception" in proc.stderr:
            return "FAIL", "a library exception's text reached the user", rc, err
        return "pass", f"{secs:.2f} s", rc, err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_cases(path: Path) -> list:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    mod.Case = Case  # cases files use Case without importing this script
    spec.loader.exec_module(mod)
    return list(mod.CASES)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--laya", required=True, help="the laya binary")
    ap.add_argument("--fixtures", default=str(ROOT.parent / "shared" / "fixtures"))
    ap.add_argument("--model", default=str(ROOT / "models" / "laya-default-q8_0.gguf"))
    ap.add_argument("--table", help="also write a markdown table (class, case, exit, first line of stderr)")
    ap.add_argument("-k", help="only cases whose name contains this")
    ap.add_argument("cases", nargs="+")
    a = ap.parse_args()
    ctx = Ctx(Path(a.laya).resolve(), Path(a.fixtures).resolve(), Path(a.model).resolve())
    if not ctx.laya.is_file():
        print(f"hostile: the binary {ctx.laya} does not exist", file=sys.stderr)
        return 2
    rows, failed, ran = [], 0, 0
    for f in a.cases:
        for c in load_cases(Path(f)):
            if a.k and a.k not in c.name:
                continue
            verdict, why, rc, err = run_case(c, ctx)
            ran += verdict != "skip"
            failed += verdict == "FAIL"
            print(f"{verdict:4} {Path(f).stem}:{c.name} [{c.klass}] exit={rc} {why}\n       {err}", flush=True)
            rows.append((c.klass, c.name, rc, err, verdict))
    if a.table:
        with open(a.table, "w") as t:
            t.write("| class | case | exit | first line of the message | |\n|---|---|---|---|---|\n")
            for k, n, rc, err, v in sorted(rows, key=lambda r: r[0]):
                cell = err.replace("|", "\\|")
                t.write(f"| {k} | {n} | {rc} | {cell} | {v} |\n")
    print(f"hostile: {len(rows)} cases, {failed} failed, {len(rows) - ran} skipped")
    if failed:
        return 1
    return 77 if ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
