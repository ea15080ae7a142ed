#!/usr/bin/env python3
"""Bits per byte of GGUF models on the same held-out text, computed by laya itself.

train.py's validation figures come from each run's own held-out split, so two recipes' figures are not on the
same text. This script scores every model given on the same documents: the held-out files (corpus_common.is_val)
of the parts in --data (evenly spaced), each cut to --bytes bytes from a line after its middle (at a character boundary, so any byte-level BPE
gives at most that many tokens and one window holds it), tokenized by each model's own tokenizer with BOS in
front; the loss of every token after BOS, summed, over the text's UTF-8 bytes. Tokenizer-independent, so models
with different vocabularies compare. Needs numpy and a built laya.

  python3 tools/train/eval_bpb.py --laya build/laya --data build-train-data OLD.gguf NEW.gguf
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus_common import is_val, read_parts  # noqa: E402


def held_out(data, per_part, nbytes):
    """per_part held-out documents of each part, evenly spaced over the part's held-out files (the parts list
    their sources in turn: the first files alone would be one source), each cut to nbytes from the first line
    start after its middle (the first lines of source files are mostly licence headers)."""
    allv = {}
    for d in read_parts(data):
        if is_val(d["src"]):
            allv.setdefault(d["kind"], []).append(d["text"])
    docs = {}
    for kind, texts in allv.items():
        texts = [t for t in texts if len(t.encode("utf-8")) >= 2 * nbytes]
        step = max(1, len(texts) // per_part)
        for t in texts[::step][:per_part]:
            nl = t.find("\n", len(t) // 2)
            mid = t[nl + 1:] if nl >= 0 else t[len(t) // 2:]
            docs.setdefault(kind, []).append(mid.encode("utf-8")[:nbytes].decode("utf-8", "ignore"))
    return docs


def nll_bits(laya, model, text, tmp):
    ids = json.loads(subprocess.run([laya, "tokenize", "-m", model, "--bos", "--batch"], check=True,
                                    input=json.dumps({"text": text}) + "\n", capture_output=True,
                                    text=True).stdout)["ids"]
    out = os.path.join(tmp, "l.npy")
    subprocess.run([laya, "logits", "-m", model, "-t", "2", "-q", "--all-positions", "--no-mlock",
                    "--tokens", ",".join(map(str, ids)), "-o", out], check=True, capture_output=True)
    lg = np.load(out).astype(np.float64)[:-1]
    m = lg.max(axis=1, keepdims=True)
    logp = lg - m - np.log(np.exp(lg - m).sum(axis=1, keepdims=True))
    tgt = np.array(ids[1:])
    return -logp[np.arange(len(tgt)), tgt].sum() / np.log(2), len(tgt)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--laya", default="build/laya")
    ap.add_argument("--data", default="build-train-data")
    ap.add_argument("--per-part", type=int, default=20, help="held-out documents per part")
    ap.add_argument("--bytes", type=int, default=1000, help="first bytes of each document")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    docs = held_out(args.data, args.per_part, args.bytes)
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in sorted(docs):
            nb = sum(len(t.encode("utf-8")) for t in docs[kind])
            row = {"docs": len(docs[kind]), "bytes": nb}
            for m in args.models:
                bits = toks = 0
                for t in docs[kind]:
                    b, n = nll_bits(args.laya, m, t, tmp)
                    bits += b
                    toks += n
                row[m] = {"bits_per_byte": bits / nb, "tokens": toks, "bytes_per_token": nb / toks}
            res[kind] = row
            print(kind, row["docs"], "docs", nb, "bytes", "  ".join(
                f"{os.path.basename(m)}: {row[m]['bits_per_byte']:.4f} bpb ({row[m]['bytes_per_token']:.2f} B/tok)"
                for m in args.models), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
