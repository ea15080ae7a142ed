#!/usr/bin/env python3
"""Adds (or replaces) one boolean metadata key of a GGUF v3 file, in place;
the tensor data is kept byte for byte (its offsets are relative to the data
section, which is re-aligned to general.alignment, 32 by default).

Used once on the Gemma fixtures made by make_families.py before it wrote
tokenizer.ggml.add_space_prefix = false itself (it does now):
  python3 gguf_add_bool.py FILE tokenizer.ggml.add_space_prefix false
"""
import struct
import sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(b, o, t):
    if t in SIZES:
        return o + SIZES[t]
    if t == 8:
        (n,) = struct.unpack_from("<Q", b, o)
        return o + 8 + n
    if t == 9:
        et, n = struct.unpack_from("<IQ", b, o)
        o += 12
        for _ in range(n):
            o = skip_value(b, o, et)
        return o
    raise ValueError("value type %d" % t)


def main():
    path, key, val = sys.argv[1], sys.argv[2], sys.argv[3] == "true"
    b = open(path, "rb").read()
    magic, ver, n_t, n_kv = struct.unpack_from("<4sIQQ", b, 0)
    assert magic == b"GGUF" and ver == 3
    o, kvs, align = 24, [], 32
    for _ in range(n_kv):
        start = o
        (kl,) = struct.unpack_from("<Q", b, o)
        k = b[o + 8:o + 8 + kl].decode()
        o += 8 + kl
        (t,) = struct.unpack_from("<I", b, o)
        o = skip_value(b, o + 4, t)
        if k == "general.alignment":
            (align,) = struct.unpack_from("<I", b, o - 4)
        if k != key:
            kvs.append(b[start:o])
    infos_start = o
    for _ in range(n_t):
        (nl,) = struct.unpack_from("<Q", b, o)
        o += 8 + nl
        (nd,) = struct.unpack_from("<I", b, o)
        o += 4 + 8 * nd + 4 + 8
    infos = b[infos_start:o]
    data = b[(o + align - 1) // align * align:]
    kb = key.encode()
    kvs.append(struct.pack("<Q", len(kb)) + kb + struct.pack("<IB", 7, 1 if val else 0))
    head = struct.pack("<4sIQQ", b"GGUF", 3, n_t, len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * ((-len(head)) % align)
    open(path, "wb").write(head + data)


if __name__ == "__main__":
    main()
