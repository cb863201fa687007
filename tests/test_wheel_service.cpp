// wheel_service itself rather than any one timer: install() and its options (bad
// values, a geometry too large to build, installing twice or after first use),
// advance() on the manual clock, the error category, max_pending, expiry_batch,
// stats(), shards (how many, where they are refused, waits spread over them, one
// max_pending for all), the steady driver's wake-ups, and the single-threaded mode
// without a lock. The timer's own semantics are in test_timer.cpp.
#define BOOST_TEST_MODULE wheel_service
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "manual_clock.hpp"

#include <asio_wheel.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using asio_wheel::clock_mode;
using asio_wheel::wheel_options;

namespace {

using asio_wheel_test::aborted;
using asio_wheel_test::manual_options;
using asio_wheel_test::recorder;
using fixture = asio_wheel_test::manual_context;

} // namespace

// ---- options and install() ----

BOOST_AUTO_TEST_CASE(install_rejects_bad_options_with_clear_messages) {
  auto rejects = [](wheel_options o, const std::string& what) {
    asio::io_context io;
    try {
      asio_wheel::install(io, o);
      BOOST_ERROR("accepted bad options: " + what);
    } catch (const std::invalid_argument& e) {
      BOOST_TEST(std::string(e.what()).find(what) != std::string::npos, e.what());
    }
  };
  wheel_options o;
  o.tick = 0ms;
  rejects(o, "tick");
  o = {};
  o.tick = -1ms;
  rejects(o, "tick");
  o = {};
  o.slots = 100;
  rejects(o, "power of two");
  o.slots = 1;
  rejects(o, "power of two");
  o.slots = std::size_t{1} << 21;
  rejects(o, "power of two");
  o = {};
  o.tick = std::chrono::steady_clock::duration::max(); // tick 1 is past the clock's end
  rejects(o, "tick * slots");
  o.slots = 2;
  rejects(o, "tick * slots");
  o = {};
  o.clock = static_cast<clock_mode>(2);
  rejects(o, "clock");
  o = {};
  o.locking = static_cast<asio_wheel::locking_mode>(-1);
  rejects(o, "locking");
  o = {};
  o.levels = 0;
  rejects(o, "levels");
  o = {};
  o.slots = 256;
  o.levels = 9; // 9 * 8 bits > 64
  rejects(o, "64");
  o.slots = 2;
  o.levels = 64; // exactly 64 bits: fine
  asio::io_context io;
  BOOST_CHECK_NO_THROW(asio_wheel::install(io, o));
}

// The longest tick install() takes still puts tick 1 at a time the clock reaches: a
// wait completes once virtual time passes it (a tick of duration::max() made every
// finite wait round up to time_point::max(), which never comes).
BOOST_AUTO_TEST_CASE(the_longest_tick_accepted_still_completes_a_wait) {
  using duration = std::chrono::steady_clock::duration;
  wheel_options o = manual_options();
  o.tick = duration::max() / 2 / static_cast<duration::rep>(o.slots);
  fixture f(o);
  asio_wheel::timer t(f.io);
  t.expires_after(1ns);
  recorder r;
  t.async_wait(r.handler(f));
  f.advance(o.tick - 1ns);
  BOOST_TEST(r.calls == 0);
  f.advance(1ns);
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(!r.ec);
  o.tick += duration(1);
  asio::io_context refused;
  BOOST_CHECK_THROW(asio_wheel::install(refused, o), std::invalid_argument);
}

// The largest geometry that passes the per-wheel checks, times 16 shards, is 6 GiB of
// slots: install() says so instead of taking seconds to build it.
BOOST_AUTO_TEST_CASE(install_rejects_a_geometry_too_large_to_build_and_says_why) {
  asio::io_context io;
  wheel_options o;
  o.slots = std::size_t{1} << 20;
  o.levels = 3;
  o.shards = 16;
  try {
    asio_wheel::install(io, o);
    BOOST_ERROR("accepted 2^20 slots * 3 levels * 16 shards");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("6192 MiB") != std::string::npos, what);
    BOOST_TEST(what.find("fewer slots, levels or shards") != std::string::npos, what);
  }
  o.shards = 1; // 387 MiB: still refused
  o.clock = clock_mode::manual;
  BOOST_CHECK_THROW(asio_wheel::install(io, o), std::invalid_argument);
  o.levels = 1; // 2^20 slots, 129 MiB: allowed
  BOOST_TEST(asio_wheel::install(io, o).shard_count() == 1u);
}

