#!/usr/bin/env python3
"""An editor plugin's request stream, look-ahead requests included, against two `laya serve` runs.

  bench/plugin_stream.py MODEL TRACE.jsonl... [--a-laya BIN] [--b-laya BIN] [--a-args=".."] [--b-args=".."]
                         [--client vim|vscode] [--every 10] [--turn 60] [--threads 2] [--json out.json]

The public traces are typed as open buffers of one editor, in turns of --turn events (buffer 1's first
60 events, then buffer 2's, ...), and after every --every-th event the plugin's request is sent, built
the way the plugin builds it when its own cache misses:

  vim     llama.vim a1c8e6e (autoload/llama.vim): POST /infill with its exact body (s:fim_ctx_local:
          input_prefix = up to 256 lines before the cursor's line, prompt = the line up to the cursor,
          input_suffix = the rest of the line and up to 64 lines after; n_predict 128, n_indent, top_k
          40, top_p 0.90, t_max_predict_ms 250 for the request at the cursor). When the answer is not
          empty the plugin at once asks ahead, "as if the completion was already inserted"
          (llama#fim with prev = the suggestion's lines): the lines before move up, the cursor's line
          becomes its prefix + the suggestion, the rest of the cursor's line is dropped, and
          t_max_predict_ms is 1000.
  vscode  llama.vscode v0.0.63 (src/completion.ts, src/llama-server.ts createRequestPayload): POST
          /infill with n_cmpl 3, top_k 40, top_p 0.99, samplers [top_k, top_p, infill], n_predict 128,
          t_max_prompt_ms 500, t_max_predict_ms 500, n_indent when not 0; it answers an array when
          n_cmpl > 1 (llama.cpp's shape), and its look-ahead (cacheFutureSuggestion) keeps the suffix.

input_extra: llama.vim's ring of chunks, as its BufLeave / BufEnter hooks fill it: each time the editor
leaves a buffer, the 64 lines around its cursor join the ring (16 chunks at most, oldest out).

Both servers get the same stream, the order alternating per request, and each its own look-ahead built
from its own answer (the same text unless a deadline cut one). Reported per server and kind of request
(cursor / look-ahead): requests, sessions the server made for them (the response's laya/new_session),
prompt tokens computed (timings/prompt_n) and reused (timings/cache_n), the round trip (client side,
request written -> response read) p50 / p90 / p99 / max, and for vscode the distinct completions per
answer. Exit 1 on an error. Python 3 standard library only.
"""
import argparse
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_load import apply, load_trace, percentile  # noqa: E402  (the same trace semantics)
from vim_requests import post, start_server  # noqa: E402  (llama.vim's /infill, timed the same way)

FIELDS = ["content", "timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_token_ms",
          "timings/prompt_per_second", "timings/predicted_n", "timings/predicted_ms",
          "timings/predicted_per_token_ms", "timings/predicted_per_second", "truncated", "tokens_cached"]
# laya's, read for the report (asking for them changes no computing)
EXTRA_FIELDS = ["timings/cache_n", "laya/new_session", "laya/session"]


def local_context(doc, cursor, prev=None):
    """llama.vim's s:fim_ctx_local: (prefix, middle, suffix, indent), `prev` = a suggestion's lines."""
    lines = doc.split("\n")
    y = doc.count("\n", 0, cursor)  # 0-based line of the cursor
    x = cursor - (doc.rfind("\n", 0, cursor) + 1)
    line = lines[y]
    if not prev:
        before = lines[max(0, y - 256):y]
        cur_prefix, cur_suffix = line[:x], line[x:]
        if line.strip() == "":
            cur_prefix = cur_suffix = ""
            indent = 0
        else:
            indent = len(line) - len(line.lstrip(" \t"))
    else:
        line_cur = line[:x] + prev[0] if len(prev) == 1 else prev[-1]
        cur_prefix, cur_suffix = line_cur, ""
        before = lines[max(0, y - 256 + len(prev) - 1):y]
        if len(prev) > 1:
            before = before + [line[:x] + prev[0]] + prev[1:-1]
        indent = len(line) - len(line.lstrip(" \t"))
    after = lines[y + 1:y + 1 + 64]
    prefix = "\n".join(before) + "\n"
    suffix = cur_suffix + "\n" + "\n".join(after) + "\n"
    return prefix, cur_prefix, suffix, indent


