// request_deadline: per-request deadlines on coroutine I/O with asio_wheel::cancel_after.
//
// The protocol is one line per request: "sleep <ms>\n" makes the server's handler work for
// that long (an asio_wheel::timer wait), then it answers "ok\n". Deadlines, all through
// asio_wheel::cancel_after(d, use_awaitable), which emits the operation's cancellation slot
// if it has not completed in time:
//
//   server, work      the handler's wait gets --deadline; past it the server answers
//                     "timeout\n" instead of "ok\n"
//   server, read      a connection that sends no request for --idle is closed (the
//                     deadline is on async_read_until on the socket)
//   client, read      the client waits at most --client-deadline for a reply (again
//                     async_read_until on the socket); after a miss the stream is out of
//                     step, so it closes the connection and reconnects for the next request
//
// A request line is at most --max-line bytes: the server buffers no more than that for a
// line that has not ended, so a client that never sends a newline cannot grow its memory,
// with or without --idle (the idle deadline limits time, not bytes). A longer line is
// answered "error: ..." and the connection closed.
//
//   request_deadline server [--port P] [--deadline MS] [--idle MS] [--max-line BYTES]
//   request_deadline client --port P [--client-deadline MS] [--requests 20,900,...]
//   request_deadline --self-test

// Built only in C++20 builds, and only with Boost (examples/CMakeLists.txt reads these):
// asio_wheel: requires C++20
// asio_wheel: requires Boost

#include <asio_wheel.hpp>

#include <boost/asio.hpp>

// The whole program is coroutines (the marker above keeps it out of C++17 builds); say so
// plainly, as the first error, on a compiler without them.
#if !defined(__cpp_impl_coroutine) || !defined(BOOST_ASIO_HAS_CO_AWAIT)
#error "request_deadline needs C++20 coroutines (__cpp_impl_coroutine, BOOST_ASIO_HAS_CO_AWAIT)"
#endif

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace net = boost::asio;
using tcp = net::ip::tcp;
using net::awaitable;
using net::use_awaitable;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

namespace {

void print_help() {
  std::cout << R"(usage: request_deadline MODE [options]

Per-request deadlines with asio_wheel::cancel_after on coroutine socket operations.
A request is a line "sleep <ms>"; the server works that long, then answers "ok".

modes:
  server          serve on 127.0.0.1 until SIGINT/SIGTERM
    --port P            listen port (default 0: ephemeral, printed)
    --deadline MS       per-request work deadline; past it the answer is "timeout"
                        (default 250; 0 = no deadline)
    --idle MS           close connections that send no request for this long
                        (default 5000; 0 = never)
    --max-line BYTES    longest request line, newline included (default 1024, 15 to
                        1048576); a longer one is answered "error: ..." and the
                        connection closed. Applies with or without --idle
  client          send requests to a server on 127.0.0.1 and print the outcomes
    --port P            server port (required)
    --client-deadline MS  wait at most this long for each reply (default 1000; 0 = forever)
    --requests LIST     comma-separated sleep times in ms (default 20,900,10,1500,30)
  --self-test     run servers and clients in this process and check that fast requests
                  succeed, slow ones time out at the server or at the client, an idle
                  connection is closed by the server, and a line over --max-line is
                  refused without an idle deadline; exit status 0 if all hold
  --help          this text
)";
}

// A day: longer than any deadline or request here, far from the clock's limit (a larger
// count of milliseconds would overflow as the clock's nanoseconds).
constexpr long long max_ms = 86'400'000;

// The longest request the protocol has, newline included: "sleep 86400000\n". A cap on
// the line below this would refuse good requests.
constexpr std::size_t longest_request = sizeof("sleep 86400000\n") - 1;
static_assert(max_ms == 86'400'000, "longest_request spells out max_ms");
// The default cap on a request line, and the largest one allowed: room for any request
// and some slack for a client's mistakes, while a connection holds at most this much.
constexpr std::size_t default_max_line = 1024;
constexpr long long max_max_line = 1024 * 1024;

