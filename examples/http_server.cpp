// http_server: an HTTP/1.1 keep-alive server on Beast over asio_wheel::timed_stream, or
// over beast::tcp_stream (--stream beast) for comparison; the same session code runs on
// either stream.
//
// Deadlines, per connection (one wheel entry for all of them with timed_stream):
// - idle: waiting for the first byte of the next request on a kept-alive connection, at
//   most --idle (default 30 s), then the connection is closed;
// - read: from the first byte of a request to the end of its header and body, at most
//   --read-timeout (default 10 s): a client that trickles a header (slowloris) is cut
//   off then, however steadily it sends;
// - write: each response, at most --write-timeout (default 10 s).
// Requests already buffered (pipelined) are served without an idle wait.
//
// A request the parser refuses is answered, then the connection closed (where the next
// request would start is unknown): 431 Request Header Fields Too Large past a header of
// 16 KiB, 413 Payload Too Large past a body of 1 MiB, 400 Bad Request for one that is
// malformed. The server then stops sending and reads what the client still sends, for at
// most --read-timeout and 1 MiB, before it closes: closing with unread bytes would reset
// the connection, and a reset can throw away the answer before the client reads it.
//
//   http_server [--stream wheel|beast] [--port P] [--threads N] [--idle D] ...
//   http_server --self-test [--stream wheel|beast]
//
// Self-test: the server runs in-process on loopback with --idle 200ms and
// --read-timeout 600ms (unless given), and its own clients check keep-alive (three
// requests, one connection), pipelining (three requests in one write, answered in
// order), requests with a body (by length and chunked) and HEAD (the length, no body),
// idle reaping (connections idle after a request and connections that never
// send are closed; the server never closes one before its idle time, measured on the
// server's clock), a slow header (cut off by the read deadline, not earlier, and counted
// as a read timeout), and bad requests (a malformed one, a header and a body over the
// limits: each answered 400, 431 or 413, then closed). Upper bounds on wall-clock time
// are generous (5 s of slack), lower bounds follow from causality only, so a busy machine
// does not fail it.
//
// A Boost.Beast program: left out of standalone builds (examples/CMakeLists.txt).
// asio_wheel: requires Boost

#include <asio_wheel.hpp>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using namespace std::chrono_literals;
using namespace std::string_literals;
using clock_type = std::chrono::steady_clock;
using duration = clock_type::duration;
using std::chrono::milliseconds;

namespace {

enum class stream_kind { wheel, beast };

struct config {
  stream_kind stream = stream_kind::wheel;
  std::string address = "127.0.0.1";
  unsigned short port = 8080;
  unsigned threads = 1;
  duration idle = 30s;
  duration read_timeout = 10s;
  duration write_timeout = 10s;
  duration tick = 1ms;
  bool self_test = false;
};

void print_help() {
  std::cout <<
      R"(usage: http_server [options]

An HTTP/1.1 keep-alive server (Beast) that answers every request with a short text.
Each connection's idle wait, request read and response write has its own deadline, on
asio_wheel::timed_stream (one wheel entry per connection) or on beast::tcp_stream.

options:
  --stream wheel|beast   asio_wheel::timed_stream (default) or beast::tcp_stream
  --address A            listen address (default 127.0.0.1)
  --port P               listen port (default 8080; 0: an ephemeral port)
  --threads N            threads running the io_context (default 1); each connection
                         runs on a strand of its own
  --idle D               close a kept-alive connection idle this long (default 30s)
  --read-timeout D       deadline of a request, from its first byte (default 10s)
  --write-timeout D      deadline of a response (default 10s)
  --tick D               the wheel's resolution (default 1ms; wheel only; at most
                         the shortest of --idle, --read-timeout and --write-timeout)
  --self-test            run the server in-process against its own loopback clients and
                         check keep-alive, pipelining, idle reaping, a slow header and
                         the answers to bad requests;
                         --idle defaults to 200ms and --read-timeout to 600ms there
  --help                 this text

Durations: a number with a unit, ms or s (200ms, 30s, 1.5s); a bare number is seconds.

A request header is at most 16 KiB and a body at most 1 MiB. A request over either, or
malformed, is answered 431 Request Header Fields Too Large, 413 Payload Too Large or
400 Bad Request with "Connection: close", and the connection is then closed.

The server prints "listening on ADDRESS:PORT" once it accepts, and runs until SIGINT or
SIGTERM; it then prints one line of counters:
  connections, requests, idle_closed, read_timeouts, write_timeouts, peer_closed,
  errors, bad_requests (refused and answered 400, 413 or 431), idle_late_max_ms and
  idle_late_avg_ms (how long after its idle deadline each idle connection was closed),
  idle_early (closed before its idle time: always 0).
Exit status of the self-test: 0 if every check passed.
)";
}

