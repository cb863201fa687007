// Which executor the wheel runs on, and what it holds: the service drives each shard on
// the plain executor of its context, never on the executor of the first I/O object
// (a connection's strand, a tracking executor), holds work only while a wait is
// pending, and lets go of every executor at shutdown. Handlers run on their own
// associated executor and only there. Checked with strands, bind_executor, a tracking
// executor, a thread_pool, and an io_context run by 4 threads; the sanitizer builds
// run every case (the shutdown-order cases are what ASan and TSan look at).
#define BOOST_TEST_MODULE executors_threads
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "manual_clock.hpp"

#include <asio_wheel.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using asio_wheel_test::manual_options;

namespace {

using fixture = asio_wheel_test::manual_context;

const error_code aborted = asio::error::operation_aborted;

// Spins until `done` holds: the waiting side of a test whose work runs on other
// threads. No time limit: a lost handler shows as ctest's timeout, not as a flake.
template <class Pred>
void wait_until(Pred done) {
  while (!done()) std::this_thread::yield();
}

} // namespace

// ---- 1: shutdown order ----

// The first object's executor is a strand. Before the fix the service kept that strand
// until its own destructor, which runs after the strand service's: a heap-use-after-free
// under ASan (and an invalid mutex under TSan) when the io_context is destroyed.
BOOST_AUTO_TEST_CASE(a_strand_timer_leaves_no_executor_behind_in_the_service) {
  auto io = std::make_unique<asio::io_context>();
  asio_wheel::wheel_service& svc = asio_wheel::install(*io, manual_options());
  {
    auto s = asio::make_strand(*io);
    asio_wheel::timer t(s, 1ms);
    int calls = 0;
    t.async_wait([&](error_code ec) {
      BOOST_TEST(!ec);
      BOOST_TEST(s.running_in_this_thread());
      ++calls;
    });
    svc.advance(1ms);
    io->poll();
    BOOST_TEST(calls == 1);
  }
  io.reset(); // services go in reverse order of creation: the strand's before the wheel's
}

// The same in steady mode, where the driver is a steady_timer: it was built on the
// first object's strand too. Expiries in the past and a cancelled far wait: no sleep.
BOOST_AUTO_TEST_CASE(a_steady_wheel_first_used_from_a_strand_shuts_down_cleanly) {
  auto io = std::make_unique<asio::io_context>();
  asio_wheel::install(*io, asio_wheel::wheel_options{});
  {
    auto s = asio::make_strand(*io);
    asio_wheel::timer far(s, 1h);
    far.async_wait([](error_code) {}); // arms the driver
    asio_wheel::timer past(s, std::chrono::steady_clock::time_point{});
    int calls = 0;
    past.async_wait([&](error_code ec) { calls += !ec; });
    io->poll();
    BOOST_TEST(calls == 1);
    far.cancel();
    io->poll();
  }
  io.reset();
}

// A context run by 4 threads, waits on 128 strands: half complete, the other half are
// cancelled by their timers' destruction after the threads stopped, so their aborted
// handlers (each holding work on its strand) are still queued when the context is
// destroyed. Shutdown destroys them, whatever order the services go in.
BOOST_AUTO_TEST_CASE(a_context_run_by_four_threads_shuts_down_with_strand_handlers_queued) {
  auto io = std::make_unique<asio::io_context>(4);
  asio_wheel::install(*io, asio_wheel::wheel_options{});
  constexpr int count = 128;
  std::atomic<int> done{0}, wrong_place{0};
  {
    std::vector<asio_wheel::timer> timers;
    timers.reserve(count);
    for (int i = 0; i < count; ++i) {
      auto s = asio::make_strand(*io);
      if (i % 2 == 0)
        timers.emplace_back(s, std::chrono::steady_clock::time_point{}); // already due
      else
        timers.emplace_back(s, 1h);
      timers.back().async_wait([&done, &wrong_place, s](error_code) {
        wrong_place += !s.running_in_this_thread(); // Boost.Test is not thread-safe
        ++done;
      });
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) threads.emplace_back([&] { io->run(); }); // the 1h waits hold work
    wait_until([&] { return done.load() == count / 2; });
    io->stop();
    for (auto& t : threads) t.join();
  }
  BOOST_TEST(done.load() == count / 2); // the aborted ones never ran: the context stopped
  BOOST_TEST(wrong_place.load() == 0);
  io.reset();
}

// ---- 2: where handlers run ----

// Before the fix the step ran on the first object's strand, and a handler whose
// executor is the plain io_context executor ran inline inside it: inside one
// connection's strand, serialized with it (and deadlocking on work posted to it).
BOOST_AUTO_TEST_CASE(a_plain_handler_never_runs_inside_the_first_objects_strand) {
  fixture f;
  auto first_strand = asio::make_strand(f.io);
  asio_wheel::timer first(first_strand, 1ms); // the first I/O object on the wheel
  asio_wheel::timer plain(f.io, 1ms);
  int in_strand = 0, plain_calls = 0;
  first.async_wait([&](error_code) { in_strand += first_strand.running_in_this_thread(); });
  plain.async_wait([&](error_code ec) {
    BOOST_TEST(!ec);
    ++plain_calls;
    BOOST_TEST(!first_strand.running_in_this_thread());
  });
  f.advance(1ms);
  BOOST_TEST(plain_calls == 1);
  BOOST_TEST(in_strand == 1);
}

