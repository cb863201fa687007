// delay_queue on the manual clock: expiry order, takers, keys, element lifetimes.
#define BOOST_TEST_MODULE delay_queue
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "manual_clock.hpp"

#include <asio_wheel/delay_queue.hpp>
#include <asio_wheel/timer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace net = asio;
using namespace std::chrono_literals;
using asio_wheel::delay_queue;
using std::chrono::steady_clock;

namespace {

using fixture = asio_wheel_test::manual_context;

// Starts a take appending what it got to `got` (errors as "!<message>").
template <class Queue>
void take_into(Queue& q, std::vector<std::string>& got) {
  q.async_take([&got](error_code ec, std::string s) {
    got.push_back(ec ? "!" + ec.message() : s);
  });
}

// Takes everything that has expired, in order.
std::vector<std::string> drain(fixture& f, delay_queue<std::string>& q, std::size_t n) {
  std::vector<std::string> got;
  for (std::size_t i = 0; i < n; ++i) take_into(q, got);
  f.settle();
  return got;
}

using strings = std::vector<std::string>;

// Counts live objects, to see that the queue destroys what it holds, exactly once.
struct tracked {
  static inline int live = 0;
  int v = 0;
  tracked() noexcept { ++live; }
  explicit tracked(int x) noexcept : v(x) { ++live; }
  tracked(tracked&& o) noexcept : v(o.v) { ++live; }
  tracked& operator=(tracked&&) = default;
  ~tracked() { --live; }
};

} // namespace

BOOST_AUTO_TEST_CASE(earliest_expired_first) {
  fixture f;
  delay_queue<std::string> q(f.io);
  q.push("c", 30ms);
  q.push("a", 10ms);
  q.push("b", 20ms);
  BOOST_TEST(q.size() == 3u);
  f.advance(30ms);
  BOOST_TEST((drain(f, q, 3) == strings{"a", "b", "c"}));
  BOOST_TEST(q.size() == 0u);
}

BOOST_AUTO_TEST_CASE(ties_in_push_order) {
  fixture f;
  delay_queue<std::string> q(f.io);
  for (const char* s : {"1", "2", "3", "4"}) q.push(s, 10ms);
  f.advance(10ms);
  BOOST_TEST((drain(f, q, 4) == strings{"1", "2", "3", "4"}));
}

// "far" sits on an upper level of the wheel and cascades into the slot that "near"
// enters directly: push order must hold whatever path each took through the wheel.
BOOST_AUTO_TEST_CASE(ties_in_push_order_across_wheel_levels) {
  fixture f;
  delay_queue<std::string> q(f.io);
  q.push("far", 300ms);
  f.advance(290ms);
  q.push("near", 10ms); // same expiry, 300 ms
  f.advance(10ms);
  BOOST_TEST((drain(f, q, 2) == strings{"far", "near"}));
}

// Two expiries inside one wheel tick: the earlier one first, even when a take waits.
BOOST_AUTO_TEST_CASE(earliest_first_within_one_tick) {
  fixture f;
  delay_queue<std::string> q(f.io);
  strings got;
  take_into(q, got);
  take_into(q, got);
  q.push("later", 10ms);          // 10.0 ms
  f.advance(300us);
  q.push("earlier", 9500us);      // 9.8 ms, same 1 ms tick
  f.advance(10ms);
  BOOST_TEST((got == strings{"earlier", "later"}));
}

// An element pushed (or reset) with its delay already passed comes before an expired
// element whose expiry is later, however the takes are started: one at a time (each
// served at once), together, or with takes waiting for a dispatch step queued before
// the push. Before, a take was served from the expired queue at once, or by that
// dispatch step, while the new element still waited in the wheel's due list: "a" came
// first.
BOOST_AUTO_TEST_CASE(an_element_pushed_already_expired_comes_before_later_expiries) {
  enum class how { one_at_a_time, together, reset, takes_waiting };
  for (how h : {how::one_at_a_time, how::together, how::reset, how::takes_waiting}) {
    BOOST_TEST_CONTEXT("case " << static_cast<int>(h)) {
      auto o = asio_wheel_test::manual_options();
      o.expiry_batch = 1; // for takes_waiting: a step that leaves the dispatch step queued
      fixture f(o);
      delay_queue<std::string> q(f.io);
      strings got;
      q.push("a", 5ms);
      if (h == how::takes_waiting) {
        f.svc.advance(10ms); // "a" due at 5 ms, in the due list
        take_into(q, got);
        take_into(q, got);
        f.io.restart();
        BOOST_TEST(f.io.poll_one() == 1u); // "a" expired; the dispatch step left queued
        BOOST_TEST(got.empty());
      } else {
        f.advance(10ms); // "a" expired at 5 ms
      }
      if (h == how::reset) {
        q.push("later", 8ms);
        BOOST_TEST(q.reset(q.push("b", 1s), -100ms)); // now expired at -90 ms
      } else {
        q.push("b", -100ms); // expired at -90 ms
      }
      if (h == how::one_at_a_time) {
        take_into(q, got);
        f.settle();
        take_into(q, got);
      } else if (h != how::takes_waiting) {
        take_into(q, got);
        take_into(q, got);
      }
      f.settle();
      BOOST_TEST((got == strings{"b", "a"}));
    }
  }
}

