#!/usr/bin/env python3
"""The first N events of typing traces, as traces of their own (a replay that fits a time budget).

  bench/cut_traces.py --events N --out DIR TRACE.jsonl...

Writes DIR/<name>.jsonl for each trace: its first N events (all of them when it has fewer) and a
header rewritten for them, so that `laya replay` and bench/llamacpp_typing_client.py accept the
file: "events" = N, "chars" and "final_sha256" of the document those N events build (rebuilt as
../shared/fixtures/traces/README.md says), "duration_ms" = the last kept event's t_ms, and
"cut_from_events" = the original count. A header's "typed_span" (long/ traces) is dropped: it
speaks of the whole trace's final text. The trace's name is kept. Prints one line per trace:
name, events kept, seconds of play at the recorded pace and with pauses capped (--pace-cap-ms,
default 300), so a script can size a replay before it runs one.
"""

import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llamacpp_typing_client import TraceError, apply_event, load_trace  # noqa: E402


def cut(path, n_events, out_dir, cap_ms):
    name, header, events = load_trace(path)
    kept = events[:n_events]
    doc, cursor = "", 0
    for e in kept:
        doc, cursor = apply_event(doc, cursor, e)
    h = {k: v for k, v in header.items() if k != "typed_span"}
    h.update({"events": len(kept), "chars": len(doc), "duration_ms": kept[-1]["t_ms"],
              "final_sha256": hashlib.sha256(doc.encode("utf-8")).hexdigest(), "cut_from_events": len(events)})
    base = os.path.basename(path)
    dest = os.path.join(out_dir, base)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    with open(dest, "w", encoding="utf-8") as f:
        f.write(json.dumps(h, ensure_ascii=False) + "\n")
        for e in kept:  # the events' own lines, unchanged
            f.write(lines[e["line"] - 1] + "\n")
    capped, prev = 0.0, 0.0
    for e in kept:
        capped += min(e["t_ms"] - prev, cap_ms)
        prev = e["t_ms"]
    return name, len(kept), kept[-1]["t_ms"] / 1000.0, capped / 1000.0, dest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", help="trace files (.jsonl)")
    ap.add_argument("--events", type=int, required=True, help="events to keep from the start of each trace")
    ap.add_argument("--out", required=True, help="folder for the cut traces (made if missing)")
    ap.add_argument("--pace-cap-ms", type=float, default=300.0, help="for the printed play time (default %(default)s)")
    args = ap.parse_args()
    if args.events < 1:
        ap.error("--events must be at least 1")
    os.makedirs(args.out, exist_ok=True)
    names = set()
    for p in args.traces:
        if os.path.basename(p) in names:
            raise SystemExit(f"cut_traces: two traces named {os.path.basename(p)}: they would overwrite each other in {args.out}")
        names.add(os.path.basename(p))
        try:
            name, n, recorded_s, capped_s, dest = cut(p, args.events, args.out, args.pace_cap_ms)
        except (TraceError, OSError) as e:
            raise SystemExit(f"cut_traces: {e}") from None
        print(f"{name}\t{n}\t{recorded_s:.1f}\t{capped_s:.1f}\t{dest}")


if __name__ == "__main__":
    main()
