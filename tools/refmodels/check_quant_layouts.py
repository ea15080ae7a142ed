#!/usr/bin/env python3
"""Checks make_families.py's block encoders (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
Q4_K, Q5_K, Q6_K) against llama.cpp's own Python dequantizers (gguf-py's
quants.py), so the --mix references do not rest on one reading of the
layouts. Each encoder's bytes are dequantized by gguf-py and must equal the
encoder's own dequantized values to float32 rounding.

Run:  python3 check_quant_layouts.py GGUF_PY_DIR
(GGUF_PY_DIR: llama.cpp's gguf-py folder; only gguf/{constants,lazy,quants}.py
are loaded, so PyYAML and the rest of gguf-py are not needed.) Needs numpy and
torch (make_families.py imports it).
"""
import importlib
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_families as mf  # noqa: E402


def load_quants(gguf_py):
    pkg = tempfile.mkdtemp()
    os.makedirs(os.path.join(pkg, "ggufq"))
    open(os.path.join(pkg, "ggufq", "__init__.py"), "w").close()
    for f in ("constants.py", "lazy.py", "quants.py"):
        shutil.copy(os.path.join(gguf_py, "gguf", f), os.path.join(pkg, "ggufq", f))
    sys.path.insert(0, pkg)
    return importlib.import_module("ggufq.quants"), importlib.import_module("ggufq.constants")


def main():
    quants, const = load_quants(sys.argv[1])
    T = const.GGMLQuantizationType
    names = {mf.GGML_Q4_0: T.Q4_0, mf.GGML_Q4_1: T.Q4_1, mf.GGML_Q5_0: T.Q5_0, mf.GGML_Q5_1: T.Q5_1,
             mf.GGML_Q8_0: T.Q8_0, mf.GGML_Q4_K: T.Q4_K, mf.GGML_Q5_K: T.Q5_K, mf.GGML_Q6_K: T.Q6_K}
    rng = np.random.default_rng(7)
    bad = 0
    for gt, qt in names.items():
        for scale, shift in ((1.0, 0.0), (0.02, 0.0), (1.0, 3.0), (1.0, -3.0)):
            rows = 16
            a = (rng.standard_normal((rows, 512)) * scale + shift).astype(np.float32)
            a[3, :256] = 0  # an all-zero block
            data, deq = mf.quantize(a, gt)
            theirs = quants.dequantize(np.frombuffer(data, dtype=np.uint8).reshape(rows, -1), qt).reshape(a.shape)
            diff = np.abs(theirs - deq).max()
            tol = 1e-6 * max(1.0, np.abs(deq).max())
            err = np.sqrt(((deq - a) ** 2).sum() / (a ** 2).sum())
            ok = diff <= tol and np.isfinite(deq).all()
            bad += not ok
            print("%-5s scale %-5g shift %-4g: max |gguf-py - ours| %.3e, rel L2 to the input %.4f  %s"
                  % (qt.name, scale, shift, diff, err, "ok" if ok else "MISMATCH"))
    print("all layouts agree" if not bad else "%d MISMATCH" % bad)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
