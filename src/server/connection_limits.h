// What one client, and all of them together, may hold of laya serve
// (issue 29: slowloris and idle keep-alive clients starved every thread).
//
// cpp-httplib serves each connection on a thread of its own for as long as
// the connection is open, and its read timeout restarts with every byte: 130
// connections sending a header byte a second held all 128 threads, and
// /health and /infill waited the whole attack. The guard (http_guard.h)
// bounds what a connection can hold instead:
//   - the whole request (request line, headers, body) must arrive within
//     request_timeout_s of its first byte, else 408;
//   - at most max_connections are served at once, at most max_per_client of
//     them from one address; past either the answer is an immediate 503,
//     never a place in a queue;
//   - health_reserve more connections are kept for GET /health (a load
//     balancer's probe answers while the rest are taken);
//   - at most large_requests requests with a body of 1 MiB or more are read
//     and handled at once: a dozen at once left /health a fair share of 2
//     cores among a dozen busy threads;
//   - when every slot is held and a new connection comes, an idle
//     keep-alive connection closes to make room, and while every slot is
//     held responses say "Connection: close": idle editors give their
//     threads to the ones typing (closing them earlier, at 3/4 held, made
//     100 keep-alive clients of bench/serve_load.py see 95 resets in 426
//     requests: a client may send on a connection as the server closes it).
// Each is a `laya serve` option (docs/SERVING.md).
#pragma once

#include <cstddef>

namespace laya::server {

struct ConnectionLimits {
  int max_connections = 128;     // each holds a thread while open; 100 editors fit
  int max_per_client = 32;       // per client address (0: no cap, e.g. behind a reverse proxy)
  int health_reserve = 4;        // extra connections that answer GET /health only
  double request_timeout_s = 10;  // whole request from its first byte: 8 MiB at 0.8 MB/s
  double keep_alive_s = 5;       // idle wait for a connection's next request
  size_t max_header_bytes = 64u << 10;  // request line + headers (httplib's own line limit is 8 KiB)
  int large_requests = 2;        // requests with a body of 1 MiB or more read and handled at once (others wait)
};

}  // namespace laya::server