// The same behind elements that the wheel has made due and no step has handed over
// yet: after an advance() and before the step (the takes then wait for it), and after
// a step whose expiry_batch ran out with one left in the due list ("c"). A take served
// at once from the expired queue, or an element pushed straight into it, would put
// "b" (expired at 7 ms) before "c" (6 ms).
BOOST_AUTO_TEST_CASE(an_element_pushed_already_expired_stays_behind_elements_not_handed_over) {
  for (bool after_a_step : {false, true}) {
    BOOST_TEST_CONTEXT("after a step: " << after_a_step) {
      auto o = asio_wheel_test::manual_options();
      o.expiry_batch = 1;
      fixture f(o);
      delay_queue<std::string> q(f.io);
      strings got;
      q.push("a", 5ms);
      q.push("c", 6ms);
      f.svc.advance(10ms); // both due, neither handed over
      if (after_a_step) {
        f.io.restart();
        BOOST_TEST(f.io.poll_one() == 1u); // "a" handed over, "c" left by the budget
      }
      q.push("b", -3ms); // expired at 7 ms
      take_into(q, got);
      BOOST_TEST(q.size() == 3u); // not served at once: it waits for the step
      f.settle();
      take_into(q, got);
      f.settle();
      take_into(q, got);
      f.settle();
      BOOST_TEST((got == strings{"a", "c", "b"}));
    }
  }
}

BOOST_AUTO_TEST_CASE(several_takers_served_in_order) {
  fixture f;
  delay_queue<std::string> q(f.io);
  std::vector<std::pair<int, std::string>> got;
  for (int i = 0; i < 3; ++i)
    q.async_take([&got, i](error_code ec, std::string s) {
      BOOST_TEST(!ec);
      got.emplace_back(i, s);
    });
  BOOST_TEST(f.svc.stats().pending == 3u);
  q.push("y", 20ms);
  q.push("x", 10ms);
  q.push("z", 30ms);
  f.advance(10ms);
  BOOST_TEST(got.size() == 1u);
  f.advance(20ms);
  using pairs = std::vector<std::pair<int, std::string>>;
  BOOST_TEST((got == pairs{{0, "x"}, {1, "y"}, {2, "z"}}));
  BOOST_TEST(f.svc.stats().pending == 0u);
}

BOOST_AUTO_TEST_CASE(taker_after_expiry_completes_as_if_by_post) {
  fixture f;
  delay_queue<std::string> q(f.io);
  q.push("x", 5ms);
  f.advance(10ms);
  BOOST_TEST(q.size() == 1u); // expired, not taken
  strings got;
  take_into(q, got);
  BOOST_TEST(got.empty()); // never inside async_take
  f.settle();
  BOOST_TEST((got == strings{"x"}));
  BOOST_TEST(q.size() == 0u);
  // A negative delay means already expired.
  q.push("now", -1s);
  take_into(q, got);
  BOOST_TEST(got.size() == 1u);
  f.settle();
  BOOST_TEST((got == strings{"x", "now"}));
}

BOOST_AUTO_TEST_CASE(nothing_before_its_expiry) {
  fixture f;
  delay_queue<std::string> q(f.io);
  strings got;
  take_into(q, got);
  q.push("x", 10ms);
  f.advance(9ms);
  BOOST_TEST(got.empty());
  f.advance(1ms);
  BOOST_TEST((got == strings{"x"}));
}

BOOST_AUTO_TEST_CASE(erase_and_stale_keys) {
  fixture f;
  delay_queue<std::string> q(f.io), other(f.io);
  auto a = q.push("a", 10ms);
  auto b = q.push("b", 10ms);
  auto c = q.push("c", 10ms);
  BOOST_TEST(q.erase(b));
  BOOST_TEST(!q.erase(b));          // already erased
  BOOST_TEST(!q.reset(b, 1ms));
  BOOST_TEST(q.size() == 2u);
  BOOST_TEST(!other.erase(a));      // key from another queue
  BOOST_TEST(!other.reset(a, 1ms));
  BOOST_TEST(!q.erase(decltype(q)::key())); // default key
  auto d = q.push("d", 10ms);       // reuses b's node: b stays stale
  BOOST_TEST(!q.erase(b));
  BOOST_TEST((d != b));
  f.advance(10ms);
  BOOST_TEST((drain(f, q, 3) == strings{"a", "c", "d"}));
  BOOST_TEST(!q.erase(a));          // taken
  BOOST_TEST(!q.reset(c, 1ms));
  BOOST_TEST(q.size() == 0u);
  // Keys of a destroyed queue stay stale for a queue created in its place.
  std::optional<delay_queue<std::string>> gone(std::in_place, f.io);
  auto g = gone->push("g", 1h);
  gone.reset();
  delay_queue<std::string> fresh(f.io);
  fresh.push("h", 1h);
  BOOST_TEST(!fresh.erase(g));
  BOOST_TEST(fresh.size() == 1u);
}

BOOST_AUTO_TEST_CASE(erase_an_expired_element) {
  fixture f;
  delay_queue<std::string> q(f.io);
  auto a = q.push("a", 1ms);
  q.push("b", 2ms);
  f.advance(5ms);
  BOOST_TEST(q.erase(a));
  BOOST_TEST((drain(f, q, 1) == strings{"b"}));
}