// Parses a non-negative integer argument no larger than max, or exits with a message.
long long parse_ms(std::string_view flag, std::string_view text, long long max = max_ms) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || *end != '\0' || v < 0) {
    std::cerr << "request_deadline: bad value for " << flag << ": '" << text << "'\n";
    std::exit(2);
  }
  if (v > max) {
    std::cerr << "request_deadline: " << flag << " out of range (at most " << max << ")\n";
    std::exit(2);
  }
  return v;
}

double ms_since(steady::time_point t0) {
  return std::chrono::duration<double, std::milli>(steady::now() - t0).count();
}

// ---------------------------------------------------------------------------------------
// Server

struct server_config {
  unsigned short port = 0;
  milliseconds deadline = 250ms;  // 0: none
  milliseconds idle = 5000ms;     // 0: none
  std::size_t max_line = default_max_line;  // bytes buffered for one request line, at most
  bool verbose = true;
};

class server {
 public:
  server(net::io_context& ctx, server_config cfg)
      : ctx_(ctx),
        cfg_(cfg),
        acceptor_(ctx, tcp::endpoint(net::ip::address_v4::loopback(), cfg.port)) {}

  unsigned short port() const { return acceptor_.local_endpoint().port(); }

  void start() {
    net::co_spawn(ctx_, accept_loop(), net::detached);
  }

  // Closes the acceptor and every connection; their coroutines then finish.
  void stop() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    for (auto* c : conns_) c->close();
  }

 private:
  // One connection: its socket and the timer its handler works on.
  struct connection {
    connection(tcp::socket s) : socket(std::move(s)), work(socket.get_executor()) {}
    void close() {
      boost::system::error_code ignored;
      socket.close(ignored);
      work.cancel();
    }
    tcp::socket socket;
    asio_wheel::timer work;
  };

  awaitable<void> accept_loop() {
    for (;;) {
      tcp::socket s(ctx_);
      try {
        co_await acceptor_.async_accept(s, use_awaitable);
      } catch (const boost::system::system_error&) {
        co_return;  // acceptor closed
      }
      net::co_spawn(ctx_, serve(std::make_shared<connection>(std::move(s))), net::detached);
    }
  }

  awaitable<void> serve(std::shared_ptr<connection> c) {
    conns_.insert(c.get());
    struct unregister {
      std::set<connection*>& set;
      connection* c;
      ~unregister() { set.erase(c); }
    } guard{conns_, c.get()};

    std::string buf;
    for (;;) {
      std::size_t n = 0;
      bool line_too_long = false;
      try {
        // The buffer may not grow past max_line: a line with no newline by then ends the
        // read with not_found, whatever the idle deadline (without one, nothing else would
        // stop a client from filling the server's memory).
        auto line = net::dynamic_buffer(buf, cfg_.max_line);
        // Deadline on a socket read: a connection that sends no request in time is closed.
        if (cfg_.idle > 0ms)
          n = co_await net::async_read_until(c->socket, line, '\n',
                                             asio_wheel::cancel_after(cfg_.idle, use_awaitable));
        else
          n = co_await net::async_read_until(c->socket, line, '\n', use_awaitable);
      } catch (const boost::system::system_error& e) {
        if (e.code() == net::error::not_found) {
          line_too_long = true;  // answered below: no co_await inside a handler
        } else {
          if (e.code() == net::error::operation_aborted && c->socket.is_open() && cfg_.verbose)
            std::printf("server: no request for %lld ms, closing the connection\n",
                        static_cast<long long>(cfg_.idle.count()));
          c->close();
          co_return;
        }
      }
      if (line_too_long) {
        // The rest of the line cannot be told from the next request, so the connection
        // cannot go on: say why, then close it.
        if (cfg_.verbose)
          std::printf("server: request line over %zu bytes, closing the connection\n",
                      cfg_.max_line);
        const std::string reply =
            "error: request line longer than " + std::to_string(cfg_.max_line) + " bytes\n";
        boost::system::error_code ignored;
        co_await net::async_write(c->socket, net::buffer(reply),
                                  net::redirect_error(use_awaitable, ignored));
        c->close();
        co_return;
      }
      std::string line = buf.substr(0, n - 1);
      buf.erase(0, n);

      std::string reply;
      long long ms = -1;
      if (line.rfind("sleep ", 0) == 0) {
        char* end = nullptr;
        errno = 0;
        ms = std::strtoll(line.c_str() + 6, &end, 10);
        // A client's number is untrusted: past max_ms it would overflow as nanoseconds.
        if (errno != 0 || end == line.c_str() + 6 || *end != '\0' || ms < 0 || ms > max_ms)
          ms = -1;
      }
      if (ms < 0) {
        reply = "error: expected 'sleep <ms>', ms from 0 to " + std::to_string(max_ms) + "\n";
      } else {
        // The work: a wait on the wheel. With a deadline, cancel_after cuts it short.
        c->work.expires_after(milliseconds(ms));
        try {
          if (cfg_.deadline > 0ms)
            co_await c->work.async_wait(asio_wheel::cancel_after(cfg_.deadline, use_awaitable));
          else
            co_await c->work.async_wait(use_awaitable);
          reply = "ok\n";
        } catch (const boost::system::system_error& e) {
          if (e.code() != net::error::operation_aborted || !c->socket.is_open()) co_return;
          reply = "timeout\n";
        }
      }
      try {
        co_await net::async_write(c->socket, net::buffer(reply), use_awaitable);
      } catch (const boost::system::system_error&) {
        c->close();  // the client went away (e.g. after its own deadline)
        co_return;
      }
    }
  }

  net::io_context& ctx_;
  server_config cfg_;
  tcp::acceptor acceptor_;
  std::set<connection*> conns_;  // live connections, for stop()
};

