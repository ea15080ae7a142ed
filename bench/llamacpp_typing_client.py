#!/usr/bin/env python3
"""Replays typing traces against llama.cpp's llama-server, as an editor plugin drives it.

  bench/llamacpp_typing_client.py [--server URL] TRACE.jsonl... [--fast] [--fim] [--json out.json]
                                  [--n-predict 8] [--n-ctx 1024] [--max-prefix-chars 3000]
  bench/llamacpp_typing_client.py --self-test [TRACE.jsonl...]

The peer side of bench/typing_vs_llamacpp.sh (issue 10, "the peer, side by side"). Python 3
standard library only. Traces: ../shared/fixtures/traces/README.md (JSON lines: a header, then
events insert / delete / move / accept with offsets in code points; Python's str indexes code
points, so the document is a str).

After every event the document and cursor are rebuilt exactly as the trace README says, and one
request is sent, like llama.vim or any editor plugin would:
  default  POST /completion  {"prompt": text before the cursor (windowed, below)}
  --fim    POST /infill      llama.vim's layout: "input_prefix" = the window's whole lines before
                             the cursor's line, "prompt" = the cursor's line up to the cursor,
                             "input_suffix" = the rest of the line and the following lines, at most
                             --max-suffix-chars (whole lines where they fit). Typing in a line then
                             changes only the part after <FIM_MID>, so the prefix and suffix stay
                             cached.
with "n_predict": 8, "cache_prompt": true, greedy decoding ("samplers": ["top_k"], "top_k": 1,
"temperature": 0), "stream": false, and "response_fields" so that the server does not echo the
prompt back. End-of-generation stops a suggestion early on both sides (laya stops there too).

The window (the context is bounded like laya's, whose prompt is BOS + at most n_ctx - n_predict - 1
tokens of the text before the cursor): the text before the cursor is cut to its last
--max-prefix-chars code points (default 3,000), at the first line start in that range (mid-line
only when no line starts there). A plugin sends text, not tokens, so the window moves a whole line
at a time and the server's prompt cache (and --cache-reuse's KV shifting) stays useful. 3,000
characters of Chinese are ~6,800 tokens with the default model (2.3 tokens per character, 0.3 for
Python), so the window must also fit in tokens: BOS + prompt (+ 3 FIM tokens and the suffix) +
n_predict <= --n-ctx. Where the UTF-8 byte count of a window (an upper bound of its byte-level BPE
token count, +1) does not prove that, its tokens are counted with the server's POST /tokenize in a
pass over the whole trace before the timed replay (nothing is tokenized while timing), and the window
moves on to the first later line start that fits (binary search; mid-line if the cursor's own line
is too long).

Pace:
  default  each request is sent at its event's t_ms after the trace's start (or at once, when the
           client is late). A request still running when the next event is due is cancelled by
           closing its connection (as a plugin kills its curl job) and counted under "cancelled";
           its time to the cancel is under "cancelled_after_ms". suggest_ms covers the completed
           requests only.
  --fast   events back to back: each request waits for the previous one's response.
  --pace-cap-ms N  the recorded pace with every pause longer than N ms cut to N (laya replay's
           --pace-cap-ms: the same times, so both engines see the same keystrokes at the same moments).

Measured per event: suggest_ms = client side, from just before the request is written to the
whole response read and parsed: the HTTP and JSON overhead is included (an editor waits for it),
opening a TCP connection is not (the client keeps one alive; it opens a new one, before the
clock starts, after a cancel and after 2 s idle). From llama-server's
"timings": prompt_n (tokens computed: the prompt tokens it evaluated; cache_n were reused),
prompt_ms, predicted_n, predicted_ms; server_ms = prompt_ms + predicted_ms.

Output (stdout, and --json): the keys of `laya replay --json` where they mean the same thing:
events (requests sent), suggest_ms {p50, p90, p99, p999, max}, tokens_computed_per_event {p50, p99,
max} (from timings.prompt_n), free_keystrokes / accept_events / accept_chars (an accept event
takes the common prefix of the last suggestion made at that state and the trace's text; a
cancelled or missing suggestion takes nothing), traces {name: {...}}; and cancelled,
cancelled_after_ms, completed, server_ms, prompt_ms, predicted_ms, cache_n_per_event,
predicted_n_per_event, windowed_events (requests whose prefix the window cut). Percentiles:
nearest rank on the sorted values (the smallest value with at least p of the values <= it), as
laya replay computes them.

--self-test (needs no server): rebuilds every trace of ../shared/fixtures/traces (and long/;
$LAYA_FIXTURES overrides the fixtures folder) and checks the sha256 of the final document against
the header's final_sha256, checks the window and percentile rules; exit 0 on success, 77 (ctest's
skip code) when the fixtures are absent, 1 on a failure.
"""