def vim_body(doc, cursor, extra, prev=None):
    prefix, middle, suffix, indent = local_context(doc, cursor, prev)
    return {"id_slot": 0, "input_prefix": prefix, "input_suffix": suffix, "input_extra": extra, "prompt": middle,
            "n_predict": 128, "stop": [], "n_indent": indent, "top_k": 40, "top_p": 0.90,
            "samplers": ["top_k", "top_p", "infill"], "stream": False, "cache_prompt": True,
            "t_max_prompt_ms": 500, "t_max_predict_ms": 1000 if prev else 250,
            "response_fields": FIELDS + EXTRA_FIELDS}


def vscode_body(doc, cursor, extra, prev=None):
    """llama.vscode's createRequestPayload(false, ...) and, with prev, cacheFutureSuggestion's context."""
    lines = doc.split("\n")
    y = doc.count("\n", 0, cursor)
    x = cursor - (doc.rfind("\n", 0, cursor) + 1)
    line = lines[y]
    prefix_lines, suffix_lines = lines[max(0, y - 256):y], lines[y + 1:y + 1 + 64]
    prompt = line[:x]
    if prompt.strip(" \t") == "":
        prompt = ""
    input_prefix = "\n".join(prefix_lines) + "\n"
    input_suffix = line[x:] + "\n" + "\n".join(suffix_lines) + "\n"
    nindent = len(line) - len(line.lstrip())
    if prev:
        if len(prev) > 1:
            input_prefix = input_prefix + prompt + "\n".join(prev[:-1]) + "\n"
            pl = input_prefix[:-1].split("\n")
            if len(pl) > 256:
                input_prefix = "\n".join(pl[-256:]) + "\n"
            prompt = prev[-1]
        else:
            prompt = prompt + prev[0]
    body = {"id_slot": 0, "input_prefix": input_prefix, "input_suffix": input_suffix,
            "input_extra": extra,  # {text, time, filename}, as its extra-context.ts keeps them
            "prompt": prompt, "n_predict": 128, "n_cmpl": 3, "top_k": 40, "top_p": 0.99, "stream": False,
            "samplers": ["top_k", "top_p", "infill"], "cache_prompt": True,
            "t_max_prompt_ms": 500, "t_max_predict_ms": 500}
    if nindent:
        body["n_indent"] = nindent
    return body


def first(answer):
    """The first completion of an answer (an array when n_cmpl > 1)."""
    return answer[0] if isinstance(answer, list) else answer


def suggestion_lines(content):
    lines = content.split("\n")
    while lines and lines[-1].strip() == "":
        lines.pop()
    return lines


def summary(rows):
    ms = [r["ms"] for r in rows]
    out = {"requests": len(rows), "new_sessions": sum(r["new"] for r in rows),
           "computed": sum(r["computed"] for r in rows), "reused": sum(r["reused"] for r in rows),
           "computed_per_request": sum(r["computed"] for r in rows) / max(len(rows), 1),
           "ms": {"p50": percentile(ms, 0.5), "p90": percentile(ms, 0.9), "p99": percentile(ms, 0.99),
                  "max": max(ms) if ms else 0}}
    if rows and "distinct" in rows[0]:
        out["distinct_per_answer"] = sum(r["distinct"] for r in rows) / len(rows)
        out["completions_per_answer"] = sum(r["n"] for r in rows) / len(rows)
    return out