BOOST_AUTO_TEST_CASE(reset_moves_the_expiry) {
  fixture f;
  delay_queue<std::string> q(f.io);
  auto a = q.push("a", 10ms);
  q.push("b", 20ms);
  auto c = q.push("c", 30ms);
  BOOST_TEST(q.reset(a, 40ms)); // later
  BOOST_TEST(q.reset(c, 5ms));  // earlier
  strings got;
  take_into(q, got);
  take_into(q, got);
  take_into(q, got);
  f.advance(5ms);
  BOOST_TEST((got == strings{"c"}));
  f.advance(15ms);
  BOOST_TEST((got == strings{"c", "b"}));
  f.advance(19ms);
  BOOST_TEST(got.size() == 2u);
  f.advance(1ms);
  BOOST_TEST((got == strings{"c", "b", "a"}));
}

BOOST_AUTO_TEST_CASE(reset_brings_back_an_expired_element) {
  fixture f;
  delay_queue<std::string> q(f.io);
  auto a = q.push("a", 1ms);
  f.advance(5ms);
  BOOST_TEST(q.reset(a, 10ms)); // expired but not taken: scheduled again
  strings got;
  take_into(q, got);
  f.settle();
  BOOST_TEST(got.empty());
  f.advance(10ms);
  BOOST_TEST((got == strings{"a"}));
}

BOOST_AUTO_TEST_CASE(move_only_elements) {
  fixture f;
  delay_queue<std::unique_ptr<int>> q(f.io);
  q.push(std::make_unique<int>(1), 2ms);
  auto k = q.push(std::make_unique<int>(2), 1ms);
  q.push(std::make_unique<int>(3), 3ms);
  BOOST_TEST(q.erase(k));
  std::vector<int> got;
  for (int i = 0; i < 2; ++i)
    q.async_take([&](error_code ec, std::unique_ptr<int> p) {
      BOOST_TEST(!ec);
      BOOST_REQUIRE(p);
      got.push_back(*p);
    });
  f.advance(3ms);
  BOOST_TEST((got == std::vector<int>{1, 3}));
}

BOOST_AUTO_TEST_CASE(destruction_destroys_remaining_elements_and_aborts_takes) {
  fixture f;
  {
    delay_queue<tracked> q(f.io);
    for (int i = 0; i < 5; ++i) q.push(tracked(i), 10ms);   // will expire, untaken
    for (int i = 0; i < 5; ++i) q.push(tracked(i), 1h);     // still on the wheel
    auto k = q.push(tracked(99), 1h);
    q.erase(k);
    int taken = -1;
    q.async_take([&](error_code ec, tracked t) {
      BOOST_TEST(!ec);
      taken = t.v;
    });
    f.advance(10ms);
    BOOST_TEST(taken == 0);
    BOOST_TEST(q.size() == 9u);
    BOOST_TEST(tracked::live >= 9);
  }
  BOOST_TEST(tracked::live == 0);
  f.advance(2h); // nothing of the queue is left on the wheel

  bool aborted = false;
  {
    delay_queue<tracked> q(f.io);
    q.async_take([&](error_code ec, tracked) {
      aborted = ec == net::error::operation_aborted;
    });
  }
  f.settle();
  BOOST_TEST(aborted);
  BOOST_TEST(tracked::live == 0);
  BOOST_TEST(f.svc.stats().pending == 0u);
}

BOOST_AUTO_TEST_CASE(cancel_aborts_pending_takes) {
  fixture f;
  delay_queue<std::string> q(f.io);
  strings got;
  take_into(q, got);
  take_into(q, got);
  BOOST_TEST(q.cancel() == 2u);
  BOOST_TEST(got.empty());
  f.settle();
  BOOST_TEST(got.size() == 2u);
  BOOST_TEST(got[0].front() == '!');
  BOOST_TEST(q.cancel() == 0u);
  // The elements stay for the next take.
  q.push("x", 1ms);
  f.advance(1ms);
  BOOST_TEST((drain(f, q, 1) == strings{"x"}));
  BOOST_TEST(f.svc.stats().pending == 0u);
}

BOOST_AUTO_TEST_CASE(per_operation_cancellation_of_a_take) {
  fixture f;
  delay_queue<std::string> q(f.io);
  net::cancellation_signal sig;
  strings got;
  q.async_take(net::bind_cancellation_slot(
      sig.slot(), [&](error_code ec, std::string s) {
        got.push_back(ec ? "!" : s);
      }));
  take_into(q, got);
  sig.emit(net::cancellation_type::terminal);
  q.push("x", 1ms);
  f.advance(1ms);
  BOOST_TEST((got == strings{"!", "x"}));
}

// Elements of one wheel tick, pushed in random order, come out by (expiry, push order),
// and each expiry counts against expiry_batch. Before the fix each one was sorted into
// the expired FIFO by a walk, under the lock and outside the batch: quadratic (40k
// elements in one tick took 6 s), and the whole tick expired and was handed over in
// a single step however large.
BOOST_AUTO_TEST_CASE(one_ticks_expiries_come_out_in_order_and_count_against_the_batch) {
  auto o = asio_wheel_test::manual_options();
  o.tick = 1s;
  o.expiry_batch = 100;
  fixture f(o);
  delay_queue<int> q(f.io);
  constexpr int n = 4000;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  for (int v : order) q.push(v, std::chrono::microseconds(1000 + 100 * v)); // all in tick 1
  std::vector<int> got;
  for (int i = 0; i < n; ++i)
    q.async_take([&got](error_code ec, int v) {
      BOOST_TEST(!ec);
      got.push_back(v);
    });
  f.svc.advance(1s);
  f.io.restart();
  std::size_t steps = 0, before = 0;
  while (f.io.poll_one() != 0) { // one driver step each: plain handlers run inside it
    ++steps;
    BOOST_TEST_REQUIRE(got.size() - before <= 100u);
    before = got.size();
  }
  BOOST_TEST(steps >= 2u * n / 100); // n expiries, then n hand-overs, 100 a step
  std::vector<int> sorted(n);
  std::iota(sorted.begin(), sorted.end(), 0);
  BOOST_TEST(got == sorted, boost::test_tools::per_element());
}

