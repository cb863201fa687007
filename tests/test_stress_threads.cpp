// Multi-threaded stress: one io_context run by 2 and 4 threads, hundreds of thousands
// of waits started from many strands, per-operation cancellation emitted from a foreign
// thread, timers destroyed inside their own handlers, cancel/expires_after/reset_after
// racing with expiry. The one property checked: every wait completes exactly once
// (and the wheel ends empty). Time is the manual clock, moved by its own thread.
//
// Soak mode: ASIO_WHEEL_SOAK_SECONDS=N runs the same workload for N seconds on one
// context, creating and destroying timers continuously, and checks that the resident
// set size stays flat after a warm-up. Not run otherwise (the test case is skipped).
#define BOOST_TEST_MODULE stress_threads
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "manual_clock.hpp"

#include <asio_wheel.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace std::chrono_literals;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STRESS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STRESS_SANITIZED 1
#endif
#endif
#ifndef STRESS_SANITIZED
#define STRESS_SANITIZED 0
#endif
// Unoptimised (-O0 Debug) builds are as slow as sanitized ones: same reduced counts.
#if !defined(__OPTIMIZE__) && !STRESS_SANITIZED
#undef STRESS_SANITIZED
#define STRESS_SANITIZED 1
#endif

namespace {

// Waits per run: 400k in a normal build; sanitizers (TSan above all) run 5-15x slower
// on 2 cores, so they get 100k, still far more interleavings than a run needs.
constexpr std::size_t default_waits = STRESS_SANITIZED ? 100'000 : 400'000;

struct counters {
  explicit counters(std::size_t capacity) : done(capacity) {}
  std::vector<std::atomic<std::uint8_t>> done; // per wait id: completions seen
  std::atomic<std::size_t> next_id{0};         // ids handed out
  std::atomic<std::size_t> completed{0};
  std::atomic<std::size_t> aborted{0};
  std::atomic<std::size_t> overflow{0};        // ids beyond capacity (soak mode)

  std::size_t take_id() { return next_id.fetch_add(1, std::memory_order_relaxed); }
  void complete(std::size_t id, const error_code& ec) {
    if (id < done.size()) done[id].fetch_add(1, std::memory_order_relaxed);
    else overflow.fetch_add(1, std::memory_order_relaxed);
    if (ec) aborted.fetch_add(1, std::memory_order_relaxed);
    completed.fetch_add(1, std::memory_order_release);
  }
};

// One strand's worth of work: a timer, its waits, and a cancellation signal the
// canceller thread may emit. `m` orders the signal's slot use (emplace by async_wait on
// the strand, emit on the canceller) and the timer's lifetime against the canceller:
// a slot may be emitted from any thread while its timer exists.
struct session : std::enable_shared_from_this<session> {
  session(asio::io_context& io, counters& c, std::size_t budget, unsigned seed)
      : io(io), strand(asio::make_strand(io)), c(c), budget(budget), rng(seed),
        timer(std::make_unique<asio_wheel::timer>(io)) {}

  asio::io_context& io;
  asio::strand<asio::io_context::executor_type> strand;
  counters& c;
  std::size_t budget;                 // waits this session still may start
  std::minstd_rand rng;
  std::mutex m;                       // guards timer (pointer) and signal
  std::unique_ptr<asio_wheel::timer> timer;
  asio::cancellation_signal signal;
  bool signal_used = false;           // some wait carried the signal's slot
  std::size_t outstanding = 0;        // waits of this session's timer not yet completed
  std::atomic<bool>* finished_flag = nullptr;
  std::atomic<std::size_t>* sessions_left = nullptr;
  bool finished = false;

  unsigned pick(unsigned n) { return std::uniform_int_distribution<unsigned>(0, n - 1)(rng); }

  void start() {
    asio::dispatch(strand, [self = shared_from_this()] { self->step(); });
  }

