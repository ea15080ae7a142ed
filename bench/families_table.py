#!/usr/bin/env python3
"""The tables of bench/families_device.sh: decode ms per token and keystroke -> suggestion latency of
laya and llama.cpp on each family's ~0.5 B model, from the raw outputs of one run.

  bench/families_table.py RAW_DIR [--json families.json] [--md families.md]

RAW_DIR holds what the device script wrote: settings.txt (key=value), machine.txt, skipped.txt, and
per model M: M.mkmodel.txt (mkmodel's result line), M.laya-tT.json (`laya bench --json`),
M.llama-tT.jsonl (`llama-bench -o jsonl`), M.replay/laya.json (`laya replay --json`) and
M.replay/llama-server.json (bench/llamacpp_typing_client.py --json). Anything missing is a dash in
the tables (and null in the JSON), with the reason where skipped.txt gives one.

Decode: laya's mean and p50 step over N_GEN steps after 8 warm-up steps (one run); llama.cpp's
mean over its repetitions of N_GEN tokens (avg_ns / n_gen), the same file, threads and cores.
"llama.cpp / laya" > 1: laya is faster. Replay: suggest_ms percentiles of the completed suggestions
(nearest rank, both sides); a suggestion still running when the next keystroke comes is cancelled
(laya: superseded) and not counted, so "completed / events" says how many the percentiles hold.
"""

import argparse
import json
import os
import re
import sys

PCTS = ("p50", "p90", "p99", "p999", "max")


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_json(path):
    t = read_text(path)
    if t is None:
        return None
    try:
        return json.loads(t)
    except json.JSONDecodeError:
        return None


def last_json_line(path, want=lambda j: True):
    t = read_text(path)
    if t is None:
        return None
    found = None
    for line in t.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
        except json.JSONDecodeError:
            continue
        if want(j):
            found = j
    return found


def settings(raw):
    s = {}
    for line in (read_text(os.path.join(raw, "settings.txt")) or "").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            s[k.strip()] = v.strip()
    return s


def model_info(raw, m):
    """Parameters and weight bytes from `laya info` (M.info.txt); the tokenizer and the time to make
    the file from mkmodel's result line (M.mkmodel.txt: absent when the file was made earlier)."""
    info = {"params_m": None, "weights_mb": None, "tokenizer": None, "mkmodel_s": None}
    t = read_text(os.path.join(raw, f"{m}.mkmodel.txt")) or ""
    r = re.search(r"([0-9.]+) M parameters, ([0-9.]+) MB, tokenizer (\S+).*?, ([0-9.]+) s", t)
    if r:
        info.update(params_m=float(r.group(1)), tokenizer=r.group(3), mkmodel_s=float(r.group(4)))
    t = read_text(os.path.join(raw, f"{m}.info.txt")) or ""
    r = re.search(r"^parameters:\s+\d+ \(([0-9.]+) M\)", t, re.M)
    if r:
        info["params_m"] = float(r.group(1))
    r = re.search(r"^memory:\s+weights ([0-9.]+) MB", t, re.M)
    if r:
        info["weights_mb"] = float(r.group(1))
    return info


def laya_decode(raw, m, th):
    j = last_json_line(os.path.join(raw, f"{m}.laya-t{th}.json"), lambda j: "decode_ms_mean" in j)
    if not j:
        return None
    return {"mean_ms": j["decode_ms_mean"], "p50_ms": j["decode_ms_p50"], "p99_ms": j["decode_ms_p99"],
            "steps": j.get("n_gen"), "threads": j.get("threads"), "gb_s": j.get("decode_gb_s"),
            "peak_rss_mb": j.get("peak_rss_mb")}


def llama_decode(raw, m, th):
    j = last_json_line(os.path.join(raw, f"{m}.llama-t{th}.jsonl"), lambda j: j.get("n_gen", 0) > 0 and "avg_ns" in j)
    if not j:
        return None
    n = j["n_gen"]
    samples = [s / n / 1e6 for s in j.get("samples_ns", [])]
    return {"mean_ms": j["avg_ns"] / n / 1e6, "stddev_ms": j.get("stddev_ns", 0) / n / 1e6,
            "runs_ms": samples, "tokens": n, "threads": j.get("n_threads"),
            "build": j.get("build_commit"), "cpu": j.get("cpu_info")}


def replay_side(d, completed_key):
    if not d:
        return None
    ms = d.get("suggest_ms") or {}
    events = d.get("events")
    if completed_key == "completed":
        completed = d.get("completed")
    else:  # laya: every event but the superseded ones
        completed = None if events is None else events - (d.get("superseded") or 0)
    tk = d.get("tokens_computed_per_event") or {}
    return {"events": events, "completed": completed, "suggest_ms": {p: ms.get(p) for p in PCTS},
            "tokens_computed": {"p50": tk.get("p50"), "p99": tk.get("p99")}}


def fmt(x, nd=2):
    return "—" if x is None else f"{x:.{nd}f}"