// Elements alone, with no take pending, do not keep run() from returning (an Asio I/O
// object holds run() only while an operation of its own is pending): the driver is not
// armed for them. A take started later arms it, also for elements pushed while the
// driver was off, and gets them on time. run_for's bound only turns a regression into a
// failure instead of an hour's wait.
BOOST_AUTO_TEST_CASE(steady_elements_without_a_take_do_not_hold_run) {
  asio::io_context io;
  asio_wheel::install(io, asio_wheel::wheel_options{});
  delay_queue<int> q(io);
  q.push(1, 1h);
  q.push(2, 1ms);
  std::vector<int> got;
  auto take = [&got](error_code ec, int v) {
    if (!ec) got.push_back(v);
  };
  q.async_take(take);
  io.run_for(60s);
  BOOST_TEST(io.stopped()); // it ran out of work, not out of time
  BOOST_TEST(got == (std::vector<int>{2}), boost::test_tools::per_element());

  q.push(3, 5ms); // nothing pending: not armed for
  io.restart();
  io.run_for(60s);
  BOOST_TEST(io.stopped());
  q.async_take(take); // arms for element 3
  io.restart();
  io.run_for(60s);
  BOOST_TEST(io.stopped());
  BOOST_TEST(got == (std::vector<int>{2, 3}), boost::test_tools::per_element());

  // A timer's wait pending far out: the driver is armed for it, and an element pushed
  // meanwhile (earlier) keeps no take waiting once the wait is cancelled.
  asio_wheel::timer t(io, 2h);
  t.async_wait([](error_code) {});
  q.push(4, 2ms);
  q.async_take([&t, &take](error_code ec, int v) {
    take(ec, v);
    t.cancel(); // then only element 1 is left, with nothing pending
  });
  io.restart();
  io.run_for(60s);
  BOOST_TEST(io.stopped());
  BOOST_TEST(got == (std::vector<int>{2, 3, 4}), boost::test_tools::per_element());
  BOOST_TEST(q.size() == 1u);
}

// The same on the steady clock, where a step makes at most expiry_batch entries due and
// can stop inside a tick (the manual clock's advance makes whole ticks due). The
// hand-over did not wait for the rest of the tick: a take served meanwhile got a later
// element than one still in the slots (a review found 24 of 400 out of order with a
// batch of 16). Expiries fall 200 us apart with each push; an element taken before one
// that surely expired earlier (by the clock read around each push) is out of order.
// The test waits for the elements' expiries, about 60 ms: no sleep, no time limit.
BOOST_AUTO_TEST_CASE(steady_a_tick_split_by_the_batch_is_handed_over_in_order) {
  asio::io_context io;
  asio_wheel::wheel_options o;
  o.tick = 50ms; // about a hundred elements a tick
  o.expiry_batch = 8;
  asio_wheel::install(io, o);
  delay_queue<int> q(io);
  constexpr int n = 200;
  std::vector<steady_clock::time_point> expires_after(n), expires_by(n);
  for (int i = 0; i < n; ++i) {
    const auto delay = 60ms - i * 200us;
    expires_after[i] = steady_clock::now() + delay;
    q.push(i, delay);
    expires_by[i] = steady_clock::now() + delay + 1ms; // the clock's upper bound: 2 us
  }
  std::vector<int> got;
  for (int i = 0; i < n; ++i)
    q.async_take([&got](error_code ec, int v) {
      if (!ec) got.push_back(v);
    });
  io.run();
  BOOST_TEST_REQUIRE(got.size() == std::size_t(n));
  int out_of_order = 0;
  for (std::size_t i = 0; i + 1 < got.size(); ++i)
    out_of_order += expires_after[got[i]] > expires_by[got[i + 1]];
  BOOST_TEST(out_of_order == 0);
}

// A tick split by the batch is handed over as soon as its last element has come due,
// not a tick later, whoever's entries finish the tick. The hand-over step waited in the
// next tick's slot: on the steady clock the takes waited for the driver to fire at that
// tick (30 ms late), and among that tick's elements, which leave a slot in no order, it
// could run between two of them and hand out the later first. Now it waits for the
// tick's end off the slots and comes due when the tick ends, before the next tick's
// elements. Wake-ups, not time, tell the first: one at the tick; the next tick's would
// be a second. Elements in one tick: the first one's, whose end next_wakeup names.
BOOST_AUTO_TEST_CASE(steady_a_tick_split_by_the_batch_is_handed_over_when_it_ends) {
  for (bool rest_ours : {true, false}) {
    BOOST_TEST_CONTEXT("the tick's rest is the queue's own: " << rest_ours) {
      asio::io_context io;
      asio_wheel::wheel_options o;
      o.tick = 30ms;
      o.expiry_batch = 1;
      auto& svc = asio_wheel::install(io, o);
      delay_queue<int> q(io), other(io);
      q.push(0, 15ms);
      const auto tick_end = svc.stats().next_wakeup;
      auto& rest = rest_ours ? q : other;
      rest.push(1, tick_end - 2ms - steady_clock::now()); // in (tick_end - 30 ms, tick_end]
      rest.push(2, tick_end - 2ms - steady_clock::now());
      std::vector<int> got;
      for (std::size_t i = 0; i < (rest_ours ? 3u : 1u); ++i)
        q.async_take([&got](error_code ec, int v) {
          if (!ec) got.push_back(v);
        });
      io.run();
      BOOST_TEST(got.size() == (rest_ours ? 3u : 1u));
      BOOST_TEST(svc.stats().wakeups == 1u);
    }
  }
}

