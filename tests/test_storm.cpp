// Expiry storm: a million waits due in the same tick while a socket echo runs on the
// same io_context. With expiry_batch = B the service completes at most B waits per
// step and re-posts itself, so the echo's handlers run between batches: checked
// deterministically from the sequence of handler kinds (no clock, no timing): every
// maximal run of consecutive expiry handlers is at most B long, i.e. at least one echo
// handler ran between any two batches. Also checked: every wait completes exactly once
// (all are due at one tick, so expiry order puts none before another). expiry_batch = 0
// completes the whole storm in one step. The same storm as waits on one shared timer
// (coroutines waiting on one timer) is bounded the same way.
#define BOOST_TEST_MODULE storm
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "manual_clock.hpp"

#include <asio_wheel.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

using namespace std::chrono_literals;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STORM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STORM_SANITIZED 1
#endif
#endif
#ifndef STORM_SANITIZED
#define STORM_SANITIZED 0
#endif
// Unoptimised (-O0 Debug) builds are as slow as sanitized ones: same reduced counts.
#if !defined(__OPTIMIZE__) && !STORM_SANITIZED
#undef STORM_SANITIZED
#define STORM_SANITIZED 1
#endif

namespace {

// 1M waits in a normal build; 200k under sanitizers (ASan's shadow and quarantine
// multiply the memory of a million timers and operations).
constexpr std::size_t storm_size = STORM_SANITIZED ? 200'000 : 1'000'000;

using io_timer = asio_wheel::basic_timer<asio::io_context::executor_type>;

// The sequence of handler kinds, folded as it happens: runs of expiry handlers.
struct trace {
  std::size_t fired = 0;          // expiry handlers so far
  std::vector<bool> seen;         // by wait index
  std::size_t repeated = 0;       // completions of a wait seen before
  std::size_t errors = 0;
  std::size_t run = 0;            // expiry handlers since the last echo handler
  std::size_t max_run = 0;
  std::size_t runs = 0;           // maximal runs of expiry handlers
  std::size_t echo = 0;           // echo handlers so far
  std::size_t echo_during_storm = 0; // echo handlers between the first and last expiry
  std::size_t min_echo_between = SIZE_MAX; // fewest echo handlers between two runs
  std::size_t echo_since_run = 0;
  std::size_t out_of_order = 0;   // completions of a wait started before the last one
  std::size_t last_index = 0;

  void on_expiry(std::size_t index, const error_code& ec) {
    if (ec) ++errors;
    if (fired > 0 && index < last_index) ++out_of_order;
    last_index = index;
    if (index >= seen.size()) seen.resize(index + 1);
    if (seen[index]) ++repeated;
    seen[index] = true;
    if (run == 0) {
      if (runs > 0 && echo_since_run < min_echo_between) min_echo_between = echo_since_run;
      ++runs;
    }
    ++run;
    if (run > max_run) max_run = run;
    ++fired;
  }
  void on_echo() {
    ++echo;
    if (fired > 0 && fired < storm_size) ++echo_during_storm;
    if (run != 0) {
      run = 0;
      echo_since_run = 0;
    }
    ++echo_since_run;
  }
};

// Two peers of a socket pair, each reading one byte and writing it back, forever:
// two bytes in flight, so some echo handler is ready whenever the reactor is polled.
class echo {
public:
  echo(asio::io_context& io, trace& t) : a_(io), b_(io), trace_(t) {
    asio::local::connect_pair(a_, b_);
  }
  void start() {
    serve(a_, buf_a_);
    serve(b_, buf_b_);
    send(a_, buf_a_);
    send(b_, buf_b_);
  }
  void stop() {
    stopped_ = true;
    error_code ignored;
    a_.close(ignored);
    b_.close(ignored);
  }

private:
  using socket = asio::local::stream_protocol::socket;
  void serve(socket& s, std::array<char, 1>& buf) {
    asio::async_read(s, asio::buffer(buf), [this, &s, &buf](error_code ec, std::size_t) {
      if (ec || stopped_) return;
      trace_.on_echo();
      send(s, buf);
      serve(s, buf);
    });
  }
  void send(socket& s, std::array<char, 1>& buf) {
    asio::async_write(s, asio::buffer(buf), [this](error_code ec, std::size_t) {
      if (ec || stopped_) return;
      trace_.on_echo();
    });
  }
  socket a_, b_;
  std::array<char, 1> buf_a_{{'a'}}, buf_b_{{'b'}};
  trace& trace_;
  bool stopped_ = false;
};

struct storm_result {
  trace t;
  asio_wheel::wheel_stats stats;
};

// n waits on n timers, or with one_timer on a single timer.
storm_result run_storm(std::size_t batch, std::size_t n, bool one_timer = false) {
  asio::io_context io(1);
  auto o = asio_wheel_test::manual_options();
  o.expiry_batch = batch;
  auto& svc = asio_wheel::install(io, o);

  storm_result r;
  trace& t = r.t;
  echo e(io, t);
  {
    std::vector<io_timer> timers;
    timers.reserve(one_timer ? 1 : n);
    const auto due = svc.now() + 10ms; // one tick for all
    for (std::size_t i = 0; i < n; ++i) {
      if (i == 0 || !one_timer) timers.emplace_back(io.get_executor(), due);
      timers.back().async_wait([&t, i](error_code ec) { t.on_expiry(i, ec); });
    }
    e.start();
    // Let the echo get going before the storm.
    for (int k = 0; k < 100; ++k) io.run_one();
    BOOST_TEST(t.echo > 0u);
    BOOST_TEST(t.fired == 0u);

    svc.advance(10ms); // past the tick: every wait is due, none has run yet
    BOOST_TEST(t.fired == 0u);
    while (t.fired < n && io.run_one() != 0) {
    }
    r.stats = svc.stats();
  } // timers destroyed: no wait left
  e.stop();
  io.restart();
  io.poll();
  return r;
}

} // namespace

