#!/usr/bin/env python3
"""llama.vim's long suggestions against two `laya serve` configurations in one run (default: drafting off / on).

  bench/vim_requests.py LAYA_BINARY MODEL TRACE.jsonl... [--every 10] [--threads 2] [--a-args="--draft 0"] [--b-args="--draft 8"]
                        [--n-predict 128] [--json out.json]

Starts two `laya serve` processes on free ports, A and B (their options --a-args / --b-args:
by default --draft 0 and --draft 8; `--a-args=--keep-repeated-lines --b-args= --texts-may-differ`
measures the repeated-line rule instead), and plays each trace: after every --every-th event it sends the request llama.vim (a1c8e6e, its
defaults) sends when its own cache misses, to both servers, the order alternating from request
to request so that neither gets the quieter moments: POST /infill with id_slot 0, input_prefix = the lines
before the cursor's line (at most 256), prompt = the cursor's line up to the cursor,
input_suffix = the rest of that line and the lines after it (at most 64), input_extra [],
n_predict 128, n_indent = the line's indentation, top_k 40, top_p 0.90, samplers
[top_k, top_p, infill], t_max_prompt_ms 500, t_max_predict_ms 1000, cache_prompt, no stream
(llama.vim shows a suggestion once it is complete), and llama.vim's response_fields with laya's
timings/passes, draft_n and draft_n_accepted appended.

Reports per trace and overall, for each server: the time to the complete suggestion (client
side: request sent -> response read) p50 / p90 / p99 / max, forward passes of the generation
per request (timings.passes) mean and p50, drafted / accepted tokens, multi-line suggestions and
those that show a (non-blank) line twice, and whether the two servers answered every request with
the same text (for drafting they must: it changes the passes, not the output). Both servers run with --awake-ms 0, so that neither one's idle workers spin on the cores
the other is computing on. Exit 1 on an error or a different text. Python 3 standard library only.
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_load import apply, load_trace, percentile  # noqa: E402  (the same trace semantics)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(laya, model, threads, args):
    port = free_port()
    # --awake-ms 0: a server's workers otherwise spin for 300 ms after its answer, on the cores the
    # other server is computing on now (measured: +10-15 % on whichever answered second).
    p = subprocess.Popen([laya, "serve", "-m", model, "-t", str(threads), "--port", str(port), "--awake-ms", "0"]
                         + args.split(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return p, port
        except OSError:
            time.sleep(0.05)
        if p.poll() is not None:
            sys.exit(f"laya serve {args} exited: {p.stderr.read().decode(errors='replace')}")
    sys.exit(f"laya serve {args} did not answer /health")


def vim_body(doc, cursor, n_predict):
    line_start = doc.rfind("\n", 0, cursor) + 1
    line_end = doc.find("\n", cursor)
    line_end = len(doc) if line_end < 0 else line_end
    before = doc[:line_start].split("\n")[:-1] if line_start > 0 else []
    after = doc[line_end + 1:].split("\n") if line_end < len(doc) else []
    line = doc[line_start:line_end]
    indent = len(line) - len(line.lstrip(" \t"))
    prefix = "".join(l + "\n" for l in before[-256:])
    suffix = line[cursor - line_start:] + "\n" + "".join(l + "\n" for l in after[:64])
    return {"id_slot": 0, "input_prefix": prefix, "input_suffix": suffix, "input_extra": [], "prompt": line[:cursor - line_start],
            "n_predict": n_predict, "stop": [], "n_indent": indent, "top_k": 40, "top_p": 0.90,
            "samplers": ["top_k", "top_p", "infill"], "stream": False, "cache_prompt": True,
            "t_max_prompt_ms": 500, "t_max_predict_ms": 1000,
            # llama.vim's list, then laya's passes and drafted counts (read for the report; computing is the same)
            "response_fields": ["content", "timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_token_ms",
                                "timings/prompt_per_second", "timings/predicted_n", "timings/predicted_ms",
                                "timings/predicted_per_token_ms", "timings/predicted_per_second", "truncated",
                                "tokens_cached", "timings/passes", "timings/draft_n", "timings/draft_n_accepted"]}


def post(conn, body):
    data = json.dumps(body).encode()
    t0 = time.perf_counter()
    conn.request("POST", "/infill", body=data, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    raw = r.read()
    ms = (time.perf_counter() - t0) * 1e3
    if r.status != 200:
        raise RuntimeError(f"/infill answered {r.status}: {raw[:300]!r}")
    return ms, json.loads(raw)


def repeats_a_line(text):
    """A multi-line suggestion showing the same (non-blank) line twice, spaces at either end aside."""
    lines = [l.strip() for l in text.split("\n")[1:]]
    lines = [l for l in lines if l]
    return len(lines) != len(set(lines))


def summary(rows):
    ms = [r[0] for r in rows]
    multi = [r for r in rows if "\n" in r[1].get("content", "")]
    passes = [r[1].get("timings/passes", 0) for r in rows]
    return {"requests": len(rows), "ms": {"p50": percentile(ms, 0.5), "p90": percentile(ms, 0.9),
                                          "p99": percentile(ms, 0.99), "max": max(ms) if ms else 0},
            "passes": {"p50": percentile(passes, 0.5), "mean": sum(passes) / len(passes) if passes else 0},
            "predicted_n_mean": sum(r[1].get("timings/predicted_n", 0) for r in rows) / max(len(rows), 1),
            "drafted_tokens": sum(r[1].get("timings/draft_n", 0) for r in rows),
            "accepted_draft_tokens": sum(r[1].get("timings/draft_n_accepted", 0) for r in rows),
            "multi_line": len(multi), "repeated_line": sum(repeats_a_line(r[1]["content"]) for r in multi)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("laya")
    ap.add_argument("model")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--a-args", default="--draft 0", help="the first server's laya serve options")
    ap.add_argument("--b-args", default="--draft 8", help="the second server's")
    ap.add_argument("--texts-may-differ", action="store_true",
                    help="the two servers' texts may differ (e.g. --keep-repeated-lines against the default)")
    ap.add_argument("--n-predict", type=int, default=128)
    ap.add_argument("--json")
    a = ap.parse_args()
    servers = [start_server(a.laya, a.model, a.threads, a.a_args), start_server(a.laya, a.model, a.threads, a.b_args)]
    names = ["A", "B"]
    result_names = {"A": a.a_args, "B": a.b_args}
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=120) for _, port in servers]
    result, all_rows, differ = {"traces": {}, "servers": None}, [[], []], 0
    result["servers"] = result_names
    try:
        k = 0
        for path in a.traces:
            head, events = load_trace(path)
            doc, cursor = head.get("text", ""), head.get("cursor", len(head.get("text", "")))
            rows = [[], []]
            for i, ev in enumerate(events):
                doc, cursor = apply(doc, cursor, ev)
                if (i + 1) % a.every:
                    continue
                body = vim_body(doc, cursor, a.n_predict)
                order = (0, 1) if k % 2 == 0 else (1, 0)
                k += 1
                got = {}
                for s in order:
                    got[s] = post(conns[s], body)
                    rows[s].append(got[s])
                if got[0][1].get("content") != got[1][1].get("content"):
                    differ += 1
            result["traces"][os.path.basename(path)] = {names[s]: summary(rows[s]) for s in (0, 1)}
            for s in (0, 1):
                all_rows[s].extend(rows[s])
        result["overall"] = {names[s]: summary(all_rows[s]) for s in (0, 1)}
        result["different_texts"] = differ
    finally:
        for p, _ in servers:
            p.terminate()
            p.wait(timeout=10)
    for name, t in list(result["traces"].items()) + [("overall", result["overall"])]:
        print(name)
        for s in names:
            x = t[s]
            print(f"  {s} {x['requests']:4d} requests  ms p50 {x['ms']['p50']:.1f} p90 {x['ms']['p90']:.1f} "
                  f"p99 {x['ms']['p99']:.1f} max {x['ms']['max']:.1f}  passes mean {x['passes']['mean']:.1f} "
                  f"p50 {x['passes']['p50']}  tokens {x['predicted_n_mean']:.1f}  drafted {x['drafted_tokens']} "
                  f"taken {x['accepted_draft_tokens']}  multi-line {x['multi_line']} with a repeated line "
                  f"{x['repeated_line']}")
    print(f"A: laya serve {a.a_args}\nB: laya serve {a.b_args}\ndifferent texts: {differ}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 1 if differ and not a.texts_may_differ else 0


if __name__ == "__main__":
    sys.exit(main())