BOOST_AUTO_TEST_CASE(install_twice_or_after_use_throws_service_already_exists) {
  asio::io_context io;
  asio_wheel::install(io, manual_options());
  BOOST_CHECK_THROW(asio_wheel::install(io, manual_options()), asio::service_already_exists);
  asio::io_context io2;
  asio_wheel::timer t(io2); // creates the default service
  BOOST_CHECK_THROW(asio_wheel::install(io2, manual_options()), asio::service_already_exists);
  auto& svc = asio::use_service<asio_wheel::wheel_service>(io2);
  BOOST_TEST(svc.options().slots == 256u);
  BOOST_TEST(svc.options().levels == 4u);
  BOOST_TEST((svc.options().clock == clock_mode::steady));
}

// ---- the manual clock and the error category ----

BOOST_AUTO_TEST_CASE(advance_is_for_manual_mode_and_forward_only) {
  asio::io_context io;
  auto& steady = asio::use_service<asio_wheel::wheel_service>(io);
  BOOST_CHECK_THROW(steady.advance(1ms), std::logic_error);
  fixture f;
  BOOST_CHECK_THROW(f.svc.advance(-1ms), std::invalid_argument);
  const auto t0 = f.svc.now();
  f.svc.advance(5ms);
  BOOST_TEST((f.svc.now() - t0 == 5ms));
}

BOOST_AUTO_TEST_CASE(error_category_names_the_limit) {
  error_code ec = asio_wheel::error::too_many_timers;
  BOOST_TEST(ec.category().name() == std::string("asio_wheel"));
  BOOST_TEST(ec.message().find("max_pending") != std::string::npos);
  BOOST_TEST(&ec.category() == &asio_wheel::error::category());
}

// ---- limits, batches, stats ----

BOOST_AUTO_TEST_CASE(max_pending_rejects_with_too_many_timers_and_disturbs_nothing) {
  auto o = manual_options();
  o.max_pending = 2;
  fixture f(o);
  asio_wheel::timer a(f.io, 1ms), b(f.io, 1ms), c(f.io, 1ms);
  recorder ra, rb, rc;
  a.async_wait(ra.handler(f));
  b.async_wait(rb.handler(f));
  c.async_wait(rc.handler(f));
  BOOST_TEST(rc.calls == 0); // as if by post
  f.settle();
  BOOST_TEST(rc.calls == 1);
  BOOST_TEST(rc.ec == asio_wheel::error::too_many_timers);
  BOOST_TEST(f.svc.stats().rejected == 1u);
  f.advance(1ms);
  BOOST_TEST(ra.calls == 1);
  BOOST_TEST(rb.calls == 1);
  BOOST_TEST(!ra.ec);
  recorder again;
  c.async_wait(again.handler(f)); // room again
  f.advance(1ms);
  BOOST_TEST(!again.ec);
}

BOOST_AUTO_TEST_CASE(expiry_batch_bounds_completions_per_step_without_reordering) {
  auto o = manual_options();
  o.expiry_batch = 100;
  fixture f(o);
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  std::vector<int> order;
  std::vector<error_code> codes(250);
  for (int i = 0; i < 250; ++i) {
    timers.push_back(std::make_unique<asio_wheel::timer>(f.io, std::chrono::milliseconds(1 + i / 100)));
    timers.back()->async_wait([&order, &codes, i](error_code ec) {
      order.push_back(i);
      codes[static_cast<std::size_t>(i)] = ec;
    });
  }
  f.svc.advance(5ms);
  f.io.restart();
  BOOST_TEST(f.io.run_one() == 1u); // one step
  BOOST_TEST(order.size() == 100u);
  // The rest are still on the wheel's due list: a cancel in between reaches them, and
  // its aborted completion leads the next step, outside the batch (it was ready when
  // the step began), which then takes 100 more expiries.
  BOOST_TEST(timers[249]->cancel() == 1u);
  f.io.run_one();
  BOOST_TEST(order.size() == 201u);
  BOOST_TEST(order[100] == 249);
  f.settle();
  BOOST_TEST(order.size() == 250u);
  std::vector<int> expired;
  for (int i : order)
    if (i != 249) expired.push_back(i);
  // Expiry order: the waits of each tick (i / 100) before those of the next; within a
  // tick in no particular order. Each exactly once.
  BOOST_REQUIRE(expired.size() == 249u);
  for (std::size_t k = 1; k < expired.size(); ++k)
    BOOST_TEST(expired[k - 1] / 100 <= expired[k] / 100);
  std::sort(expired.begin(), expired.end());
  for (int i = 0; i < 249; ++i) BOOST_TEST(expired[static_cast<std::size_t>(i)] == i);
  BOOST_TEST(codes[249] == aborted);
  BOOST_TEST(!codes[248]);
}

