// idle_reaper: a TCP echo server that closes connections idle for longer than a
// timeout, with one asio_wheel::timer per connection.
//
// The hot path is the read: every read moves the connection's deadline with
// timer.reset_after(idle_timeout), which keeps the pending wait (nothing is cancelled,
// allocated or posted). The wait is started once per connection and only started again
// when it completes. A completion with success does not prove idleness on its own: a read
// can land between the wait being handed to the executor and its handler running, so the
// handler compares the last activity with the timeout and waits again if the connection
// was active.
//
//   idle_reaper [--port P] [--idle-timeout MS]        serve until SIGINT/SIGTERM
//   idle_reaper --self-test [--quick] [options]        serve and load it, then check
//
// Self-test: the same process (one io_context, one thread) opens --connections loopback
// clients, all from 127.0.0.1 to the one server port: each needs a local port of its own,
// so there can be no more of them than the kernel's ephemeral port range holds (28232 by
// default on Linux). A --chatty-fraction of them send a small message about every idle_timeout/4
// (with jitter) and check the echo; the others send one message and then go idle. At the
// end every idle client must have been reaped within idle_timeout + tick + allowance,
// measured on the server from its last activity to the close, and no chatty client may
// have been reaped. Nor may an idle wait complete before the deadline of the connection's
// last reset_after, unless that reset came after the wait was already due: the handler's
// re-arm would cover for a reset_after that did nothing, so the self-test counts those
// early wake-ups instead of trusting the re-arm. The allowance (--allowance, default
// 100 ms; 250 ms with --quick) is scheduling slack: the single thread that runs the
// timers also runs thousands of sockets, an expiry storm is delivered in batches of
// wheel_options::expiry_batch, and a busy machine can deschedule the whole process.

// A Boost.Asio program: left out of standalone builds (examples/CMakeLists.txt).
// asio_wheel: requires Boost

#include <asio_wheel.hpp>

#include <boost/asio.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using time_point = std::chrono::steady_clock::time_point;
using duration = std::chrono::steady_clock::duration;

namespace {

struct config {
  unsigned short port = 0;
  milliseconds idle_timeout = 2000ms;
  bool self_test = false;
  std::size_t connections = 10000;
  double chatty_fraction = 0.5;
  milliseconds duration = 10000ms;
  milliseconds allowance = 100ms;
  milliseconds tick = 1ms;
  unsigned seed = 1;

  // How long after its last read an idle client must have been reaped: the idle
  // timeout, rounded up to a tick, plus the scheduling allowance.
  milliseconds reap_bound() const { return idle_timeout + tick + allowance; }
};

void print_help() {
  std::cout <<
      R"(usage: idle_reaper [options]

An echo server on 127.0.0.1 that closes connections idle for longer than the idle
timeout, with one asio_wheel::timer per connection (reset_after on every read).

options:
  --port P               listen port (default 0: an ephemeral port)
  --idle-timeout MS      close connections idle this long (default 2000)
  --tick MS              wheel resolution (default 1; at most the idle timeout)
  --self-test            also run a load of clients in-process and check the reaping
  --connections N        self-test clients (default 10000). All connect from 127.0.0.1
                         to the one server port, so each needs a local port of its
                         own: N is at most the size of the ephemeral port range
                         (/proc/sys/net/ipv4/ip_local_port_range; 32768-60999, 28232
                         ports, by default), less the ports bound there (the server's
                         own with --port 0, other programs' listeners). Also limited
                         by RLIMIT_NOFILE (two descriptors a connection)
  --chatty-fraction F    share of clients that keep talking (default 0.5)
  --duration MS          self-test length (default 10000)
  --allowance MS         scheduling slack allowed on top of idle timeout + one tick
                         when checking reap times (default 100)
  --seed S               jitter seed (default 1)
  --quick                self-test preset: 200 connections, idle timeout 300 ms,
                         duration 2000 ms, allowance 250 ms (implies --self-test; the
                         larger allowance is for test machines busy with other work,
                         where the whole process can be descheduled for 150 ms)
  --help                 this text

Without --self-test the server runs until SIGINT or SIGTERM. Exit status of the
self-test: 0 if every idle client was reaped in time, no chatty client was reaped, and
no idle wait completed before the deadline its connection's last reset_after set (one
that did means reset_after did not move the wait; the server's re-arm would hide it).
)";
}

// Parses a non-negative integer argument no larger than max, or exits with a message.
// The bound keeps a value from wrapping where it is narrowed (a port, a seed) or from
// overflowing when milliseconds become the clock's nanoseconds.
unsigned long long parse_number(std::string_view flag, const char* text,
                                unsigned long long max) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
    std::cerr << "idle_reaper: bad value for " << flag << ": '" << text << "'\n";
    std::exit(2);
  }
  if (v > max) {
    std::cerr << "idle_reaper: " << flag << " out of range (at most " << max << ")\n";
    std::exit(2);
  }
  return v;
}