import argparse
import glob
import hashlib
import http.client
import json
import math
import os
import socket
import sys
import time
import urllib.parse

SKIP = 77

# ---------------------------------------------------------------------------------------------
# Traces


class TraceError(Exception):
    pass


def load_trace(path):
    """(name, header, events): events are dicts with op, pos, text / n, t_ms, line; checked."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror}") from None
    header, events, doc_len, prev_t = None, [], 0, 0.0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            j = json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceError(f"{where}: not JSON: {e}") from None
        if not isinstance(j, dict):
            raise TraceError(f"{where}: not a JSON object")
        if header is None:
            if "op" in j or not isinstance(j.get("final_sha256"), str):
                raise TraceError(f"{where}: expected the header line (with \"final_sha256\")")
            header = j
            continue
        t = j.get("t_ms")
        if not isinstance(t, (int, float)) or isinstance(t, bool) or t < prev_t:
            raise TraceError(f"{where}: bad t_ms {t!r} (a number, never decreasing)")
        prev_t = float(t)
        op, pos = j.get("op"), j.get("pos")
        if not isinstance(pos, int) or isinstance(pos, bool) or pos < 0 or pos > doc_len:
            raise TraceError(f"{where}: bad pos {pos!r} (document of {doc_len} code points)")
        e = {"op": op, "pos": pos, "t_ms": float(t), "line": lineno}
        if op in ("insert", "accept"):
            if not isinstance(j.get("text"), str):
                raise TraceError(f"{where}: {op} without a string \"text\"")
            e["text"] = j["text"]
            doc_len += len(e["text"])
        elif op == "delete":
            n = j.get("n")
            if not isinstance(n, int) or isinstance(n, bool) or n < 0 or n > doc_len - pos:
                raise TraceError(f"{where}: bad delete n {n!r} at {pos} (document of {doc_len} code points)")
            e["n"] = n
            doc_len -= n
        elif op != "move":
            raise TraceError(f"{where}: unknown op {op!r}")
        events.append(e)
    if header is None:
        raise TraceError(f"{path}: empty trace (no header line)")
    if not events:
        raise TraceError(f"{path}: the trace has a header but no events")
    name = header.get("trace") if isinstance(header.get("trace"), str) else os.path.basename(path).removesuffix(".jsonl")
    return name, header, events


def apply_event(doc, cursor, e):
    """The document and cursor after event e (README: insert/accept leave the cursor after the
    text, delete at pos, move at pos)."""
    op, pos = e["op"], e["pos"]
    if op in ("insert", "accept"):
        return doc[:pos] + e["text"] + doc[pos:], pos + len(e["text"])
    if op == "delete":
        return doc[:pos] + doc[pos + e["n"]:], pos
    return doc, pos  # move


# ---------------------------------------------------------------------------------------------
# The window


def line_start_at_or_after(text, lo):
    """The first line start s with lo <= s < len(text) (s == 0 or text[s-1] == '\\n'), or None."""
    if lo <= 0:
        return 0 if text else None
    nl = text.find("\n", lo - 1)
    if nl < 0 or nl + 1 >= len(text):
        return None
    return nl + 1


def char_window_start(pre, max_chars):
    """Start (code points) of the last max_chars of pre, moved to the first line start in range."""
    if len(pre) <= max_chars:
        return 0
    lo = len(pre) - max_chars
    s = line_start_at_or_after(pre, lo)
    return lo if s is None else s


def utf8_bound(s):
    """An upper bound of the tokens of s for byte-level BPE (every token is >= 1 byte; +1 for a
    tokenizer that adds a leading space)."""
    return len(s.encode("utf-8")) + 1 if s else 0


class Windower:
    """Builds each event's request text; count_tokens(str) -> int is the server's tokenizer (or
    None: no token check, for the self-test)."""

    def __init__(self, args, count_tokens=None):
        self.fim = args.fim
        self.n_predict = args.n_predict
        self.n_ctx = args.n_ctx
        self.max_prefix = args.max_prefix_chars
        self.max_suffix = args.max_suffix_chars
        self.count_tokens = count_tokens
        self.tokenized = 0  # /tokenize calls

    def _tokens(self, s, exact):
        if not s:
            return 0
        if not exact:
            return utf8_bound(s)
        self.tokenized += 1
        return self.count_tokens(s)

    def _fits(self, parts, exact):
        overhead = 1 + self.n_predict + (3 if self.fim else 0)  # BOS, FIM_PRE/SUF/MID
        return overhead + sum(self._tokens(p, exact) for p in parts) <= self.n_ctx

    def suffix_end(self, doc, cursor):
        """End of the FIM suffix: whole lines up to max_suffix chars after the cursor (at least
        the rest of the cursor's line, itself cut at max_suffix)."""
        hard = min(len(doc), cursor + self.max_suffix)
        nl = doc.find("\n", cursor, hard)
        if nl < 0:
            return hard
        last = doc.rfind("\n", cursor, hard)
        return last + 1

    def build(self, doc, cursor):
        """dict: start (window start), and the request fields (prompt / input_prefix, ...)."""
        pre = doc[:cursor]
        start = char_window_start(pre, self.max_prefix)
        suffix = doc[cursor:self.suffix_end(doc, cursor)] if self.fim else ""

        ls = pre.rfind("\n") + 1  # the cursor's line start

        def parts(s):  # as the server tokenizes them: /infill's three fields one by one
            return [pre[s:ls] if s <= ls else "", pre[max(s, ls):], suffix] if self.fim else [pre[s:]]

        if self.count_tokens is not None and not self._fits(parts(start), exact=False):
            if self.fim and not self._fits(["", pre[ls:], suffix], exact=True):
                raise TraceError(f"the cursor's line and the FIM suffix ({len(pre) - ls} + {len(suffix)} chars) do not "
                                 f"fit in {self.n_ctx} tokens: lower --max-suffix-chars")
            if not self._fits(parts(start), exact=True):
                start = self._first_fitting(pre, start, parts)
        out = {"start": start}
        if self.fim:
            out["input_prefix"] = pre[start:ls] if start <= ls else ""
            out["prompt"] = pre[max(start, ls):]
            out["input_suffix"] = suffix
        else:
            out["prompt"] = pre[start:]
        return out

    def _first_fitting(self, pre, start, parts):
        """The earliest window start after `start` that fits: a line start, else a character."""
        cands, s = [], start
        while True:
            s = line_start_at_or_after(pre, s + 1)
            if s is None:
                break
            cands.append(s)
        best = self._search(cands, parts)
        if best is not None:
            return best
        lo = cands[-1] if cands else start
        best = self._search(range(lo + 1, len(pre) + 1), parts)
        return len(pre) if best is None else best

    def _search(self, cands, parts):
        """Binary search for the first candidate that fits (fewer tokens the later it starts)."""
        lo, hi, best = 0, len(cands) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            if self._fits(parts(cands[mid]), exact=True):
                best, hi = cands[mid], mid - 1
            else:
                lo = mid + 1
        return best


# ---------------------------------------------------------------------------------------------
# Statistics


def percentile(values, p):
    """Nearest rank: the smallest value with at least p of the values <= it (laya replay's)."""
    if not values:
        return None
    v = sorted(values)
    i = max(math.ceil(p * len(v)), 1) - 1
    return v[min(i, len(v) - 1)]


def dist_ms(v):
    return {k: percentile(v, p) for k, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999), ("max", 1.0))}


