#!/usr/bin/env python3
"""Stand-ins for llama.cpp's llama-bench and llama-server (no model is run), so that
bench/families_device.sh's llama.cpp side can be tested where llama.cpp is not built. Called by the
name of a link or copy (llama-bench, llama-server) or as `fake_llama.py bench|server ARGS`.

  llama-bench ... -n N -t T -r R -o jsonl   prints one JSON line as llama-bench's jsonl output has it
                                            (avg_ns, stddev_ns, samples_ns, n_gen, n_threads, ...)
  llama-server --port P ...                 answers GET /health and POST /completion, /tokenize on
                                            127.0.0.1:P as llama-server does, with a fixed 8-token
                                            suggestion after ~5 ms; --help and --version print a line.
Python 3 standard library only.
"""

import json
import os
import sys
import time


def arg(argv, names, default):
    for i, a in enumerate(argv):
        if a in names and i + 1 < len(argv):
            return argv[i + 1]
    return default


def bench(argv):
    if "--version" in argv or "--help" in argv:
        print("version: 0 (fake)")
        return 0
    n = int(arg(argv, ("-n", "--n-gen"), "128"))
    t = int(arg(argv, ("-t", "--threads"), "4"))
    r = int(arg(argv, ("-r", "--repetitions"), "5"))
    samples = [int(n * (10 + i) * 1e6 / t) for i in range(r)]  # 10 ms a token at 1 thread
    avg = sum(samples) // len(samples)
    print(json.dumps({"build_commit": "fake", "build_number": 0, "cpu_info": "fake", "model_filename": arg(argv, ("-m",), ""),
                      "n_threads": t, "n_prompt": 0, "n_gen": n, "n_depth": 0, "avg_ns": avg, "stddev_ns": 1000,
                      "avg_ts": n / (avg / 1e9), "stddev_ts": 0.0, "samples_ns": samples}))
    return 0


def serve(port):
    import http.server  # here: llama-bench's stand-in starts sooner without it

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, obj):
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health":
                self.reply({"status": "ok"})
            else:
                self.send_error(404)

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/tokenize":
                self.reply({"tokens": list(range(len(req.get("content", "").encode())))})
            elif self.path in ("/completion", "/infill"):
                time.sleep(0.005)
                self.reply({"content": " fake one", "stop_type": "limit",
                            "timings": {"prompt_n": 1, "prompt_ms": 1.0, "predicted_n": 8, "predicted_ms": 4.0,
                                        "cache_n": 3}})
            else:
                self.send_error(404)

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def server(argv):
    if "--help" in argv:
        print("usage: llama-server [options] (fake: --port, --host; -ngl, --n-gpu-layers, --parallel, --cache-reuse accepted)")
        return 0
    if "--version" in argv:
        print("version: 0 (fake)")
        return 0
    serve(int(arg(argv, ("--port",), "8080")))
    return 0


def main():
    name = os.path.basename(sys.argv[0])
    argv = sys.argv[1:]
    if name.endswith(".py") and argv and argv[0] in ("bench", "server"):
        name, argv = "llama-" + argv[0], argv[1:]
    if "bench" in name:
        return bench(argv)
    if "server" in name:
        return server(argv)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