// ---------------------------------------------------------------------------------------
// Client

enum class outcome { ok, server_timeout, client_deadline, error };

const char* to_string(outcome o) {
  switch (o) {
    case outcome::ok: return "ok";
    case outcome::server_timeout: return "timeout (server deadline)";
    case outcome::client_deadline: return "no reply (client deadline)";
    case outcome::error: return "error";
  }
  return "?";
}

struct result {
  long long sleep_ms;
  outcome what;
  double elapsed_ms;
};

// Sends each request in turn on one connection (a new one after a client-side deadline)
// and returns the outcomes.
awaitable<std::vector<result>> run_client(tcp::endpoint ep, std::vector<long long> sleeps,
                                          milliseconds client_deadline, bool verbose) {
  auto ex = co_await net::this_coro::executor;
  std::vector<result> results;
  tcp::socket sock(ex);
  std::string buf;
  for (long long ms : sleeps) {
    auto t0 = steady::now();
    result r{ms, outcome::error, 0};
    try {
      if (!sock.is_open()) {
        buf.clear();
        co_await sock.async_connect(ep, use_awaitable);
      }
      std::string req = "sleep " + std::to_string(ms) + "\n";
      co_await net::async_write(sock, net::buffer(req), use_awaitable);
      std::size_t n = 0;
      try {
        // Deadline on a socket read: the reply must arrive within client_deadline.
        if (client_deadline > 0ms)
          n = co_await net::async_read_until(sock, net::dynamic_buffer(buf), '\n',
                                             asio_wheel::cancel_after(client_deadline,
                                                                      use_awaitable));
        else
          n = co_await net::async_read_until(sock, net::dynamic_buffer(buf), '\n',
                                             use_awaitable);
      } catch (const boost::system::system_error& e) {
        if (e.code() != net::error::operation_aborted) throw;
        r.what = outcome::client_deadline;
        // A late reply would still arrive on this stream: start afresh.
        boost::system::error_code ignored;
        sock.close(ignored);
      }
      if (r.what != outcome::client_deadline) {
        std::string reply = buf.substr(0, n - 1);
        buf.erase(0, n);
        r.what = reply == "ok"        ? outcome::ok
                 : reply == "timeout" ? outcome::server_timeout
                                      : outcome::error;
      }
    } catch (const boost::system::system_error& e) {
      if (verbose) std::printf("client: %s\n", e.code().message().c_str());
      r.what = outcome::error;
      boost::system::error_code ignored;
      sock.close(ignored);
    }
    r.elapsed_ms = ms_since(t0);
    if (verbose)
      std::printf("client: sleep %5lld ms -> %-28s after %7.1f ms%s\n", ms, to_string(r.what),
                  r.elapsed_ms,
                  r.what == outcome::client_deadline ? ", reconnecting" : "");
    results.push_back(r);
  }
  boost::system::error_code ignored;
  sock.close(ignored);
  co_return results;
}