[[noreturn]] void usage_error(const std::string& what) {
  std::cerr << "http_server: " << what << " (try --help)\n";
  std::exit(2);
}

duration parse_duration(std::string_view flag, std::string_view text) {
  double scale = 1.0; // seconds
  std::string_view number = text;
  if (text.size() > 2 && text.substr(text.size() - 2) == "ms") {
    scale = 1e-3;
    number = text.substr(0, text.size() - 2);
  } else if (text.size() > 1 && text.back() == 's') {
    number = text.substr(0, text.size() - 1);
  }
  const std::string copy(number);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(copy.c_str(), &end);
  if (copy.empty() || errno != 0 || end != copy.c_str() + copy.size() || !(v >= 0) || v > 1e6) {
    usage_error("bad duration for " + std::string(flag) + ": '" + std::string(text) + "'");
  }
  return std::chrono::duration_cast<duration>(std::chrono::duration<double>(v * scale));
}

unsigned long parse_count(std::string_view flag, const char* text, unsigned long max) {
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v > max) {
    usage_error("bad value for " + std::string(flag) + ": '" + text + "'");
  }
  return v;
}

config parse_args(int argc, char** argv) {
  config cfg;
  bool have_idle = false, have_read = false;
  auto value = [&](int& i) -> const char* {
    if (i + 1 >= argc) usage_error(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      print_help();
      std::exit(0);
    } else if (a == "--stream") {
      const std::string_view v = value(i);
      if (v == "wheel") {
        cfg.stream = stream_kind::wheel;
      } else if (v == "beast") {
        cfg.stream = stream_kind::beast;
      } else {
        usage_error("--stream takes wheel or beast, not '" + std::string(v) + "'");
      }
    } else if (a == "--address") {
      cfg.address = value(i);
    } else if (a == "--port") {
      cfg.port = static_cast<unsigned short>(parse_count(a, value(i), 65535));
    } else if (a == "--threads") {
      cfg.threads = static_cast<unsigned>(parse_count(a, value(i), 256));
      if (cfg.threads == 0) usage_error("--threads must be at least 1");
    } else if (a == "--idle") {
      cfg.idle = parse_duration(a, value(i));
      have_idle = true;
    } else if (a == "--read-timeout") {
      cfg.read_timeout = parse_duration(a, value(i));
      have_read = true;
    } else if (a == "--write-timeout") {
      cfg.write_timeout = parse_duration(a, value(i));
    } else if (a == "--tick") {
      cfg.tick = parse_duration(a, value(i));
      if (cfg.tick <= duration::zero()) usage_error("--tick must be positive");
    } else if (a == "--self-test") {
      cfg.self_test = true;
    } else {
      usage_error("unknown argument '" + std::string(a) + "'");
    }
  }
  if (cfg.self_test) {
    if (!have_idle) cfg.idle = 200ms;
    if (!have_read) cfg.read_timeout = 600ms;
    cfg.port = 0;
  }
  if (cfg.idle <= duration::zero() || cfg.read_timeout <= duration::zero() ||
      cfg.write_timeout <= duration::zero()) {
    usage_error("--idle, --read-timeout and --write-timeout must be positive");
  }
  // The wheel rounds each deadline up to a tick: a coarser one cannot time them.
  if (cfg.tick > std::min({cfg.idle, cfg.read_timeout, cfg.write_timeout})) {
    usage_error("--tick must not be longer than --idle, --read-timeout or --write-timeout");
  }
  return cfg;
}

