#!/usr/bin/env python3
"""Print a GGUF file's metadata and tensor table (pure Python, no numpy).

read_gguf() is the parser; train.py's --init-gguf reads a shipped file back with it."""
import struct, sys

SCALAR = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}


def read_gguf(data):
    """(version, metadata {key: (type, value)}, tensors [(name, dims, ggml type, offset)], start of the tensor
    data) of the GGUF bytes `data`; arrays come back as ('array', element type, length, values)."""
    pos = 0

    def rd(fmt):
        nonlocal pos
        v = struct.unpack_from('<' + fmt, data, pos)
        pos += struct.calcsize('<' + fmt)
        return v

    def rstr():
        nonlocal pos
        (n,) = rd('Q')
        s = data[pos:pos + n].decode('utf-8', 'replace')
        pos += n
        return s

    def rval(t):
        if t in SCALAR: return rd(SCALAR[t])[0]
        if t == 8: return rstr()
        if t == 9:
            (et,) = rd('I'); (n,) = rd('Q')
            return ('array', et, n, [rval(et) for _ in range(n)])
        raise ValueError(f'metadata type {t}')
    if data[:4] != b'GGUF':
        raise ValueError('not a GGUF file')
    pos = 4
    (ver,) = rd('I'); (nt,) = rd('Q'); (nkv,) = rd('Q')
    kv = {}
    for _ in range(nkv):
        k = rstr(); (t,) = rd('I'); kv[k] = (t, rval(t))
    tensors = []
    for _ in range(nt):
        name = rstr(); (nd,) = rd('I'); dims = rd('Q' * nd); (ty,) = rd('I'); (off,) = rd('Q')
        tensors.append((name, dims, ty, off))
    align = kv.get('general.alignment', (4, 32))[1]
    return ver, kv, tensors, (pos + align - 1) // align * align


def main(path, maxarr=8):
    data = open(path, 'rb').read()
    ver, kv, tensors, _ = read_gguf(data)
    print(data[:4], 'version', ver, 'tensors', len(tensors), 'kv', len(kv))
    for k, (t, v) in kv.items():
        if isinstance(v, tuple):
            v = v[:3] + (v[3][:maxarr],)
        print(f'  {k} [{t}] = {v!r}'[:300])
    for name, dims, ty, off in tensors:
        print(f'  T {name} {dims} type={ty} off={off}')

if __name__ == '__main__':
    main(sys.argv[1])