def dist_n(v):
    return {k: percentile(v, p) for k, p in (("p50", 0.5), ("p99", 0.99), ("max", 1.0))}


class Stats:
    KEYS = ("suggest_ms", "server_ms", "prompt_ms", "predicted_ms", "prompt_n", "cache_n", "predicted_n",
            "cancelled_after_ms")

    def __init__(self):
        self.events = self.cancelled = self.windowed = self.server_errors = 0
        self.first_error = ""
        self.free_keystrokes = self.accepts = self.accept_chars = 0
        self.v = {k: [] for k in self.KEYS}

    def add(self, o):
        self.first_error = self.first_error or o.first_error
        for a in ("events", "cancelled", "windowed", "server_errors", "free_keystrokes", "accepts", "accept_chars"):
            setattr(self, a, getattr(self, a) + getattr(o, a))
        for k in self.KEYS:
            self.v[k] += o.v[k]

    def json(self):
        return {
            "events": self.events,
            "completed": len(self.v["suggest_ms"]),
            "cancelled": self.cancelled,
            "server_errors": self.server_errors,
            "suggest_ms": dist_ms(self.v["suggest_ms"]),
            "server_ms": dist_ms(self.v["server_ms"]),
            "prompt_ms": dist_ms(self.v["prompt_ms"]),
            "predicted_ms": dist_ms(self.v["predicted_ms"]),
            "cancelled_after_ms": dist_ms(self.v["cancelled_after_ms"]),
            "tokens_computed_per_event": dist_n(self.v["prompt_n"]),
            "cache_n_per_event": dist_n(self.v["cache_n"]),
            "predicted_n_per_event": dist_n(self.v["predicted_n"]),
            "windowed_events": self.windowed,
            "free_keystrokes": self.free_keystrokes,
            "accept_events": self.accepts,
            "accept_chars": self.accept_chars,
            # every completed request's client-side latency, in event order: `laya replay --html
            # --peer this.json` draws them next to laya's on the same axes
            "samples": {"suggest_ms": self.v["suggest_ms"]},
        }

    def print(self, name):
        def f(d):
            return " ".join(f"{k.replace('p999', 'p99.9')} {'-' if x is None else f'{x:.3f}'}" for k, x in d.items())
        j = self.json()
        print(f"{name}: {self.events} events, {j['completed']} completed, {self.cancelled} cancelled, "
              f"{self.windowed} windowed, free keystrokes {self.free_keystrokes} (of {self.accept_chars} "
              f"accepted chars in {self.accepts} accepts)")
        print(f"  suggest_ms (client)  {f(j['suggest_ms'])}")
        print(f"  server_ms            {f(j['server_ms'])}")
        t = j["tokens_computed_per_event"]
        c = j["cache_n_per_event"]
        print(f"  tokens computed per event (prompt_n) p50 {t['p50']} p99 {t['p99']} max {t['max']}; "
              f"cached (cache_n) p50 {c['p50']} max {c['max']}")
        if self.cancelled:
            print(f"  cancelled after ms   {f(j['cancelled_after_ms'])}")
        if self.server_errors:
            print(f"  server errors (HTTP 500, no suggestion shown) {self.server_errors}: {self.first_error[:160]}")


