// heartbeat: dead-peer detection with asio_wheel::periodic_timer.
//
// Every peer (each end of each connection) pings the other on a periodic timer with
// jitter ("ping <n>") and answers the other's pings ("pong <n>"). At each tick a peer first
// counts its unanswered pings; once k of them are outstanding (--missed k) the other side
// is declared dead and the connection dropped. A healthy peer answers within a round trip,
// far less than a period, so it never has an unanswered ping at a tick.
//
// The demo runs a server and --clients clients on loopback in one process; after
// --mute-after one client hangs (keeps its socket open, stops pinging and answering). The
// server must drop exactly that client, within the window derived below, and nobody else.
// The clients connect asynchronously while the server accepts, and no peer's first
// period starts until every client is connected and accepted: a peer that pinged while
// its other end still waited in the listen queue would count that wait as missed beats.
//
// Detection window, from the mute at time m (P period, J jitter, k missed beats):
// the first unanswered ping is sent at the first tick after m (its slot is at most m + P
// and not before m - J), and the drop happens k ticks later, at that tick's slot + k P
// plus its own jitter. So the drop is at m + [k P - J, (k + 1) P + J), plus delivery
// lateness. The check allows --slack for that lateness at the top, and 10 ms at the
// bottom for a ping sent less than a round trip before the hang, which goes unanswered
// too. Sockets use TCP_NODELAY: with Nagle's algorithm a ping queued behind an
// unacknowledged one waits for a delayed ACK (40 ms on Linux), longer than a round trip.
//
//   heartbeat [--self-test] [options]             the in-process demo (checks itself)
//   heartbeat server [--port P] [options]         serve until SIGINT/SIGTERM
//   heartbeat client --port P [--mute-after MS]   one client

// A Boost.Asio program: left out of standalone builds (examples/CMakeLists.txt).
// asio_wheel: requires Boost

#include <asio_wheel.hpp>

#include <boost/asio.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

namespace {

struct config {
  milliseconds period = 100ms;
  milliseconds jitter = 20ms;
  std::uint64_t missed = 3;
  std::size_t clients = 3;
  milliseconds mute_after = 1000ms;  // 0 = never (client mode)
  milliseconds slack = 100ms;
  std::optional<unsigned short> port;
  bool self_test = false;
  bool verbose = false;  // log every ping and pong
};

void print_help() {
  std::cout << R"(usage: heartbeat [MODE] [options]

Peers on loopback ping each other on an asio_wheel::periodic_timer with jitter and drop
a peer after k unanswered pings.

modes:
  (none)        in-process demo: a server and --clients clients; once all are connected
                the heartbeats start, one client hangs --mute-after later and must be
                dropped by the server, within the window
                [k P - J - 10 ms, (k + 1) P + J + slack) after the hang, and nobody else;
                the demo gives up at --mute-after + (k + 4) P + J + slack + 1 s, which
                must be at most 10000 days
  server        serve on 127.0.0.1 (--port, default ephemeral) until SIGINT/SIGTERM
  client        connect to 127.0.0.1:--port; hang after --mute-after if given

options:
  --period MS        heartbeat period P (default 100)
  --jitter MS        each beat is late by uniform [0, J) (default 20)
  --missed K         drop the peer after K unanswered pings (default 3)
  --clients N        demo clients (default 3, at most 2000: the demo runs both ends of
                     every connection on one thread, and 2000 clients at the default
                     period, 80000 loopback pings and pongs a second, keep it busy most
                     of the time; it needs 2 N + 64 descriptors, RLIMIT_NOFILE)
  --mute-after MS    demo/client: hang after this long (default 1000 in the demo)
  --slack MS         demo: allowed delivery lateness + round trip (default 100)
  --port P           server: listen port; client: server port
  --verbose          log every ping and pong
  --self-test        the demo, with the default settings unless given; exit status 0 if
                     the checks hold (the demo without it prints them too)
  --help             this text
)";
}