BOOST_AUTO_TEST_CASE(batches_interleave_with_echo) {
  constexpr std::size_t batch = 1024;
  const auto r = run_storm(batch, storm_size);
  const trace& t = r.t;
  BOOST_TEST_MESSAGE("storm of " << storm_size << ": " << t.runs << " expiry runs, longest "
                                 << t.max_run << ", " << t.echo_during_storm
                                 << " echo handlers during the storm, fewest between two runs "
                                 << t.min_echo_between);
  BOOST_TEST(t.fired == storm_size);         // exact count
  BOOST_TEST(t.errors == 0u);
  BOOST_TEST(t.repeated == 0u);              // each exactly once, with the count
  BOOST_TEST(t.max_run <= batch);            // echo served between any two batches
  BOOST_TEST(t.runs >= (storm_size + batch - 1) / batch);
  BOOST_TEST(t.min_echo_between >= 1u);
  BOOST_TEST(r.stats.expired == storm_size);
  BOOST_TEST(r.stats.pending == 0u);
  BOOST_TEST(r.stats.cancelled == 0u);
}

BOOST_AUTO_TEST_CASE(small_batches_interleave_too) {
  // A batch size that does not divide the storm, and many more steps.
  constexpr std::size_t batch = 7;
  const std::size_t n = storm_size / 20;
  const auto r = run_storm(batch, n);
  BOOST_TEST(r.t.fired == n);
  BOOST_TEST(r.t.repeated == 0u);
  BOOST_TEST(r.t.max_run <= batch);
  BOOST_TEST(r.t.runs >= (n + batch - 1) / batch);
}

// expiry_batch bounds one timer's waits too (they all left in one step, however many).
BOOST_AUTO_TEST_CASE(one_timers_waits_are_batched_too_and_keep_their_order) {
  constexpr std::size_t batch = 100;
  const std::size_t n = storm_size / 20;
  const auto r = run_storm(batch, n, true);
  BOOST_TEST(r.t.fired == n);
  BOOST_TEST(r.t.repeated == 0u);
  BOOST_TEST(r.t.errors == 0u);
  BOOST_TEST(r.t.max_run <= batch);
  BOOST_TEST(r.t.runs >= (n + batch - 1) / batch);
  BOOST_TEST(r.t.min_echo_between >= 1u);
  BOOST_TEST(r.t.out_of_order == 0u); // in the order they were started
  BOOST_TEST(r.stats.expired == n);
  BOOST_TEST(r.stats.pending == 0u);
}

// What a timer's batch leaves waits at the front of the due list: before what came due
// at later ticks in the same advance, so that completions stay in expiry order.
BOOST_AUTO_TEST_CASE(a_timers_waits_left_by_a_batch_complete_before_later_expiries) {
  asio::io_context io(1);
  auto o = asio_wheel_test::manual_options();
  o.expiry_batch = 4;
  auto& svc = asio_wheel::install(io, o);
  io_timer shared(io.get_executor(), svc.now() + 1ms), later(io.get_executor(), svc.now() + 2ms);
  std::vector<int> order;
  for (int i = 0; i < 10; ++i) shared.async_wait([&order, i](error_code) { order.push_back(i); });
  later.async_wait([&order](error_code) { order.push_back(100); });
  svc.advance(2ms); // both due in one advance
  std::vector<std::size_t> per_step;
  while (std::size_t ran = io.poll_one()) {
    (void)ran;
    per_step.push_back(order.size());
  }
  BOOST_TEST(order == (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100}),
             boost::test_tools::per_element());
  BOOST_TEST(per_step.size() >= 3u); // 4 + 4 + (2 and the later timer's 1)
  BOOST_TEST(per_step.front() == 4u);
  BOOST_TEST(svc.stats().pending == 0u);
}

BOOST_AUTO_TEST_CASE(unlimited_batch_runs_all_in_one_step) {
  const std::size_t n = storm_size / 4;
  const auto r = run_storm(0, n);
  BOOST_TEST(r.t.fired == n);
  BOOST_TEST(r.t.repeated == 0u);
  BOOST_TEST(r.t.runs == 1u);        // no echo handler in between: one step
  BOOST_TEST(r.t.max_run == n);
  BOOST_TEST(r.stats.expired == n);
}