// The same for a first executor that is a strand of a strand, which the any_io_executor
// of a timer erases to a type the shard did not look for: before, the shard took it as
// it was, and each step, with every plain handler run inline in it, ran inside that
// connection's strand.
BOOST_AUTO_TEST_CASE(a_plain_handler_never_runs_inside_a_first_strand_of_a_strand) {
  fixture f;
  auto inner = asio::make_strand(f.io);
  asio::strand<decltype(inner)> first_strand(inner);
  asio_wheel::timer first(first_strand, 1ms); // type-erased: any_io_executor
  asio_wheel::timer plain(f.io, 1ms);
  int in_strand = 0, plain_calls = 0, plain_inside = 0;
  first.async_wait([&](error_code) { in_strand += first_strand.running_in_this_thread(); });
  plain.async_wait([&](error_code ec) {
    BOOST_TEST(!ec);
    ++plain_calls;
    plain_inside += first_strand.running_in_this_thread() + inner.running_in_this_thread();
  });
  f.advance(1ms);
  BOOST_TEST(plain_calls == 1);
  BOOST_TEST(plain_inside == 0);
  BOOST_TEST(in_strand == 1);
}

BOOST_AUTO_TEST_CASE(a_bound_executor_is_where_the_handler_runs) {
  fixture f;
  auto s = asio::make_strand(f.io);
  asio_wheel::timer t(f.io, 1ms);
  int calls = 0;
  t.async_wait(asio::bind_executor(s, [&](error_code ec) {
    BOOST_TEST(!ec);
    BOOST_TEST(s.running_in_this_thread());
    ++calls;
  }));
  f.advance(1ms);
  BOOST_TEST(calls == 1);
}

// Completions bound to strands share the step that collected them, as plain ones do:
// one scheduler handler delivers them all (each strand is idle, so dispatch runs it
// there and then). Before, each ended the step, so a server cancelling a strand-bound
// wait per request queued aborted completions faster than one per step drained them.
BOOST_AUTO_TEST_CASE(strand_bound_completions_share_one_step) {
  fixture f;
  constexpr int n = 64;
  std::vector<asio::strand<asio::io_context::executor_type>> strands;
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  int expired = 0, aborted_calls = 0, outside = 0;
  for (int i = 0; i < n; ++i) {
    strands.push_back(asio::make_strand(f.io));
    timers.push_back(std::make_unique<asio_wheel::timer>(f.io, 1ms));
    timers.back()->async_wait(asio::bind_executor(strands.back(), [&, i](error_code ec) {
      outside += !strands[i].running_in_this_thread();
      ++(ec == aborted ? aborted_calls : expired);
    }));
  }
  for (int i = 0; i < n; i += 2) timers[i]->cancel(); // half aborted, in the ready queue
  f.svc.advance(1ms);                                  // the other half due
  BOOST_TEST(f.io.poll_one() == 1u);                   // one step
  BOOST_TEST(aborted_calls == n / 2);
  BOOST_TEST(expired == n / 2);
  BOOST_TEST(outside == 0);
}

// Strands of a context run by 4 threads: each handler runs in its own strand, and the
// plain ones in none. Per-strand counters are plain ints: TSan sees any overlap.
BOOST_AUTO_TEST_CASE(four_threads_each_handler_in_its_own_strand) {
  asio::io_context io(4);
  asio_wheel::wheel_service& svc = asio_wheel::install(io, manual_options());
  constexpr int strands = 32, per_strand = 16;
  struct connection {
    asio::strand<asio::io_context::executor_type> strand;
    int completions = 0; // touched only on `strand`
  };
  std::vector<std::unique_ptr<connection>> conns;
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  std::atomic<int> done{0}, wrong_place{0};
  for (int c = 0; c < strands; ++c) {
    conns.push_back(std::make_unique<connection>(connection{asio::make_strand(io)}));
    for (int k = 0; k < per_strand; ++k) {
      connection& conn = *conns.back();
      // Every other timer lives on the strand; the others are plain, their handlers bound.
      if (k % 2 == 0)
        timers.push_back(std::make_unique<asio_wheel::timer>(conn.strand, 1ms * (1 + k)));
      else
        timers.push_back(std::make_unique<asio_wheel::timer>(io, 1ms * (1 + k)));
      timers.back()->async_wait(asio::bind_executor(conn.strand, [&, c](error_code ec) {
        if (ec || !conn.strand.running_in_this_thread()) ++wrong_place;
        for (int other = 0; other < strands; ++other)
          if (other != c && conns[other]->strand.running_in_this_thread()) ++wrong_place;
        ++conn.completions;
        ++done;
      }));
    }
  }
  auto guard = asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { io.run(); });
  svc.advance(1ms * per_strand);
  wait_until([&] { return done.load() == strands * per_strand; });
  guard.reset();
  for (auto& t : threads) t.join(); // returns: nothing holds work once the waits are done
  BOOST_TEST(wrong_place.load() == 0);
  for (auto& conn : conns) BOOST_TEST(conn->completions == per_strand);
}