// Parses a non-negative integer argument no larger than max, or exits with a message.
// The bound keeps a value from wrapping where it is narrowed (a port) or from
// overflowing when milliseconds become the clock's nanoseconds.
long long parse_number(std::string_view flag, const char* text, long long max) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0) {
    std::cerr << "heartbeat: bad value for " << flag << ": '" << text << "'\n";
    std::exit(2);
  }
  if (v > max) {
    std::cerr << "heartbeat: " << flag << " out of range (at most " << max << ")\n";
    std::exit(2);
  }
  return v;
}

// A day: longer than any period or timeout here, far from the clock's limit.
constexpr long long max_ms = 86'400'000;

// Demo clients: each is two peers on the demo's one thread (see --help).
constexpr long long max_clients = 2'000;

// The demo gives up well after the detection window has closed, at
//   --mute-after + (--missed + 4) * --period + --jitter + --slack + 1 s.
// Computed in unsigned milliseconds, which the parser's bounds keep from wrapping (at most
// (1'000'004 + 3) * max_ms + 1000 < 2^47), and checked against max_run_ms before the demo
// starts: a product of the largest --missed and --period, 1'000'004 days, is far beyond
// what steady_clock's nanoseconds hold (about 106'751 days).
unsigned long long give_up_ms(const config& cfg) {
  auto ms = [](milliseconds d) { return static_cast<unsigned long long>(d.count()); };
  return ms(cfg.mute_after) + (cfg.missed + 4) * ms(cfg.period) + ms(cfg.jitter) +
         ms(cfg.slack) + 1000;
}

// 10000 days: a bound that leaves the clock's range (and now() + it) a wide margin.
constexpr unsigned long long max_run_ms = 10'000ULL * max_ms;

milliseconds give_up_after(const config& cfg) {
  return milliseconds(static_cast<milliseconds::rep>(give_up_ms(cfg)));
}

steady::time_point g_start = steady::now();

double ms_since_start() {
  return std::chrono::duration<double, std::milli>(steady::now() - g_start).count();
}

