#include "server/http_guard.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>


namespace laya::server {

namespace {

using Clock = std::chrono::steady_clock;

thread_local RequestGuard* t_guard = nullptr;

// A reserve connection has this long to send its GET /health: a probe sends
// it at once, and a slow client must not keep a reserve slot for long.
constexpr int kReserveTimeoutMs = 1000;
// Threads beyond the connection slots: one that has left its slot may not
// be waiting for work yet when the next admitted connection is handed over,
// and a connection admitted in an idle one's place runs until that one has
// closed (up to kIdleSliceMs).
constexpr int kSpareThreads = 16;
// A refused connection's wait for the client's request after the 503 (LingerCloser).
constexpr int kLingerMs = 50;
// The idle wait's poll slice: how soon an idle keep-alive connection notices
// that its slot is wanted or that the server stops.
constexpr int kIdleSliceMs = 20;
// A request whose body reaches this size waits for a LargeRequestGate token.
constexpr size_t kLargeRequestBytes = size_t{1} << 20;

std::string error_body(int code, const std::string& msg, const char* type) {
  return nlohmann::json{{"error", {{"code", code}, {"message", msg}, {"type", type}}}}.dump();
}

std::string raw_response(int code, const char* reason, const std::string& body) {
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n{}", code,
      reason, body.size(), code == 503 ? "Retry-After: 1\r\n" : "", body);
}

std::string peer_address(socket_t sock) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(sock, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
  else if (ss.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
  return buf;
}

void address_of(socket_t sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  const int rc = peer ? getpeername(sock, reinterpret_cast<sockaddr*>(&ss), &len)
                      : getsockname(sock, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc != 0) return;
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

int poll_one(socket_t sock, short events, int ms) {
  pollfd p{sock, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, std::max(0, ms));
    if (r >= 0 || errno != EINTR) return r;
  }
}

}  // namespace

// Requests past kLargeRequestBytes read and parsed at once, at most
// `tokens` of them (--large-requests): twelve 8 MB bodies read and scanned
// together made twelve busy threads, and a /health probe, scheduled fairly
// among them on 2 cores, waited up to 120-280 ms; the others wait here (not
// on a core) within their own deadline.
class LargeRequestGate {
 public:
  explicit LargeRequestGate(int tokens) : free_(std::max(1, tokens)) {}
  bool acquire_until(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return free_ > 0; })) return false;
    --free_;
    return true;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

namespace {

// A Stream over one connection: buffered reads that end at the request's
// deadline and at the header and body limits (see http_guard.h).
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(socket_t sock, RequestGuard& g, size_t max_header, size_t max_body, int write_timeout_ms,
                LargeRequestGate& gate)
      : sock_(sock), g_(g), max_header_(max_header), max_body_(max_body), write_ms_(write_timeout_ms), gate_(gate) {}
  ~GuardedStream() override { end_request(); }

  // The request (its handler too) is done: a large one gives its token back.
  void end_request() {
    if (large_) gate_.release();
    large_ = false;
  }

  void begin_request(Clock::time_point deadline) {
    deadline_ = deadline;
    in_headers_ = true;
    header_bytes_ = body_bytes_ = 0;
    match_ = 0;
    wrote_ = false;
  }
  bool buffered() const { return pos_ < end_; }
  bool wrote() const { return wrote_; }
  size_t request_bytes() const { return header_bytes_ + body_bytes_; }