// On the steady clock a step can stop inside a tick (expiry_batch). When a handler of
// that tick cancels the tick's other waits, the tick is over: the next wake-up is the
// next wait's, not the passed tick's. Before, the wheel kept the tick unfinished, and
// stats() failed an assertion (nothing else slotted) or named the past (a wait an hour
// away), where the driver was armed too. The test waits for one tick, about 5 ms: no
// sleep, no time limit.
BOOST_AUTO_TEST_CASE(steady_a_split_tick_whose_rest_is_cancelled_is_over) {
  asio::io_context io;
  asio_wheel::wheel_options o;
  o.expiry_batch = 1;
  o.shards = 1;
  auto& svc = asio_wheel::install(io, o);
  const auto at = std::chrono::steady_clock::now() + 5ms;
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  asio_wheel::timer later(io);
  std::vector<error_code> codes;
  std::chrono::steady_clock::time_point wake_when_alone{}, wake_with_later{};
  for (int i = 0; i < 3; ++i) {
    timers.push_back(std::make_unique<asio_wheel::timer>(io, at));
    timers.back()->async_wait([&](error_code ec) {
      codes.push_back(ec);
      if (codes.size() != 1) return;
      for (auto& t : timers) t->cancel(); // the other two, still in the tick's slot
      wake_when_alone = svc.stats().next_wakeup;
      later.expires_after(1h);
      later.async_wait([](error_code) {});
      wake_with_later = svc.stats().next_wakeup;
      later.cancel();
    });
  }
  io.run();
  BOOST_TEST_REQUIRE(codes.size() == 3u);
  BOOST_TEST(!codes[0]);
  BOOST_TEST(codes[1] == aborted);
  BOOST_TEST(codes[2] == aborted);
  BOOST_TEST((wake_when_alone == std::chrono::steady_clock::time_point::max()));
  // The start of the hour's slot (a level-2 slot spans 65.5 s), not the passed tick.
  BOOST_TEST((wake_with_later >= at + 30min));
}

// A handler that starts an operation completing at once (a wait whose expiry has
// passed, a take with an element expired) gets it completed in the same step, not in a
// posted one, up to expiry_batch completions per step; still never inside the
// initiating call.
BOOST_AUTO_TEST_CASE(chained_operations_complete_in_the_running_step_up_to_the_batch) {
  auto o = manual_options();
  o.expiry_batch = 4;
  fixture f(o);
  asio_wheel::timer t(f.io);
  int completed = 0;
  bool inside_initiation = false;
  std::function<void(error_code)> next = [&](error_code ec) {
    BOOST_TEST(!ec);
    BOOST_TEST(!inside_initiation);
    if (++completed == 10) return;
    t.expires_at(asio_wheel::timer::time_point::min());
    inside_initiation = true;
    t.async_wait(next);
    inside_initiation = false;
  };
  t.async_wait(next); // expiry time_point(): passed
  BOOST_TEST(completed == 0);
  f.io.restart();
  BOOST_TEST(f.io.run_one() == 1u); // one step: the batch of 4
  BOOST_TEST(completed == 4);
  BOOST_TEST(f.io.run_one() == 1u);
  BOOST_TEST(completed == 8);
  f.settle();
  BOOST_TEST(completed == 10);

  // Takes started from the previous take's handler, on elements expired already.
  asio_wheel::delay_queue<int> q(f.io);
  for (int i = 0; i < 6; ++i) q.push(i, -1ms);
  f.settle(); // a step moves them to the expired elements
  std::vector<int> taken;
  std::function<void(error_code, int)> take = [&](error_code ec, int v) {
    BOOST_TEST(!ec);
    taken.push_back(v);
    if (taken.size() < 6) q.async_take(take);
  };
  q.async_take(take); // ready before the step: it completes outside the batch
  f.io.restart();
  BOOST_TEST(f.io.run_one() == 1u);
  BOOST_TEST(taken.size() == 5u); // the first take, and a chain of 4
  f.settle();
  BOOST_TEST((taken == std::vector<int>{0, 1, 2, 3, 4, 5}));
}