// A day: longer than any self-test or timeout here, far from the clock's limit.
constexpr unsigned long long max_ms = 86'400'000;

// No more local ports exist than this, whatever the ephemeral range.
constexpr unsigned long long max_connections = 65'535;

// The ephemeral port range, from which each self-test client's connect takes its local
// port: all clients connect from 127.0.0.1 to one server port, so no two can share one.
struct port_range {
  unsigned long long low = 0, high = 0;
  unsigned long long size() const { return high - low + 1; }
};

// Linux's range; empty where it cannot be read (then only max_connections applies).
std::optional<port_range> ephemeral_port_range() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  port_range r;
  if (in >> r.low >> r.high && r.low <= r.high) return r;
  return std::nullopt;
}

config parse_args(int argc, char** argv) {
  config cfg;
  bool quick = false;
  auto value = [&](int& i) -> const char* {
    if (i + 1 >= argc) {
      std::cerr << "idle_reaper: " << argv[i] << " needs a value\n";
      std::exit(2);
    }
    return argv[++i];
  };
  // Explicit options win over the --quick preset, so remember which were given.
  bool have_conn = false, have_idle = false, have_dur = false, have_allow = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      print_help();
      std::exit(0);
    } else if (a == "--port") {
      cfg.port = static_cast<unsigned short>(parse_number(a, value(i), 65535));
    } else if (a == "--idle-timeout") {
      cfg.idle_timeout = milliseconds(parse_number(a, value(i), max_ms));
      have_idle = true;
    } else if (a == "--tick") {
      cfg.tick = milliseconds(parse_number(a, value(i), max_ms));
    } else if (a == "--self-test") {
      cfg.self_test = true;
    } else if (a == "--connections") {
      cfg.connections = parse_number(a, value(i), max_connections);
      if (cfg.connections == 0) {
        std::cerr << "idle_reaper: --connections must be at least 1\n";
        std::exit(2);
      }
      have_conn = true;
    } else if (a == "--chatty-fraction") {
      const char* t = value(i);
      char* end = nullptr;
      cfg.chatty_fraction = std::strtod(t, &end);
      // Written so that NaN fails too (every comparison with it is false): it would reach
      // a conversion to size_t, which is undefined for NaN.
      const double f = cfg.chatty_fraction;
      if (end == t || *end != '\0' || !(f >= 0 && f <= 1)) {
        std::cerr << "idle_reaper: --chatty-fraction must be in [0, 1]\n";
        std::exit(2);
      }
    } else if (a == "--duration") {
      cfg.duration = milliseconds(parse_number(a, value(i), max_ms));
      have_dur = true;
    } else if (a == "--allowance") {
      cfg.allowance = milliseconds(parse_number(a, value(i), max_ms));
      have_allow = true;
    } else if (a == "--seed") {
      cfg.seed = static_cast<unsigned>(
          parse_number(a, value(i), std::numeric_limits<unsigned>::max()));
    } else if (a == "--quick") {
      quick = true;
    } else {
      std::cerr << "idle_reaper: unknown argument '" << a << "' (try --help)\n";
      std::exit(2);
    }
  }
  if (quick) {
    cfg.self_test = true;
    if (!have_conn) cfg.connections = 200;
    if (!have_idle) cfg.idle_timeout = 300ms;
    if (!have_dur) cfg.duration = 2000ms;
    if (!have_allow) cfg.allowance = 250ms;
  }
  if (cfg.self_test) {
    if (auto ports = ephemeral_port_range(); ports && cfg.connections > ports->size()) {
      std::cerr << "idle_reaper: --connections " << cfg.connections << " is more than the "
                << ports->size() << " local ports of the ephemeral range (" << ports->low
                << "-" << ports->high
                << ", /proc/sys/net/ipv4/ip_local_port_range): every client connects from "
                   "127.0.0.1 to the one server port, so each needs a port of its own\n";
      std::exit(2);
    }
  }
  if (cfg.idle_timeout < 4ms) {
    std::cerr << "idle_reaper: --idle-timeout must be at least 4 ms\n";
    std::exit(2);
  }
  if (cfg.tick <= 0ms) {
    std::cerr << "idle_reaper: --tick must be positive\n";
    std::exit(2);
  }
  // The wheel rounds each idle deadline up to a tick: a coarser one cannot time it.
  if (cfg.tick > cfg.idle_timeout) {
    std::cerr << "idle_reaper: --tick " << cfg.tick.count()
              << " ms is longer than the idle timeout (" << cfg.idle_timeout.count()
              << " ms), which it would round up to a tick\n";
    std::exit(2);
  }
  // The self-test checks that idle clients were reaped within idle timeout + tick +
  // allowance: that must end before the test does, or no idle client is ever checked.
  if (cfg.self_test && cfg.duration <= cfg.reap_bound()) {
    std::cerr << "idle_reaper: --duration " << cfg.duration.count()
              << " ms must be longer than the idle timeout + --tick + --allowance ("
              << cfg.reap_bound().count()
              << " ms): the self-test checks idle clients reaped within that\n";
    std::exit(2);
  }
  return cfg;
}