  bool is_readable() const override { return buffered() || poll_one(sock_, POLLIN, ms_left()) > 0; }
  bool is_writable() const override { return poll_one(sock_, POLLOUT, write_ms_) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    if (!buffered() && !fill()) return -1;
    size_t n = std::min(size, end_ - pos_);
    if (!account(buf_.get() + pos_, n)) return -1;
    std::memcpy(ptr, buf_.get() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    for (;;) {
      const ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || errno != EINTR) {
        if (n > 0) wrote_ = true;
        return n;
      }
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  int ms_left() const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, INT32_MAX));
  }

  bool fill() {
    const int ms = ms_left();
    const int r = ms > 0 ? poll_one(sock_, POLLIN, ms) : 0;
    if (r == 0) {
      g_.timed_out = true;
      return false;
    }
    if (r < 0) return false;
    ssize_t n;
    do n = ::recv(sock_, buf_.get(), kBufBytes, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0) return false;
    pos_ = 0;
    end_ = static_cast<size_t>(n);
    return true;
  }

  // Counts n bytes about to be consumed against the header or body limit;
  // false (with the guard's flag set) past it. Headers end at "\r\n\r\n"
  // (httplib 0.11 requires CRLF line ends).
  bool account(const char* p, size_t n) {
    size_t i = 0;
    for (; in_headers_ && i < n; ++i) {
      if (++header_bytes_ > max_header_) {
        g_.headers_too_large = true;
        return false;
      }
      static constexpr char kEnd[] = "\r\n\r\n";
      match_ = p[i] == kEnd[match_] ? match_ + 1 : (p[i] == '\r' ? 1 : 0);
      if (match_ == 4) in_headers_ = false;
    }
    body_bytes_ += n - i;
    if (body_bytes_ > max_body_) {
      g_.body_too_large = true;
      return false;
    }
    if (!large_ && body_bytes_ >= kLargeRequestBytes) {
      if (!gate_.acquire_until(deadline_)) {
        g_.timed_out = true;
        return false;
      }
      large_ = true;
    }
    return true;
  }

  socket_t sock_;
  RequestGuard& g_;
  size_t max_header_, max_body_;
  int write_ms_;
  LargeRequestGate& gate_;
  bool large_ = false;  // holds a token of gate_
  Clock::time_point deadline_{};
  // 64 KiB: httplib asks for 4 KiB (a body) or 1 byte (a header line) at a
  // time; receiving 64 KiB per system call made an 8 MiB body 128 recv+poll
  // pairs instead of 2,048.
  static constexpr size_t kBufBytes = 64u << 10;
  std::unique_ptr<char[]> buf_ = std::make_unique<char[]>(kBufBytes);
  size_t pos_ = 0, end_ = 0;
  bool in_headers_ = true, wrote_ = false;
  size_t header_bytes_ = 0, body_bytes_ = 0;
  int match_ = 0;
};

}  // namespace

// The task queue httplib gets. httplib's ThreadPool queues a connection
// when every thread is busy, behind slow clients, with no way to refuse it.
// This one runs httplib's task (process_and_close_socket) on the listener
// thread itself: admission takes microseconds there and a refusal never
// waits for a thread; an admitted connection is handed to a worker with
// try_submit, which fails rather than queue when none is idle.
class ShedQueue final : public httplib::TaskQueue {
 public:
  explicit ShedQueue(size_t n) {
    for (size_t i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
  }
  void enqueue(std::function<void()> fn) override { fn(); }
  bool try_submit(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || jobs_.size() >= idle_) return false;
    jobs_.push_back(std::move(fn));
    cv_.notify_one();
    return true;
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ++idle_;
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        --idle_;
        if (jobs_.empty()) return;  // stopping
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();
    }
  }

  std::vector<std::thread> threads_;
  std::deque<std::function<void()>> jobs_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t idle_ = 0;
  bool stop_ = false;
};