// Aborted completions are the context's own doing (cancel, expires_*, destruction), not
// time's: a step completes all that were queued before it, whatever expiry_batch says,
// as Asio runs every cancelled handler in its scheduler's next round. Bounded by the
// batch, a context whose handlers cancel more waits per round than the batch (a busy
// server: each stream cancels its wait whenever it goes quiet) piled them up in the
// ready queue without end, each holding its operation's memory (found by W10: about 90
// bytes more per request at 10k connections).
BOOST_AUTO_TEST_CASE(aborted_completions_queued_before_a_step_all_complete_in_it) {
  auto o = manual_options();
  o.expiry_batch = 4;
  fixture f(o);
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  for (int i = 0; i < 10; ++i) timers.push_back(std::make_unique<asio_wheel::timer>(f.io, 1h));
  std::size_t aborted_count = 0;
  const auto on_wait = [&aborted_count](error_code ec) {
    BOOST_TEST(ec == aborted);
    ++aborted_count;
  };
  // Rounds of the context, each with one step and a handler that cancels 10 waits
  // and starts them again (a plain post, as a stream's handler): the ready queue
  // must not grow from round to round.
  for (auto& t : timers) t->async_wait(on_wait);
  int rounds = 0;
  std::function<void()> round = [&] {
    for (auto& t : timers) {
      BOOST_TEST(t->cancel() == 1u);
      t->async_wait(on_wait);
    }
    if (++rounds < 50) asio::post(f.io, round);
  };
  asio::post(f.io, round);
  f.io.restart();
  for (int r = 0; r < 50; ++r) {
    BOOST_TEST(f.io.run_one() == 1u); // a round, which posts a step by its cancels
    const std::size_t before = aborted_count;
    BOOST_TEST(f.io.run_one() == 1u); // that step
    BOOST_TEST(aborted_count - before == 10u); // all of them, not 4
  }
  BOOST_TEST(rounds == 50);
  for (auto& t : timers) BOOST_TEST(t->cancel() == 1u);
  f.settle();
  BOOST_TEST(aborted_count == 510u);
}

// I/O objects find their context's service through a per-thread cache of the last
// lookup. A context destroyed and another built at the same address must not get the
// old (freed) service: the timer below must live on the new context's manual wheel.
BOOST_AUTO_TEST_CASE(a_new_context_at_a_dead_contexts_address_gets_its_own_service) {
  alignas(asio::io_context) unsigned char storage[sizeof(asio::io_context)];
  auto* first = ::new (static_cast<void*>(storage)) asio::io_context;
  {
    asio_wheel::timer t(*first); // caches first's service on this thread
  }
  first->~io_context();
  auto* second = ::new (static_cast<void*>(storage)) asio::io_context;
  BOOST_TEST(static_cast<void*>(second) == static_cast<void*>(first));
  asio_wheel::wheel_service& svc = asio_wheel::install(*second, manual_options());
  {
    asio_wheel::timer t(*second, 5ms);
    int calls = 0;
    t.async_wait([&](error_code ec) {
      BOOST_TEST(!ec);
      ++calls;
    });
    BOOST_TEST(svc.stats().pending == 1u); // on second's wheel, not a stale one
    svc.advance(5ms);
    second->poll();
    BOOST_TEST(calls == 1);
  }
  second->~io_context();
}

BOOST_AUTO_TEST_CASE(stats_count_what_happened) {
  fixture f;
  asio_wheel::timer a(f.io, 1ms), b(f.io, 3ms), c(f.io, 1s);
  a.async_wait([](error_code) {});
  b.async_wait([](error_code) {});
  c.async_wait([](error_code) {});
  BOOST_TEST(f.svc.stats().pending == 3u);
  f.advance(5ms);
  c.cancel();
  f.settle();
  auto s = f.svc.stats();
  BOOST_TEST(s.pending == 0u);
  BOOST_TEST(s.expired == 2u);
  BOOST_TEST(s.cancelled == 1u);
  BOOST_TEST(s.wakeups == 0u); // manual mode has no driver
  // a was due at 1 ms and handed over when virtual time reached 5 ms.
  BOOST_TEST(s.max_lateness.count() == std::chrono::nanoseconds(4ms).count());
}