double to_ms(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// ---------------------------------------------------------------------------------------
// The server.

class server {
 public:
  server(net::io_context& ctx, asio_wheel::wheel_service& wheel, unsigned short port,
         milliseconds idle_timeout)
      : wheel_(wheel),
        acceptor_(ctx, tcp::endpoint(net::ip::address_v4::loopback(), port)),
        idle_timeout_(idle_timeout) {}

  unsigned short port() const { return acceptor_.local_endpoint().port(); }

  void start() { accept(); }

  // Closes the acceptor and every open connection; run() then drains and returns.
  void stop() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    // close() erases from sessions_, so take them out first.
    auto all = std::move(sessions_);
    sessions_.clear();
    for (auto& [peer, s] : all) s->close(/*reaped=*/false);
  }

  std::size_t open() const { return sessions_.size(); }
  std::uint64_t echoed_bytes() const { return echoed_bytes_; }
  std::uint64_t reaped() const { return reaped_; }
  // Idle waits that completed with success before the deadline of the connection's last
  // reset_after (see wait_idle): the library's defect if any, never the program's.
  std::uint64_t early_wakeups() const { return early_wakeups_; }
  // Waits that completed before the last reset's deadline because that reset came after
  // the previous deadline had passed (the completion was already on its way): expected.
  std::uint64_t raced_wakeups() const { return raced_wakeups_; }

  // Server-side reap latency (last activity -> close) by client endpoint.
  const std::map<tcp::endpoint, duration>& reaps() const { return reaps_; }

  // How long the connection from this client endpoint has been idle, if it is still open.
  bool idle_for(const tcp::endpoint& client, duration& out) const {
    auto it = sessions_.find(client);
    if (it == sessions_.end()) return false;
    out = wheel_.now() - it->second->last_activity();
    return true;
  }

 private:
  class session : public std::enable_shared_from_this<session> {
   public:
    session(server& owner, tcp::socket socket, const tcp::endpoint& peer)
        : owner_(owner),
          socket_(std::move(socket)),
          idle_timer_(socket_.get_executor()),
          peer_(peer) {}

    time_point last_activity() const { return last_activity_; }

    void start() {
      last_activity_ = owner_.wheel_.now();
      deadline_ = last_activity_ + owner_.idle_timeout_;
      idle_timer_.expires_at(deadline_);
      wait_idle();
      read();
    }

    // Idempotent. reaped: closed because idle (counted), not because of shutdown or EOF.
    void close(bool reaped) {
      if (closed_) return;
      closed_ = true;
      if (reaped) {
        auto idle = owner_.wheel_.now() - last_activity_;
        owner_.reaps_[peer_] = idle;
        ++owner_.reaped_;
      }
      boost::system::error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_both, ignored);
      socket_.close(ignored);
      idle_timer_.cancel();
      auto it = owner_.sessions_.find(peer_);
      if (it != owner_.sessions_.end() && it->second.get() == this)
        owner_.sessions_.erase(it);
    }

   private:
    void read() {
      socket_.async_read_some(
          net::buffer(buf_), [self = shared_from_this()](boost::system::error_code ec,
                                                         std::size_t n) {
            if (self->closed_) return;
            if (ec) {  // EOF or error from the client: not a reap
              self->close(false);
              return;
            }
            // The hot path: remember the activity and move the deadline, O(1), the
            // pending wait stays where it is.
            self->last_activity_ = self->owner_.wheel_.now();
            // Past the deadline in force, the wait may already be on its way to us with
            // success, and no reset reaches it then (the early wake-up of the top comment).
            if (self->last_activity_ >= self->deadline_) self->reset_late_ = true;
            // reset_after adds the timeout to an upper bound of the clock, so the wait
            // cannot complete before this deadline.
            self->deadline_ = self->last_activity_ + self->owner_.idle_timeout_;
            self->idle_timer_.reset_after(self->owner_.idle_timeout_);
            self->owner_.echoed_bytes_ += n;
            net::async_write(self->socket_, net::buffer(self->buf_.data(), n),
                             [self](boost::system::error_code ec, std::size_t) {
                               if (self->closed_) return;
                               if (ec) {
                                 self->close(false);
                                 return;
                               }
                               self->read();
                             });
          });
    }

    void wait_idle() {
      idle_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (self->closed_ || ec == net::error::operation_aborted) return;
        if (ec) {  // e.g. asio_wheel::error::too_many_timers: cannot police it, drop it
          std::cerr << "idle_reaper: idle wait failed: " << ec.message() << "\n";
          self->close(false);
          return;
        }
        auto& o = self->owner_;
        auto now = o.wheel_.now();
        // Before the deadline of the last reset_after: fine only if that reset came too
        // late to reach this wait; otherwise reset_after did not move it (a library
        // defect, which the re-arm below would otherwise hide). Counted for the self-test.
        if (now < self->deadline_) {
          if (self->reset_late_)
            ++o.raced_wakeups_;
          else
            ++o.early_wakeups_;
        }
        auto idle = now - self->last_activity_;
        if (idle >= o.idle_timeout_) {
          self->close(true);
        } else {
          // Activity after the wait was already on its way: wait for the real deadline.
          self->deadline_ = self->last_activity_ + o.idle_timeout_;
          self->reset_late_ = false;
          self->idle_timer_.expires_at(self->deadline_);
          self->wait_idle();
        }
      });
    }

    server& owner_;
    tcp::socket socket_;
    asio_wheel::timer idle_timer_;
    time_point last_activity_{};
    time_point deadline_{};    // last_activity_ + idle timeout, as last set
    bool reset_late_ = false;  // a reset came after the deadline in force had passed
    tcp::endpoint peer_;
    bool closed_ = false;
    std::array<char, 1024> buf_;
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) {
        boost::system::error_code ep_ec;
        auto remote = socket.remote_endpoint(ep_ec);
        if (!ep_ec) {
          auto s = std::make_shared<session>(*this, std::move(socket), remote);
          sessions_[remote] = s;
          s->start();
        }
      } else if (ec == net::error::no_descriptors) {
        std::cerr << "idle_reaper: accept: " << ec.message() << "\n";
      }
      accept();
    });
  }

  asio_wheel::wheel_service& wheel_;
  tcp::acceptor acceptor_;
  milliseconds idle_timeout_;
  // Open connections by client endpoint: address and port, since every 127.0.0.0/8
  // address is loopback and 127.0.0.1:P and 127.0.0.2:P are two clients. Two open
  // connections to this listener never share one (their 4-tuples would be equal).
  std::map<tcp::endpoint, std::shared_ptr<session>> sessions_;
  std::map<tcp::endpoint, duration> reaps_;
  std::uint64_t echoed_bytes_ = 0;
  std::uint64_t reaped_ = 0;
  std::uint64_t early_wakeups_ = 0;
  std::uint64_t raced_wakeups_ = 0;
};