// Virtual time is read without the shard's lock (wheel_service::now() is what handlers
// ask to measure lateness, W6's once per wait): read by handlers on two threads and by a
// third thread spinning, while the main thread advances it, it only moves forward, and
// each handler sees at least its deadline. The sanitizer builds run it, but TSan would
// not see a plain (non-atomic) virtual time race here: g++ 12 leaves the store of
// advance_locked's result, a time point returned by value, uninstrumented (checked at
// -O0 and at -Og).
BOOST_AUTO_TEST_CASE(virtual_time_read_on_other_threads_while_it_advances) {
  asio::io_context io(2);
  asio_wheel::wheel_service& svc = asio_wheel::install(io, manual_options());
  const auto start = svc.now();
  constexpr int steps = 200;
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  std::atomic<int> done{0}, early{0};
  for (int k = 1; k <= steps; ++k) {
    timers.push_back(std::make_unique<asio_wheel::timer>(io, 1ms * k));
    const auto deadline = start + 1ms * k;
    timers.back()->async_wait([&, deadline](error_code ec) {
      if (ec || svc.now() < deadline) ++early;
      ++done;
    });
  }
  std::atomic<bool> stop{false};
  std::atomic<int> backwards{0};
  std::thread reader([&] {
    auto last = svc.now();
    while (!stop.load()) {
      const auto now = svc.now();
      if (now < last) ++backwards;
      last = now;
    }
  });
  auto guard = asio::make_work_guard(io);
  std::vector<std::thread> runners;
  for (int i = 0; i < 2; ++i) runners.emplace_back([&] { io.run(); });
  for (int k = 0; k < steps; ++k) svc.advance(1ms);
  wait_until([&] { return done.load() == steps; });
  stop = true;
  reader.join();
  guard.reset();
  for (auto& t : runners) t.join();
  BOOST_TEST(early.load() == 0);
  BOOST_TEST(backwards.load() == 0);
  BOOST_TEST((svc.now() - start == 1ms * steps));
}

// ---- 3: outstanding work ----

// Before the fix the service kept the first object's executor, here one that tracks
// work, for the life of the context: run() never returned. poll() stops a context that
// has no outstanding work, so stopped() says whether anything still holds some.
BOOST_AUTO_TEST_CASE(work_is_held_only_while_a_wait_is_pending) {
  fixture f;
  {
    auto tracked = asio::prefer(f.io.get_executor(), asio::execution::outstanding_work.tracked);
    asio_wheel::timer t(tracked, 1ms);
    t.async_wait([](error_code) {});
    f.settle();
    BOOST_TEST(!f.io.stopped()); // a pending wait is outstanding work
    f.advance(1ms);
    BOOST_TEST(f.svc.stats().expired == 1u);
  }
  f.settle();
  BOOST_TEST(f.io.stopped()); // the timer is gone: nothing holds work
}

BOOST_AUTO_TEST_CASE(a_typed_tracking_executor_holds_no_work_after_its_timer) {
  fixture f;
  {
    auto tracked = asio::prefer(f.io.get_executor(), asio::execution::outstanding_work.tracked);
    asio_wheel::basic_timer<decltype(tracked)> t(tracked, 1ms);
    t.async_wait([](error_code) {});
    f.advance(1ms);
  }
  f.settle();
  BOOST_TEST(f.io.stopped());
}

// A thread_pool as the context, strands of it, a tracking executor among them: every
// handler runs in its strand, and join() returns once the timers are gone.
BOOST_AUTO_TEST_CASE(a_thread_pool_with_strands_joins_once_the_timers_are_gone) {
  asio::thread_pool pool(4);
  asio_wheel::wheel_service& svc = asio_wheel::install(pool, manual_options());
  constexpr int count = 64;
  std::atomic<int> done{0}, wrong_place{0};
  {
    std::vector<asio_wheel::timer> timers;
    timers.reserve(count + 1);
    timers.emplace_back(
        asio::prefer(pool.get_executor(), asio::execution::outstanding_work.tracked), 1ms);
    timers.back().async_wait([&](error_code ec) { done += !ec; });
    std::vector<asio::strand<asio::thread_pool::executor_type>> strands;
    for (int i = 0; i < count; ++i) {
      strands.push_back(asio::make_strand(pool));
      timers.emplace_back(strands.back(), 1ms * (1 + i % 8));
      timers.back().async_wait([&, s = strands.back()](error_code ec) {
        if (ec || !s.running_in_this_thread()) ++wrong_place;
        ++done;
      });
    }
    svc.advance(8ms);
    wait_until([&] { return done.load() == count + 1; });
  }
  pool.join();
  BOOST_TEST(wrong_place.load() == 0);
}