// Connects, sends nothing, and returns how long until the server closed the connection.
awaitable<double> idle_probe(tcp::endpoint ep) {
  auto ex = co_await net::this_coro::executor;
  tcp::socket sock(ex);
  auto t0 = steady::now();
  co_await sock.async_connect(ep, use_awaitable);
  char c;
  boost::system::error_code ec;
  co_await sock.async_read_some(net::buffer(&c, 1), net::redirect_error(use_awaitable, ec));
  co_return ms_since(t0);
}

// Sends each line as is on one connection and returns the server's reply to each: the
// self-test's malformed and out-of-range requests, which run_client cannot send.
awaitable<std::vector<std::string>> raw_requests(tcp::endpoint ep,
                                                 std::vector<std::string> lines) {
  auto ex = co_await net::this_coro::executor;
  tcp::socket sock(ex);
  co_await sock.async_connect(ep, use_awaitable);
  std::string buf;
  std::vector<std::string> replies;
  for (const auto& line : lines) {
    const std::string req = line + "\n";
    co_await net::async_write(sock, net::buffer(req), use_awaitable);
    const std::size_t n =
        co_await net::async_read_until(sock, net::dynamic_buffer(buf), '\n', use_awaitable);
    replies.push_back(buf.substr(0, n - 1));
    buf.erase(0, n);
  }
  co_return replies;
}

// Sends `size` bytes with no newline, a line the server's cap cuts off when `size` is the
// cap, and returns the server's reply line ("" if none came within `wait`) and whether
// the server then closed the connection (within `wait` again).
awaitable<std::pair<std::string, bool>> overlong_line(tcp::endpoint ep, std::size_t size,
                                                      milliseconds wait) {
  auto ex = co_await net::this_coro::executor;
  tcp::socket sock(ex);
  co_await sock.async_connect(ep, use_awaitable);
  const std::string line(size, 'x');
  co_await net::async_write(sock, net::buffer(line), use_awaitable);
  std::string buf;
  boost::system::error_code ec;
  const std::size_t n = co_await net::async_read_until(
      sock, net::dynamic_buffer(buf), '\n',
      asio_wheel::cancel_after(wait, net::redirect_error(use_awaitable, ec)));
  if (ec) co_return std::pair<std::string, bool>{"", false};
  std::string reply = buf.substr(0, n - 1);
  buf.erase(0, n);
  char c;
  co_await sock.async_read_some(
      net::buffer(&c, 1), asio_wheel::cancel_after(wait, net::redirect_error(use_awaitable, ec)));
  co_return std::pair<std::string, bool>{reply, buf.empty() && ec == net::error::eof};
}

