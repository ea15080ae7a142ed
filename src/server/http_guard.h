// GuardedServer: cpp-httplib's Server with laya's connection admission and
// request deadlines (connection_limits.h says what and why).
//
// How: httplib 0.11 (Debian's) hands each accepted socket to
// TaskQueue::enqueue and then to the virtual process_and_close_socket, which
// reads requests through a Stream. GuardedServer overrides that function (it
// is private in httplib but virtual, as SSLServer's override shows) and serves
// the connection itself through GuardedStream, a Stream that
//   - ends the request at its deadline (a timeout per request, not per byte),
//   - counts the bytes of the headers and of the body and stops reading past
//     their limits: chunked bodies and bodies without Content-Length, which
//     httplib 0.11 reads to the end whatever payload_max_length says (a 1 GiB
//     chunked body took RSS to 4.67 GB), stop at the limit like the others;
// and its task queue (ShedQueue) admits each connection on the listener
// thread (microseconds: the caps are counters) and hands it to an idle worker,
// or answers 503 without reading when there is none or a cap is reached,
// instead of giving it a place in a queue behind slow clients.
//
// What a handler sees: request_guard() tells the pre-routing handler that a
// connection is on the /health reserve, and the error handler why a read
// failed (408 timeout, 413 body or 431 headers past the limit).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <httplib.h>

#include "server/connection_limits.h"

namespace laya::server {

class LargeRequestGate;
class LingerCloser;
class ShedQueue;

// Why the current thread's request could not be read, and what its
// connection may do. Valid on the thread serving the request.
struct RequestGuard {
  bool health_only = false;  // a reserve connection: GET /health, else 503
  bool timed_out = false;    // the deadline passed while reading
  bool body_too_large = false;
  bool headers_too_large = false;
};
// The current thread's guard; nullptr outside a GuardedServer connection.
const RequestGuard* request_guard();

// Counters for /metrics.
struct GuardCounters {
  std::atomic<int64_t> refused_busy{0};    // 503: every slot held
  std::atomic<int64_t> refused_client{0};  // 503: max_per_client from that address
  std::atomic<int64_t> timed_out{0};       // 408
  std::atomic<int64_t> too_large{0};       // 413 / 431 from the byte counts
  std::atomic<int64_t> idle_closed{0};     // idle keep-alive connections closed under pressure
};

class GuardedServer : public httplib::Server {
 public:
  GuardedServer(const ConnectionLimits& lim, size_t max_body_bytes);
  ~GuardedServer() override;

  // The listen backlog after bind: httplib's is 5, so a burst of connects
  // waited for SYN retries (1 s, then 3 s) before the 503 could be sent.
  void widen_backlog();

  const GuardCounters& counters() const { return counters_; }
  int held() const;  // connections held now (general + reserve)

 private:
  enum class Admit { kServe, kHealthOnly, kBusy, kClient };
  bool process_and_close_socket(socket_t sock) override;
  Admit admit(const std::string& peer);
  void leave(const std::string& peer, Admit how);
  // Serves requests on one admitted connection until it closes.
  void serve(socket_t sock, bool health_only);
  // Writes a 503 (`why`) and hands the socket to the LingerCloser.
  void refuse(socket_t sock, const std::string& why);
  bool under_pressure() const;  // every slot held: responses say "Connection: close"
  // Idle keep-alive: waits for the next request's first byte; false when the
  // wait ends first, the server stops, or a new connection wants its slot
  // (the thread goes to a connection with work).
  bool wait_for_next_request(socket_t sock);
  // Answers a request whose request line never came whole (httplib wrote
  // nothing): 408 past the deadline, 431 past the header limit.
  void answer_unread(socket_t sock, const RequestGuard& g, int64_t timeout_ms);

  ConnectionLimits lim_;
  size_t max_body_bytes_;
  mutable std::mutex mu_;
  int held_ = 0, reserve_held_ = 0;
  std::map<std::string, int> per_client_;
  std::atomic<int> general_held_{0};  // held_, readable without the lock
  std::atomic<int> idle_{0};          // connections waiting for their next request
  std::atomic<int> evict_{0};         // how many of those admit() asked to close
  GuardCounters counters_;
  std::unique_ptr<LingerCloser> closer_;
  std::unique_ptr<LargeRequestGate> gate_;
  ShedQueue* queue_ = nullptr;  // made by new_task_queue, owned by httplib's listen loop
};

}  // namespace laya::server