// ---- 4: Networking TS executors ----

// A Networking TS executor of the test's own (context, on_work_started/finished,
// dispatch/post/defer), which Asio accepts wherever it takes an executor, as
// steady_timer does. It counts the work it is told of and what it is given, and hands
// each function to its io_context. Any Asio has it: io_context::strand and
// asio::executor, the TS executors Asio ships, go when TS executors are turned off.
class counting_ts_executor {
public:
  struct counts {
    int work = 0; // started minus finished
    int dispatched = 0;
    int posted = 0; // post and defer
  };

  counting_ts_executor(asio::io_context& io, counts& c) noexcept : io_(&io), counts_(&c) {}

  asio::io_context& context() const noexcept { return *io_; }
  void on_work_started() const noexcept { ++counts_->work; }
  void on_work_finished() const noexcept { --counts_->work; }
  template <class Function, class Allocator>
  void dispatch(Function&& f, const Allocator&) const {
    ++counts_->dispatched;
    asio::dispatch(io_->get_executor(), std::forward<Function>(f));
  }
  template <class Function, class Allocator>
  void post(Function&& f, const Allocator&) const {
    ++counts_->posted;
    asio::post(io_->get_executor(), std::forward<Function>(f));
  }
  template <class Function, class Allocator>
  void defer(Function&& f, const Allocator&) const {
    ++counts_->posted;
    asio::defer(io_->get_executor(), std::forward<Function>(f));
  }

  friend bool operator==(const counting_ts_executor& a, const counting_ts_executor& b) noexcept {
    return a.io_ == b.io_ && a.counts_ == b.counts_;
  }
  friend bool operator!=(const counting_ts_executor& a, const counting_ts_executor& b) noexcept {
    return !(a == b);
  }

private:
  asio::io_context* io_;
  counts* counts_;
};
static_assert(asio::is_executor<counting_ts_executor>::value);
static_assert(!asio::execution::is_executor<counting_ts_executor>::value);

// A handler bound to a TS executor (it did not compile: the library asked every
// executor for outstanding_work.tracked): each operation counts as work on it while it
// is pending, and its handler is dispatched through it, once.
BOOST_AUTO_TEST_CASE(a_handler_bound_to_a_ts_executor_runs_through_it_holding_its_work) {
  fixture f;
  counting_ts_executor::counts counts;
  const counting_ts_executor ex(f.io, counts);
  asio_wheel::timer t(f.io, 1ms);
  asio_wheel::delay_queue<int> q(f.io);
  asio_wheel::periodic_timer p(f.io, 1ms);
  int calls = 0;
  t.async_wait(asio::bind_executor(ex, [&](error_code ec) { calls += !ec; }));
  q.push(7, 1ms);
  q.async_take(asio::bind_executor(ex, [&](error_code ec, int v) { calls += !ec && v == 7; }));
  p.async_tick(asio::bind_executor(ex, [&](error_code ec, std::size_t) { calls += !ec; }));
  f.settle();
  BOOST_TEST(counts.work == 3);
  BOOST_TEST(counts.dispatched == 0);
  f.advance(1ms);
  BOOST_TEST(calls == 3);
  BOOST_TEST(counts.dispatched == 3);
  BOOST_TEST(counts.work == 0);
  // Aborted, the same.
  t.expires_after(1ms);
  t.async_wait(asio::bind_executor(ex, [&](error_code ec) { calls += ec == aborted; }));
  BOOST_TEST(counts.work == 1);
  t.cancel();
  f.settle();
  BOOST_TEST(calls == 4);
  BOOST_TEST(counts.work == 0);
}

#if ASIO_WHEEL_TEST_TS_EXECUTORS
// Asio's own TS executors, as a bound handler's executor: each handler runs in its
// legacy strand, or through the polymorphic executor.
BOOST_AUTO_TEST_CASE(a_handler_bound_to_a_legacy_strand_runs_in_it) {
  fixture f;
  asio::io_context::strand strand(f.io);
  asio_wheel::timer t(f.io, 1ms);
  asio_wheel::delay_queue<int> q(f.io);
  asio_wheel::periodic_timer p(f.io, 1ms);
  int in_strand = 0, polymorphic = 0;
  t.async_wait(asio::bind_executor(strand, [&](error_code ec) {
    in_strand += !ec && strand.running_in_this_thread();
  }));
  q.push(7, 1ms);
  q.async_take(asio::bind_executor(strand, [&](error_code ec, int) {
    in_strand += !ec && strand.running_in_this_thread();
  }));
  p.async_tick(asio::bind_executor(strand, [&](error_code ec, std::size_t) {
    in_strand += !ec && strand.running_in_this_thread();
  }));
  asio_wheel::timer u(f.io, 1ms);
  u.async_wait(asio::bind_executor(asio::executor(f.io.get_executor()),
                                   [&](error_code ec) { polymorphic += !ec; }));
  f.advance(1ms);
  BOOST_TEST(in_strand == 3);
  BOOST_TEST(polymorphic == 1);
  BOOST_TEST(f.io.stopped()); // no work left behind
}