// The order half, set up as a review found it: tick T holds five entries (four of
// another queue's, and "a1"), so a batch of four leaves one of them in T's slot; the
// next tick holds "x1" and then "x2", on chains that its walk takes x2 first from. The
// hand-over step parked in that slot ran between them and gave x2 to the second take.
// (Chains are handed out in push order; the two elements never waited on ("g") move the
// chain count on. Ticks of 100 ms: the test waits about half a second.)
BOOST_AUTO_TEST_CASE(steady_a_split_tick_is_handed_over_before_the_next_ticks_elements) {
  asio::io_context io;
  asio_wheel::wheel_options o;
  o.tick = 100ms;
  o.expiry_batch = 4;
  auto& svc = asio_wheel::install(io, o);
  delay_queue<std::string> q(io), other(io);
  const auto probe = other.push("probe", 150ms);
  const auto probe_tick = svc.stats().next_wakeup; // T ends at probe_tick + 100 ms
  other.erase(probe);
  auto at = [&](std::chrono::milliseconds offset) { return probe_tick + offset - svc.now(); };
  for (int i = 0; i < 3; ++i) other.push("f", at(40ms));
  q.push("a1", at(50ms));
  other.push("f", at(60ms));
  const auto g1 = other.push("g", 1h), g2 = other.push("g", 1h);
  q.push("x1", at(110ms));
  q.push("x2", at(120ms));
  strings got;
  for (int i = 0; i < 3; ++i)
    q.async_take([&](error_code ec, std::string s) {
      got.push_back(ec ? "!" + ec.message() : s);
      if (got.size() == 3) { // nothing left to wait for: run() returns
        other.erase(g1);
        other.erase(g2);
      }
    });
  io.run();
  BOOST_TEST((got == strings{"a1", "x1", "x2"}));
}

// Elements that hold a timer with a wait pending, on the queue's own shard. The queue
// moved its elements under the shard's lock, and the timer's move took that lock again
// for its wait: take and erase waited for themselves, forever. Now the element leaves
// its node outside the lock, and the wait moves along to complete at the timer's expiry.
BOOST_AUTO_TEST_CASE(elements_holding_timers_with_waits_move_without_deadlock) {
  fixture f;
  using element = std::optional<asio_wheel::timer>;
  delay_queue<element> q(f.io);
  int timer_waits = 0;
  auto element_with_wait = [&](steady_clock::duration expiry) {
    element e(std::in_place, f.io, expiry);
    e->async_wait([&timer_waits](error_code ec) { timer_waits += !ec; });
    return e;
  };
  q.push(element_with_wait(5ms), 1ms);
  const auto doomed = q.push(element_with_wait(5ms), 1ms);
  BOOST_TEST(q.erase(doomed)); // destroyed outside the lock: its wait aborts
  element taken;
  q.async_take([&taken](error_code ec, element e) {
    BOOST_TEST(!ec);
    taken = std::move(e);
  });
  f.advance(1ms); // the take gets the element, moved with its wait
  BOOST_TEST_REQUIRE(taken.has_value());
  BOOST_TEST(timer_waits == 0);
  f.advance(4ms);
  BOOST_TEST(timer_waits == 1); // the wait came along
  BOOST_TEST(f.svc.stats().pending == 0u);
}

// An element's move constructor and destructor may call its own queue, and another
// queue on another shard: no element that is not trivially copyable is moved or
// destroyed under a shard's lock. (When take and erase moved elements under the lock,
// a call back into the same queue waited for itself; one into a queue on another shard
// held two shards' locks, which two threads doing the same in turn could deadlock on.)
namespace {
struct calls_queues {
  static inline std::vector<const delay_queue<calls_queues>*> queues;
  static inline std::size_t calls = 0;
  int v = 0;
  calls_queues() = default;
  explicit calls_queues(int x) : v(x) {}
  calls_queues(calls_queues&& o) noexcept : v(o.v) { call_all(); }
  calls_queues& operator=(calls_queues&&) = default;
  ~calls_queues() { call_all(); }
  static void call_all() noexcept {
    for (const auto* q : queues) calls += q->size() + 1; // size() takes its shard's lock
  }
};
} // namespace

BOOST_AUTO_TEST_CASE(elements_may_call_queues_from_their_move_and_destructor) {
  asio::io_context io; // two shards: on the steady clock (advance() moves one wheel)
  asio_wheel::wheel_options o;
  o.shards = 2;
  o.sharding = asio_wheel::shard_policy::round_robin;
  asio_wheel::install(io, o);
  delay_queue<calls_queues> a(io), b(io); // one on each shard
  calls_queues::queues = {&a, &b};
  std::vector<int> got;
  auto take = [&got](error_code ec, calls_queues e) { got.push_back(ec ? -1 : e.v); };
  a.async_take(take); // started before the element: handed over by a wheel step
  a.push(calls_queues(1), 0ms);
  const auto doomed = a.push(calls_queues(2), 1h);
  BOOST_TEST(a.erase(doomed));
  b.push(calls_queues(3), -1ms);
  io.run();
  b.async_take(take); // after its element expired: handed over at once, as if by post
  io.restart();
  io.run();
  calls_queues::queues.clear();
  BOOST_TEST((got == std::vector<int>{1, 3}));
  BOOST_TEST(calls_queues::calls > 0u);
  BOOST_TEST(a.size() == 0u);
  BOOST_TEST(b.size() == 0u);
}