// ---------------------------------------------------------------------------------------
// The self-test load: clients in the same io_context.

class load {
 public:
  load(net::io_context& ctx, tcp::endpoint target, const config& cfg)
      : ctx_(ctx), target_(target), cfg_(cfg), rng_(cfg.seed) {}

  void start() {
    clients_.reserve(cfg_.connections);
    for (std::size_t i = 0; i < cfg_.connections; ++i) {
      // Spread chatty clients evenly: client i is chatty when floor((i+1)f) > floor(i f).
      bool chatty = static_cast<std::size_t>((i + 1) * cfg_.chatty_fraction) >
                    static_cast<std::size_t>(i * cfg_.chatty_fraction);
      clients_.push_back(std::make_shared<client>(*this, chatty));
    }
    connect_more();
  }

  void stop() {
    stopping_ = true;
    for (auto& c : clients_) c->close();
  }

  struct client : std::enable_shared_from_this<client> {
    client(load& owner, bool chatty)
        : owner(owner), chatty(chatty), socket(owner.ctx_), send_timer(owner.ctx_) {}

    load& owner;
    bool chatty;
    tcp::socket socket;
    asio_wheel::timer send_timer;  // chatty clients: when to speak next
    tcp::endpoint local;  // the server sees this as the remote endpoint
    bool connected = false;
    bool lost = false;    // saw EOF or an error while the test was running
    bool closed = false;
    std::uint64_t seq = 0;
    std::string out;
    std::array<char, 64> in{};