# ---------------------------------------------------------------------------------------------
# The server


class Server:
    """One HTTP/1.1 keep-alive connection to llama-server, reopened after a cancel (closed) and
    when it has been idle for IDLE_S seconds (cpp-httplib closes idle connections after 5 s)."""

    IDLE_S = 2.0

    def __init__(self, url, timeout):
        u = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if u.scheme != "http":
            raise SystemExit(f"llamacpp client: only http:// servers ({url})")
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.timeout = timeout
        self.conn = None
        self.last_used = 0.0
        self.reconnects = 0  # requests resent because a kept-alive connection had been closed

    def connect(self):
        if self.conn is not None and time.perf_counter() - self.last_used > self.IDLE_S:
            self.close()
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self.conn.connect()
            self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.last_used = time.perf_counter()
        return self.conn

    def close(self):
        if self.conn is not None:
            try:
                if self.conn.sock is not None:
                    self.conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.conn.close()
            self.conn = None

    def send(self, path, body):
        self.path, self.body = path, body
        self.connect().request("POST", path, body=body, headers={"Content-Type": "application/json"})

    def receive(self, deadline):
        """The parsed JSON response to the last send(), or None when `deadline` (a perf_counter
        time; None: the request timeout) passes first."""
        for attempt in (0, 1):
            if deadline is not None:
                left = deadline - time.perf_counter()
                if left <= 0:
                    return None
                self.conn.sock.settimeout(left)
            try:
                r = self.conn.getresponse()
                data = r.read()
                break
            except (socket.timeout, TimeoutError):
                return None
            except (http.client.RemoteDisconnected, ConnectionError) as e:
                # a kept-alive connection the server had closed: once more on a new one
                self.close()
                if attempt:
                    raise SystemExit(f"llamacpp client: llama-server closed the connection: {e}") from None
                self.reconnects += 1
                self.send(self.path, self.body)
        self.last_used = time.perf_counter()
        if self.conn.sock is not None:
            self.conn.sock.settimeout(self.timeout)
        if (r.getheader("Connection") or "").lower() == "close":
            self.close()
        if r.status == 500 and self.path in ("/completion", "/infill"):
            # The server computed the completion but its output parser refused the text (seen on
            # Chinese: "does not match the expected Content-only format"): the editor shows
            # nothing. Counted as a server error and timed like any answer; the replay goes on.
            return {"_server_error": data[:300].decode("utf-8", "replace")}
        if r.status != 200:
            raise SystemExit(f"llamacpp client: HTTP {r.status} from llama-server: {data[:500].decode('utf-8', 'replace')}")
        return json.loads(data)

    def post(self, path, obj):
        self.send(path, json.dumps(obj).encode("utf-8"))
        return self.receive(None)

    def count_tokens(self, text):
        return len(self.post("/tokenize", {"content": text, "add_special": False})["tokens"])