// Trivially copyable elements are moved into a take under the lock, never copied: a
// move-only one compiles and arrives, and one with a constructor template of its own
// still gets its trivial move constructor, so no user code runs under the lock (the
// template here calls the queue, which waited for itself when the element was copied).
namespace {
struct move_only_ticket {
  int id = 0;
  move_only_ticket() = default;
  explicit move_only_ticket(int i) : id(i) {}
  move_only_ticket(move_only_ticket&&) = default;
  move_only_ticket& operator=(move_only_ticket&&) = default;
  move_only_ticket(const move_only_ticket&) = delete;
  move_only_ticket& operator=(const move_only_ticket&) = delete;
};
static_assert(std::is_trivially_copyable_v<move_only_ticket>);

struct forwarding_element {
  static inline const delay_queue<forwarding_element>* queue = nullptr;
  static inline int template_calls = 0;
  int v = 0;
  forwarding_element() = default;
  explicit forwarding_element(int x) : v(x) {}
  template <class U, class = std::enable_if_t<!std::is_same_v<std::decay_t<U>, int>>>
  forwarding_element(U&& other) : v(other.v) { // NOLINT: a converting constructor
    ++template_calls;
    if (queue) (void)queue->size();
  }
};
static_assert(std::is_trivially_copyable_v<forwarding_element>);
} // namespace

BOOST_AUTO_TEST_CASE(trivially_copyable_elements_are_moved_in_without_user_code) {
  fixture f;
  delay_queue<move_only_ticket> tickets(f.io);
  tickets.push(move_only_ticket(7), 1ms);
  BOOST_TEST(tickets.erase(tickets.push(move_only_ticket(8), 1ms)));
  int got = 0;
  tickets.async_take([&got](error_code ec, move_only_ticket t) { got = ec ? -1 : t.id; });
  f.advance(1ms);
  BOOST_TEST(got == 7);

  delay_queue<forwarding_element> q(f.io);
  q.push(forwarding_element(5), 1ms);
  f.advance(1ms);
  forwarding_element::queue = &q;
  forwarding_element::template_calls = 0;
  int v = 0;
  q.async_take([&v](error_code ec, forwarding_element e) { v = ec ? -1 : e.v; });
  f.settle();
  forwarding_element::queue = nullptr;
  BOOST_TEST(v == 5);
  BOOST_TEST(forwarding_element::template_calls == 0);
}

// An aborted take passes T(); when that throws, the exception leaves run() (as a
// handler's would), the take's memory goes back (LeakSanitizer), and its handler is
// never invoked. (It ended the program once take_values() was noexcept, and leaked the
// take's memory before.)
namespace {
struct throwing_default {
  static inline bool fail = false;
  std::string s;
  throwing_default() {
    if (fail) throw std::runtime_error("no T() today");
  }
  explicit throwing_default(std::string x) : s(std::move(x)) {}
  throwing_default(throwing_default&&) noexcept = default;
  throwing_default& operator=(throwing_default&&) = default;
};
} // namespace

BOOST_AUTO_TEST_CASE(an_aborted_take_whose_default_value_throws_frees_its_take) {
  fixture f;
  delay_queue<throwing_default> q(f.io);
  int calls = 0;
  q.async_take([&calls](error_code, throwing_default) { ++calls; });
  BOOST_TEST(q.cancel() == 1u);
  throwing_default::fail = true;
  BOOST_CHECK_THROW(f.settle(), std::runtime_error);
  throwing_default::fail = false;
  BOOST_TEST(calls == 0);
  BOOST_TEST(f.svc.stats().pending == 0u);
}

// A take that has its element but has not run yet when the queue is destroyed: the
// element, still in its node, reaches the handler, and the node is freed after (ASan
// tells a use after free or a leak). The same when the context is then destroyed
// instead of run: the take is destroyed, and with it the node.
BOOST_AUTO_TEST_CASE(a_take_completed_before_its_queue_is_destroyed_gets_its_element) {
  const std::string element(100, 'x'); // on the heap: ASan sees it used after free
  std::string got;
  {
    fixture f;
    auto q = std::make_unique<delay_queue<std::string>>(f.io);
    q->push(element, 1ms);
    q->push(element, 1ms);
    f.advance(1ms);
    q->async_take([&got](error_code ec, std::string s) { got = ec ? "!" : std::move(s); });
    const auto recycled = q->push("recycled", 1ms); // the taken node is not reused
    q.reset();
    BOOST_TEST(got.empty()); // never inside async_take
    f.settle();
    BOOST_TEST(got == element);
    (void)recycled;
  }
  bool ran = false;
  {
    fixture f;
    auto q = std::make_unique<delay_queue<std::string>>(f.io);
    q->push(element, 1ms);
    f.advance(1ms);
    q->async_take([&ran](error_code, std::string) { ran = true; });
    q.reset();
  } // the context goes without running it: the take and its node are destroyed
  BOOST_TEST(!ran);
}

// ---- moves ----

