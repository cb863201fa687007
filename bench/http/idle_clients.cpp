// http_idle_clients: opens N keep-alive connections to an HTTP/1.1 server, makes one
// request on each (or none), then leaves them idle and measures how long after its last
// activity the server closes each one. The idle half of W10 (scripts/bench --http).
//
//   http_idle_clients --port P [--address A] [--connections N] [--no-request]
//                     [--parallel K] [--give-up S]
//
// Prints "idle_clients: all N idle" once every connection is idle (its response read,
// or its connect done with --no-request), so that a script can sample the server then,
// and at the end one line of key=value results:
//   connections, idle (connections that got that far), reaped (closed by the server:
//   EOF or reset), unreaped (still open after --give-up seconds), errors (connect,
//   write or response failures, and closes other than EOF or a reset), of them failed
//   (before becoming idle: not the server's to reap) and bad_closes, and
//   reap_ms_min/p50/p99/max: from the last activity (the end of the response, or the
//   connect) to the close, in milliseconds. Before that line, if there was an error,
//   "idle_clients: first error: STAGE: MESSAGE" (STAGE: connect, request, response, close).
// Exit status: 0 if every connection became idle and was reaped, 1 otherwise.
//
// One thread, Boost.Asio; at most --parallel (default 256) connects in flight, so that
// the server's listen backlog does not overflow into SYN retries.
// A Boost.Asio program, not part of standalone builds.
// asio_wheel: requires Boost

#include <boost/asio.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using clock_type = std::chrono::steady_clock;

namespace {

struct config {
  std::string address = "127.0.0.1";
  unsigned short port = 0;
  std::size_t connections = 10000;
  std::size_t parallel = 256;
  bool request = true;
  int give_up_seconds = 60;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::cerr << "http_idle_clients: " << what << " (try --help)\n";
  std::exit(2);
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
  auto value = [&](int& i) -> const char* {
    if (i + 1 >= argc) usage_error(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << "usage: http_idle_clients --port P [--address A] [--connections N] "
                   "[--no-request] [--parallel K] [--give-up S]\n"
                   "Opens N connections (default 10000), makes one request on each unless "
                   "--no-request, then\nmeasures how long after its last activity the server "
                   "closes each (see the top of\nbench/http/idle_clients.cpp).\n";
      std::exit(0);
    } else if (a == "--address") {
      cfg.address = value(i);
    } else if (a == "--port") {
      cfg.port = static_cast<unsigned short>(parse_count(a, value(i), 65535));
    } else if (a == "--connections") {
      cfg.connections = parse_count(a, value(i), 1000000);
    } else if (a == "--parallel") {
      cfg.parallel = std::max<std::size_t>(1, parse_count(a, value(i), 100000));
    } else if (a == "--no-request") {
      cfg.request = false;
    } else if (a == "--give-up") {
      cfg.give_up_seconds = static_cast<int>(parse_count(a, value(i), 86400));
    } else {
      usage_error("unknown argument '" + std::string(a) + "'");
    }
  }
  if (cfg.port == 0) usage_error("--port is required");
  return cfg;
}

void raise_descriptor_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

class clients {
public:
  clients(net::io_context& io, const config& cfg)
      : io_(io), cfg_(cfg), target_(net::ip::make_address(cfg.address), cfg.port),
        give_up_(io) {
    conns_.reserve(cfg.connections);
    for (std::size_t i = 0; i < cfg.connections; ++i) conns_.push_back(std::make_unique<conn>(io));
  }

  void start() {
    const std::size_t first = std::min(cfg_.parallel, conns_.size());
    for (std::size_t i = 0; i < first; ++i) connect_next();
    if (conns_.empty()) finish_idle_phase();
  }

  int report() const {
    std::vector<double> ms;
    ms.reserve(conns_.size());
    std::size_t idle = 0, reaped = 0;
    for (const auto& c : conns_) {
      if (c->idle) ++idle;
      if (c->reaped) {
        ++reaped;
        ms.push_back(std::chrono::duration<double, std::milli>(c->closed_at - c->idle_since).count());
      }
    }
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) {
      if (ms.empty()) return 0.0;
      const auto i = static_cast<std::size_t>(q * static_cast<double>(ms.size() - 1) + 0.5);
      return ms[std::min(i, ms.size() - 1)];
    };
    const std::size_t unreaped = idle - reaped;
    if (!first_error_.empty()) std::printf("idle_clients: first error: %s\n", first_error_.c_str());
    std::printf("idle_clients: connections=%zu idle=%zu reaped=%zu unreaped=%zu errors=%zu "
                "failed=%zu bad_closes=%zu "
                "reap_ms_min=%.1f reap_ms_p50=%.1f reap_ms_p99=%.1f reap_ms_max=%.1f\n",
                conns_.size(), idle, reaped, unreaped, failed_ + bad_closes_, failed_, bad_closes_,
                ms.empty() ? 0.0 : ms.front(),
                at(0.5), at(0.99), ms.empty() ? 0.0 : ms.back());
    std::fflush(stdout);
    return idle == conns_.size() && reaped == conns_.size() ? 0 : 1;
  }

private:
  struct conn {
    explicit conn(net::io_context& io) : socket(io) {}
    tcp::socket socket;
    std::string in;
    char byte = 0;
    bool idle = false;
    bool reaped = false;
    clock_type::time_point idle_since{}, closed_at{};
  };

