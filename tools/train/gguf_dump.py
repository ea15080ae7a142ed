#!/usr/bin/env python3
"""Print a GGUF file's metadata and tensor table (pure Python, no numpy)."""
import struct, sys

def main(path, maxarr=8):
    f = open(path, 'rb')
    def rd(fmt):
        n = struct.calcsize(fmt); return struct.unpack('<' + fmt, f.read(n))
    def rstr():
        (n,) = rd('Q'); return f.read(n).decode('utf-8', 'replace')
    SC = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}
    def rval(t):
        if t in SC: return rd(SC[t])[0]
        if t == 8: return rstr()
        if t == 9:
            (et,) = rd('I'); (n,) = rd('Q')
            vals = [rval(et) for _ in range(n)]
            return ('array', et, n, vals[:maxarr])
        raise ValueError(t)
    magic = f.read(4); (ver,) = rd('I'); (nt,) = rd('Q'); (nkv,) = rd('Q')
    print(magic, 'version', ver, 'tensors', nt, 'kv', nkv)
    for _ in range(nkv):
        k = rstr(); (t,) = rd('I'); v = rval(t)
        print(f'  {k} [{t}] = {v!r}'[:300])
    for _ in range(nt):
        name = rstr(); (nd,) = rd('I'); dims = rd('Q' * nd); (ty,) = rd('I'); (off,) = rd('Q')
        print(f'  T {name} {dims} type={ty} off={off}')

if __name__ == '__main__':
    main(sys.argv[1])