BOOST_AUTO_TEST_CASE(a_move_carries_elements_takes_and_keys) {
  fixture f;
  delay_queue<std::string> a(f.io);
  a.push("x", 10ms);
  const auto ky = a.push("y", 20ms);
  a.push("z", 30ms);
  strings got;
  take_into(a, got);
  delay_queue<std::string> b(std::move(a));
  f.settle();
  BOOST_TEST(got.empty()); // a move completes nothing
  BOOST_TEST(b.size() == 3u);
  BOOST_TEST(a.size() == 0u);
  BOOST_TEST(!a.erase(ky)); // a's old keys are stale for a, and name b's elements
  BOOST_TEST(b.erase(ky));
  f.advance(10ms); // the take started on `a` completes from b
  BOOST_TEST((got == strings{"x"}));
  f.advance(20ms);
  BOOST_TEST((drain(f, b, 1) == strings{"z"}));
  BOOST_TEST(b.size() == 0u);
  // The moved-from queue is a new, empty one on the same executor.
  BOOST_TEST((a.get_executor() == b.get_executor()));
  a.push("again", 1ms);
  f.advance(1ms);
  BOOST_TEST((drain(f, a, 1) == strings{"again"}));
  BOOST_TEST(f.svc.stats().pending == 0u);
}

// Two contexts, so two shards: the target goes to the source's shard and context.
BOOST_AUTO_TEST_CASE(a_move_assignment_destroys_the_targets_elements_and_aborts_its_takes) {
  fixture f1, f2;
  {
    delay_queue<tracked> source(f1.io), target(f2.io);
    for (int i = 0; i < 3; ++i) source.push(tracked(i), std::chrono::milliseconds(10 * (i + 1)));
    const auto kept = source.push(tracked(7), 1h);
    const auto gone = target.push(tracked(100), 1ms);
    target.push(tracked(101), 1h);
    error_code target_take;
    int target_takes = 0;
    target.async_take([&](error_code ec, tracked) { target_take = ec, ++target_takes; });
    BOOST_TEST(tracked::live == 6);
    target = std::move(source);
    BOOST_TEST(tracked::live == 4); // the target's two are destroyed
    f2.settle();
    BOOST_TEST(target_takes == 1);
    BOOST_TEST((target_take == net::error::operation_aborted));
    BOOST_TEST(f2.svc.stats().pending == 0u);
    f2.advance(1h); // nothing of the target's old elements is left on f2's wheel
    BOOST_TEST(!target.erase(gone));
    BOOST_TEST((target.get_executor() == net::any_io_executor(f1.io.get_executor())));
    std::vector<int> got;
    for (int i = 0; i < 3; ++i)
      target.async_take([&](error_code ec, tracked t) {
        if (!ec) got.push_back(t.v);
      });
    for (int i = 0; i < 30; ++i) f1.advance(1ms);
    BOOST_TEST((got == std::vector<int>{0, 1, 2}));
    BOOST_TEST(target.erase(kept));
    BOOST_TEST(target.size() == 0u);
    BOOST_TEST(source.size() == 0u);
  }
  BOOST_TEST(tracked::live == 0);

  // From a queue on io_context::executor_type, constructing and assigning.
  using io_queue = asio_wheel::basic_delay_queue<std::string, net::io_context::executor_type>;
  io_queue narrow(f2.io);
  narrow.push("n", 1ms);
  delay_queue<std::string> wide(std::move(narrow));
  io_queue narrow2(f2.io);
  narrow2.push("n2", 2ms);
  wide = std::move(narrow2);
  f2.advance(2ms);
  BOOST_TEST((drain(f2, wide, 1) == strings{"n2"}));
  BOOST_TEST(wide.size() == 0u);
}

// Takes hold their element's node until the handler has the value; the queue moves in
// between, and the node goes back to the queue at its new address, to be reused there.
BOOST_AUTO_TEST_CASE(a_node_held_by_a_take_goes_back_to_the_moved_queue) {
  fixture f;
  auto a = std::make_unique<delay_queue<std::string>>(f.io);
  a->push(std::string(100, 'x'), 1ms); // on the heap: ASan sees a node used after free
  f.advance(1ms);
  strings got;
  take_into(*a, got); // completes as if by post, holding the node
  delay_queue<std::string> b(std::move(*a));
  a.reset();
  f.settle();
  BOOST_TEST((got == strings{std::string(100, 'x')}));
  b.push("reused", 1ms);
  f.advance(1ms);
  BOOST_TEST((drain(f, b, 1) == strings{"reused"}));
}

// The queue moves between every two handlers while a tick split by the batch (steady
// clock) is handed over: its hand-over step is parked until the tick's end at some of
// those moves, in the wheel's due list at others, and finds the queue wherever it is.
BOOST_AUTO_TEST_CASE(steady_a_queue_moved_between_every_handler_hands_over_in_order) {
  asio::io_context io;
  asio_wheel::wheel_options o;
  o.tick = 50ms;
  o.expiry_batch = 4;
  asio_wheel::install(io, o);
  auto q = std::make_unique<delay_queue<int>>(io);
  constexpr int n = 60;
  for (int i = 0; i < n; ++i) q->push(i, 20ms + i * 100us); // one or two ticks
  std::vector<int> got;
  for (int i = 0; i < n; ++i)
    q->async_take([&got](error_code ec, int v) {
      if (!ec) got.push_back(v);
    });
  std::size_t moves = 0;
  while (io.run_one() != 0) {
    q = std::make_unique<delay_queue<int>>(std::move(*q));
    ++moves;
  }
  BOOST_TEST(moves >= 2u * n / 4); // a step per batch of expiries, then of hand-overs
  std::vector<int> sorted(n);
  std::iota(sorted.begin(), sorted.end(), 0);
  BOOST_TEST(got == sorted, boost::test_tools::per_element());
}