// Closes refused connections once the client has read its 503, without
// holding a thread: closing a socket with unread input resets it, and the
// client may then see "connection reset" instead of the answer, so each
// waits (up to kLingerMs, reading and discarding at most 64 KiB) for the
// client's request or its close. One thread polls them all: a reconnecting
// attacker was refused ~4,700 times a second in the suite, and a thread per
// lingering refusal (50 ms each) left none for admissible connections.
class LingerCloser {
 public:
  LingerCloser() {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
    thread_ = std::thread([this] { run(); });
  }
  ~LingerCloser() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake();
    thread_.join();
    for (const Entry& e : fds_) ::close(e.fd);
    for (int fd : wake_)
      if (fd >= 0) ::close(fd);
  }
  void add(socket_t fd) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (fds_.size() >= kMaxLingering) {  // a flood: close at once rather than keep descriptors
        ::close(fd);
        return;
      }
      fds_.push_back({fd, Clock::now() + std::chrono::milliseconds(kLingerMs), 0});
    }
    wake();
  }

 private:
  struct Entry {
    socket_t fd;
    Clock::time_point end;
    size_t drained;
  };
  static constexpr size_t kMaxLingering = 1024;

  void wake() {
    if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  }

  void run() {
    std::vector<pollfd> pfds;
    for (;;) {
      pfds.assign(1, pollfd{wake_[0], POLLIN, 0});
      int ms = 1000;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        const auto now = Clock::now();
        for (const Entry& e : fds_) {
          pfds.push_back({e.fd, POLLIN, 0});
          ms = std::min<int>(ms, static_cast<int>(std::max<int64_t>(
                                     0, std::chrono::duration_cast<std::chrono::milliseconds>(e.end - now).count())));
        }
      }
      ::poll(pfds.data(), pfds.size(), ms);
      char sink[4096];
      while (wake_[0] >= 0 && ::read(wake_[0], sink, sizeof(sink)) > 0) {
      }
      std::lock_guard<std::mutex> lock(mu_);
      const auto now = Clock::now();
      // fds_ only grows meanwhile (add appends): the first pfds.size() - 1 entries are the polled ones.
      for (size_t i = pfds.size() - 1; i-- > 0;) {
        Entry& e = fds_[i];
        bool done = now >= e.end;
        if (pfds[i + 1].revents) {
          ssize_t n;
          while ((n = ::recv(e.fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0 && (e.drained += static_cast<size_t>(n)) < (64u << 10)) {
          }
          done = done || n == 0 || e.drained >= (64u << 10) || (n < 0 && errno != EAGAIN && errno != EINTR);
        }
        if (done) {
          ::close(e.fd);
          fds_.erase(fds_.begin() + static_cast<std::ptrdiff_t>(i));
        }
      }
    }
  }

  std::mutex mu_;
  std::vector<Entry> fds_;
  int wake_[2] = {-1, -1};
  bool stop_ = false;
  std::thread thread_;
};

const RequestGuard* request_guard() { return t_guard; }

GuardedServer::~GuardedServer() = default;

GuardedServer::GuardedServer(const ConnectionLimits& lim, size_t max_body_bytes)
    : lim_(lim), max_body_bytes_(max_body_bytes), closer_(std::make_unique<LingerCloser>()),
      gate_(std::make_unique<LargeRequestGate>(lim.large_requests)) {
  lim_.max_connections = std::max(1, lim_.max_connections);
  lim_.health_reserve = std::max(0, lim_.health_reserve);
  const size_t threads = static_cast<size_t>(lim_.max_connections + lim_.health_reserve + kSpareThreads);
  new_task_queue = [this, threads] {
    queue_ = new ShedQueue(threads);  // owned and shut down by httplib's listen loop
    return queue_;
  };
}

void GuardedServer::widen_backlog() {
  const socket_t s = svr_sock_;
  if (s != INVALID_SOCKET) ::listen(s, SOMAXCONN);  // a second listen() only changes the backlog
}

int GuardedServer::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_ + reserve_held_;
}

bool GuardedServer::under_pressure() const { return general_held_.load() >= lim_.max_connections; }

GuardedServer::Admit GuardedServer::admit(const std::string& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  int& mine = per_client_[peer];
  Admit a = Admit::kBusy;
  if (lim_.max_per_client > 0 && mine >= lim_.max_per_client) a = Admit::kClient;
  else if (held_ < lim_.max_connections) a = Admit::kServe, ++held_;
  // Every slot held, some by idle keep-alive connections: one of them is
  // asked to close (wait_for_next_request) and this one is served in its
  // place meanwhile (a spare thread carries it).
  else if (idle_.load() > evict_.load()) a = Admit::kServe, ++held_, ++evict_;
  else if (reserve_held_ < lim_.health_reserve) a = Admit::kHealthOnly, ++reserve_held_;
  if (a == Admit::kServe || a == Admit::kHealthOnly) ++mine;
  if (mine == 0) per_client_.erase(peer);
  general_held_.store(held_);
  return a;
}