// printf-style, with the compiler checking the format against the arguments.
[[gnu::format(printf, 1, 2)]] void log(const char* fmt, ...) {
  std::printf("[%8.1f ms] ", ms_since_start());
  std::va_list args;
  va_start(args, fmt);
  std::vprintf(fmt, args);
  va_end(args);
  std::printf("\n");
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------

// One end of a connection: pings on a periodic timer, answers pings, watches pongs.
class peer : public std::enable_shared_from_this<peer> {
 public:
  // Called once when the connection ends: dropped (we declared the other side dead) or
  // closed (the other side went away, or stop()).
  using end_handler = std::function<void(peer&, bool dropped)>;

  peer(std::string name, tcp::socket socket, const config& cfg, end_handler on_end)
      : name_(std::move(name)),
        socket_(std::move(socket)),
        beat_(socket_.get_executor(), cfg.period, asio_wheel::missed_tick::skip),
        limit_(cfg.missed),
        verbose_(cfg.verbose),
        on_end_(std::move(on_end)) {
    beat_.jitter(cfg.jitter);
    boost::system::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);  // see the top of the file
  }

  const std::string& name() const { return name_; }

  void start() {
    beat_.reset();  // first beat one period from now
    tick();
    read();
  }

  // Simulates a hung process: the socket stays open, nothing is sent or answered.
  void mute() {
    muted_ = true;
    beat_.cancel();
    log("%s: hanging (no more pings or pongs)", name_.c_str());
  }

  void stop() { end(false); }

 private:
  void tick() {
    beat_.async_tick([self = shared_from_this()](boost::system::error_code ec,
                                                  std::uint64_t missed) {
      if (ec || self->ended_ || self->muted_) return;
      if (missed > 0)
        log("%s: %llu beat(s) of ours ran late and were skipped", self->name_.c_str(),
            static_cast<unsigned long long>(missed));
      std::uint64_t unanswered = self->sent_ - self->acked_;
      if (unanswered >= self->limit_) {
        log("%s: %llu pings unanswered, dropping the peer", self->name_.c_str(),
            static_cast<unsigned long long>(unanswered));
        self->end(true);
        return;
      }
      self->send("ping " + std::to_string(++self->sent_) + "\n");
      if (self->verbose_)
        log("%s: ping %llu", self->name_.c_str(), static_cast<unsigned long long>(self->sent_));
      self->tick();
    });
  }

  void read() {
    net::async_read_until(
        socket_, net::dynamic_buffer(in_), '\n',
        [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
          if (self->ended_) return;
          if (ec) {
            log("%s: connection closed by the peer (%s)", self->name_.c_str(),
                ec.message().c_str());
            self->end(false);
            return;
          }
          std::string line = self->in_.substr(0, n - 1);
          self->in_.erase(0, n);
          if (self->verbose_)
            log("%s: got '%s'%s", self->name_.c_str(), line.c_str(),
                self->muted_ ? " (hung: ignored)" : "");
          if (!self->muted_) self->on_line(line);
          self->read();
        });
  }

  void on_line(const std::string& line) {
    if (line.rfind("ping ", 0) == 0) {
      send("pong " + line.substr(5) + "\n");
    } else if (line.rfind("pong ", 0) == 0) {
      std::uint64_t n = std::strtoull(line.c_str() + 5, nullptr, 10);
      if (n > acked_ && n <= sent_) acked_ = n;
    }
  }

  // Writes are queued: at most one async_write is in flight on the socket.
  void send(std::string msg) {
    out_.push_back(std::move(msg));
    if (out_.size() == 1) write_front();
  }

  void write_front() {
    net::async_write(socket_, net::buffer(out_.front()),
                     [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                       if (self->ended_) return;
                       if (ec) {
                         self->end(false);
                         return;
                       }
                       self->out_.pop_front();
                       if (!self->out_.empty()) self->write_front();
                     });
  }

  void end(bool dropped) {
    if (ended_) return;
    ended_ = true;
    boost::system::error_code ignored;
    socket_.close(ignored);
    beat_.cancel();
    if (on_end_) on_end_(*this, dropped);
  }

  std::string name_;
  tcp::socket socket_;
  asio_wheel::periodic_timer beat_;
  std::uint64_t limit_;
  bool verbose_;
  end_handler on_end_;
  std::uint64_t sent_ = 0;   // pings sent, numbered 1..sent_
  std::uint64_t acked_ = 0;  // highest ping answered
  bool muted_ = false;
  bool ended_ = false;
  std::string in_;
  std::deque<std::string> out_;
};

// Accepts connections and runs a peer for each; names them by the client's port.
class server {
 public:
  server(net::io_context& ctx, const config& cfg, unsigned short port,
         peer::end_handler on_end)
      : cfg_(cfg),
        acceptor_(ctx, tcp::endpoint(net::ip::address_v4::loopback(), port)),
        on_end_([this, user = std::move(on_end)](peer& p, bool dropped) {
          if (user) user(p, dropped);
          forget(p);
        }) {}

  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  void start() { accept(); }
  void stop() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    auto all = std::move(peers_);  // stop() ends each peer, which calls forget()
    peers_.clear();
    for (auto& p : all) p->stop();
  }

  // The demo's start line: until release_peers(), an accepted connection gets a peer that
  // neither pings nor reads (its period has not started), and on_accept is told how many
  // connections have been accepted so far.
  void hold_peers(std::function<void(std::size_t accepted)> on_accept) {
    hold_ = true;
    on_accept_ = std::move(on_accept);
  }
  void release_peers() {
    hold_ = false;
    for (auto& p : peers_) p->start();  // all of them held: nothing has ended them yet
  }

 private:
  // An ended peer is dropped from the list (whoever ended it still holds a reference).
  void forget(peer& p) {
    peers_.erase(std::remove_if(peers_.begin(), peers_.end(),
                                [&](const std::shared_ptr<peer>& q) { return q.get() == &p; }),
                 peers_.end());
  }

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (!acceptor_.is_open()) return;
      if (!ec) {
        boost::system::error_code ep_ec;
        auto port = s.remote_endpoint(ep_ec).port();
        log("server: client:%u connected", static_cast<unsigned>(port));
        auto p = std::make_shared<peer>("server/client:" + std::to_string(port), std::move(s),
                                        cfg_, on_end_);
        peers_.push_back(p);
        if (!hold_) p->start();
        ++accepted_;
        if (on_accept_) on_accept_(accepted_);
      }
      accept();
    });
  }

  const config& cfg_;
  tcp::acceptor acceptor_;
  peer::end_handler on_end_;
  std::vector<std::shared_ptr<peer>> peers_;
  bool hold_ = false;
  std::size_t accepted_ = 0;
  std::function<void(std::size_t)> on_accept_;
};

