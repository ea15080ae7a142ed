#!/usr/bin/env python3
"""Load test for `laya serve`: many editors typing at once over loopback HTTP.

  bench/serve_load.py LAYA_BINARY MODEL TRACE.jsonl... [--clients 100] [--seconds 60] [--threads 2]
                      [--route] [--json out.json]
  bench/serve_load.py LAYA_BINARY MODEL TRACE.jsonl... --once [--gap-ms 30] [--threads 2] [--json out.json]

Starts `laya serve` on a free port, then runs --clients client threads for --seconds (bounded:
every client stops at the deadline). Client i types trace i % len(traces), starting at event
(i // len(traces)) * 37 so that no two clients hold the same text, and after every event sends the
request llama.vim sends (POST /infill: input_prefix = the lines before the cursor's line, prompt =
the cursor's line up to the cursor, input_suffix = the rest, n_predict 8) on its own keep-alive
connection, waiting for each answer before the next keystroke (an editor's pace at best). Each
client names its document ("session": "client-i") unless --route is given, in which case the
server routes by shared text as it does for the plugins.

--once: one client plays every trace once, from its start, back to back (each trace its own
document): the keystroke -> suggestion latency over HTTP to set next to `laya replay --fast` on the
same traces (the server's overhead: JSON, routing, the edit found by diffing, loopback TCP).
With --gap-ms G the client waits G ms after each answer, as a typist does (the engine's threads
fall asleep between keystrokes): set it next to `laya replay --gap-ms G`.

Reports: requests, errors (non-200, a body that is not the JSON asked for, a dropped connection),
superseded answers, keystroke -> suggestion latency p50 / p99 / max (client side), the server's
RSS after the first 10 s and at the end, and /metrics' resident sessions. Exit 1 on any error or
when the server died. Python 3 standard library only.
"""
import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time


def load_trace(path):
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(l) for l in f if l.strip()]
    return lines[0], lines[1:]


def apply(doc, cursor, ev):
    op = ev["op"]
    if op == "insert":
        p = ev["pos"]
        doc = doc[:p] + ev["text"] + doc[p:]
        cursor = p + len(ev["text"])
    elif op == "delete":
        p, n = ev["pos"], ev["n"]
        doc = doc[:p] + doc[p + n:]
        cursor = p
    elif op == "move":
        cursor = ev["pos"]
    elif op == "accept":
        p = ev["pos"]
        doc = doc[:p] + ev["text"] + doc[p:]
        cursor = p + len(ev["text"])
    return doc, cursor