    void close() {
      if (closed) return;
      closed = true;
      boost::system::error_code ignored;
      socket.close(ignored);
      send_timer.cancel();
    }

    void connect() {
      socket.async_connect(owner.target_, [self = shared_from_this()](
                                              boost::system::error_code ec) {
        auto& o = self->owner;
        --o.in_flight_;
        o.connect_more();
        if (self->closed) return;
        if (ec) {
          ++o.connect_failures_;
          if (o.connect_failures_ <= 5)
            std::cerr << "idle_reaper: connect failed: " << ec.message() << "\n";
          self->close();
          return;
        }
        boost::system::error_code ep_ec;
        self->local = self->socket.local_endpoint(ep_ec);
        self->connected = true;
        ++o.connected_;
        self->send();  // everyone says hello once; idle clients then fall silent
      });
    }

    // Sends one line and checks that exactly it comes back.
    void send() {
      out = (chatty ? "ping " : "hello ") + std::to_string(seq++) + "\n";
      net::async_write(socket, net::buffer(out), [self = shared_from_this()](
                                                     boost::system::error_code ec,
                                                     std::size_t) {
        if (self->closed) return;
        if (ec) return self->on_lost(ec);
        net::async_read(self->socket, net::buffer(self->in.data(), self->out.size()),
                        [self](boost::system::error_code ec, std::size_t n) {
                          if (self->closed) return;
                          if (ec) return self->on_lost(ec);
                          if (std::string_view(self->in.data(), n) != self->out)
                            ++self->owner.echo_mismatches_;
                          if (self->chatty)
                            self->schedule();
                          else
                            self->wait_for_close();
                        });
      });
    }