// I/O objects whose executor is a legacy strand (basic_waitable_timer takes one): their
// handlers run in it, and the service, which they are the first to use, runs its own
// steps on the context's plain executor, so that another object's plain handler runs
// outside the strand (the query of a TS executor's context did not compile).
BOOST_AUTO_TEST_CASE(io_objects_on_a_legacy_strand_run_their_handlers_in_it) {
  fixture f;
  asio::io_context::strand strand(f.io);
  asio_wheel::basic_timer<asio::io_context::strand> t(strand, 1ms);
  asio_wheel::basic_delay_queue<int, asio::io_context::strand> q(strand);
  asio_wheel::basic_periodic_timer<asio::io_context::strand> p(strand, 1ms);
  asio_wheel::timer plain(f.io, 1ms);
  int in_strand = 0, plain_outside = 0;
  t.async_wait([&](error_code ec) { in_strand += !ec && strand.running_in_this_thread(); });
  q.push(7, 1ms);
  q.async_take([&](error_code ec, int) { in_strand += !ec && strand.running_in_this_thread(); });
  p.async_tick(
      [&](error_code ec, std::size_t) { in_strand += !ec && strand.running_in_this_thread(); });
  plain.async_wait([&](error_code ec) { plain_outside += !ec && !strand.running_in_this_thread(); });
  f.advance(1ms);
  BOOST_TEST(in_strand == 3);
  BOOST_TEST(plain_outside == 1);
  BOOST_TEST(f.io.stopped());
}

// The first use of the wheel a cancel_after on an operation whose I/O executor is a
// legacy strand (a steady_timer on one): the deadline's executor, erased, was not seen
// through, so the service took the strand for its steps, and a plain handler of any
// other timer ran inside it.
BOOST_AUTO_TEST_CASE(a_first_cancel_after_on_a_legacy_strand_leaves_the_steps_outside_it) {
  fixture f;
  asio::io_context::strand strand(f.io);
  asio::basic_waitable_timer<std::chrono::steady_clock,
                             asio::wait_traits<std::chrono::steady_clock>,
                             asio::io_context::strand>
      op(strand, std::chrono::hours(1));
  int cancelled_in_strand = 0, plain_outside = 0;
  op.async_wait(asio_wheel::cancel_after(2ms, [&](error_code ec) {
    cancelled_in_strand += ec == aborted && strand.running_in_this_thread();
  }));
  asio_wheel::timer plain(f.io, 1ms);
  plain.async_wait([&](error_code ec) { plain_outside += !ec && !strand.running_in_this_thread(); });
  f.advance(1ms);
  BOOST_TEST(plain_outside == 1);
  f.advance(1ms);
  BOOST_TEST(cancelled_in_strand == 1);
}

// A first object on `ex`, whose handlers run in `strand`, then a plain timer: the first
// one's handler runs in the strand, the plain one's outside it (the service took the
// context's plain executor).
template <class Executor, class Strand>
void check_first_object_leaves_the_steps_outside(fixture& f, const Executor& ex,
                                                 const Strand& strand) {
  asio_wheel::basic_timer<Executor> t(ex, 1ms);
  asio_wheel::timer plain(f.io, 1ms);
  int in_strand = 0, plain_outside = 0;
  t.async_wait([&](error_code ec) { in_strand += !ec && strand.running_in_this_thread(); });
  plain.async_wait([&](error_code ec) { plain_outside += !ec && !strand.running_in_this_thread(); });
  f.advance(1ms);
  BOOST_TEST(in_strand == 1);
  BOOST_TEST(plain_outside == 1);
}

// The same for an I/O object on the polymorphic executor holding a legacy strand: its
// context is only an execution_context, so its target is looked at.
BOOST_AUTO_TEST_CASE(a_first_object_on_a_polymorphic_executor_leaves_the_steps_outside_its_strand) {
  fixture f;
  asio::io_context::strand strand(f.io);
  check_first_object_leaves_the_steps_outside(f, asio::executor(strand), strand);
}

// A strand of the polymorphic executor (itself a TS executor, so it comes wrapped): it
// was not taken for a strand, and the service ran its steps inside it.
BOOST_AUTO_TEST_CASE(a_first_object_on_a_strand_of_a_polymorphic_executor_leaves_the_steps_outside_it) {
  fixture f;
  auto strand = asio::make_strand(asio::executor(f.io.get_executor()));
  check_first_object_leaves_the_steps_outside(f, strand, strand);
}