def percentile(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    import math
    r = math.ceil(p * len(v))
    return v[min(max(r, 1) - 1, len(v) - 1)]


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return -1.0


class Client(threading.Thread):
    def __init__(self, idx, port, trace, start_event, deadline, route, once=False, gap_ms=0.0):
        super().__init__(daemon=True)
        self.idx, self.port, self.trace, self.start_event = idx, port, trace, start_event
        self.deadline, self.route, self.once = deadline, route, once
        self.gap_ms, self.server_ms, self.step_ms = gap_ms, [], []
        self.lat, self.errors, self.superseded, self.requests = [], [], 0, 0

    def connect(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.connect()
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return c

    def run(self):
        header, events = self.trace
        doc, cursor = header.get("initial_text", ""), 0
        conn = self.connect()
        i = 0
        while time.monotonic() < self.deadline or self.once:
            if self.once and i == len(events):
                break
            if self.gap_ms > 0 and i > 0:
                time.sleep(self.gap_ms / 1e3)  # think time: the engine's threads go to sleep as between keystrokes
            ev = events[(self.start_event + i) % len(events)]
            if (self.start_event + i) % len(events) == 0 and i > 0:
                doc, cursor = header.get("initial_text", ""), 0  # the trace starts over
            i += 1
            doc, cursor = apply(doc, cursor, ev)
            if i < 2 and self.start_event > 0:
                continue
            line_start = doc.rfind("\n", 0, cursor) + 1
            body = {"id_slot": 0, "input_prefix": doc[:line_start], "prompt": doc[line_start:cursor],
                    "input_suffix": doc[cursor:], "input_extra": [], "n_predict": 8, **({} if os.environ.get("NO_TOPK") else {"top_k": 40, "top_p": 0.9}),
                    "samplers": ["top_k", "top_p", "infill"], "stream": False, "cache_prompt": True,
                    "t_max_prompt_ms": 500, **({} if os.environ.get("NO_DEADLINE") else {"t_max_predict_ms": 1000}),
                    "response_fields": ["content", "timings/prompt_n", "timings/total_ms", "timings/predicted_per_token_ms",
                                        "tokens_cached", "error"]}
            if not self.route:
                body["session"] = f"client-{self.idx}"
            data = json.dumps(body).encode()
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/infill", data, {"Content-Type": "application/json"})
                r = conn.getresponse()
                payload = r.read()
                dt = (time.perf_counter() - t0) * 1e3
                self.requests += 1
                if r.status != 200:
                    self.errors.append(f"HTTP {r.status}: {payload[:200]!r}")
                    continue
                j = json.loads(payload)
                if "error" in j:
                    self.superseded += 1
                    continue
                if not isinstance(j.get("content"), str):
                    self.errors.append(f"no content: {payload[:200]!r}")
                    continue
                self.lat.append(dt)
                if isinstance(j.get("timings/total_ms"), (int, float)):
                    self.server_ms.append(j["timings/total_ms"])  # Session::suggest inside the server
                if isinstance(j.get("timings/predicted_per_token_ms"), (int, float)) and j["timings/predicted_per_token_ms"] > 0:
                    self.step_ms.append(j["timings/predicted_per_token_ms"])
            except (OSError, http.client.HTTPException, ValueError) as e:
                self.requests += 1
                self.errors.append(f"{type(e).__name__}: {e}")
                try:
                    conn.close()
                    conn = self.connect()
                except OSError:
                    pass
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("laya")
    ap.add_argument("model")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--route", action="store_true", help="no session names: the server routes by shared text")
    ap.add_argument("--server-cpus", help="pin the server to these CPUs (taskset -c LIST), e.g. 2,3")
    ap.add_argument("--once", action="store_true", help="one client plays every trace once, back to back")
    ap.add_argument("--gap-ms", type=float, default=0.0,
                    help="with --once: wait this long after each response (laya replay --gap-ms plays the same)")
    ap.add_argument("--json")
    a = ap.parse_args()
    if not 1 <= a.clients <= 1000 or not 1 <= a.seconds <= 3600:
        sys.exit("serve_load.py: --clients in [1, 1000], --seconds in [1, 3600]")
    traces = [load_trace(p) for p in a.traces]
    pin = ["taskset", "-c", a.server_cpus] if a.server_cpus else []
    srv = subprocess.Popen(pin + [a.laya, "serve", "-m", a.model, "--port", "0", "-t", str(a.threads),
                            "--max-sessions", str(max(64, a.clients + 8)),
                            # every simulated user is on 127.0.0.1: no per-address cap, a slot per client
                            "--max-connections-per-client", "0", "--max-connections", str(max(128, a.clients + 8))],
                           stderr=subprocess.PIPE, text=True)
    port = None
    err = ""
    for line in srv.stderr:
        err += line
        m = re.search(r"listening on http://[0-9.]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        sys.exit(f"serve_load.py: laya serve did not start: {err}")
    threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()  # drain its stderr
    deadline = time.monotonic() + a.seconds
    if a.once:
        a.clients = len(traces)
        clients = [Client(i, port, traces[i], 0, deadline, a.route, once=True, gap_ms=a.gap_ms)
                   for i in range(len(traces))]
        rss_early = -1.0
        for c in clients:  # one after another: one editor
            c.start()
            c.join()
            if rss_early < 0:
                rss_early = rss_mb(srv.pid)
    else:
        clients = [Client(i, port, traces[i % len(traces)], (i // len(traces)) * 37, deadline, a.route)
                   for i in range(a.clients)]
        for c in clients:
            c.start()
        time.sleep(min(10, a.seconds / 2))
        rss_early = rss_mb(srv.pid)
        for c in clients:
            c.join(timeout=a.seconds + 180)
    rss_end = rss_mb(srv.pid)
    alive = srv.poll() is None
    resident = None
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics")
        m = re.search(r"^laya_resident_sessions (\S+)$", c.getresponse().read().decode(), re.M)
        resident = float(m.group(1)) if m else None
    except OSError:
        pass
    srv.terminate()
    try:
        srv.wait(timeout=10)
    except subprocess.TimeoutExpired:
        srv.kill()
    lat = [x for c in clients for x in c.lat]
    errors = [e for c in clients for e in c.errors]
    srv_ms = [x for c in clients for x in c.server_ms]
    step_ms = [x for c in clients for x in c.step_ms]
    out = {"clients": a.clients, "seconds": a.seconds, "threads": a.threads, "route": a.route,
           "requests": sum(c.requests for c in clients), "completed": len(lat), "errors": len(errors),
           "superseded": sum(c.superseded for c in clients), "server_alive": alive,
           "suggest_ms": {"p50": percentile(lat, 0.5), "p90": percentile(lat, 0.9), "p99": percentile(lat, 0.99),
                          "max": max(lat) if lat else 0.0},
           "per_client_p50_ms": [percentile(c.lat, 0.5) for c in clients] if a.once else None,
           # The same requests timed inside the server (Session::suggest) and its decode steps:
           # suggest_ms minus server_suggest_ms is the transport (HTTP, JSON, the client).
           "server_suggest_ms": {"p50": percentile(srv_ms, 0.5), "p99": percentile(srv_ms, 0.99)} if srv_ms else None,
           "decode_step_ms_p50": percentile(step_ms, 0.5) if step_ms else None,
           "gap_ms": a.gap_ms,
           "rss_mb_after_10s": rss_early, "rss_mb_end": rss_end, "resident_sessions": resident,
           "first_errors": errors[:5]}
    print(json.dumps(out, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    sys.exit(0 if alive and not errors else 1)


if __name__ == "__main__":
    main()