// ---------------------------------------------------------------------------------------

int run_demo(const config& cfg) {
  net::io_context ctx(1);
  // Client i's socket until it is connected, then its peer; the sockets of connected
  // clients are left moved-from (closing one is harmless).
  std::vector<tcp::socket> sockets;
  std::vector<std::shared_ptr<peer>> clients(cfg.clients);
  std::vector<unsigned short> client_ports(cfg.clients);

  // What happened, for the checks.
  struct drop {
    std::string by;
    double at_ms;
  };
  std::vector<drop> drops;
  double mute_at = -1;
  bool stopping = false;
  bool all_connected = false;

  asio_wheel::timer mute_timer(ctx);  // when client#0 hangs
  asio_wheel::timer end_timer(ctx);   // stop a little after the drop
  asio_wheel::timer give_up(ctx);     // stop if the clients do not connect or no drop comes
  std::function<void()> finish;       // closes everything so that run() returns

  auto on_end = [&](peer& p, bool dropped) {
    if (stopping || !dropped) return;
    drops.push_back({p.name(), ms_since_start()});
    // Let two more periods pass so that a wrong second drop would show, then stop.
    end_timer.expires_after(2 * cfg.period);
    end_timer.async_wait([&](boost::system::error_code ec) {
      if (!ec) finish();
    });
  };

  server srv(ctx, cfg, 0, on_end);
  srv.start();
  tcp::endpoint ep(net::ip::address_v4::loopback(), srv.port());
  log("server on 127.0.0.1:%u; period %lld ms, jitter %lld ms, drop after %llu missed",
      srv.port(), static_cast<long long>(cfg.period.count()),
      static_cast<long long>(cfg.jitter.count()), static_cast<unsigned long long>(cfg.missed));

  finish = [&] {
    if (stopping) return;
    stopping = true;
    mute_timer.cancel();
    end_timer.cancel();
    give_up.cancel();
    boost::system::error_code ignored;
    for (auto& s : sockets) s.close(ignored);  // connects still in flight
    for (auto& c : clients)
      if (c) c->stop();
    srv.stop();
  };

  // The start line: every peer's first period begins only once the whole population is
  // connected and accepted. Connecting 2000 clients takes a while, and a peer that
  // started pinging early would count the time its other end was not yet accepted (or
  // not yet started) as unanswered pings, and drop a healthy peer.
  auto begin = [&] {
    if (all_connected || stopping) return;
    all_connected = true;
    log("all %zu clients connected and accepted; heartbeats start", cfg.clients);
    srv.release_peers();
    for (auto& c : clients) c->start();

    mute_timer.expires_after(cfg.mute_after);
    mute_timer.async_wait([&](boost::system::error_code ec) {
      if (ec || stopping) return;
      mute_at = ms_since_start();
      clients.front()->mute();
    });

    // Well after the detection window has closed (main checked it against max_run_ms).
    give_up.expires_after(give_up_after(cfg));
    give_up.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      log("giving up: no drop seen");
      finish();
    });
  };

  // Connects asynchronously while the server accepts. At most connect_window connections
  // are connected but not yet accepted at any time, far below the listen backlog (an
  // overflow costs a one-second SYN retry).
  constexpr std::size_t connect_window = 256;
  std::size_t started = 0, connected = 0, accepted = 0;
  std::function<void()> connect_more = [&] {
    while (!stopping && started < cfg.clients && started - accepted < connect_window) {
      std::size_t i = started++;
      sockets[i].async_connect(ep, [&, i](boost::system::error_code ec) {
        if (stopping) return;
        if (ec) {
          log("client#%zu: connect failed: %s", i, ec.message().c_str());
          finish();
          return;
        }
        boost::system::error_code ep_ec;
        client_ports[i] = sockets[i].local_endpoint(ep_ec).port();
        clients[i] = std::make_shared<peer>(
            "client#" + std::to_string(i) + ":" + std::to_string(client_ports[i]),
            std::move(sockets[i]), cfg, on_end);
        if (++connected == cfg.clients && accepted == cfg.clients) begin();
      });
    }
  };
  srv.hold_peers([&](std::size_t n) {
    accepted = n;
    if (stopping) return;
    if (connected == cfg.clients && accepted == cfg.clients) begin();
    connect_more();
  });

  sockets.reserve(cfg.clients);
  for (std::size_t i = 0; i < cfg.clients; ++i) sockets.emplace_back(ctx);
  connect_more();

  // The connection phase gets its own limit, whatever the heartbeat settings.
  give_up.expires_after(30s);
  give_up.async_wait([&](boost::system::error_code ec) {
    if (ec || all_connected) return;
    log("giving up: %zu of %zu clients connected, %zu accepted", connected, cfg.clients,
        accepted);
    finish();
  });

  ctx.run();  // returns once finish() has closed everything

  // Checks.
  const double k = static_cast<double>(cfg.missed);
  const double P = static_cast<double>(cfg.period.count());
  const double J = static_cast<double>(cfg.jitter.count());
  const double lo = k * P - J - 10;  // 10 ms: a round trip on a busy loopback
  const double hi = (k + 1) * P + J + static_cast<double>(cfg.slack.count());
  const std::string muted_name = "server/client:" + std::to_string(client_ports.front());

  bool ok = true;
  auto check = [&](bool cond, const std::string& what) {
    std::printf("  %-4s %s\n", cond ? "ok" : "FAIL", what.c_str());
    ok = ok && cond;
  };
  std::printf("\nchecks\n");
  check(all_connected, "all " + std::to_string(cfg.clients) + " clients connected");
  check(mute_at >= 0, "client#0 hung");
  check(drops.size() == 1, "exactly one drop (" + std::to_string(drops.size()) + " seen)");
  if (!drops.empty()) {
    check(drops.front().by == muted_name,
          "the server dropped the hung client (dropped by " + drops.front().by + ")");
    double after = drops.front().at_ms - mute_at;
    char buf[160];
    std::snprintf(buf, sizeof buf, "detected %.1f ms after the hang, window [%.0f, %.0f) ms",
                  after, lo, hi);
    check(after >= lo && after < hi, buf);
  }
  return ok ? 0 : 1;
}

