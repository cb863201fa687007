// order_expiry: cancel unpaid orders when their payment window closes, with
// asio_wheel::delay_queue.
//
// Every order goes into the queue with its payment window as the delay. Paying removes it
// (erase), extending the window moves it (reset), and a consumer loop takes the orders
// whose window closed and cancels them. A payment or extension that comes after the order
// was taken finds a stale key: erase/reset say false, and the shop refuses it.
//
// The clock is the wheel's manual clock (clock_mode::manual): the program moves virtual
// time with wheel_service::advance() one second at a time and polls the io_context after
// each step, so an hour of shop time runs in milliseconds and every run is the same.
//
//   order_expiry                    the scripted day, with a log
//   order_expiry --random N         N random orders checked against a plain model
//   order_expiry --self-test        both (the script, then 5000 random orders)

// A Boost.Asio program: left out of standalone builds (examples/CMakeLists.txt).
// asio_wheel: requires Boost

#include <asio_wheel.hpp>

#include <boost/asio.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace net = boost::asio;
using namespace std::chrono_literals;
using std::chrono::seconds;
using time_point = std::chrono::steady_clock::time_point;

namespace {

// A --random run holds every order at once: its events, the model's expectation, the
// queue entry and the shop's books. That came to about 550 bytes an order, measured as
// the peak RSS of a run of 1e6 orders (546 MB; 64-bit, libstdc++). The cap keeps a run
// within about 1 GiB, which a test machine has; far more would only end in the OOM killer.
constexpr unsigned long long bytes_per_order = 600;  // the measured 550, rounded up
constexpr unsigned long long memory_budget = 1ULL << 30;
constexpr unsigned long long max_random_orders = memory_budget / bytes_per_order;
static_assert(max_random_orders == 1'789'569, "--help states the cap");

void print_help() {
  std::cout << R"(usage: order_expiry [options]

Unpaid orders are cancelled when their payment window closes; payments erase them from an
asio_wheel::delay_queue, extensions reset their expiry. Runs on the wheel's manual clock,
so it is instant and deterministic.

options:
  (none)          run the scripted example and check it
  --random N      run N random orders and check them against a simple model
                  (N at most 1789569: a run holds every order in memory, about 600
                  bytes each, and is kept within 1 GiB)
  --seed S        seed for --random (default 1)
  --verbose       log every event of --random too
  --self-test     the script, then --random 5000; exit status 0 if both check out
  --help          this text
)";
}

struct order {
  std::string id;
  long long cents = 0;
};