// The polymorphic executor around an executor it cannot see through (a TS executor of
// the user's): the service uses it as it is, with nothing tracked. Its erased form led
// back to itself: the construction recursed until the stack ran out.
BOOST_AUTO_TEST_CASE(a_first_object_on_a_polymorphic_executor_of_an_unknown_type_works) {
  fixture f;
  counting_ts_executor::counts counts;
  asio_wheel::basic_timer<asio::executor> t(asio::executor(counting_ts_executor(f.io, counts)),
                                            1ms);
  int calls = 0;
  t.async_wait([&](error_code ec) { calls += !ec; });
  f.advance(1ms);
  BOOST_TEST(calls == 1);
  BOOST_TEST(counts.dispatched + counts.posted > 0); // the steps went through it
  BOOST_TEST(counts.work == 0);
  BOOST_TEST(f.io.stopped());
}
#endif

// ---- open questions: cancellation racing a move, the UNSAFE hint ----

// Per-operation cancellation emitted on another thread while the object moves: the
// cancellation handler is re-pointed at the moved-to object under the service lock,
// never re-installed in the slot. Every wait completes exactly once, with
// operation_aborted (none is lost in a moved-from object), whichever of move and
// emission goes first. `start(object, handler)` starts the wait.
template <class Object, class Start>
void race_cancellation_against_moves(fixture& f, std::unique_ptr<Object> (*make)(fixture&),
                                     Start start, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    asio::cancellation_signal signal;
    std::unique_ptr<Object> t = make(f);
    int calls = 0;
    error_code result;
    start(*t, asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, auto&&...) {
      ++calls;
      result = ec;
    }));
    std::atomic<bool> go{false};
    std::thread emitter([&] {
      wait_until([&] { return go.load(); });
      signal.emit(asio::cancellation_type::terminal);
    });
    go = true;
    for (int hop = 0; hop < 16; ++hop) t = std::make_unique<Object>(std::move(*t));
    emitter.join();
    f.settle();
    BOOST_TEST_REQUIRE(calls == 1);
    BOOST_TEST(result == aborted);
  }
  BOOST_TEST(f.svc.stats().pending == 0u);
}

BOOST_AUTO_TEST_CASE(a_cancellation_racing_a_timer_move_is_never_lost) {
  fixture f;
  race_cancellation_against_moves<asio_wheel::timer>(
      f,
      [](fixture& f) {
        return std::make_unique<asio_wheel::timer>(f.io, std::chrono::steady_clock::time_point::max());
      },
      [](asio_wheel::timer& t, auto handler) { t.async_wait(std::move(handler)); }, 2000);
}

// The same for a periodic timer's tick: its schedule and its list of ticks both move.
BOOST_AUTO_TEST_CASE(a_cancellation_racing_a_periodic_timer_move_is_never_lost) {
  fixture f;
  race_cancellation_against_moves<asio_wheel::periodic_timer>(
      f,
      [](fixture& f) {
        return std::make_unique<asio_wheel::periodic_timer>(f.io, std::chrono::hours(1));
      },
      [](asio_wheel::periodic_timer& t, auto handler) { t.async_tick(std::move(handler)); },
      1000);
  // Each schedule left the wheel with its cancelled tick, wherever the timer was then.
  BOOST_TEST((f.svc.stats().next_wakeup == std::chrono::steady_clock::time_point::max()));
}