    // Chatty: next message after uniform [idle/8, 3 idle/8], i.e. idle/4 on average.
    void schedule() {
      auto idle = duration_cast<std::chrono::microseconds>(owner.cfg_.idle_timeout);
      std::uniform_int_distribution<long long> d(idle.count() / 8, 3 * idle.count() / 8);
      send_timer.expires_after(std::chrono::microseconds(d(owner.rng_)));
      send_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (self->closed || ec) return;
        self->send();
      });
    }

    // Idle: the only thing left to see is the server closing the connection.
    void wait_for_close() {
      socket.async_read_some(net::buffer(in), [self = shared_from_this()](
                                                  boost::system::error_code ec,
                                                  std::size_t) {
        if (self->closed) return;
        if (ec) return self->on_lost(ec);
        self->wait_for_close();  // unexpected data; keep waiting
      });
    }

    // Keeps the socket open (in CLOSE_WAIT) until the end of the test: that holds on to
    // the client's port, so no later client can get it, and an endpoint names one client.
    void on_lost(boost::system::error_code ec) {
      if (!owner.stopping_) {
        lost = true;
        if (chatty) {
          ++owner.chatty_lost_;
          if (owner.chatty_lost_ <= 5)
            std::cerr << "idle_reaper: chatty client " << local
                      << " lost its connection: " << ec.message() << "\n";
        } else {
          ++owner.idle_closed_seen_;
        }
      }
    }
  };

  const std::vector<std::shared_ptr<client>>& clients() const { return clients_; }
  std::size_t connected() const { return connected_; }
  std::size_t connect_failures() const { return connect_failures_; }
  std::size_t echo_mismatches() const { return echo_mismatches_; }
  std::size_t chatty_lost() const { return chatty_lost_; }
  std::size_t idle_closed_seen() const { return idle_closed_seen_; }

 private:
  // Keeps at most a fixed number of connects in flight so the listen backlog never
  // overflows (an overflow costs a one-second SYN retry, which would blur the timings).
  void connect_more() {
    while (!stopping_ && in_flight_ < 64 && next_ < clients_.size()) {
      ++in_flight_;
      clients_[next_++]->connect();
    }
  }

  net::io_context& ctx_;
  tcp::endpoint target_;
  const config& cfg_;
  std::mt19937_64 rng_;
  std::vector<std::shared_ptr<client>> clients_;
  std::size_t next_ = 0;
  std::size_t in_flight_ = 0;
  bool stopping_ = false;
  std::size_t connected_ = 0;
  std::size_t connect_failures_ = 0;
  std::size_t echo_mismatches_ = 0;
  std::size_t chatty_lost_ = 0;
  std::size_t idle_closed_seen_ = 0;
};

// Raises the soft RLIMIT_NOFILE to what n connections need (two descriptors each, both
// ends live in this process); returns how many connections the hard limit allows.
std::size_t fit_descriptor_limit(std::size_t n) {
  constexpr std::size_t reserve = 64;  // stdio, epoll, acceptor, eventfds, slack
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return n;
  rlim_t need = static_cast<rlim_t>(2 * n + reserve);
  if (rl.rlim_cur < need) {
    rlimit want = rl;
    want.rlim_cur = (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) ? need : rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
    std::size_t fit = rl.rlim_cur > reserve ? (rl.rlim_cur - reserve) / 2 : 0;
    std::cout << "note: RLIMIT_NOFILE allows " << rl.rlim_cur << " descriptors (hard limit "
              << rl.rlim_max << "); using " << fit << " connections instead of " << n
              << "\n";
    return fit;
  }
  return n;
}

// ---------------------------------------------------------------------------------------

class status_printer {
 public:
  status_printer(net::io_context& ctx, asio_wheel::wheel_service& wheel, const server& srv)
      : timer_(ctx), wheel_(wheel), srv_(srv), start_(wheel.now()) {}

  void start() { arm(); }
  void stop() {
    stopped_ = true;
    timer_.cancel();
  }