void GuardedServer::leave(const std::string& peer, Admit how) {
  std::lock_guard<std::mutex> lock(mu_);
  if (how == Admit::kServe) --held_;
  else --reserve_held_;
  if (auto it = per_client_.find(peer); it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
  general_held_.store(held_);
}

void GuardedServer::refuse(socket_t sock, const std::string& why) {
  const std::string r = raw_response(503, "Service Unavailable", error_body(503, why, "unavailable_error"));
  (void)::send(sock, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(sock, SHUT_WR);
  closer_->add(sock);
}

// Runs on the listener thread (ShedQueue::enqueue): must not block.
bool GuardedServer::process_and_close_socket(socket_t sock) {
  const std::string peer = peer_address(sock);
  const Admit a = admit(peer);
  if (a == Admit::kBusy || a == Admit::kClient) {
    ++(a == Admit::kBusy ? counters_.refused_busy : counters_.refused_client);
    refuse(sock, a == Admit::kBusy
                     ? fmt::format("server busy: all {} connections (--max-connections) and the {} kept for /health "
                                   "are held; retry shortly",
                                   lim_.max_connections, lim_.health_reserve)
                     : fmt::format("too many connections from {}: {} are open (--max-connections-per-client); close "
                                   "one or reuse it (keep-alive)",
                                   peer, lim_.max_per_client));
    return true;
  }
  const bool handed = queue_ && queue_->try_submit([this, sock, peer, a] {
    serve(sock, a == Admit::kHealthOnly);
    leave(peer, a);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  });
  if (!handed) {
    leave(peer, a);
    ++counters_.refused_busy;
    refuse(sock, "server busy: no thread free for a new connection; retry shortly");
  }
  return true;
}

void GuardedServer::answer_unread(socket_t sock, const RequestGuard& g, int64_t timeout_ms) {
  const std::string r =
      g.timed_out ? raw_response(408, "Request Timeout",
                                 error_body(408,
                                            fmt::format("request not received whole within {} ms of its start "
                                                        "(--request-timeout)",
                                                        timeout_ms),
                                            "timeout_error"))
                  : raw_response(431, "Request Header Fields Too Large",
                                 error_body(431,
                                            fmt::format("request line and headers past the limit of {} bytes",
                                                        lim_.max_header_bytes),
                                            "invalid_request_error"));
  (void)::send(sock, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool GuardedServer::wait_for_next_request(socket_t sock) {
  struct Idle {  // counted while waiting: admit() may ask one of these to give its slot
    std::atomic<int>& n;
    explicit Idle(std::atomic<int>& c) : n(c) { ++n; }
    ~Idle() { --n; }
  } idle(idle_);
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(lim_.keep_alive_s * 1000));
  while (svr_sock_ != INVALID_SOCKET) {
    for (int e = evict_.load(); e > 0;) {
      if (general_held_.load() <= lim_.max_connections) {  // nobody waits for a slot now: a stale request
        evict_.compare_exchange_weak(e, 0);
        break;
      }
      if (evict_.compare_exchange_weak(e, e - 1)) {
        ++counters_.idle_closed;
        return false;
      }
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (ms <= 0) return false;
    const int r = poll_one(sock, POLLIN, static_cast<int>(std::min<int64_t>(ms, kIdleSliceMs)));
    if (r != 0) return r > 0;  // a byte or the client's close: the next request's read tells which
  }
  return false;
}

void GuardedServer::serve(socket_t sock, bool health_only) {
  RequestGuard g;
  t_guard = &g;
  const int write_ms = static_cast<int>(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000);
  GuardedStream strm(sock, g, lim_.max_header_bytes, max_body_bytes_, std::max(1, write_ms), *gate_);
  const auto timeout = std::chrono::milliseconds(
      health_only ? std::min<int64_t>(kReserveTimeoutMs, static_cast<int64_t>(lim_.request_timeout_s * 1000))
                  : static_cast<int64_t>(lim_.request_timeout_s * 1000));
  // The first request's time starts at the accept (a connection that sends
  // nothing is a slow request too); a later one's at its first byte.
  auto deadline = Clock::now() + timeout;
  for (size_t left = std::max<size_t>(1, keep_alive_max_count_); left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    g = RequestGuard{};
    g.health_only = health_only;
    strm.begin_request(deadline);
    const bool close = left == 1 || health_only || under_pressure();
    bool closed = false;
    const bool ok = process_request(strm, close, closed, nullptr);
    strm.end_request();
    if (g.timed_out || g.body_too_large || g.headers_too_large) {
      ++(g.timed_out ? counters_.timed_out : counters_.too_large);
      // httplib wrote nothing when the request line itself never came whole;
      // otherwise its error handler said why. The rest of the request is
      // unread either way: the connection ends.
      if (!strm.wrote()) answer_unread(sock, g, timeout.count());
      break;
    }
    if (!ok || closed || close) break;
    if (!strm.buffered() && !wait_for_next_request(sock)) break;
    deadline = Clock::now() + timeout;
  }
  t_guard = nullptr;
}

}  // namespace laya::server