# ---------------------------------------------------------------------------------------------
# The replay


def cap_pauses(events, cap_ms):
    """Every pause longer than cap_ms (before the first event too) becomes cap_ms, as laya replay
    --pace-cap-ms does."""
    prev_in = prev_out = 0.0
    for e in events:
        out = prev_out + min(e["t_ms"] - prev_in, cap_ms)
        prev_in = e["t_ms"]
        e["t_ms"] = prev_out = out


def prepare(args, events, windower):
    """One request per event (built before the timed replay): (event, body bytes, window start,
    accept text)."""
    doc, cursor, out = "", 0, []
    base = {"n_predict": args.n_predict, "cache_prompt": True, "stream": False, "temperature": 0.0,
            "top_k": 1, "samplers": ["top_k"], "response_fields": ["content", "timings", "stop_type"]}
    for e in events:
        doc, cursor = apply_event(doc, cursor, e)
        w = windower.build(doc, cursor)
        req = dict(base)
        req.update({k: v for k, v in w.items() if k != "start"})
        out.append((e, json.dumps(req, ensure_ascii=False).encode("utf-8"), w["start"]))
    return out, doc


def replay(args, srv, name, requests):
    s = Stats()
    path = "/infill" if args.fim else "/completion"
    last = None  # the last completed suggestion's text (None: none for the current state)
    start = time.perf_counter()
    for i, (e, body, wstart) in enumerate(requests):
        if e["op"] == "accept":
            k = 0
            if last is not None:
                while k < min(len(last), len(e["text"])) and last[k] == e["text"][k]:
                    k += 1
            s.accepts += 1
            s.accept_chars += len(e["text"])
            s.free_keystrokes += k
        last = None
        srv.connect()  # (re)opening a connection is not timed
        t_send = time.perf_counter()
        srv.send(path, body)
        s.events += 1
        s.windowed += wstart > 0
        deadline = None
        if not args.fast and i + 1 < len(requests):
            deadline = max(start + requests[i + 1][0]["t_ms"] / 1000.0, t_send)
        r = srv.receive(deadline)
        t_done = time.perf_counter()
        if r is None:  # the next event is due: cancel (close the connection), as a plugin does
            if args.fast:
                raise SystemExit(f"llamacpp client: {name}: no response in {args.timeout} s (event line {e['line']})")
            srv.close()
            s.cancelled += 1
            s.v["cancelled_after_ms"].append((t_done - t_send) * 1000.0)
        elif "_server_error" in r:
            s.server_errors += 1
            s.first_error = s.first_error or r["_server_error"]
            s.v["suggest_ms"].append((t_done - t_send) * 1000.0)
        else:
            tm = r.get("timings", {})
            s.v["suggest_ms"].append((t_done - t_send) * 1000.0)
            s.v["prompt_ms"].append(tm.get("prompt_ms", 0.0))
            s.v["predicted_ms"].append(tm.get("predicted_ms", 0.0))
            s.v["server_ms"].append(tm.get("prompt_ms", 0.0) + tm.get("predicted_ms", 0.0))
            s.v["prompt_n"].append(tm.get("prompt_n", 0))
            s.v["cache_n"].append(tm.get("cache_n", 0))
            s.v["predicted_n"].append(tm.get("predicted_n", 0))
            last = r.get("content", "")
        if not args.fast and i + 1 < len(requests):
            due = start + requests[i + 1][0]["t_ms"] / 1000.0
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)
    return s