namespace {
// An element whose destructor pushes a follow-up into the queue it belonged to.
struct requeue {
  static inline int live = 0;
  delay_queue<requeue>* home = nullptr;
  requeue() noexcept { ++live; }
  explicit requeue(delay_queue<requeue>* q) noexcept : home(q) { ++live; }
  requeue(requeue&& o) noexcept : home(std::exchange(o.home, nullptr)) { ++live; }
  requeue& operator=(requeue&& o) noexcept {
    home = std::exchange(o.home, nullptr);
    return *this;
  }
  ~requeue() {
    --live;
    if (auto* q = std::exchange(home, nullptr)) q->push(requeue(), 1ms);
  }
};
} // namespace

// Clearing a queue (its destruction, or a move assignment to it) destroys its elements
// outside the lock, and one's destructor may push into the same queue: the new element
// went on the wheel after the queue had let go of its nodes, and came due into a freed
// queue (a review found it, ASan: heap-use-after-free). Now clearing goes round until
// a round destroys no element.
BOOST_AUTO_TEST_CASE(an_element_pushing_into_its_queue_as_the_queue_clears_goes_too) {
  fixture f;
  {
    auto target = std::make_unique<delay_queue<requeue>>(f.io);
    delay_queue<requeue> source(f.io);
    target->push(requeue(target.get()), 1h);
    source.push(requeue(), 1h);
    *target = std::move(source); // the target's element pushes a follow-up as it goes
    BOOST_TEST(target->size() == 1u); // the source's element alone
    target->push(requeue(target.get()), 1h);
    target.reset(); // and again as the queue is destroyed
  }
  BOOST_TEST(requeue::live == 0);
  f.advance(1h); // nothing of the queues is left on the wheel to come due
  BOOST_TEST(requeue::live == 0);
}

// Ties inside one tick, pushed with decreasing delays: push order breaks each tie.
BOOST_AUTO_TEST_CASE(decreasing_delays_inside_one_tick_come_out_earliest_first) {
  fixture f;
  delay_queue<int> q(f.io);
  for (int i = 0; i < 1000; ++i) q.push(i, std::chrono::microseconds(1000 - i / 2)); // pairs tie
  f.advance(1ms);
  std::vector<int> got;
  for (int i = 0; i < 1000; ++i)
    q.async_take([&got](error_code, int v) { got.push_back(v); });
  f.settle();
  BOOST_TEST_REQUIRE(got.size() == 1000u);
  BOOST_TEST(got.front() == 998); // delay 501 us: the earliest
  for (std::size_t i = 0; i + 1 < got.size(); i += 2) {
    BOOST_TEST(got[i] + 1 == got[i + 1]); // a tie: push order
    if (i + 2 < got.size()) BOOST_TEST(got[i + 2] == got[i] - 2); // then the next expiry
  }
}

// The expired queue alone (a sorted run with a heap beside it), against a std::map of
// the same keys: pushes mostly in key order (the run's back), a little before it (sorted
// into the run's last keys, past holes among them), far before it (the heap), pops,
// erases anywhere (holes in the run), so that the ring wraps, grows, and fills with
// holes (pushes then go to the heap). The front must always be the least key, and every
// node's place must stay true (an erase through a stale one breaks the queue).
BOOST_AUTO_TEST_CASE(expired_queue_fronts_the_least_key_under_every_operation) {
  struct node {
    asio_wheel::detail::steady_time expiry;
    std::uint64_t seq = 0;
    std::uint64_t expired_place = 0;
  };
  using key = std::pair<asio_wheel::detail::steady_time, std::uint64_t>;
  asio_wheel::detail::expired_queue<node> q;
  std::deque<node> nodes; // stable addresses
  std::map<key, node*> ref;
  std::mt19937 rng(20261124);
  auto t = asio_wheel::detail::steady_time();
  std::uint64_t seq = 0;
  std::size_t checked = 0;
  auto check_front = [&] {
    BOOST_REQUIRE_EQUAL(q.empty(), ref.empty());
    if (!ref.empty()) BOOST_REQUIRE(&q.top() == ref.begin()->second);
    ++checked;
  };
  for (int step = 0; step < 50000; ++step) {
    const unsigned r = rng() % 16;
    if (r < 7 || ref.empty()) {
      // In order, a tie (push order breaks it), or one that comes before the back.
      const unsigned how = rng() % 8;
      const auto expiry = how == 0   ? t - std::chrono::nanoseconds(rng() % 50)
                          : how == 1 ? t
                          : how == 2 ? t - std::chrono::nanoseconds(rng() % 1000)
                                     : (t += std::chrono::nanoseconds(rng() % 5));
      node& n = nodes.emplace_back(node{expiry, seq++});
      q.reserve(ref.size() + 1);
      q.push(n);
      ref.emplace(key{n.expiry, n.seq}, &n);
    } else if (r < 11) {
      q.pop();
      ref.erase(ref.begin());
    } else if (r < 15) {
      // Anywhere: the back, the middle, the front.
      auto it = ref.begin();
      std::advance(it, rng() % ref.size());
      q.erase(*it->second);
      ref.erase(it);
    } else if (rng() % 64 == 0) {
      q.clear();
      ref.clear();
    }
    check_front();
  }
  while (!ref.empty()) {
    q.pop();
    ref.erase(ref.begin());
    check_front();
  }
  BOOST_TEST(checked > 50000u);
}