std::vector<long long> parse_list(std::string_view text) {
  std::vector<long long> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    auto comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    out.push_back(parse_ms("--requests", text.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Self-test

int self_test() {
  // Wall-clock checks on a real socket: the lower bounds are strict (a deadline never
  // fires early), the upper bounds allow this much scheduling slack on a busy machine.
  constexpr double slack_ms = 200;
  const milliseconds server_deadline = 250ms, client_deadline = 250ms, idle = 400ms;
  const std::vector<long long> mix = {10, 700, 20, 1000, 5};

  net::io_context ctx(1);
  server with_deadline(ctx, {0, server_deadline, idle, default_max_line, true});
  server without_deadline(ctx, {0, 0ms, idle, default_max_line, true});
  // No idle deadline: only the line cap keeps a line with no newline from growing.
  server without_idle(ctx, {0, server_deadline, 0ms, default_max_line, true});
  with_deadline.start();
  without_deadline.start();
  without_idle.start();
  auto ep_a = tcp::endpoint(net::ip::address_v4::loopback(), with_deadline.port());
  auto ep_b = tcp::endpoint(net::ip::address_v4::loopback(), without_deadline.port());
  auto ep_c = tcp::endpoint(net::ip::address_v4::loopback(), without_idle.port());

  // A number past what milliseconds can hold as the clock's nanoseconds, one past the
  // server's limit, none at all, and a good request on the same connection after them.
  const std::vector<std::string> bad_lines = {"sleep 99999999999999999999", "sleep 86400001",
                                              "sleep", "sleep 5"};
  std::vector<result> server_side, client_side;
  std::vector<std::string> bad_replies;
  std::vector<std::string> at_cap_replies;
  std::pair<std::string, bool> overlong{"", false};
  double idle_closed_after = -1;
  net::co_spawn(
      ctx,
      [&]() -> awaitable<void> {
        std::printf("== server-side deadline %lld ms on the handler's work\n",
                    static_cast<long long>(server_deadline.count()));
        server_side = co_await run_client(ep_a, mix, 0ms, true);
        std::printf("== client-side deadline %lld ms on reading the reply (server without "
                    "deadline)\n",
                    static_cast<long long>(client_deadline.count()));
        client_side = co_await run_client(ep_b, mix, client_deadline, true);
        std::printf("== malformed and out-of-range requests, then a good one\n");
        bad_replies = co_await raw_requests(ep_a, bad_lines);
        for (std::size_t i = 0; i < bad_replies.size(); ++i)
          std::printf("client: '%s' -> '%s'\n", bad_lines[i].c_str(), bad_replies[i].c_str());
        std::printf("== idle connection, server read deadline %lld ms\n",
                    static_cast<long long>(idle.count()));
        idle_closed_after = co_await idle_probe(ep_a);
        std::printf("client: idle connection closed by the server after %.1f ms\n",
                    idle_closed_after);
        // A request of exactly the cap, newline included ("sleep 000...05"), is served.
        const std::vector<std::string> at_cap = {
            "sleep " + std::string(default_max_line - 8, '0') + "5"};
        std::printf("== a request of %zu bytes, newline included, then one with no newline "
                    "by %zu bytes, server without an idle deadline\n",
                    default_max_line, default_max_line);
        at_cap_replies = co_await raw_requests(ep_c, at_cap);
        std::printf("client: 'sleep 0...05' -> '%s'\n",
                    at_cap_replies.empty() ? "" : at_cap_replies[0].c_str());
        overlong = co_await overlong_line(ep_c, default_max_line, 2000ms);
        std::printf("client: reply '%s', then %s\n", overlong.first.c_str(),
                    overlong.second ? "closed by the server" : "not closed");
        with_deadline.stop();
        without_deadline.stop();
        without_idle.stop();
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  ctx.run();

  bool ok = true;
  auto check = [&](bool cond, const std::string& what) {
    std::printf("  %-4s %s\n", cond ? "ok" : "FAIL", what.c_str());
    ok = ok && cond;
  };
  std::printf("\nchecks\n");
  auto check_run = [&](const std::vector<result>& rs, outcome slow_outcome, milliseconds dl,
                       const char* side) {
    check(rs.size() == mix.size(), std::string(side) + ": every request has an outcome");
    for (auto& r : rs) {
      std::ostringstream what;
      what << side << ": sleep " << r.sleep_ms << " -> " << to_string(r.what) << " after "
           << static_cast<long long>(r.elapsed_ms) << " ms";
      if (r.sleep_ms < dl.count()) {
        check(r.what == outcome::ok && r.elapsed_ms >= static_cast<double>(r.sleep_ms) &&
                  r.elapsed_ms < static_cast<double>(r.sleep_ms) + slack_ms,
              what.str() + " (expected ok)");
      } else {
        check(r.what == slow_outcome && r.elapsed_ms >= static_cast<double>(dl.count()) &&
                  r.elapsed_ms < static_cast<double>(dl.count()) + slack_ms,
              what.str() + " (expected " + to_string(slow_outcome) + " at the deadline)");
      }
    }
  };
  check_run(server_side, outcome::server_timeout, server_deadline, "server deadline");
  check_run(client_side, outcome::client_deadline, client_deadline, "client deadline");
  check(bad_replies.size() == bad_lines.size(), "every malformed request has a reply");
  for (std::size_t i = 0; i + 1 < bad_replies.size(); ++i)
    check(bad_replies[i].rfind("error:", 0) == 0,
          "'" + bad_lines[i] + "' -> '" + bad_replies[i] + "' (expected an error reply)");
  if (!bad_replies.empty())
    check(bad_replies.back() == "ok", "the same connection then serves 'sleep 5' -> '" +
                                          bad_replies.back() + "' (expected ok)");
  check(idle_closed_after >= static_cast<double>(idle.count()) &&
            idle_closed_after < static_cast<double>(idle.count()) + slack_ms,
        "idle connection closed at the server's read deadline");
  check(at_cap_replies == std::vector<std::string>{"ok"},
        "a request as long as the cap is served");
  check(overlong.first == "error: request line longer than " +
                              std::to_string(default_max_line) + " bytes" &&
            overlong.second,
        "a line over the cap is refused and the connection closed, without an idle deadline");
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_help();
    return 2;
  }
  std::string_view mode = argv[1];
  if (mode == "--help" || mode == "-h") {
    print_help();
    return 0;
  }
  try {
    if (mode == "--self-test") {
      if (argc > 2) {
        std::cerr << "request_deadline: --self-test takes no options\n";
        return 2;
      }
      return self_test();
    }
    if (mode != "server" && mode != "client") {
      std::cerr << "request_deadline: unknown mode '" << mode << "' (try --help)\n";
      return 2;
    }
    server_config scfg;
    milliseconds client_deadline = 1000ms;
    std::vector<long long> requests = {20, 900, 10, 1500, 30};
    std::optional<unsigned short> port;
    for (int i = 2; i < argc; ++i) {
      std::string_view a = argv[i];
      auto value = [&]() -> std::string_view {
        if (i + 1 >= argc) {
          std::cerr << "request_deadline: " << a << " needs a value\n";
          std::exit(2);
        }
        return argv[++i];
      };
      if (a == "--help" || a == "-h") {
        print_help();
        return 0;
      } else if (a == "--port") {
        port = static_cast<unsigned short>(parse_ms(a, value(), 65535));
      } else if (a == "--deadline" && mode == "server") {
        scfg.deadline = milliseconds(parse_ms(a, value()));
      } else if (a == "--idle" && mode == "server") {
        scfg.idle = milliseconds(parse_ms(a, value()));
      } else if (a == "--max-line" && mode == "server") {
        scfg.max_line = static_cast<std::size_t>(parse_ms(a, value(), max_max_line));
        if (scfg.max_line < longest_request) {
          std::cerr << "request_deadline: --max-line must be at least " << longest_request
                    << " (the longest request, 'sleep " << max_ms << "' and its newline)\n";
          return 2;
        }
      } else if (a == "--client-deadline" && mode == "client") {
        client_deadline = milliseconds(parse_ms(a, value()));
      } else if (a == "--requests" && mode == "client") {
        requests = parse_list(value());
      } else {
        std::cerr << "request_deadline: unknown argument '" << a << "' for " << mode
                  << " (try --help)\n";
        return 2;
      }
    }

    net::io_context ctx(1);
    if (mode == "server") {
      scfg.port = port.value_or(0);
      server srv(ctx, scfg);
      srv.start();
      std::printf("server: listening on 127.0.0.1:%u, work deadline %lld ms, idle %lld ms, "
                  "line at most %zu bytes\n",
                  srv.port(), static_cast<long long>(scfg.deadline.count()),
                  static_cast<long long>(scfg.idle.count()), scfg.max_line);
      std::fflush(stdout);
      net::signal_set signals(ctx, SIGINT, SIGTERM);
      signals.async_wait([&](boost::system::error_code ec, int) {
        if (!ec) srv.stop();
      });
      ctx.run();
      return 0;
    }

    if (!port) {
      std::cerr << "request_deadline: client needs --port\n";
      return 2;
    }
    int failures = 0;
    net::co_spawn(
        ctx,
        run_client(tcp::endpoint(net::ip::address_v4::loopback(), *port), requests,
                   client_deadline, true),
        [&](std::exception_ptr e, std::vector<result> rs) {
          if (e) std::rethrow_exception(e);
          for (auto& r : rs) failures += r.what == outcome::error;
        });
    ctx.run();
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "request_deadline: " << e.what() << "\n";
    return 1;
  }
}