def ratio(a, b):
    return "—" if not a or not b else f"{a / b:.2f}×"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", help="the run's raw folder")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--md", help="write the markdown tables here (else stdout)")
    args = ap.parse_args()
    raw = args.raw
    s = settings(raw)
    models = s.get("models", "").split() or sorted(
        f[: -len(".mkmodel.txt")] for f in os.listdir(raw) if f.endswith(".mkmodel.txt"))
    threads = s.get("threads", "2 1").split()
    skipped = [line for line in (read_text(os.path.join(raw, "skipped.txt")) or "").splitlines() if line.strip()]
    machine = (read_text(os.path.join(raw, "machine.txt")) or "").strip()

    out = {"settings": s, "machine": machine, "skipped": skipped, "models": []}
    for m in models:
        e = {"preset": m, **model_info(raw, m), "decode": {}, "replay": {}}
        for th in threads:
            e["decode"][f"t{th}"] = {"laya": laya_decode(raw, m, th), "llama.cpp": llama_decode(raw, m, th)}
        e["replay"]["laya"] = replay_side(read_json(os.path.join(raw, f"{m}.replay", "laya.json")), "superseded")
        e["replay"]["llama-server"] = replay_side(read_json(os.path.join(raw, f"{m}.replay", "llama-server.json")), "completed")
        out["models"].append(e)

    build = next((d["llama.cpp"]["build"] for e in out["models"] for d in e["decode"].values()
                  if d["llama.cpp"] and d["llama.cpp"].get("build")), None)
    L = []
    L.append(f"Machine: {machine.splitlines()[0] if machine else '?'}.")
    L.append("")
    L.append(f"Random-weight {s.get('type', 'Q8_0')} models from `laya mkmodel` (synthetic byte-level vocabulary at each "
             f"family's vocabulary size); llama.cpp {build or '—'}, CPU only (`-ngl 0`, `CUDA_VISIBLE_DEVICES=`); "
             f"2 threads on cores {s.get('cpus2', '?')}, 1 thread on core {s.get('cpu1', '?')}, one run at a time.")
    L.append("")
    L.append(f"**Decode**, ms per token (`laya bench -p 0 -n {s.get('n_gen', '?')} --warmup 8`: mean (p50); "
             f"`llama-bench -p 0 -n {s.get('n_gen', '?')} -r {s.get('reps', '?')}`: mean ± stddev of the runs); "
             "llama.cpp / laya > 1: laya is faster.")
    L.append("")
    head = "| model | params (M) | weights (MB) |"
    sep = "| --- | ---: | ---: |"
    for th in threads:
        head += f" laya, {th} thr. | llama.cpp, {th} thr. | llama.cpp / laya |"
        sep += " ---: | ---: | ---: |"
    L += [head, sep]
    for e in out["models"]:
        row = f"| {e['preset']} | {fmt(e['params_m'], 1)} | {fmt(e['weights_mb'], 1)} |"
        for th in threads:
            d = e["decode"][f"t{th}"]
            a, b = d["laya"], d["llama.cpp"]
            ya = "—" if not a else f"{a['mean_ms']:.2f} ({a['p50_ms']:.2f})"
            yb = "—" if not b else f"{b['mean_ms']:.2f} ± {b['stddev_ms']:.2f}"
            row += f" {ya} | {yb} | {ratio(b and b['mean_ms'], a and a['mean_ms'])} |"
        L.append(row)
    L.append("")
    L.append(f"**Keystroke → suggestion** at the recorded pace with pauses capped at {s.get('pace_cap_ms', '?')} ms "
             f"(the first {s.get('replay_events', '?')} events of {', '.join(s.get('replay_traces', '?').split())}), "
             "2 threads, 8 tokens a suggestion, context 1024; laya `replay` in process, llama-server `/completion` "
             "client side (HTTP included); ms over the completed suggestions:")
    L.append("")
    L.append("| model | engine | completed / events | p50 | p90 | p99 | p99.9 | max | tokens computed p50 / p99 |")
    L.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for e in out["models"]:
        for eng in ("llama-server", "laya"):
            r = e["replay"][eng]
            if not r:
                L.append(f"| {e['preset']} | {eng} | — | — | — | — | — | — | — |")
                continue
            ms = r["suggest_ms"]
            L.append(f"| {e['preset']} | {eng} | {r['completed'] if r['completed'] is not None else '—'} / {r['events']} | "
                     + " | ".join(fmt(ms[p]) for p in PCTS)
                     + f" | {r['tokens_computed']['p50']} / {r['tokens_computed']['p99']} |")
    if skipped:
        L.append("")
        L.append("Skipped to stay within the time budget: " + "; ".join(skipped) + ".")
    md = "\n".join(L) + "\n"
    if args.md:
        with open(args.md, "w", encoding="utf-8") as f:
            f.write(md)
    else:
        sys.stdout.write(md)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