  // On the strand: random churn on the timer, then top up the waits.
  void step() {
    {
      std::lock_guard<std::mutex> g(m);
      switch (pick(16)) {
      case 0: timer->cancel(); break;
      case 1: timer->expires_after(std::chrono::milliseconds(pick(4))); break;
      case 2: timer->reset_after(std::chrono::milliseconds(pick(4))); break;
      case 3: // destroy the timer (its waits abort) and start over with a new one
        timer = std::make_unique<asio_wheel::timer>(io, std::chrono::milliseconds(pick(3)));
        signal_used = false;
        break;
      case 4: // own per-operation cancellation, on the strand
        if (signal_used) signal.emit(asio::cancellation_type::terminal);
        break;
      case 5: start_free_wait(); break;
      default: break;
      }
      if (pick(4) == 0) timer->expires_after(std::chrono::milliseconds(pick(5)));
      const std::size_t target = 1 + pick(3);
      while (outstanding < target && budget > 0) start_wait();
    }
    if (outstanding == 0 && budget == 0 && !finished) {
      finished = true;
      sessions_left->fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  // Holding m: a wait on the session's timer, its handler bound to the strand.
  void start_wait() {
    --budget;
    ++outstanding;
    const std::size_t id = c.take_id();
    auto handler = asio::bind_executor(strand, [self = shared_from_this(), id](error_code ec) {
      self->c.complete(id, ec);
      --self->outstanding;
      self->step();
    });
    if (pick(3) == 0) {
      timer->async_wait(asio::bind_cancellation_slot(signal.slot(), std::move(handler)));
      signal_used = true;
    } else {
      timer->async_wait(std::move(handler));
    }
  }

  // A timer owned by its own handler, so destroyed inside it; the handler runs inline
  // on whichever thread completes it and touches only atomics.
  void start_free_wait() {
    if (budget == 0) return;
    --budget;
    const std::size_t id = c.take_id();
    auto t = std::make_unique<asio_wheel::timer>(io, std::chrono::milliseconds(pick(4)));
    asio_wheel::timer& ref = *t;
    counters* cs = &c;
    ref.async_wait([t = std::move(t), cs, id](error_code ec) { cs->complete(id, ec); });
  }

  // The canceller thread: emit the slot of whichever wait last took it, if any.
  void foreign_emit(asio::cancellation_type type) {
    std::lock_guard<std::mutex> g(m);
    if (timer && signal_used) signal.emit(type);
  }
};

struct stress_result {
  std::size_t waits = 0, aborted = 0, advances = 0;
};

// Runs one stress round on `io` (whose wheel is manual): `waits` waits spread over
// `n_sessions` strands, `threads` threads in run(), one thread advancing time, one
// emitting cancellations. Checks exactly-once completion.
stress_result run_round(asio::io_context& io, asio_wheel::wheel_service& svc, std::size_t waits,
                        unsigned threads, std::size_t n_sessions, unsigned seed) {
  counters c(waits + n_sessions * 8);
  std::atomic<std::size_t> sessions_left{n_sessions};
  std::vector<std::shared_ptr<session>> sessions;
  for (std::size_t i = 0; i < n_sessions; ++i) {
    sessions.push_back(
        std::make_shared<session>(io, c, waits / n_sessions, seed * 7919u + static_cast<unsigned>(i)));
    sessions.back()->sessions_left = &sessions_left;
  }

  auto work = asio::make_work_guard(io);
  io.restart();
  std::vector<std::thread> runners;
  for (unsigned i = 0; i < threads; ++i) runners.emplace_back([&io] { io.run(); });
  for (auto& s : sessions) s->start();

  auto all_done = [&] {
    return sessions_left.load(std::memory_order_acquire) == 0 &&
           c.completed.load(std::memory_order_acquire) == c.next_id.load(std::memory_order_acquire);
  };

  std::atomic<bool> stop{false};
  std::thread canceller([&] {
    std::minstd_rand rng(seed);
    static constexpr asio::cancellation_type types[] = {
        asio::cancellation_type::terminal, asio::cancellation_type::partial,
        asio::cancellation_type::total};
    while (!stop.load(std::memory_order_acquire)) {
      auto& s = sessions[rng() % sessions.size()];
      s->foreign_emit(types[rng() % 3]);
      std::this_thread::yield();
    }
  });

  std::size_t advances = 0;
  while (!all_done()) {
    svc.advance(1ms);
    ++advances;
    std::this_thread::yield();
  }
  stop = true;
  canceller.join();
  work.reset();
  for (auto& t : runners) t.join();

  // Every wait completed exactly once; nothing is left on the wheel.
  const std::size_t n = c.next_id.load();
  BOOST_TEST(c.overflow.load() == 0u);
  std::size_t bad = 0;
  for (std::size_t id = 0; id < n && id < c.done.size(); ++id)
    if (c.done[id].load() != 1) ++bad;
  BOOST_TEST(bad == 0u);
  BOOST_TEST(c.completed.load() == n);
  BOOST_TEST(svc.stats().pending == 0u);
  for (auto& s : sessions) BOOST_TEST(s->outstanding == 0u);
  return {n, c.aborted.load(), advances};
}

asio_wheel::wheel_options manual_options() {
  auto o = asio_wheel_test::manual_options(3, 64);
  o.expiry_batch = 256;
  return o;
}

long rss_kib() {
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  f >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

} // namespace

BOOST_AUTO_TEST_CASE(two_threads_exactly_once) {
  asio::io_context io(2);
  auto& svc = asio_wheel::install(io, manual_options());
  const auto r = run_round(io, svc, default_waits, 2, 16, 1);
  BOOST_TEST_MESSAGE("2 threads: " << r.waits << " waits, " << r.aborted << " aborted, "
                                   << r.advances << " advances");
  BOOST_TEST(r.waits >= default_waits / 2);
  BOOST_TEST(r.aborted > 0u); // the cancellation paths were taken
  BOOST_TEST(r.aborted < r.waits);
}

BOOST_AUTO_TEST_CASE(four_threads_exactly_once) {
  asio::io_context io(4);
  auto& svc = asio_wheel::install(io, manual_options());
  const auto r = run_round(io, svc, default_waits, 4, 32, 2);
  BOOST_TEST_MESSAGE("4 threads: " << r.waits << " waits, " << r.aborted << " aborted, "
                                   << r.advances << " advances");
  BOOST_TEST(r.waits >= default_waits / 2);
  BOOST_TEST(r.aborted > 0u);
}

// The same on the steady clock: the driving steady_timer is armed, re-armed and fired
// while waits start and stop on other threads. Expiries are 0-4 ms, so the wall time
// is about (waits per session) ms; nothing is compared with the clock.
BOOST_AUTO_TEST_CASE(steady_clock_driver_exactly_once) {
  asio::io_context io(3);
  asio_wheel::wheel_options o;
  o.slots = 16;
  o.levels = 2;
  o.expiry_batch = 64;
  auto& svc = asio_wheel::install(io, o);
  const std::size_t waits = STRESS_SANITIZED ? 4'000 : 24'000;
  const std::size_t n_sessions = 24;
  counters c(waits + n_sessions * 8);
  std::atomic<std::size_t> sessions_left{n_sessions};
  std::vector<std::shared_ptr<session>> sessions;
  for (std::size_t i = 0; i < n_sessions; ++i) {
    sessions.push_back(std::make_shared<session>(io, c, waits / n_sessions, 77u + static_cast<unsigned>(i)));
    sessions.back()->sessions_left = &sessions_left;
  }
  for (auto& s : sessions) s->start();
  std::vector<std::thread> runners;
  for (int i = 0; i < 3; ++i) runners.emplace_back([&io] { io.run(); });
  for (auto& t : runners) t.join(); // run() returns only when no wait is pending
  BOOST_TEST(sessions_left.load() == 0u);
  const std::size_t n = c.next_id.load();
  std::size_t bad = 0;
  for (std::size_t id = 0; id < n; ++id) bad += c.done[id].load() != 1;
  BOOST_TEST(bad == 0u);
  BOOST_TEST(c.completed.load() == n);
  const auto s = svc.stats();
  BOOST_TEST(s.pending == 0u);
  BOOST_TEST(s.expired + s.cancelled == n);
  BOOST_TEST(s.wakeups > 0u);
}

// Soak: ASIO_WHEEL_SOAK_SECONDS=N. Rounds of the stress workload on one context until N
// seconds have passed; after a warm-up of a fifth of the time, RSS may not grow by more
// than max(8 MiB, 10 %) over the warm-up's level (allocator noise, not a per-timer leak:
// a leak of one op per wait would grow by megabytes per round).
static bool soak_enabled() {
  const char* s = std::getenv("ASIO_WHEEL_SOAK_SECONDS");
  return s != nullptr && std::atoi(s) > 0;
}

BOOST_AUTO_TEST_CASE(soak_rss_flat, *boost::unit_test::precondition([](boost::unit_test::test_unit_id) {
                       return soak_enabled();
                     })) {
  const int seconds = std::atoi(std::getenv("ASIO_WHEEL_SOAK_SECONDS"));
  asio::io_context io(2);
  auto& svc = asio_wheel::install(io, manual_options());
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::seconds(seconds);
  const auto warm = start + std::chrono::seconds(seconds) / 5;
  long baseline = -1, peak = 0;
  std::size_t rounds = 0, waits = 0;
  while (std::chrono::steady_clock::now() < end) {
    const auto r = run_round(io, svc, 50'000, 2, 16, static_cast<unsigned>(rounds));
    waits += r.waits;
    ++rounds;
    const long rss = rss_kib();
    if (std::chrono::steady_clock::now() >= warm) {
      if (baseline < 0) baseline = rss;
      if (rss > peak) peak = rss;
    }
    if (rounds % 10 == 0)
      std::printf("soak: %zu rounds, %zu waits, rss %ld KiB (baseline %ld)\n", rounds, waits, rss,
                  baseline);
  }
  std::printf("soak: %zu rounds, %zu waits in %d s; rss baseline %ld KiB, peak %ld KiB\n", rounds,
              waits, seconds, baseline, peak);
  BOOST_TEST(rounds >= 2u);
  if (baseline > 0) {
    const long allowed = std::max(8L * 1024, baseline / 10);
    BOOST_TEST(peak - baseline <= allowed);
  }
}