  void connect_next() {
    if (next_ == conns_.size()) return;
    conn& c = *conns_[next_++];
    c.socket.async_connect(target_, [this, &c](error_code ec) {
      if (ec) {
        fail(c, "connect", ec);
      } else if (cfg_.request) {
        send_request(c);
      } else {
        become_idle(c);
      }
      connect_next(); // keep `parallel` connects in flight
    });
  }

  void send_request(conn& c) {
    static const std::string request = "GET /idle HTTP/1.1\r\nHost: bench\r\n\r\n";
    net::async_write(c.socket, net::buffer(request), [this, &c](error_code ec, std::size_t) {
      if (ec) return fail(c, "request", ec);
      read_response(c);
    });
  }

  // Reads until the header and Content-Length bytes of body have arrived.
  void read_response(conn& c) {
    const std::size_t old = c.in.size();
    c.in.resize(old + 1024);
    c.socket.async_read_some(net::buffer(&c.in[old], 1024),
                             [this, &c, old](error_code ec, std::size_t n) {
                               c.in.resize(old + n);
                               if (ec) return fail(c, "response", ec);
                               if (response_complete(c.in)) {
                                 become_idle(c);
                               } else {
                                 read_response(c);
                               }
                             });
  }

  static bool response_complete(const std::string& in) {
    const std::size_t end = in.find("\r\n\r\n");
    if (end == std::string::npos) return false;
    std::size_t length = 0;
    std::string header = in.substr(0, end);
    std::transform(header.begin(), header.end(), header.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    const std::size_t at = header.find("\r\ncontent-length:");
    if (at != std::string::npos) length = std::strtoul(header.c_str() + at + 17, nullptr, 10);
    return in.size() >= end + 4 + length;
  }

  // From now on, the server's idle deadline runs: wait for it to close the connection.
  void become_idle(conn& c) {
    c.idle = true;
    c.idle_since = clock_type::now();
    std::string().swap(c.in);
    ++idle_;
    if (idle_phase_done()) finish_idle_phase();
    c.socket.async_read_some(net::buffer(&c.byte, 1), [this, &c](error_code ec, std::size_t) {
      c.closed_at = clock_type::now();
      // EOF or a reset: the server closed it. Data would be a protocol error.
      c.reaped = ec == net::error::eof || ec == net::error::connection_reset;
      if (!c.reaped) {
        ++bad_closes_;
        note_error("close", ec);
      }
      ++closed_;
      if (idle_phase_done() && closed_ == idle_) give_up_.cancel();
    });
  }

  // A connection that failed before it became idle: it is not the server's to reap.
  void fail(conn& c, const char* stage, const error_code& ec) {
    ++failed_;
    note_error(stage, ec);
    error_code ignored;
    c.socket.close(ignored);
    if (idle_phase_done()) finish_idle_phase();
  }

  // Keeps the first error's stage and message, for the report: a count alone does not
  // say whether the client, the network or the server was at fault. No error code means
  // a bad close by data: a byte arrived on a connection whose response was complete.
  void note_error(const char* stage, const error_code& ec) {
    if (first_error_.empty())
      first_error_ = std::string(stage) + ": " + (ec ? ec.message() : "data after the response");
  }

  // Every connection is idle or failed.
  bool idle_phase_done() const { return idle_ + failed_ == conns_.size(); }

  void finish_idle_phase() {
    std::printf("idle_clients: all %zu idle (%zu failed)\n", idle_, failed_);
    std::fflush(stdout);
    if (closed_ == idle_) return; // nothing left to wait for
    give_up_.expires_after(std::chrono::seconds(cfg_.give_up_seconds));
    give_up_.async_wait([this](error_code ec) {
      if (!ec) io_.stop(); // some are still open: they are reported unreaped
    });
  }

  net::io_context& io_;
  const config& cfg_;
  tcp::endpoint target_;
  net::steady_timer give_up_;
  std::vector<std::unique_ptr<conn>> conns_;
  std::size_t next_ = 0;       // the next connection to connect
  std::size_t idle_ = 0;       // connections that became idle
  std::size_t failed_ = 0;     // ... that failed before that
  std::size_t closed_ = 0;     // idle ones whose close was seen
  std::size_t bad_closes_ = 0; // ... with something else than EOF or a reset
  std::string first_error_;    // "stage: message" of the first failure or bad close
};

} // namespace

int main(int argc, char** argv) {
  const config cfg = parse_args(argc, argv);
  raise_descriptor_limit();
  net::io_context io(1);
  clients c(io, cfg);
  c.start();
  io.run();
  return c.report();
}