// A wait's cancellation handler stays in its slot after the wait left its timer (on
// its way to the handler, or done), and the signal may be emitted then. The timer
// meanwhile moved to new memory and the old went (a std::vector that grows): the
// emission read the freed timer (ASan: heap-use-after-free), because the handler was
// re-pointed only while its op was still in the timer's list. Now an op leaving the
// list leaves its handler pointing at nothing. Each case: the wait aborted by cancel(),
// completed by its step and queued on a strand, and completed and run; the handler runs
// once, with the result it had. The same for a periodic timer's tick, a delay_queue's
// take, and a take served at once, which never waited in its queue's list.
BOOST_AUTO_TEST_CASE(an_emission_after_the_wait_left_its_moved_timer_reads_nothing_of_it) {
  enum class stage { aborted, queued_on_a_strand, handler_ran };
  for (stage at : {stage::aborted, stage::queued_on_a_strand, stage::handler_ran}) {
    BOOST_TEST_CONTEXT("stage " << static_cast<int>(at)) {
      fixture f;
      auto strand = asio::make_strand(f.io);
      // A timer and a periodic timer, each moved out of heap memory that is then freed.
      asio::cancellation_signal timer_signal, tick_signal;
      int timer_calls = 0, tick_calls = 0;
      error_code timer_ec, tick_ec;
      auto t = std::make_unique<asio_wheel::timer>(f.io, std::chrono::milliseconds(10));
      t->async_wait(asio::bind_cancellation_slot(
          timer_signal.slot(), asio::bind_executor(strand, [&](error_code ec) {
            ++timer_calls;
            timer_ec = ec;
          })));
      auto p = std::make_unique<asio_wheel::periodic_timer>(f.io, std::chrono::milliseconds(10));
      p->async_tick(asio::bind_cancellation_slot(
          tick_signal.slot(), asio::bind_executor(strand, [&](error_code ec, std::uint64_t) {
            ++tick_calls;
            tick_ec = ec;
          })));
      asio::cancellation_signal take_signal, at_once_signal;
      int take_calls = 0, at_once_calls = 0;
      error_code take_ec, at_once_ec;
      auto q = std::make_unique<asio_wheel::delay_queue<int>>(f.io);
      q->push(1, std::chrono::milliseconds(10));
      q->async_take(asio::bind_cancellation_slot(
          take_signal.slot(), asio::bind_executor(strand, [&](error_code ec, int) {
            ++take_calls;
            take_ec = ec;
          })));
      if (at == stage::aborted) {
        t->cancel();
        p->cancel();
        q->cancel();
      } else {
        f.svc.advance(std::chrono::milliseconds(10));
        f.io.restart();
        f.io.run_one(); // the step: all handed over to the strand, not run yet
        if (at == stage::handler_ran) f.settle();
      }
      q->push(2, std::chrono::milliseconds(-1)); // expired at once: the take is served so
      q->async_take(asio::bind_cancellation_slot(
          at_once_signal.slot(), asio::bind_executor(strand, [&](error_code ec, int) {
            ++at_once_calls;
            at_once_ec = ec;
          })));
      asio_wheel::timer moved_timer(std::move(*t));
      asio_wheel::periodic_timer moved_periodic(std::move(*p));
      asio_wheel::delay_queue<int> moved_queue(std::move(*q));
      t.reset();
      p.reset();
      q.reset();
      for (auto* signal : {&timer_signal, &tick_signal, &take_signal, &at_once_signal})
        signal->emit(asio::cancellation_type::terminal);
      f.settle();
      BOOST_TEST(timer_calls == 1);
      BOOST_TEST(tick_calls == 1);
      BOOST_TEST(take_calls == 1);
      BOOST_TEST(at_once_calls == 1);
      const error_code expected = at == stage::aborted ? aborted : error_code();
      BOOST_TEST(timer_ec == expected);
      BOOST_TEST(tick_ec == expected);
      BOOST_TEST(take_ec == expected);
      BOOST_TEST(!at_once_ec);
      BOOST_TEST(f.svc.stats().pending == 0u);
    }
  }
}

// A cancellation handler stays in its slot after its wait ended, and an emission then is
// a no-op. Timer `a`'s ended wait named shard 0; then `a` was move-assigned from a timer
// on shard 1, and lives there. The stale emission must not read a's list under shard
// 0's lock while shard 1's steps change it under theirs: it did (a data race under
// TSan, a heap-use-after-free under ASan in some runs), until the list's shard index
// told it that the list is no longer shard 0's. Since session 45 the handler forgets
// the list as its wait ends (wheel_op::forget_owner), and the emission reads nothing.
BOOST_AUTO_TEST_CASE(a_stale_cancellation_after_a_move_to_another_shard_reads_nothing_of_it) {
  // Steady mode (the manual clock has one shard); every wait is due at once, no sleep.
  asio::io_context io;
  asio_wheel::wheel_options o;
  o.shards = 2;
  o.sharding = asio_wheel::shard_policy::round_robin;
  asio_wheel::wheel_service& svc = asio_wheel::install(io, o);
  asio_wheel::timer a(io, 1h); // shard 0
  asio_wheel::timer b(io);     // shard 1
  asio::cancellation_signal stale;
  error_code first;
  a.async_wait(asio::bind_cancellation_slot(stale.slot(), [&](error_code ec) { first = ec; }));
  BOOST_TEST(a.cancel() == 1u);
  io.poll();
  io.restart();
  BOOST_TEST(first == aborted);
  a = std::move(b); // a goes to shard 1

  // Waits on `a` due at once, each started by the last one's handler, so that shard 1's
  // steps change a's list on the context's threads while the stale signal is emitted.
  constexpr int waits = 20000;
  std::atomic<int> done{0}, aborted_waits{0};
  auto strand = asio::make_strand(io);
  std::function<void()> next = [&] {
    if (done == waits) return;
    a.expires_at(std::chrono::steady_clock::time_point());
    a.async_wait(asio::bind_executor(strand, [&](error_code ec) {
      aborted_waits += ec == aborted; // the stale emission aborts nothing
      ++done;
      next();
    }));
  };
  asio::post(strand, next);
  std::thread emitter([&] {
    while (done < waits) stale.emit(asio::cancellation_type::terminal);
  });
  std::thread runner([&] { io.run(); });
  io.run();
  runner.join();
  emitter.join();
  BOOST_TEST(done == waits);
  BOOST_TEST(aborted_waits == 0);
  BOOST_TEST(svc.stats().pending == 0u);
}