double to_ms(duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// ---------------------------------------------------------------------------------------
// Counters, shared by every session (several threads may run them).

struct server_stats {
  std::atomic<std::uint64_t> connections{0};
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> idle_closed{0};
  std::atomic<std::uint64_t> read_timeouts{0};
  std::atomic<std::uint64_t> write_timeouts{0};
  std::atomic<std::uint64_t> peer_closed{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> bad_requests{0};      // refused by the parser, answered 4xx
  std::atomic<std::uint64_t> idle_early{0};        // closed before its idle time: a bug
  std::atomic<std::int64_t> idle_late_max_ns{0};   // worst delay past the idle deadline
  std::atomic<std::int64_t> idle_late_sum_ns{0};

  void note_idle_close(std::int64_t late_ns) {
    idle_closed.fetch_add(1, std::memory_order_relaxed);
    if (late_ns < 0) {
      idle_early.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    idle_late_sum_ns.fetch_add(late_ns, std::memory_order_relaxed);
    std::int64_t seen = idle_late_max_ns.load(std::memory_order_relaxed);
    while (late_ns > seen &&
           !idle_late_max_ns.compare_exchange_weak(seen, late_ns, std::memory_order_relaxed)) {
    }
  }

  void print(std::FILE* out) const {
    const auto idle = idle_closed.load();
    const auto sum = idle_late_sum_ns.load();
    std::fprintf(out,
                 "http_server: connections=%llu requests=%llu idle_closed=%llu read_timeouts=%llu "
                 "write_timeouts=%llu peer_closed=%llu errors=%llu bad_requests=%llu "
                 "idle_late_max_ms=%.3f idle_late_avg_ms=%.3f idle_early=%llu\n",
                 static_cast<unsigned long long>(connections.load()),
                 static_cast<unsigned long long>(requests.load()),
                 static_cast<unsigned long long>(idle),
                 static_cast<unsigned long long>(read_timeouts.load()),
                 static_cast<unsigned long long>(write_timeouts.load()),
                 static_cast<unsigned long long>(peer_closed.load()),
                 static_cast<unsigned long long>(errors.load()),
                 static_cast<unsigned long long>(bad_requests.load()),
                 static_cast<double>(idle_late_max_ns.load()) / 1e6,
                 idle > idle_early.load() ? static_cast<double>(sum) / 1e6 /
                                                static_cast<double>(idle - idle_early.load())
                                          : 0.0,
                 static_cast<unsigned long long>(idle_early.load()));
    std::fflush(out);
  }
};

bool is_timeout(const error_code& ec) {
  return ec == asio_wheel::error::timeout || ec == beast::error::timeout;
}

// The limits on a request, given to the parser; past them it fails with
// http::error::header_limit or http::error::body_limit.
constexpr std::uint32_t header_limit = 16 * 1024;
constexpr std::uint64_t body_limit = 1024 * 1024;

// The answer to a request the parser refused: what the client sent is at fault. Empty
// for the other read errors (the peer closing, mid-request or not, a socket error, a
// timeout), where there is nobody to answer or nothing the client could fix.
std::optional<http::status> status_for_refused(const error_code& ec) {
  if (ec.category() != http::make_error_code(http::error::bad_method).category()) return {};
  switch (static_cast<http::error>(ec.value())) {
    case http::error::header_limit:
      return http::status::request_header_fields_too_large;
    case http::error::body_limit:
      return http::status::payload_too_large;
    case http::error::bad_line_ending:
    case http::error::bad_method:
    case http::error::bad_target:
    case http::error::bad_version:
    case http::error::bad_field:
    case http::error::bad_value:
    case http::error::bad_content_length:
    case http::error::bad_transfer_encoding:
    case http::error::bad_chunk:
    case http::error::bad_chunk_extension:
    case http::error::bad_obs_fold:
    case http::error::multiple_content_length:
      return http::status::bad_request;
    default:
      return {};
  }
}

// What a refused request's connection reads and drops, at most, before it closes.
constexpr std::size_t drain_limit = 1024 * 1024;

// ---------------------------------------------------------------------------------------
// One connection. Stream is asio_wheel::timed_stream or beast::tcp_stream: both have
// expires_after, async_read_some/async_write_some and socket().

template <class Stream>
class session : public std::enable_shared_from_this<session<Stream>> {
public:
  session(tcp::socket socket, const config& cfg, server_stats& stats)
      : stream_(std::move(socket)), cfg_(cfg), stats_(stats) {}

  void start() { wait_for_request(); }

private:
  // Between requests: a pipelined request already buffered is served at once; else the
  // connection may idle for cfg.idle, waiting for the first byte of the next request.
  void wait_for_request() {
    if (buffer_.size() > 0) {
      read_request();
      return;
    }
    idle_since_ = clock_type::now();
    stream_.expires_after(cfg_.idle);
    stream_.async_read_some(buffer_.prepare(1024),
                            [self = this->shared_from_this()](error_code ec, std::size_t n) {
                              self->on_first_bytes(ec, n);
                            });
  }

  void on_first_bytes(error_code ec, std::size_t n) {
    if (ec) {
      if (is_timeout(ec)) {
        const auto late = clock_type::now() - (idle_since_ + cfg_.idle);
        stats_.note_idle_close(std::chrono::duration_cast<std::chrono::nanoseconds>(late).count());
      } else if (ec == net::error::eof) {
        stats_.peer_closed.fetch_add(1, std::memory_order_relaxed);
      } else {
        stats_.errors.fetch_add(1, std::memory_order_relaxed);
      }
      return; // the session ends; the stream closes with it
    }
    buffer_.commit(n);
    read_request();
  }

  // The whole request (header and body) under one deadline from its first byte.
  void read_request() {
    stream_.expires_after(cfg_.read_timeout);
    parser_.emplace();
    parser_->header_limit(header_limit);
    parser_->body_limit(body_limit);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](error_code ec, std::size_t) {
                       self->on_request(ec);
                     });
  }

  void on_request(error_code ec) {
    if (ec) {
      if (is_timeout(ec)) {
        stats_.read_timeouts.fetch_add(1, std::memory_order_relaxed);
      } else if (ec == http::error::end_of_stream) {
        stats_.peer_closed.fetch_add(1, std::memory_order_relaxed);
      } else if (const auto status = status_for_refused(ec)) {
        stats_.bad_requests.fetch_add(1, std::memory_order_relaxed);
        refuse(*status);
      } else {
        stats_.errors.fetch_add(1, std::memory_order_relaxed);
      }
      return;
    }
    const http::request<http::string_body>& req = parser_->get();
    static constexpr std::string_view hello = "Hello, World!\n";
    response_.emplace(http::status::ok, req.version());
    response_->set(http::field::server, "asio_wheel-http_server");
    response_->set(http::field::content_type, "text/plain");
    response_->set("X-Target", req.target());
    // A reply to HEAD names the length a GET's body would have, and carries none of it:
    // bytes after its header would be read as the next reply on the connection.
    if (req.method() != http::verb::head) response_->body() = hello;
    response_->content_length(hello.size());
    response_->keep_alive(req.keep_alive());
    parser_.reset(); // an idle connection keeps no request around
    stream_.expires_after(cfg_.write_timeout);
    http::async_write(stream_, *response_,
                      [self = this->shared_from_this()](error_code ec, std::size_t) {
                        self->on_written(ec);
                      });
  }

  // A write that failed: timed out, or another error.
  void count_write_failure(error_code ec) {
    auto& counter = is_timeout(ec) ? stats_.write_timeouts : stats_.errors;
    counter.fetch_add(1, std::memory_order_relaxed);
  }

  void on_written(error_code ec) {
    if (ec) {
      count_write_failure(ec);
      return;
    }
    stats_.requests.fetch_add(1, std::memory_order_relaxed);
    const bool keep_alive = response_->keep_alive();
    response_.reset();
    if (!keep_alive) {
      error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      return;
    }
    wait_for_request();
  }

  // Answers a request the parser refused, then closes: the parser cannot say where the
  // next request would start. HTTP/1.1: the request's own version may be unknown.
  void refuse(http::status status) {
    parser_.reset();
    response_.emplace(status, 11);
    response_->set(http::field::server, "asio_wheel-http_server");
    response_->set(http::field::content_type, "text/plain");
    response_->body() = std::string(http::obsolete_reason(status)) + "\n";
    response_->keep_alive(false);
    response_->prepare_payload();
    stream_.expires_after(cfg_.write_timeout);
    http::async_write(stream_, *response_,
                      [self = this->shared_from_this()](error_code ec, std::size_t) {
                        self->on_refused(ec);
                      });
  }

  // The client may still be sending the rest of what was refused. Closing with unread
  // bytes would send a reset, which can throw away the answer at the client before it is
  // read (RFC 9112, 9.6: tear-down); so stop sending, and read and drop what comes until
  // the client closes too, for at most read_timeout and drain_limit bytes.
  void on_refused(error_code ec) {
    response_.reset();
    if (ec) {
      count_write_failure(ec);
      return;
    }
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.consume(buffer_.size());
    drained_ = 0;
    stream_.expires_after(cfg_.read_timeout);
    drain();
  }

  void drain() {
    stream_.async_read_some(buffer_.prepare(16 * 1024),
                            [self = this->shared_from_this()](error_code ec, std::size_t n) {
                              // The client's EOF, the deadline or an error: close now.
                              if (ec) return;
                              self->drained_ += n;
                              if (self->drained_ < drain_limit) self->drain();
                            });
  }

  Stream stream_;
  const config& cfg_;
  server_stats& stats_;
  beast::flat_buffer buffer_;
  // A request's body (up to body_limit) is read and dropped: every request is answered.
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
  clock_type::time_point idle_since_{};
  std::size_t drained_ = 0;  // bytes read and dropped after a refused request
};

// ---------------------------------------------------------------------------------------
// The listener: each accepted connection on a strand of its own.

class server {
public:
  // The acceptor has a strand of its own: stop() comes from the signal handler, on any
  // of the pool's threads, while an accept's handler may be starting the next accept.
  server(net::io_context& io, const config& cfg, server_stats& stats)
      : io_(io), cfg_(cfg), stats_(stats), acceptor_(net::make_strand(io)) {
    const tcp::endpoint ep(net::ip::make_address(cfg.address), cfg.port);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(net::socket_base::max_listen_connections);
  }

  tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

  void start() { accept(); }

  // Closes the acceptor on its strand; callable from any thread.
  void stop() {
    net::post(acceptor_.get_executor(), [this] {
      error_code ignored;
      acceptor_.close(ignored);
    });
  }

private:
  void accept() {
    acceptor_.async_accept(net::make_strand(io_), [this](error_code ec, tcp::socket socket) {
      // Runs on the acceptor's strand (its I/O executor). After stop(), no next accept:
      // on a closed acceptor it would fail at once, and again, for ever.
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) {
        stats_.connections.fetch_add(1, std::memory_order_relaxed);
        if (cfg_.stream == stream_kind::wheel) {
          std::make_shared<session<asio_wheel::timed_stream>>(std::move(socket), cfg_, stats_)
              ->start();
        } else {
          std::make_shared<session<beast::tcp_stream>>(std::move(socket), cfg_, stats_)->start();
        }
      } else if (ec == net::error::no_descriptors) {
        // EMFILE: out of descriptors; keep accepting once some close.
        stats_.errors.fetch_add(1, std::memory_order_relaxed);
      }
      accept();
    });
  }

  net::io_context& io_;
  const config& cfg_;
  server_stats& stats_;
  tcp::acceptor acceptor_;
};

