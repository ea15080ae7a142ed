#!/usr/bin/env python3
"""Bad model files for `laya replay --swap-bad` (hot model swap, issue 12).

  make_bad_models.py MODEL.gguf OUT_DIR

writes OUT_DIR/truncated.gguf (the first half of MODEL: the loader refuses it,
a tensor runs past the end) and OUT_DIR/nan.gguf (MODEL with output_norm.weight
overwritten by NaN: it loads, its shapes agree with its metadata, and only the
swap's probe prompt, whose logits are NaN, refuses it). Standard library only.
"""
import os
import shutil
import struct
import sys

# GGUF value types -> struct format of a scalar (8: string, 9: array).
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def get(self, fmt):
        v = struct.unpack_from("<" + fmt, self.d, self.p)
        self.p += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.get("Q")
        s = self.d[self.p:self.p + n]
        self.p += n
        return s.decode("utf-8", "replace")

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.get("I"), self.get("Q")
            return [self.value(et) for _ in range(n)]
        return self.get(SCALAR[t])


def tensor_span(path, name):
    """(file offset, bytes) of an F32 tensor."""
    with open(path, "rb") as f:
        r = Reader(f.read())
    if r.d[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    r.p = 4
    r.get("I")  # version
    n_tensors, n_kv = r.get("Q"), r.get("Q")
    align = 32
    for _ in range(n_kv):
        key, t = r.string(), r.get("I")
        v = r.value(t)
        if key == "general.alignment":
            align = v
    found = None
    for _ in range(n_tensors):
        tname, nd = r.string(), r.get("I")
        ne = [r.get("Q") for _ in range(nd)]
        ttype, off = r.get("I"), r.get("Q")
        if tname == name:
            if ttype != 0:
                sys.exit(f"{path}: {name} is of GGUF type {ttype}, expected F32 (0)")
            n = 1
            for x in ne:
                n *= x
            found = (off, 4 * n)
    if found is None:
        sys.exit(f"{path}: no tensor {name}")
    data_start = (r.p + align - 1) // align * align
    return data_start + found[0], found[1]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    size = os.path.getsize(model)
    with open(model, "rb") as src, open(os.path.join(out, "truncated.gguf"), "wb") as dst:
        dst.write(src.read(size // 2))
    nan_path = os.path.join(out, "nan.gguf")
    shutil.copyfile(model, nan_path)
    off, nbytes = tensor_span(nan_path, "output_norm.weight")
    with open(nan_path, "r+b") as f:
        f.seek(off)
        f.write(struct.pack("<I", 0x7FC00000) * (nbytes // 4))
    print(f"{out}/truncated.gguf ({size // 2} of {size} bytes), {out}/nan.gguf (output_norm.weight = NaN)")


if __name__ == "__main__":
    main()