int run_server(const config& cfg) {
  net::io_context ctx(1);
  server srv(ctx, cfg, cfg.port.value_or(0), [](peer& p, bool dropped) {
    if (dropped) log("%s: dropped", p.name().c_str());
  });
  srv.start();
  log("server on 127.0.0.1:%u; period %lld ms, jitter %lld ms, drop after %llu missed",
      srv.port(), static_cast<long long>(cfg.period.count()),
      static_cast<long long>(cfg.jitter.count()), static_cast<unsigned long long>(cfg.missed));
  net::signal_set signals(ctx, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code ec, int) {
    if (!ec) srv.stop();
  });
  ctx.run();
  return 0;
}

int run_client(const config& cfg) {
  if (!cfg.port) {
    std::cerr << "heartbeat: client needs --port\n";
    return 2;
  }
  net::io_context ctx(1);
  asio_wheel::timer mute_timer(ctx);
  net::signal_set signals(ctx, SIGINT, SIGTERM);
  tcp::socket s(ctx);
  s.connect(tcp::endpoint(net::ip::address_v4::loopback(), *cfg.port));
  // When the connection ends (dropped by either side, or closed), nothing is left to do.
  auto me = std::make_shared<peer>("client:" + std::to_string(s.local_endpoint().port()),
                                   std::move(s), cfg, [&](peer&, bool) {
                                     mute_timer.cancel();
                                     boost::system::error_code ignored;
                                     signals.cancel(ignored);
                                   });
  me->start();
  if (cfg.mute_after > 0ms) {
    mute_timer.expires_after(cfg.mute_after);
    mute_timer.async_wait([&](boost::system::error_code ec) {
      if (!ec) me->mute();
    });
  }
  signals.async_wait([&](boost::system::error_code ec, int) {
    if (!ec) me->stop();
  });
  // A hung client learns that it was dropped from the EOF, and exits then.
  ctx.run();
  return 0;
}

}  // namespace