def run(args):
    srv = Server(args.server, args.timeout)
    traces = []
    for p in args.traces:
        try:
            traces.append(load_trace(p))
        except TraceError as e:
            raise SystemExit(f"llamacpp client: {e}") from None
    try:
        srv.connect()
    except OSError as e:
        raise SystemExit(f"llamacpp client: cannot reach llama-server at {args.server}: {e}") from None
    if args.pace_cap_ms:
        for _, _, events in traces:
            cap_pauses(events, args.pace_cap_ms)
    windower = Windower(args, srv.count_tokens)
    total, per = Stats(), {}
    for name, header, events in traces:
        t0 = time.perf_counter()
        try:
            requests, doc = prepare(args, events, windower)
        except TraceError as e:
            raise SystemExit(f"llamacpp client: {name}: {e}") from None
        got = hashlib.sha256(doc.encode("utf-8")).hexdigest()
        if got != header["final_sha256"]:
            raise SystemExit(f"llamacpp client: {name}: rebuilt document's sha256 {got} != final_sha256 {header['final_sha256']}")
        print(f"{name}: {len(requests)} requests prepared in {time.perf_counter() - t0:.1f} s "
              f"({windower.tokenized} /tokenize calls so far)", file=sys.stderr)
        s = replay(args, srv, name, requests)
        srv.close()  # each trace starts on a fresh connection
        s.print(name)
        sys.stdout.flush()
        per[name] = s.json()
        total.add(s)
    if len(traces) > 1:
        total.print("overall")
    if args.json:
        out = total.json()
        out.update({"engine": "llama-server", "server": args.server, "endpoint": "/infill" if args.fim else "/completion",
                    "n_predict": args.n_predict, "n_ctx": args.n_ctx, "max_prefix_chars": args.max_prefix_chars,
                    "paced": not args.fast, "pace_cap_ms": args.pace_cap_ms or None, "percentiles": "nearest rank", "resent_on_closed_connection": srv.reconnects,
                    "tokenize_calls": windower.tokenized, "traces": per})
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
            f.write("\n")


# ---------------------------------------------------------------------------------------------
# Self-test


def fixtures_dir():
    env = os.environ.get("LAYA_FIXTURES")
    if env:
        return env if os.path.isdir(env) else None
    p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "fixtures")
    return os.path.normpath(p) if os.path.isdir(p) else None


