#!/usr/bin/env python3
"""Keystroke latency of `laya lsp` against the in-process work for the same keystrokes.

Run the LSP end-to-end test with the server's timing log and its keystrokes kept, a few times:
  for i in 1 2 3; do LAYA_LSP_ARGS=--timings LAYA_E2E_TRACE=/tmp/lsp_$i.jsonl \\
      node tests/e2e/lsp.test.mjs build/laya models/laya-default-q8_0.gguf; done
  python3 bench/lsp_breakdown.py /tmp/lsp_1.jsonl /tmp/lsp_2.jsonl /tmp/lsp_3.jsonl
Per keystroke it pairs the client's time (didChange + inlineCompletion sent -> reply received, over
stdio through vscode-jsonrpc) with the server's --timings line for that request: the in-process cost
of the keystroke is Session::edit + Session::suggest (what `laya replay --fast` times). The first
keystroke is left out: it also makes the document's session and prefills the whole text.
"""
import json
import re
import sys


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(p * len(s)))] if s else float('nan')


def main(bases):
    client, server, inproc = [], [], []
    for base in bases:
        lat = json.load(open(base + '.lsp_ms.json'))
        log = {}
        for line in open(base + '.stderr'):
            m = re.search(r'inlineCompletion (\d+): done reply ([\d.]+) ms, edit ([\d.]+) ms, suggest ([\d.]+) ms', line)
            if m:
                log[int(m.group(1))] = (float(m.group(2)), float(m.group(3)) + float(m.group(4)))
        for k in range(1, len(lat)):  # request ids are 1, 2, ... in keystroke order (0 is initialize)
            if k + 1 in log:
                client.append(lat[k])
                server.append(log[k + 1][0])
                inproc.append(log[k + 1][1])
    rows = [('client: keystroke -> reply (stdio)', client),
            ('server: request read -> reply written', server),
            ('in-process: Session::edit + suggest', inproc),
            ('client - in-process (per keystroke)', [a - b for a, b in zip(client, inproc)])]
    for name, v in rows:
        print(f'{name:40s} n {len(v):3d}  p50 {pct(v, .5):7.3f}  p90 {pct(v, .9):7.3f}  p99 {pct(v, .99):7.3f} ms')


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