// Both ends of every demo connection are in this process: two descriptors per client, plus
// a reserve for stdio, epoll, the acceptor and eventfds. Raises the soft RLIMIT_NOFILE to
// that if need be; returns false (with the limits in rl) if the hard limit is too low.
bool fit_descriptor_limit(std::size_t clients, rlimit& rl, rlim_t& need) {
  need = static_cast<rlim_t>(2 * clients + 64);
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return true;  // cannot tell: try
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) return true;
  if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
    rlimit want = rl;
    want.rlim_cur = need;
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) return true;
  }
  return false;
}

int main(int argc, char** argv) {
  config cfg;
  std::string_view mode;
  int first = 1;
  if (argc > 1 && (std::string_view(argv[1]) == "server" ||
                   std::string_view(argv[1]) == "client")) {
    mode = argv[1];
    first = 2;
  }
  bool have_mute = false;
  for (int i = first; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::cerr << "heartbeat: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      print_help();
      return 0;
    } else if (a == "--period") {
      cfg.period = milliseconds(parse_number(a, value(), max_ms));
    } else if (a == "--jitter") {
      cfg.jitter = milliseconds(parse_number(a, value(), max_ms));
    } else if (a == "--missed") {
      cfg.missed = static_cast<std::uint64_t>(parse_number(a, value(), 1'000'000));
    } else if (a == "--clients") {
      cfg.clients = static_cast<std::size_t>(parse_number(a, value(), max_clients));
    } else if (a == "--mute-after") {
      cfg.mute_after = milliseconds(parse_number(a, value(), max_ms));
      have_mute = true;
    } else if (a == "--slack") {
      cfg.slack = milliseconds(parse_number(a, value(), max_ms));
    } else if (a == "--port") {
      cfg.port = static_cast<unsigned short>(parse_number(a, value(), 65535));
    } else if (a == "--verbose") {
      cfg.verbose = true;
    } else if (a == "--self-test" && mode.empty()) {
      cfg.self_test = true;
    } else {
      std::cerr << "heartbeat: unknown argument '" << a << "' (try --help)\n";
      return 2;
    }
  }
  if (cfg.period <= 0ms || cfg.missed == 0 || cfg.jitter >= cfg.period) {
    std::cerr << "heartbeat: need --period > 0, --missed >= 1 and --jitter < --period\n";
    return 2;
  }
  if (mode.empty() && give_up_ms(cfg) > max_run_ms) {
    std::cerr << "heartbeat: the demo would run too long: --mute-after + (--missed + 4) * "
                 "--period + --jitter + --slack + 1000 ms must be at most "
              << max_run_ms << " ms (10000 days); it is " << give_up_ms(cfg) << " ms\n";
    return 2;
  }
  try {
    if (mode == "server") return run_server(cfg);
    if (mode == "client") {
      if (!have_mute) cfg.mute_after = 0ms;
      return run_client(cfg);
    }
    if (cfg.clients == 0) {
      std::cerr << "heartbeat: the demo needs at least one client\n";
      return 2;
    }
    rlimit rl{};
    rlim_t need = 0;
    if (!fit_descriptor_limit(cfg.clients, rl, need)) {
      std::cerr << "heartbeat: --clients " << cfg.clients << " needs " << need
                << " descriptors (two per client: both ends are in this process), and "
                   "RLIMIT_NOFILE allows "
                << rl.rlim_cur << " (hard limit " << rl.rlim_max << ")\n";
      return 2;
    }
    int rc = run_demo(cfg);
    std::printf("%s\n", rc == 0 ? "PASS" : "FAIL");
    return cfg.self_test ? rc : 0;
  } catch (const std::exception& e) {
    std::cerr << "heartbeat: " << e.what() << "\n";
    return 1;
  }
}