// Virtual seconds since the start, as h:mm:ss.
std::string clock_text(long long s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

// The shop: the unpaid orders and what became of them.
class shop {
 public:
  shop(net::io_context& ctx, asio_wheel::wheel_service& wheel, bool verbose)
      : wheel_(wheel), start_(wheel.now()), unpaid_(ctx), verbose_(verbose) {}

  // The consumer: takes each order whose window has closed and cancels it.
  void open() { take_next(); }
  void close() { unpaid_.cancel(); }

  void place(const std::string& id, long long cents, seconds window) {
    keys_.insert_or_assign(id, unpaid_.push(order{id, cents}, window));
    log("order %s placed, %lld.%02lld EUR, pay within %lld s", id.c_str(), cents / 100,
        cents % 100, static_cast<long long>(window.count()));
  }

  bool pay(const std::string& id) {
    auto it = keys_.find(id);
    // erase() is false for a stale key: the order was already taken (expired) or paid.
    bool ok = it != keys_.end() && unpaid_.erase(it->second);
    if (ok) {
      paid_.insert(id);
      log("order %s paid", id.c_str());
    } else {
      rejected_payments_.insert(id);
      log("payment for %s refused: the order was cancelled (or is unknown)", id.c_str());
    }
    return ok;
  }

  bool extend(const std::string& id, seconds window) {
    auto it = keys_.find(id);
    // reset() gives a new expiry of now + window; false for a stale key.
    bool ok = it != keys_.end() && unpaid_.reset(it->second, window);
    if (ok) {
      log("order %s extended: pay within %lld s from now", id.c_str(),
          static_cast<long long>(window.count()));
    } else {
      rejected_extensions_.insert(id);
      log("extension for %s refused: the order was cancelled (or is unknown)", id.c_str());
    }
    return ok;
  }

  long long now_s() const {
    return std::chrono::duration_cast<seconds>(wheel_.now() - start_).count();
  }

  std::size_t unpaid() const { return unpaid_.size(); }
  const std::vector<std::pair<std::string, long long>>& expired() const { return expired_; }
  const std::set<std::string>& paid() const { return paid_; }
  const std::set<std::string>& rejected_payments() const { return rejected_payments_; }
  const std::set<std::string>& rejected_extensions() const { return rejected_extensions_; }
  std::size_t take_errors() const { return take_errors_; }

 private:
  // printf-style, with the compiler checking the format against the arguments.
  [[gnu::format(printf, 2, 3)]] void log(const char* fmt, ...) {
    if (!verbose_) return;
    std::printf("[%s] ", clock_text(now_s()).c_str());
    std::va_list args;
    va_start(args, fmt);
    std::vprintf(fmt, args);
    va_end(args);
    std::printf("\n");
  }

  void take_next() {
    unpaid_.async_take([this](boost::system::error_code ec, order o) {
      if (ec == net::error::operation_aborted) return;  // the shop closed
      if (ec) {
        ++take_errors_;
        std::fprintf(stderr, "order_expiry: async_take: %s\n", ec.message().c_str());
        return;
      }
      expired_.emplace_back(o.id, now_s());
      log("order %s not paid in time: cancelled", o.id.c_str());
      take_next();
    });
  }

  asio_wheel::wheel_service& wheel_;
  time_point start_;
  asio_wheel::delay_queue<order> unpaid_;
  // Keys stay after the order is gone, so late payments exercise stale-key detection.
  std::unordered_map<std::string, asio_wheel::delay_queue<order>::key> keys_;
  std::vector<std::pair<std::string, long long>> expired_;  // id, when taken (s)
  std::set<std::string> paid_, rejected_payments_, rejected_extensions_;
  std::size_t take_errors_ = 0;
  bool verbose_;
};

// Something the customer or the shop does at a given second.
struct event {
  long long at;  // seconds since the start
  enum { place, pay, extend } what;
  std::string id;
  long long seconds_arg = 0;  // place: window; extend: new window
};

struct expectation {
  std::map<std::string, long long> expired;  // id -> deadline (s)
  std::set<std::string> paid, rejected_payments, rejected_extensions;
};

// Runs the events on a manual clock: at each second the events due then happen, then
// time advances one second and the completions that became due run. Returns true if the
// outcome matches the expectation.
bool run(std::vector<event> events, const expectation& want, bool verbose) {
  std::stable_sort(events.begin(), events.end(),
                   [](const event& a, const event& b) { return a.at < b.at; });
  net::io_context ctx(1);
  asio_wheel::wheel_options opts;
  opts.clock = asio_wheel::clock_mode::manual;
  opts.tick = 1s;  // payment windows are whole seconds
  auto& wheel = asio_wheel::install(ctx, opts);
  shop s(ctx, wheel, verbose);
  s.open();

  long long last = 0;
  for (auto& e : events) last = std::max(last, e.at + e.seconds_arg);
  last += 5;  // every window has closed by now, with a tick to spare

  std::size_t next = 0;
  for (long long t = 0; t <= last; ++t) {
    for (; next < events.size() && events[next].at == t; ++next) {
      auto& e = events[next];
      switch (e.what) {
        case event::place:
          s.place(e.id, 500 + static_cast<long long>(std::hash<std::string>{}(e.id) % 20000),
                  seconds(e.seconds_arg));
          break;
        case event::pay: s.pay(e.id); break;
        case event::extend: s.extend(e.id, seconds(e.seconds_arg)); break;
      }
    }
    wheel.advance(1s);
    ctx.restart();
    ctx.poll();
  }
  s.close();
  ctx.restart();
  ctx.poll();

  // Checks.
  bool ok = true;
  auto check = [&](bool cond, const std::string& what) {
    if (verbose || !cond) std::printf("  %-4s %s\n", cond ? "ok" : "FAIL", what.c_str());
    ok = ok && cond;
  };
  std::set<std::string> expired_ids;
  bool on_time = true, in_order = true;
  long long prev_deadline = -1;
  for (auto& [id, at] : s.expired()) {
    expired_ids.insert(id);
    auto it = want.expired.find(id);
    if (it == want.expired.end()) continue;  // reported by the set comparison below
    // Never before the deadline, at most one tick after it.
    if (at < it->second || at > it->second + 1) {
      on_time = false;
      std::printf("  order %s cancelled at %s, deadline %s\n", id.c_str(),
                  clock_text(at).c_str(), clock_text(it->second).c_str());
    }
    if (it->second < prev_deadline) in_order = false;
    prev_deadline = it->second;
  }
  std::set<std::string> want_expired;
  for (auto& [id, d] : want.expired) want_expired.insert(id);
  if (verbose) std::printf("\nchecks\n");
  check(expired_ids == want_expired && expired_ids.size() == s.expired().size(),
        "cancelled orders: " + std::to_string(s.expired().size()) + " as expected");
  check(on_time, "each cancelled at its deadline (at most one tick later)");
  check(in_order, "cancelled in deadline order");
  check(s.paid() == want.paid, "paid orders: " + std::to_string(s.paid().size()) + " as expected");
  check(s.rejected_payments() == want.rejected_payments,
        "refused payments: " + std::to_string(s.rejected_payments().size()) + " as expected");
  check(s.rejected_extensions() == want.rejected_extensions,
        "refused extensions: " + std::to_string(s.rejected_extensions().size()) +
            " as expected");
  check(s.unpaid() == 0, "no order left in the queue");
  check(s.take_errors() == 0, "no async_take error");
  return ok;
}

bool scripted() {
  constexpr long long m = 60;
  std::vector<event> ev = {
      {0, event::place, "A", 15 * m},    // expires 0:15:00
      {0, event::place, "B", 15 * m},    // paid at 0:04:00
      {0, event::place, "C", 10 * m},    // extended twice, expires 0:30:00
      {0, event::place, "D", 30 * m},    // paid at 0:16:00
      {2 * m, event::place, "E", 5 * m},  // expires 0:07:00, pays too late at 0:09:00
      {4 * m, event::pay, "B"},
      {6 * m, event::extend, "C", 15 * m},   // deadline 0:21:00
      {9 * m, event::pay, "E"},              // refused
      {16 * m, event::pay, "D"},
      {20 * m, event::extend, "C", 10 * m},  // deadline 0:30:00
      {25 * m, event::place, "F", 2 * m},    // deadline 0:27:00
      {26 * m, event::extend, "F", 2 * m},   // deadline 0:28:00
      {27 * m, event::extend, "A", 10 * m},  // refused: A was cancelled at 0:15:00
      {29 * m, event::pay, "F"},             // refused: F was cancelled at 0:28:00
  };
  expectation want;
  want.expired = {{"E", 7 * m}, {"A", 15 * m}, {"F", 28 * m}, {"C", 30 * m}};
  want.paid = {"B", "D"};
  want.rejected_payments = {"E", "F"};
  want.rejected_extensions = {"A"};
  std::printf("== scripted day\n");
  bool ok = run(ev, want, true);
  std::printf("%s\n", ok ? "scripted: PASS" : "scripted: FAIL");
  return ok;
}

// Random orders. Every event is at least two seconds away from a deadline it could race
// with, so the model's answer does not depend on the one tick of allowed lateness.
bool random_orders(std::size_t n, unsigned seed, bool verbose) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](long long lo, long long hi) {
    return std::uniform_int_distribution<long long>(lo, hi)(rng);
  };
  std::vector<event> ev;
  expectation want;
  for (std::size_t i = 0; i < n; ++i) {
    std::string id = std::to_string(i);
    id.insert(0, 1, 'o');  // not "o" + ...: g++ 12 gives a false -Wrestrict there
    long long placed = uniform(0, 600);
    long long deadline = placed + uniform(60, 900);
    ev.push_back({placed, event::place, id, deadline - placed});
    long long fate = uniform(0, 99);
    if (fate < 35) {  // paid in time
      ev.push_back({uniform(placed, deadline - 2), event::pay, id});
      want.paid.insert(id);
      continue;
    }
    if (fate < 60) {  // extended, then maybe paid in time
      long long at = uniform(placed, deadline - 2);
      long long window = uniform(30, 600);
      ev.push_back({at, event::extend, id, window});
      deadline = at + window;
      if (fate < 45) {
        ev.push_back({uniform(at, deadline - 2), event::pay, id});
        want.paid.insert(id);
        continue;
      }
    }
    want.expired[id] = deadline;
    if (fate >= 90) {  // a late payment or a late extension: both refused
      if (fate % 2 == 0) {
        ev.push_back({uniform(deadline + 2, deadline + 120), event::pay, id});
        want.rejected_payments.insert(id);
      } else {
        ev.push_back({uniform(deadline + 2, deadline + 120), event::extend, id, 60});
        want.rejected_extensions.insert(id);
      }
    }
  }
  std::printf("== %zu random orders (seed %u): %zu to be paid, %zu to be cancelled\n", n,
              seed, want.paid.size(), want.expired.size());
  bool ok = run(std::move(ev), want, verbose);
  std::printf("%s\n", ok ? "random: PASS" : "random: FAIL");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  bool self_test = false, verbose = false;
  std::size_t random_n = 0;
  unsigned seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    // A value out of range is an error, not a silent wrap (strtoull's ERANGE, a seed
    // past unsigned); more orders than a run can hold in memory have a message of their
    // own below.
    auto number = [&](unsigned long long max) -> unsigned long long {
      if (i + 1 >= argc) {
        std::cerr << "order_expiry: " << a << " needs a value\n";
        std::exit(2);
      }
      const char* t = argv[++i];
      char* end = nullptr;
      errno = 0;
      unsigned long long v = std::strtoull(t, &end, 10);
      if (errno != 0 || end == t || *end != '\0' || t[0] == '-' || v > max) {
        std::cerr << "order_expiry: bad value for " << a << ": '" << t << "'\n";
        std::exit(2);
      }
      return v;
    };
    if (a == "--help" || a == "-h") {
      print_help();
      return 0;
    } else if (a == "--self-test") {
      self_test = true;
    } else if (a == "--random") {
      const unsigned long long n = number(std::numeric_limits<unsigned long long>::max());
      if (n > max_random_orders) {
        std::cerr << "order_expiry: --random " << n << " is too many: a run holds every "
                  << "order in memory, about " << bytes_per_order << " bytes each, so at "
                  << "most " << max_random_orders << " (1 GiB)\n";
        std::exit(2);
      }
      random_n = static_cast<std::size_t>(n);
    } else if (a == "--seed") {
      seed = static_cast<unsigned>(number(std::numeric_limits<unsigned>::max()));
    } else if (a == "--verbose") {
      verbose = true;
    } else {
      std::cerr << "order_expiry: unknown argument '" << a << "' (try --help)\n";
      return 2;
    }
  }
  try {
    bool ok = true;
    if (self_test) {
      ok = scripted() && ok;
      ok = random_orders(random_n ? random_n : 5000, seed, verbose) && ok;
    } else if (random_n > 0) {
      ok = random_orders(random_n, seed, verbose);
    } else {
      ok = scripted();
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "order_expiry: " << e.what() << "\n";
    return 1;
  }
}