 private:
  void arm() {
    timer_.expires_at(start_ + std::chrono::seconds(++n_));
    timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || stopped_) return;
      auto st = wheel_.stats();
      std::printf(
          "[%3llus] open %6zu | echoed %10llu B | reaped %6llu | timers pending %6zu | "
          "wake-ups %8llu\n",
          static_cast<unsigned long long>(n_), srv_.open(),
          static_cast<unsigned long long>(srv_.echoed_bytes()),
          static_cast<unsigned long long>(srv_.reaped()), st.pending,
          static_cast<unsigned long long>(st.wakeups));
      std::fflush(stdout);
      arm();
    });
  }

  asio_wheel::timer timer_;
  asio_wheel::wheel_service& wheel_;
  const server& srv_;
  time_point start_;
  std::uint64_t n_ = 0;
  bool stopped_ = false;
};

// Checks the self-test results; prints the summary; returns true if they hold.
bool summarize(const config& cfg, asio_wheel::wheel_service& wheel, const server& srv,
               const load& ld, const std::map<tcp::endpoint, duration>& reaps,
               const std::vector<std::pair<tcp::endpoint, duration>>& still_open_idle) {
  const duration bound = cfg.reap_bound(); // the wheel was installed with cfg.tick
  std::size_t idle_total = 0, idle_reaped_ok = 0, idle_late = 0, idle_missed = 0,
              idle_not_due = 0, chatty_total = 0, chatty_reaped = 0;
  std::vector<duration> over;  // reap latency minus idle timeout, for the reaped idle ones
  std::map<tcp::endpoint, std::size_t> endpoint_users;
  for (auto& c : ld.clients())
    if (c->connected) ++endpoint_users[c->local];
  std::size_t shared_endpoints = 0;  // would make the by-endpoint accounting wrong
  for (auto& [ep, n] : endpoint_users) shared_endpoints += n > 1;
  for (auto& c : ld.clients()) {
    if (!c->connected) continue;
    auto it = reaps.find(c->local);
    if (c->chatty) {
      ++chatty_total;
      if (it != reaps.end() || c->lost) ++chatty_reaped;
      continue;
    }
    ++idle_total;
    if (it != reaps.end()) {
      over.push_back(it->second - cfg.idle_timeout);
      if (it->second <= bound)
        ++idle_reaped_ok;
      else
        ++idle_late;
    }
  }
  // Idle clients the server still had open at the end: a failure only if they were
  // already past the bound (the reaper missed them); younger ones were not due yet.
  for (auto& [port, idle] : still_open_idle) {
    if (idle > bound)
      ++idle_missed;
    else
      ++idle_not_due;
  }
  std::sort(over.begin(), over.end());
  auto pct = [&](double p) {
    if (over.empty()) return 0.0;
    return to_ms(over[static_cast<std::size_t>(p * static_cast<double>(over.size() - 1))]);
  };
  auto st = wheel.stats();
  std::printf("\nsummary\n");
  std::printf("  connections         %zu connected, %zu failed to connect\n", ld.connected(),
              ld.connect_failures());
  std::printf("  idle clients        %zu: %zu reaped in time, %zu late, %zu missed, "
              "%zu not due yet at the end\n",
              idle_total, idle_reaped_ok, idle_late, idle_missed, idle_not_due);
  std::printf("  reap time - timeout min %.2f ms, median %.2f ms, p99 %.2f ms, max %.2f ms "
              "(bound: tick %.2f ms + allowance %.2f ms)\n",
              pct(0), pct(0.5), pct(0.99), pct(1), to_ms(wheel.options().tick),
              to_ms(cfg.allowance));
  std::printf("  idle clients saw EOF %zu\n", ld.idle_closed_seen());
  std::printf("  chatty clients      %zu, reaped or lost %zu\n", chatty_total, chatty_reaped);
  std::printf("  echo mismatches     %zu\n", ld.echo_mismatches());
  std::printf("  idle waits early    %llu (before the last reset_after's deadline); %llu more "
              "after a reset that came once the wait was due (expected)\n",
              static_cast<unsigned long long>(srv.early_wakeups()),
              static_cast<unsigned long long>(srv.raced_wakeups()));
  std::printf("  echoed bytes        %llu\n",
              static_cast<unsigned long long>(srv.echoed_bytes()));
  std::printf("  wheel               expired %llu, cancelled %llu, rejected %llu, "
              "wake-ups %llu, max lateness %.2f ms\n",
              static_cast<unsigned long long>(st.expired),
              static_cast<unsigned long long>(st.cancelled),
              static_cast<unsigned long long>(st.rejected),
              static_cast<unsigned long long>(st.wakeups), to_ms(st.max_lateness));

  bool ok = true;
  auto check = [&](bool cond, const char* what) {
    std::printf("  %-4s %s\n", cond ? "ok" : "FAIL", what);
    ok = ok && cond;
  };
  check(ld.connect_failures() == 0 && ld.connected() == cfg.connections,
        "all clients connected");
  check(shared_endpoints == 0,
        "every client had its own endpoint (reap accounting is by endpoint)");
  check(idle_total == 0 || (idle_late == 0 && idle_missed == 0),
        "every idle client was reaped within idle timeout + tick + allowance");
  check(idle_total == 0 || idle_reaped_ok > 0, "at least one idle client was checked");
  check(chatty_reaped == 0, "no chatty client was reaped");
  check(ld.echo_mismatches() == 0, "every echo matched");
  check(srv.early_wakeups() == 0,
        "no idle wait completed before the deadline its last reset_after set");
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  config cfg = parse_args(argc, argv);
  if (cfg.self_test) {
    std::size_t fit = fit_descriptor_limit(cfg.connections);
    if (fit == 0) {
      std::cerr << "idle_reaper: no descriptors left for connections\n";
      return 1;
    }
    cfg.connections = fit;
  }

  try {
    net::io_context ctx(1);
    asio_wheel::wheel_options opts;
    opts.tick = cfg.tick;
    auto& wheel = asio_wheel::install(ctx, opts);

    server srv(ctx, wheel, cfg.port, cfg.idle_timeout);
    srv.start();
    std::printf("idle_reaper: echo server on 127.0.0.1:%u, idle timeout %lld ms, tick %.2f ms\n",
                srv.port(), static_cast<long long>(cfg.idle_timeout.count()),
                to_ms(wheel.options().tick));
    std::fflush(stdout);

    status_printer status(ctx, wheel, srv);
    status.start();

    if (!cfg.self_test) {
      net::signal_set signals(ctx, SIGINT, SIGTERM);
      signals.async_wait([&](boost::system::error_code ec, int) {
        if (ec) return;
        std::printf("\nstopping\n");
        status.stop();
        srv.stop();
      });
      ctx.run();
      return 0;
    }

    std::printf("self-test: %zu connections, %.0f%% chatty, duration %lld ms\n",
                cfg.connections, cfg.chatty_fraction * 100,
                static_cast<long long>(cfg.duration.count()));
    load ld(ctx, tcp::endpoint(net::ip::address_v4::loopback(), srv.port()), cfg);
    ld.start();

    // The results are taken at the deadline, before the shutdown closes everything.
    std::map<tcp::endpoint, duration> reaps;
    std::vector<std::pair<tcp::endpoint, duration>> still_open_idle;
    asio_wheel::timer end(ctx);
    end.expires_after(cfg.duration);
    end.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      reaps = srv.reaps();
      for (auto& c : ld.clients()) {
        duration idle{};
        if (c->connected && !c->chatty && srv.idle_for(c->local, idle))
          still_open_idle.emplace_back(c->local, idle);
      }
      status.stop();
      ld.stop();
      srv.stop();
    });
    ctx.run();  // returns once everything is closed and no wait is pending

    return summarize(cfg, wheel, srv, ld, reaps, still_open_idle) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "idle_reaper: " << e.what() << "\n";
    return 1;
  }
}