def self_test(args):
    paths = list(args.traces)
    if not paths:
        fx = fixtures_dir()
        if fx is None or not os.path.isdir(os.path.join(fx, "traces")):
            print("self-test: SKIP: ../shared/fixtures/traces not found (set LAYA_FIXTURES)")
            return SKIP
        paths = sorted(glob.glob(os.path.join(fx, "traces", "*.jsonl")) +
                       glob.glob(os.path.join(fx, "traces", "long", "*.jsonl")))
        if not paths:
            print("self-test: SKIP: no traces in the fixtures")
            return SKIP
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    # Nearest rank, as laya replay: 1..100 -> p50 50, p90 90, p99 99, p99.9 100; one value; none.
    v = list(range(100, 0, -1))
    check((percentile(v, .5), percentile(v, .9), percentile(v, .99), percentile(v, .999), percentile(v, 1)) ==
          (50, 90, 99, 100, 100), "percentile of 1..100")
    check(percentile([7], 0.5) == 7 and percentile([], 0.5) is None, "percentile of one / no value")
    check(percentile([1, 2, 3, 4], 0.5) == 2, "percentile p50 of 4 values")
    # The window: a line start in range, mid-line only without one.
    check(char_window_start("ab\ncd\nef", 100) == 0, "window: short text")
    check(char_window_start("abcd\nefgh\nij", 6) == 10, "window: first line start in range")
    check(char_window_start("abcdefgh", 3) == 5, "window: no line start -> character cut")
    check(char_window_start("abcd\nef\n", 2) == 6, "window: the line start at the cursor is not used")
    wargs = argparse.Namespace(fim=True, n_predict=8, n_ctx=1024, max_prefix_chars=3000, max_suffix_chars=10)
    wf = Windower(wargs)
    w = wf.build("l1\nab|cd\nxy\nlong suffix line\n", 5)
    check((w["input_prefix"], w["prompt"], w["input_suffix"]) == ("l1\n", "ab", "|cd\nxy\n"), f"fim split {w}")
    check(wf.build("ab", 1)["input_suffix"] == "b", "fim suffix at the end of the text")
    # A token count of len(s) (one per code point): a budget of 1024 - 1 - 8 = 1015 code points.
    targs = argparse.Namespace(fim=False, n_predict=8, n_ctx=1024, max_prefix_chars=3000, max_suffix_chars=0)
    wt = Windower(targs, count_tokens=len)
    text = "".join(f"line {i:04d} 中文\n" for i in range(300))  # 13 code points, 17 bytes a line
    w = wt.build(text, len(text))
    check(len(w["prompt"]) <= 1015 and len(w["prompt"]) > 1000 and (w["start"] == 0 or text[w["start"] - 1] == "\n"),
          f"token-bounded window: {len(w['prompt'])} code points from {w['start']}")
    one = "x" * 5000
    check(len(wt.build(one, 5000)["prompt"]) == 1015, "token-bounded window: one long line, character cut")

    for p in paths:
        t0 = time.perf_counter()
        try:
            name, header, events = load_trace(p)
        except TraceError as e:
            failures.append(str(e))
            continue
        doc, cursor, bad_delete, windowed = "", 0, 0, 0
        win = Windower(argparse.Namespace(fim=False, n_predict=8, n_ctx=1024, max_prefix_chars=3000,
                                          max_suffix_chars=1000))
        for e in events:
            if e["op"] == "delete" and e["pos"] + e["n"] != cursor:
                bad_delete += 1  # the README: a delete ends at the cursor (informational)
            doc, cursor = apply_event(doc, cursor, e)
            w = win.build(doc, cursor)
            windowed += w["start"] > 0
            if len(w["prompt"]) > 3000 or not doc[:cursor].endswith(w["prompt"]):
                failures.append(f"{name}: window of {len(w['prompt'])} code points")
                break
        got = hashlib.sha256(doc.encode("utf-8")).hexdigest()
        ok = got == header["final_sha256"]
        check(ok, f"{name}: sha256 {got} != final_sha256 {header['final_sha256']}")
        check(len(doc) == header.get("chars", len(doc)), f"{name}: {len(doc)} code points, header says {header.get('chars')}")
        print(f"self-test: {name}: {len(events)} events, {len(doc)} code points, sha256 {'ok' if ok else 'MISMATCH'}, "
              f"{windowed} windowed events, {bad_delete} deletes not ending at the cursor "
              f"({(time.perf_counter() - t0) * 1000:.0f} ms)")
    for f in failures:
        print(f"self-test: FAIL: {f}")
    print("self-test: " + ("FAILED" if failures else f"ok ({len(paths)} traces)"))
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description="Replay typing traces against llama-server (see the header of this file).")
    ap.add_argument("traces", nargs="*", help="trace files (.jsonl)")
    ap.add_argument("--server", default="http://127.0.0.1:8090", help="llama-server's URL (default %(default)s)")
    ap.add_argument("--fast", action="store_true", help="events back to back instead of at the recorded pace")
    ap.add_argument("--pace-cap-ms", type=float, default=0.0,
                    help="the recorded pace, with every pause longer than this cut to it (default: uncapped)")
    ap.add_argument("--fim", action="store_true", help="POST /infill (llama.vim's layout) instead of /completion")
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--n-predict", type=int, default=8, help="tokens per suggestion (default %(default)s)")
    ap.add_argument("--n-ctx", type=int, default=1024, help="the server's context per slot, in tokens (default %(default)s)")
    ap.add_argument("--max-prefix-chars", type=int, default=3000, help="window before the cursor (default %(default)s)")
    ap.add_argument("--max-suffix-chars", type=int, default=1000, help="--fim: suffix after the cursor (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one response in --fast (default %(default)s)")
    ap.add_argument("--self-test", action="store_true", help="check the trace reconstruction (no server needed)")
    args = ap.parse_args()
    if args.self_test:
        return self_test(args)
    if not args.traces:
        ap.error("no trace given")
    if args.n_predict < 1 or args.n_ctx <= args.n_predict + 4 or args.max_prefix_chars < 1 or args.max_suffix_chars < 0:
        ap.error("bad --n-predict / --n-ctx / --max-prefix-chars / --max-suffix-chars")
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