// ---- shards ----

BOOST_AUTO_TEST_CASE(shard_count_follows_the_options_and_the_context) {
  auto count = [](int hint, wheel_options o) {
    asio::io_context io(hint);
    return asio_wheel::install(io, o).shard_count();
  };
  const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
  wheel_options o;
  // A hint of 1 says one thread runs the context, not that no other thread uses it
  // (Asio still locks; a thread_pool(1) is used from other threads): a lock, and shards
  // by the cores. Where asio::config could read the hint (Boost 1.87 and later), it
  // took both away: a thread_pool(1)'s timers, started from the owner's thread, raced
  // the pool's steps (TSan) and broke the wheel's counts (assertions).
  BOOST_TEST(count(1, o) == std::min<std::size_t>(hw, 16));
#if (defined(ASIO_WHEEL_STANDALONE) && __has_include(<asio/config.hpp>)) || \
    (!defined(ASIO_WHEEL_STANDALONE) && __has_include(<boost/asio/config.hpp>))
  BOOST_TEST(count(ASIO_WHEEL_TEST_HINT_UNSAFE, o) == 1u); // Asio takes no lock: nor do we
#endif
  o.locking = asio_wheel::locking_mode::off;
  BOOST_TEST(count(4, o) == 1u); // no lock, one thread: one wheel
  o = wheel_options{};
  o.clock = clock_mode::manual;
  BOOST_TEST(count(4, o) == 1u); // advance() moves one wheel
  o = wheel_options{};
  BOOST_TEST(count(4, o) == std::min<std::size_t>(hw, 16));
  o.shards = 3;
  BOOST_TEST(count(1, o) == 3u); // asked for explicitly
}