def record(ms, answer):
    one = first(answer)
    row = {"ms": ms, "new": bool(one.get("laya/new_session", one.get("laya", {}).get("new_session", False))),
           "computed": one.get("timings/prompt_n", one.get("timings", {}).get("prompt_n", 0)),
           "reused": one.get("timings/cache_n", one.get("timings", {}).get("cache_n", 0))}
    if isinstance(answer, list):
        row["n"] = len(answer)
        row["distinct"] = len({a.get("content", "") for a in answer})
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--a-laya", default="build/laya")
    ap.add_argument("--b-laya", default="build/laya")
    ap.add_argument("--a-args", default="", help="the first server's laya serve options")
    ap.add_argument("--b-args", default="", help="the second server's")
    ap.add_argument("--client", choices=["vim", "vscode"], default="vim")
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--turn", type=int, default=60, help="events typed in one buffer before switching")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    make_body = vim_body if a.client == "vim" else vscode_body
    servers = [start_server(a.a_laya, a.model, a.threads, a.a_args), start_server(a.b_laya, a.model, a.threads, a.b_args)]
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=120) for _, port in servers]
    bufs = []
    for path in a.traces:
        head, events = load_trace(path)
        bufs.append({"name": os.path.basename(path), "events": events, "i": 0,
                     "doc": head.get("text", ""), "cursor": head.get("cursor", len(head.get("text", "")))})
    rows = {(s, kind): [] for s in (0, 1) for kind in ("cursor", "look-ahead")}
    ring, k, b = [], 0, 0
    try:
        while any(buf["i"] < len(buf["events"]) for buf in bufs):
            buf = bufs[b % len(bufs)]
            b += 1
            if buf["i"] >= len(buf["events"]):
                continue
            for _ in range(a.turn):
                if buf["i"] >= len(buf["events"]):
                    break
                buf["doc"], buf["cursor"] = apply(buf["doc"], buf["cursor"], buf["events"][buf["i"]])
                buf["i"] += 1
                if buf["i"] % a.every:
                    continue
                order = (0, 1) if k % 2 == 0 else (1, 0)
                k += 1
                for s in order:
                    ms, ans = post(conns[s], make_body(buf["doc"], buf["cursor"], ring))
                    rows[(s, "cursor")].append(record(ms, ans))
                    content = first(ans).get("content", "")
                    if content.strip():
                        ms, ans = post(conns[s], make_body(buf["doc"], buf["cursor"], ring, suggestion_lines(content)))
                        rows[(s, "look-ahead")].append(record(ms, ans))
            # BufLeave: the 64 lines around the cursor join the ring (16 at most)
            lines = buf["doc"].split("\n")
            y = buf["doc"].count("\n", 0, buf["cursor"])
            chunk = "\n".join(lines[max(0, y - 32):y + 32]) + "\n"
            ring = [c for c in ring if c["text"] != chunk] + [{"text": chunk, "time": time.time(), "filename": buf["name"]}]
            ring = ring[-16:]
        metrics = []
        for _, port in servers:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/metrics")
            metrics.append(c.getresponse().read().decode())
    finally:
        for p, _ in servers:
            p.terminate()
            p.wait(timeout=10)
    result = {"client": a.client, "servers": {"A": f"{a.a_laya} {a.a_args}", "B": f"{a.b_laya} {a.b_args}"},
              "A": {}, "B": {}}
    for s, name in ((0, "A"), (1, "B")):
        for kind in ("cursor", "look-ahead"):
            result[name][kind] = summary(rows[(s, kind)])
        result[name]["all"] = summary(rows[(s, "cursor")] + rows[(s, "look-ahead")])
        created = [l for l in metrics[s].splitlines() if l.startswith("laya_sessions_created_total")]
        result[name]["sessions_created_metric"] = created[0].split()[-1] if created else None
    for name in ("A", "B"):
        print(f"{name}: {result['servers'][name]}  (sessions created: {result[name]['sessions_created_metric']})")
        for kind in ("cursor", "look-ahead", "all"):
            x = result[name][kind]
            extra = (f"  completions {x['completions_per_answer']:.2f} distinct {x['distinct_per_answer']:.2f}"
                     if "distinct_per_answer" in x else "")
            print(f"  {kind:10s} {x['requests']:4d} requests  new sessions {x['new_sessions']:3d}  computed/request "
                  f"{x['computed_per_request']:7.1f}  reused {x['reused']:8d}  ms p50 {x['ms']['p50']:7.1f} "
                  f"p90 {x['ms']['p90']:7.1f} p99 {x['ms']['p99']:7.1f} max {x['ms']['max']:7.1f}{extra}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