// Raises the soft RLIMIT_NOFILE to the hard limit: a server of many connections.
void raise_descriptor_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur != rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// The context, with the wheel installed for the timed stream (the tick from --tick).
void install_wheel(net::io_context& io, const config& cfg) {
  if (cfg.stream != stream_kind::wheel) return;
  asio_wheel::wheel_options o;
  o.tick = cfg.tick;
  asio_wheel::install(io, o);
}

const char* stream_name(stream_kind k) { return k == stream_kind::wheel ? "wheel" : "beast"; }

// ---------------------------------------------------------------------------------------
// Self-test: the server on its own threads, blocking clients on this one.

struct self_test {
  const config& cfg;
  server_stats& stats;
  tcp::endpoint server_ep;
  net::io_context client_io; // the clients' sockets (used blocking, never run)
  int failures = 0;

  void check(bool ok, const std::string& what) {
    std::printf("  %s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok) ++failures;
  }

  tcp::socket connect() {
    tcp::socket s(client_io);
    s.connect(server_ep);
    s.set_option(tcp::no_delay(true));
    return s;
  }

  static std::string request(const std::string& target, bool keep_alive = true) {
    return "GET " + target + " HTTP/1.1\r\nHost: self-test\r\n" +
           (keep_alive ? "" : "Connection: close\r\n") + "\r\n";
  }

  // Reads one response; false on any error.
  static bool read_response(tcp::socket& s, beast::flat_buffer& buf, std::string* target) {
    http::response<http::string_body> res;
    error_code ec;
    http::read(s, buf, res, ec);
    if (ec || res.result() != http::status::ok || res.body() != "Hello, World!\n") return false;
    if (target) *target = std::string(res["X-Target"]);
    return true;
  }

  // Blocks until the server closes `s`: true for EOF or a reset.
  static bool wait_closed(tcp::socket& s) {
    char c;
    error_code ec;
    for (;;) {
      s.read_some(net::buffer(&c, 1), ec);
      if (ec) return ec == net::error::eof || ec == net::error::connection_reset;
    }
  }

  void keep_alive() {
    std::printf("keep-alive: three requests on one connection\n");
    const auto before = stats.connections.load();
    tcp::socket s = connect();
    beast::flat_buffer buf;
    bool ok = true;
    for (int i = 0; i < 3 && ok; ++i) {
      net::write(s, net::buffer(request("/k" + std::to_string(i))));
      std::string target;
      ok = read_response(s, buf, &target) && target == "/k" + std::to_string(i);
    }
    check(ok, "three responses, each for its request");
    check(stats.connections.load() - before == 1, "one connection accepted for them");
    net::write(s, net::buffer(request("/close", false)));
    check(read_response(s, buf, nullptr) && wait_closed(s),
          "Connection: close is answered, then closed");
  }

  void pipelined() {
    std::printf("pipelining: three requests in one write\n");
    tcp::socket s = connect();
    net::write(s, net::buffer(request("/p1") + request("/p2") + request("/p3")));
    beast::flat_buffer buf;
    std::string order;
    bool ok = true;
    for (int i = 0; i < 3 && ok; ++i) {
      std::string target;
      ok = read_response(s, buf, &target);
      order += target;
    }
    check(ok && order == "/p1/p2/p3", "answered in order (" + order + ")");
  }

  void bodies_and_head() {
    std::printf("bodies and HEAD: a POST with a length, a chunked POST, a HEAD, then a GET\n");
    tcp::socket s = connect();
    beast::flat_buffer buf;
    std::string target;
    net::write(s, net::buffer("POST /b1 HTTP/1.1\r\nHost: self-test\r\n"
                              "Content-Length: 5\r\n\r\nhello"s));
    check(read_response(s, buf, &target) && target == "/b1", "a body with a length: answered");
    net::write(s, net::buffer("POST /b2 HTTP/1.1\r\nHost: self-test\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"s));
    check(read_response(s, buf, &target) && target == "/b2", "a chunked body: answered");
    // A HEAD reply's Content-Length is the GET's; no body follows it. Were one sent, the
    // GET's reply would be read from the middle of it.
    net::write(s, net::buffer("HEAD /h HTTP/1.1\r\nHost: self-test\r\n\r\n"s));
    http::response_parser<http::empty_body> head;
    head.skip(true);
    error_code ec;
    http::read(s, buf, head, ec);
    check(!ec && head.get().result() == http::status::ok &&
              head.get()[http::field::content_length] == "14",
          "HEAD: answered with the GET's length");
    net::write(s, net::buffer(request("/after-head")));
    check(read_response(s, buf, &target) && target == "/after-head",
          "the reply after HEAD's is read whole: HEAD's carried no body");
  }

  void idle() {
    constexpr int after_request = 40, silent = 10;
    std::printf("idle: %d connections idle after a request, %d that never send (idle %.0f ms)\n",
                after_request, silent, to_ms(cfg.idle));
    const auto closed_before = stats.idle_closed.load();
    std::vector<tcp::socket> conns;
    for (int i = 0; i < silent; ++i) conns.push_back(connect());
    bool served = true;
    for (int i = 0; i < after_request; ++i) {
      tcp::socket s = connect();
      beast::flat_buffer buf;
      net::write(s, net::buffer(request("/i")));
      served = served && read_response(s, buf, nullptr);
      conns.push_back(std::move(s));
    }
    check(served, "every request answered");
    const auto start = clock_type::now();
    int closed = 0;
    for (tcp::socket& s : conns) closed += wait_closed(s) ? 1 : 0;
    const auto took = clock_type::now() - start;
    check(closed == after_request + silent, std::to_string(closed) + " of " +
                                                std::to_string(after_request + silent) +
                                                " closed by the server");
    check(took < cfg.idle + 5s, "all within idle + 5 s of slack (" +
                                    std::to_string(static_cast<int>(to_ms(took))) + " ms)");
    // The server counts its idle closes itself; give its threads a moment to count the
    // last ones (they closed the sockets before counting) without any fixed wait.
    const auto want = closed_before + static_cast<std::uint64_t>(after_request + silent);
    while (stats.idle_closed.load() < want && clock_type::now() - start < cfg.idle + 10s) {
      std::this_thread::yield();
    }
    check(stats.idle_closed.load() == want, "the server counted them as idle");
    check(stats.idle_early.load() == 0, "none closed before its idle time (server's clock)");
    std::printf("  server: %.3f ms worst delay past the idle deadline\n",
                static_cast<double>(stats.idle_late_max_ns.load()) / 1e6);
  }

  // Sends a request the server must refuse; true if the answer has `want` status and
  // "Connection: close", and the server closes the connection after it (once this side
  // has stopped sending, as a client does once it has its answer).
  bool refused(const std::string& req, http::status want) {
    tcp::socket s = connect();
    net::write(s, net::buffer(req));
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    error_code ec;
    http::read(s, buf, res, ec);
    if (ec) {
      std::printf("  no answer: %s\n", ec.message().c_str());
      return false;
    }
    std::printf("  answer: %u %s\n", res.result_int(), std::string(res.reason()).c_str());
    s.shutdown(tcp::socket::shutdown_send, ec);
    return res.result() == want && !res.keep_alive() && wait_closed(s);
  }

  void bad_requests() {
    std::printf("bad requests: malformed, header over %u bytes, body over %llu bytes\n",
                header_limit, static_cast<unsigned long long>(body_limit));
    const auto before = stats.bad_requests.load();
    check(refused("GET /bad HTTP/1.1\r\nHost: self-test\r\nno colon here\r\n\r\n"s,
                  http::status::bad_request),
          "a malformed header line: 400, then closed");
    check(refused("GET /big HTTP/1.1\r\nHost: self-test\r\nX-Big: "s +
                      std::string(header_limit + 4096, 'a') + "\r\n\r\n",
                  http::status::request_header_fields_too_large),
          "a header over the limit: 431, then closed");
    // Part of the body follows the header: the server has it unread when it answers.
    check(refused("POST /big HTTP/1.1\r\nHost: self-test\r\nContent-Length: "s +
                      std::to_string(body_limit + 1) + "\r\n\r\n" +
                      std::string(64 * 1024, 'b'),
                  http::status::payload_too_large),
          "a body over the limit: 413, then closed");
    const auto deadline = clock_type::now() + 10s;
    while (stats.bad_requests.load() - before < 3 && clock_type::now() < deadline) {
      std::this_thread::yield();
    }
    check(stats.bad_requests.load() - before == 3, "counted as bad requests");
  }

  void slow_header() {
    std::printf("slow header: one byte every 20 ms, never ending (read timeout %.0f ms)\n",
                to_ms(cfg.read_timeout));
    const auto timeouts_before = stats.read_timeouts.load();
    tcp::socket s = connect();
    const std::string head = "GET /slow HTTP/1.1\r\nHost: self-test\r\nX-Slow: ";
    const auto start = clock_type::now(); // before the first byte leaves
    net::write(s, net::buffer(head.substr(0, 1)));
    bool cut = false;
    std::size_t i = 1;
    while (clock_type::now() - start < cfg.read_timeout + 5s) {
      std::this_thread::sleep_for(20ms);
      const char c = i < head.size() ? head[i] : 'a';
      ++i;
      error_code ec;
      net::write(s, net::buffer(&c, 1), ec);
      if (ec) {
        cut = true;
        break;
      }
    }
    const auto took = clock_type::now() - start;
    check(cut, "cut off (" + std::to_string(static_cast<int>(to_ms(took))) + " ms, " +
                   std::to_string(i) + " bytes sent)");
    check(took >= cfg.read_timeout, "not before the read timeout: the idle deadline no "
                                    "longer applies once a request has started");
    const auto deadline = clock_type::now() + 10s;
    while (stats.read_timeouts.load() == timeouts_before && clock_type::now() < deadline) {
      std::this_thread::yield();
    }
    check(stats.read_timeouts.load() - timeouts_before == 1, "counted as a read timeout");
  }
};

int run_self_test(const config& cfg) {
  std::printf("http_server self-test: stream %s, threads %u, idle %.0f ms, read timeout "
              "%.0f ms, write timeout %.0f ms\n",
              stream_name(cfg.stream), cfg.threads, to_ms(cfg.idle), to_ms(cfg.read_timeout),
              to_ms(cfg.write_timeout));
  // A hang is a failure, not a stuck build: give up after a generous minute.
  std::mutex m;
  std::condition_variable cv;
  bool finished = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_for(lock, 60s, [&] { return finished; })) {
      std::fprintf(stderr, "http_server: self-test hung for 60 s\n");
      std::_Exit(3);
    }
  });

  net::io_context io(static_cast<int>(cfg.threads));
  install_wheel(io, cfg);
  server_stats stats;
  server srv(io, cfg, stats);
  srv.start();
  std::vector<std::thread> runners;
  for (unsigned t = 0; t < cfg.threads; ++t) runners.emplace_back([&io] { io.run(); });

  self_test t{cfg, stats, srv.local_endpoint(), {}, 0};
  t.keep_alive();
  t.pipelined();
  t.bodies_and_head();
  t.bad_requests();
  t.idle();
  t.slow_header();

  net::post(io, [&srv] { srv.stop(); });
  for (auto& r : runners) r.join();
  stats.print(stdout);
  {
    std::lock_guard<std::mutex> lock(m);
    finished = true;
  }
  cv.notify_all();
  watchdog.join();
  if (t.failures != 0) {
    std::printf("self-test FAILED: %d check(s)\n", t.failures);
    return 1;
  }
  std::printf("self-test passed\n");
  return 0;
}