BOOST_AUTO_TEST_CASE(shards_are_rejected_where_they_cannot_work) {
  asio::io_context io;
  wheel_options o;
  o.shards = 2;
  o.clock = clock_mode::manual;
  BOOST_CHECK_THROW(asio_wheel::install(io, o), std::invalid_argument);
  o.clock = clock_mode::steady;
  o.shards = 17;
  BOOST_CHECK_THROW(asio_wheel::install(io, o), std::invalid_argument);
  o.shards = 2;
  o.sharding = static_cast<asio_wheel::shard_policy>(7);
  BOOST_CHECK_THROW(asio_wheel::install(io, o), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(objects_live_on_their_constructing_threads_shard_unless_round_robin) {
  using access = asio_wheel::detail::service_access;
  using shard = asio_wheel::detail::wheel_shard;
  for (auto policy : {asio_wheel::shard_policy::by_thread, asio_wheel::shard_policy::round_robin}) {
    asio::io_context io;
    wheel_options o;
    o.shards = 2;
    o.sharding = policy;
    auto& svc = asio_wheel::install(io, o);
    // Two threads, one after the other, each building three objects: numbered one
    // after the other, they get different shards.
    const shard* built[2][3];
    for (auto& thread_built : built)
      std::thread([&] {
        for (auto& s : thread_built) s = &access::next_shard(svc);
      }).join();
    if (policy == asio_wheel::shard_policy::by_thread) {
      for (auto& thread_built : built)
        for (auto* s : thread_built) BOOST_TEST(s == thread_built[0]);
      BOOST_TEST(built[0][0] != built[1][0]);
    } else {
      for (auto& thread_built : built) { // taking turns
        BOOST_TEST(thread_built[0] != thread_built[1]);
        BOOST_TEST(thread_built[0] == thread_built[2]);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(timers_spread_over_shards_complete_never_early_and_are_counted_once) {
  asio::io_context io;
  wheel_options o;
  o.shards = 4;
  o.sharding = asio_wheel::shard_policy::round_robin; // one thread, every shard used
  auto& svc = asio_wheel::install(io, o);
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  int fired = 0, aborted_count = 0, early = 0;
  for (int i = 0; i < 40; ++i) {
    timers.push_back(std::make_unique<asio_wheel::timer>(io, std::chrono::milliseconds(1 + i % 5)));
    auto expiry = timers.back()->expiry();
    timers.back()->async_wait([&, expiry](error_code ec) {
      if (ec == aborted) { ++aborted_count; return; }
      ++fired;
      if (std::chrono::steady_clock::now() < expiry) ++early;
    });
  }
  for (int i = 0; i < 40; i += 8) timers[i]->cancel(); // on every shard in turn
  BOOST_TEST(svc.stats().pending == 35u);
  io.run();
  BOOST_TEST(fired == 35);
  BOOST_TEST(aborted_count == 5);
  BOOST_TEST(early == 0);
  const auto st = svc.stats();
  BOOST_TEST(st.expired == 35u);
  BOOST_TEST(st.cancelled == 5u);
  BOOST_TEST(st.pending == 0u);
}

BOOST_AUTO_TEST_CASE(max_pending_is_one_limit_over_all_shards) {
  asio::io_context io;
  wheel_options o;
  o.shards = 4;
  o.max_pending = 10;
  auto& svc = asio_wheel::install(io, o);
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  int rejected = 0, other = 0;
  auto start_one = [&] { // on the next shard in turn
    timers.push_back(std::make_unique<asio_wheel::timer>(io, 1h));
    timers.back()->async_wait([&](error_code ec) {
      if (ec == asio_wheel::error::too_many_timers) ++rejected;
      else ++other;
    });
  };
  for (int i = 0; i < 12; ++i) start_one();
  io.poll();
  BOOST_TEST(rejected == 2);
  BOOST_TEST(svc.stats().pending == 10u);
  BOOST_TEST(svc.stats().rejected == 2u);
  timers[0]->cancel(); // frees a place, whichever shard asks next
  start_one();
  io.poll();
  BOOST_TEST(rejected == 2);
  BOOST_TEST(svc.stats().pending == 10u);
  for (auto& t : timers) t->cancel();
  io.poll();
  BOOST_TEST(other == 11); // 10 aborted now, 1 by the first cancel
}

// ---- the steady driver ----

BOOST_AUTO_TEST_CASE(steady_mode_never_fires_early_and_wakes_only_for_occupied_ticks) {
  asio::io_context io;
  wheel_options one_wheel; // wake-ups are counted per wheel: keep one
  one_wheel.shards = 1;
  auto& svc = asio_wheel::install(io, one_wheel);
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  int early = 0, fired = 0;
  for (int i = 0; i < 20; ++i) {
    timers.push_back(std::make_unique<asio_wheel::timer>(io, std::chrono::milliseconds(2 + (i % 4))));
    auto expiry = timers.back()->expiry();
    timers.back()->async_wait([&, expiry](error_code ec) {
      BOOST_TEST(!ec);
      ++fired;
      if (std::chrono::steady_clock::now() < expiry) ++early;
    });
  }
  io.run();
  BOOST_TEST(fired == 20);
  BOOST_TEST(early == 0);
  // Four distinct deadlines: at most one wake-up for each (plus one if the ticks of
  // construction straddle a boundary).
  BOOST_TEST(svc.stats().wakeups <= 5u);
  BOOST_TEST(svc.stats().wakeups >= 1u);
}

BOOST_AUTO_TEST_CASE(steady_mode_does_not_wake_while_waits_are_far_away) {
  asio::io_context io;
  auto& svc = asio::use_service<asio_wheel::wheel_service>(io);
  asio_wheel::timer t(io, 1h);
  t.async_wait([](error_code) {});
  io.run_for(30ms);
  BOOST_TEST(svc.stats().wakeups == 0u);
  BOOST_TEST(svc.stats().pending == 1u);
}

// ---- locking ----

BOOST_AUTO_TEST_CASE(single_threaded_concurrency_hints_work) {
  for (int hint : {1, ASIO_WHEEL_TEST_HINT_UNSAFE}) {
    asio::io_context io(hint);
    auto& svc = asio_wheel::install(io, manual_options());
    asio_wheel::timer t(io, 1ms);
    int calls = 0;
    t.async_wait([&](error_code) { ++calls; });
    svc.advance(1ms);
    io.poll();
    BOOST_TEST(calls == 1);
  }
}