// ASIO_WHEEL_TEST_HINT_UNSAFE: Asio takes no locks; the wheel works on one
// thread, with or without its own lock (automatic: off where asio::config can tell).
BOOST_AUTO_TEST_CASE(the_unsafe_concurrency_hint_works_on_one_thread) {
  for (auto locking : {asio_wheel::locking_mode::automatic, asio_wheel::locking_mode::off}) {
    asio::io_context io(ASIO_WHEEL_TEST_HINT_UNSAFE);
    auto o = manual_options();
    o.locking = locking;
    asio_wheel::wheel_service& svc = asio_wheel::install(io, o);
    BOOST_TEST(svc.shard_count() == 1u);
    asio_wheel::timer a(io, 1ms), b(io, 2ms);
    int fired = 0, cancelled = 0;
    a.async_wait([&](error_code ec) { fired += !ec; });
    b.async_wait([&](error_code ec) { cancelled += ec == aborted; });
    svc.advance(1ms);
    b.cancel();
    io.run();
    BOOST_TEST(fired == 1);
    BOOST_TEST(cancelled == 1);
  }
  // A steady wheel created by the first timer, with an expiry already passed.
  asio::io_context io(ASIO_WHEEL_TEST_HINT_UNSAFE);
  asio_wheel::timer t(io, std::chrono::steady_clock::time_point{});
  int fired = 0;
  t.async_wait([&](error_code ec) { fired += !ec; });
  io.run();
  BOOST_TEST(fired == 1);
}

// A handler that the wheel's step runs starts an operation that completes at once (a
// wait whose expiry has passed, a wait it cancels, a take of an element already due),
// then blocks until it has completed. On a context run by two threads the other thread
// must be able to complete it, as it would a steady_timer's wait, so a step may not keep
// what its handlers queue to itself. Before the fix the step picked such an operation up
// only after the blocked handler returned: a deadlock (ctest's timeout).
BOOST_AUTO_TEST_CASE(a_step_handler_blocking_on_an_operation_it_started_is_served_by_another_thread) {
  asio::io_context io(2);
  asio_wheel::wheel_service& svc = asio_wheel::install(io, manual_options());
  asio_wheel::timer a(io, 2ms), b(io, std::chrono::steady_clock::time_point{}),
      c(io, std::chrono::hours(1));
  asio_wheel::delay_queue<int> q(io);
  q.push(7, 1ms);
  int served = 0;
  a.async_wait([&](error_code ec) {
    BOOST_TEST(!ec);
    b.async_wait(asio::use_future).get(); // its expiry has passed
    std::future<void> cancelled = c.async_wait(asio::use_future);
    c.cancel();
    BOOST_CHECK_THROW(cancelled.get(), system_error);
    BOOST_TEST(q.async_take(asio::use_future).get() == 7); // came due before a did
    served = 3;
  });
  svc.advance(2ms);
  std::thread other([&] { io.run(); });
  io.run();
  other.join();
  BOOST_TEST(served == 3);
}

// An element that is not trivially copyable leaves its node outside the lock: a take's
// completion, on a thread running the context, moves it out and gives the node back,
// while the queue's own thread pushes into recycled nodes and starts more takes. Every
// element reaches one take, whole (TSan: no race on a node between the two threads).
BOOST_AUTO_TEST_CASE(takes_give_nodes_back_while_the_queue_pushes_on_another_thread) {
  asio::io_context io(2);
  asio_wheel::install(io, asio_wheel::wheel_options{}); // the steady clock: runs alone
  asio_wheel::delay_queue<std::string> q(io);
  auto work = asio::make_work_guard(io);
  std::thread runners[2] = {std::thread([&] { io.run(); }), std::thread([&] { io.run(); })};
  constexpr int n = 20000;
  const std::string prefix(32, 'e'); // on the heap: a torn move shows
  std::atomic<int> taken{0}, whole{0};
  for (int i = 0; i < n; ++i) {
    q.push(prefix + std::to_string(i % 10), (i % 3) * 1ms - 1ms);
    q.async_take([&](error_code ec, std::string s) {
      whole += !ec && s.size() == prefix.size() + 1 && s.compare(0, prefix.size(), prefix) == 0;
      ++taken;
    });
  }
  while (taken.load() < n) std::this_thread::yield();
  work.reset();
  for (auto& t : runners) t.join();
  BOOST_TEST(whole.load() == n);
  BOOST_TEST(q.size() == 0u);
}

// The same on one thread, with the handler running the context itself until the
// operation it started has completed (a nested run_one, which Asio allows and a
// steady_timer's wait survives): the posted step is there for it to run.
BOOST_AUTO_TEST_CASE(a_step_handler_running_the_context_completes_what_it_started) {
  asio::io_context io;
  asio_wheel::wheel_service& svc = asio_wheel::install(io, manual_options());
  asio_wheel::timer a(io, 1ms), b(io, std::chrono::steady_clock::time_point{});
  bool inner = false, outer = false;
  a.async_wait([&](error_code ec) {
    BOOST_TEST(!ec);
    b.async_wait([&](error_code e) { inner = !e; });
    while (!inner) io.run_one();
    outer = true;
  });
  svc.advance(1ms);
  io.run();
  BOOST_TEST(inner);
  BOOST_TEST(outer);
}