int run_server(const config& cfg) {
  raise_descriptor_limit();
  net::io_context io(static_cast<int>(cfg.threads));
  install_wheel(io, cfg);
  server_stats stats;
  std::optional<server> srv;
  try {
    srv.emplace(io, cfg, stats);
  } catch (const std::exception& e) {
    std::cerr << "http_server: cannot listen on " << cfg.address << ":" << cfg.port << ": "
              << e.what() << "\n";
    return 1;
  }
  srv->start();
  net::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](error_code ec, int) {
    if (ec) return;
    srv->stop();
    io.stop(); // connections still open are dropped with the context
  });
  const tcp::endpoint ep = srv->local_endpoint();
  std::printf("http_server: listening on %s:%u (stream %s, threads %u, idle %.0f ms, read "
              "timeout %.0f ms, write timeout %.0f ms)\n",
              ep.address().to_string().c_str(), static_cast<unsigned>(ep.port()),
              stream_name(cfg.stream), cfg.threads, to_ms(cfg.idle), to_ms(cfg.read_timeout),
              to_ms(cfg.write_timeout));
  std::fflush(stdout);
  std::vector<std::thread> runners;
  for (unsigned t = 1; t < cfg.threads; ++t) runners.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& r : runners) r.join();
  stats.print(stdout);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  const config cfg = parse_args(argc, argv);
  try {
    return cfg.self_test ? run_self_test(cfg) : run_server(cfg);
  } catch (const std::exception& e) {
    std::cerr << "http_server: " << e.what() << "\n";
    return 1;
  }
}
