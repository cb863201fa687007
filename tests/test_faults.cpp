// Faults: what happens when things go wrong around the wheel.
//  - a completion handler throws: the exception leaves run(), no other completion is
//    lost, duplicated or reordered, and run() called again carries on;
//  - the handler's allocator throws std::bad_alloc in async_wait: the exception reaches
//    the caller, the wheel and its counters are as before, nothing else is disturbed;
//  - the io_context is destroyed with a million waits pending: every handler is
//    destroyed, none invoked, nothing leaks (LeakSanitizer in the ASan build);
//  - max_pending reached under load: the extra waits complete with too_many_timers
//    (never inside async_wait), the accepted ones complete normally;
//  - a shard's constructor throws std::bad_alloc (its wheel's slots): install throws,
//    and the shard's process-wide index is free again for the next one;
//  - a step cannot be posted (the executor throws std::bad_alloc): the cancel or
//    advance that asked for it throws, nothing is lost, and the next post catches up;
//    a wait, tick or take that asked for it throws and leaves no trace; a cancel_after
//    deadline that asked for it (its operation already started) waits for the next step;
//  - operator new fails for the driver's re-arm: a posted step arms it instead.
#define BOOST_TEST_MODULE faults
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "manual_clock.hpp"

#include <asio_wheel.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FAULTS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FAULTS_SANITIZED 1
#endif
#endif
#ifndef FAULTS_SANITIZED
#define FAULTS_SANITIZED 0
#endif
// Unoptimised (-O0 Debug) builds are as slow as sanitized ones: same reduced counts.
#if !defined(__OPTIMIZE__) && !FAULTS_SANITIZED
#undef FAULTS_SANITIZED
#define FAULTS_SANITIZED 1
#endif

namespace {

asio_wheel::wheel_options manual(std::size_t batch = 1024, std::size_t max_pending = 0) {
  auto o = asio_wheel_test::manual_options();
  o.expiry_batch = batch;
  o.max_pending = max_pending;
  return o;
}

struct thrown : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs io until it runs out of work, counting the exceptions that leave run(), and
// separately the asio::multiple_exceptions (Asio's wrapper when two exceptions
// were captured in one scheduler handler: see strand_exceptions_leave_run_one_by_one).
struct caught_count {
  std::size_t thrown = 0, multiple = 0;
};
caught_count run_through_exceptions(asio::io_context& io) {
  caught_count c;
  for (;;) {
    try {
      io.run();
      return c;
    } catch (const thrown&) {
      ++c.thrown; // run() is called again as is: no restart() needed after a throw
    } catch (const asio::multiple_exceptions&) {
      ++c.multiple;
    }
  }
}

// ---- a handler that throws ------------------------------------------------------------

// Returns the exceptions that left run().
caught_count throwing_handler_case(std::size_t batch, bool on_strand) {
  asio::io_context io(1);
  auto& svc = asio_wheel::install(io, manual(batch));
  auto strand = asio::make_strand(io);
  constexpr std::size_t n = 50;
  std::vector<int> order;
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  for (std::size_t i = 0; i < n; ++i) {
    // Two ticks, so the throw happens both inside a batch and at its end.
    timers.push_back(std::make_unique<asio_wheel::timer>(io, i < n / 2 ? 1ms : 2ms));
    auto h = [&order, i](error_code ec) {
      BOOST_TEST(!ec);
      order.push_back(static_cast<int>(i));
      if (i % 7 == 3) throw thrown("handler " + std::to_string(i));
    };
    if (on_strand)
      timers.back()->async_wait(asio::bind_executor(strand, h));
    else
      timers.back()->async_wait(h);
  }
  svc.advance(2ms);
  const caught_count caught = run_through_exceptions(io);
  BOOST_TEST(caught.thrown + caught.multiple >= 1u);
  BOOST_REQUIRE(order.size() == n); // nothing lost, nothing twice
  // In expiry order: the first tick's waits (0 .. n/2-1, in any order among themselves)
  // all before the second's.
  for (std::size_t i = 0; i < n; ++i)
    BOOST_TEST((order[i] < static_cast<int>(n / 2)) == (i < n / 2));
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < n; ++i) BOOST_TEST(sorted[i] == static_cast<int>(i));
  const auto s = svc.stats();
  BOOST_TEST(s.expired == n);
  BOOST_TEST(s.pending == 0u);

  // The wheel keeps working after the exceptions.
  bool later = false;
  timers[0]->expires_after(5ms);
  timers[0]->async_wait([&later](error_code ec) { later = !ec; });
  svc.advance(5ms);
  io.restart();
  io.run();
  BOOST_TEST(later);
  return caught;
}

} // namespace

// Handlers run inline by the service's step: each exception leaves run() on its own.
BOOST_AUTO_TEST_CASE(throwing_handler_inline) {
  const auto c = throwing_handler_case(1024, false);
  BOOST_TEST(c.thrown == 7u); // i = 3, 10, 17, 24, 31, 38, 45
  BOOST_TEST(c.multiple == 0u);
}
BOOST_AUTO_TEST_CASE(throwing_handler_small_batches) {
  const auto c = throwing_handler_case(4, false);
  BOOST_TEST(c.thrown == 7u);
  BOOST_TEST(c.multiple == 0u);
}
// Handlers on a strand: every handler still runs once, in order, and run() resumes.
BOOST_AUTO_TEST_CASE(throwing_handler_on_strand) { throwing_handler_case(1024, true); }

// As with steady_timer, each exception of a strand-bound handler leaves run() by itself.
// The step dispatches the strand-bound completions of its batch from one scheduler
// handler; Asio captures the exception of a handler its dispatch ran inline, and a
// second capture would turn both into one asio::multiple_exceptions keeping only the
// first: so the step ends after a dispatch whose handler threw.
BOOST_AUTO_TEST_CASE(strand_exceptions_leave_run_one_by_one) {
  const auto c = throwing_handler_case(1024, true);
  BOOST_TEST(c.thrown == 7u);
  BOOST_TEST(c.multiple == 0u);
}

BOOST_AUTO_TEST_CASE(throwing_aborted_handler) {
  // Aborted completions go through the same queue: a throw there loses nothing either.
  asio::io_context io(1);
  auto& svc = asio_wheel::install(io, manual(3));
  std::vector<int> seen;
  asio_wheel::timer t(io, 100ms);
  for (int i = 0; i < 10; ++i)
    t.async_wait([&seen, i](error_code ec) {
      BOOST_TEST(ec == asio::error::operation_aborted);
      seen.push_back(i);
      if (i == 0 || i == 5) throw thrown("aborted handler");
    });
  BOOST_TEST(t.cancel() == 10u);
  const auto c = run_through_exceptions(io);
  BOOST_TEST(c.thrown == 2u);
  BOOST_TEST(c.multiple == 0u);
  BOOST_REQUIRE(seen.size() == 10u);
  for (int i = 0; i < 10; ++i) BOOST_TEST(seen[i] == i);
  BOOST_TEST(svc.stats().cancelled == 10u);
}

// A handler whose move constructor throws once the wait has started: the op moves the
// handler out of its memory before the upcall (Asio's rule, so that a handler owning
// that memory outlives its release). When that move throws, the op's memory still goes
// back and the handler is destroyed once: a completion's exception leaves run() as a
// handler's own would (the handler is never invoked, as with Asio's), and a shutdown
// destroys the op without throwing. LeakSanitizer (the ASan build) catches a lost op.
namespace {

struct move_bomb_handler {
  std::shared_ptr<int> destroyed; // counts destructions of live (not moved-from) copies
  bool* armed;
  int* invoked;
  bool live = true;

  move_bomb_handler(std::shared_ptr<int> d, bool* a, int* i)
      : destroyed(std::move(d)), armed(a), invoked(i) {}
  move_bomb_handler(move_bomb_handler&& o)
      : destroyed(o.destroyed), armed(o.armed), invoked(o.invoked), live(o.live) {
    if (*armed) throw thrown("handler move");
    o.live = false;
  }
  ~move_bomb_handler() {
    if (live) ++*destroyed;
  }
  void operator()(error_code) { ++*invoked; }
};

} // namespace

BOOST_AUTO_TEST_CASE(a_handler_whose_move_throws_at_completion_frees_its_op) {
  asio::io_context io(1);
  auto& svc = asio_wheel::install(io, manual());
  auto destroyed = std::make_shared<int>(0);
  bool armed = false;
  int invoked = 0;
  asio_wheel::timer t(io, 1ms);
  t.async_wait(move_bomb_handler(destroyed, &armed, &invoked));
  BOOST_TEST(*destroyed == 0);
  armed = true;
  svc.advance(1ms);
  const auto c = run_through_exceptions(io);
  BOOST_TEST(c.thrown == 1u);
  BOOST_TEST(invoked == 0);
  BOOST_TEST(*destroyed == 1);
  BOOST_TEST(svc.stats().pending == 0u);

  // The shard goes on.
  armed = false;
  bool later = false;
  t.expires_after(1ms);
  t.async_wait([&later](error_code ec) { later = !ec; });
  svc.advance(1ms);
  io.restart();
  io.run();
  BOOST_TEST(later);
}

BOOST_AUTO_TEST_CASE(a_handler_whose_move_throws_at_shutdown_is_destroyed_once) {
  auto destroyed = std::make_shared<int>(0);
  bool armed = false;
  int invoked = 0;
  {
    asio::io_context io(1);
    asio_wheel::install(io, manual());
    asio_wheel::timer t(io, 1h);
    t.async_wait(move_bomb_handler(destroyed, &armed, &invoked));
    armed = true;
  } // the timer, then the context: its shutdown destroys the pending op
  BOOST_TEST(invoked == 0);
  BOOST_TEST(*destroyed == 1);
}

// ---- a cancellation slot that cannot take its handler ------------------------------------

namespace {

// A slot whose emplace throws, as Asio's cancellation_slot does when it cannot allocate.
struct throwing_slot {
  bool is_connected() const noexcept { return true; }
  template <class CancellationHandler, class... Args>
  CancellationHandler& emplace(Args&&...) {
    throw std::bad_alloc();
  }
};

struct handler_with_throwing_slot {
  std::shared_ptr<int> alive;
  int* invoked;
  using cancellation_slot_type = throwing_slot;
  cancellation_slot_type get_cancellation_slot() const noexcept { return {}; }
  void operator()(error_code) { ++*invoked; }
};

} // namespace

// The op was built (in the timer's buffer, or in memory of its own) before its slot was
// connected; when connecting threw, async_wait threw with the op left built, never
// admitted and never freed: a leak of the op and its handler. Now, as with Asio's own
// timers, nothing of the wait is left. LeakSanitizer catches the heap case in the ASan
// build; the handler's count catches both.
BOOST_AUTO_TEST_CASE(a_wait_whose_slot_cannot_connect_leaves_nothing) {
  asio::io_context io(1);
  auto& svc = asio_wheel::install(io, manual());
  auto alive = std::make_shared<int>(0);
  int invoked = 0, plain = 0;
  asio_wheel::timer t(io, 1ms);
  // The first wait would live in the timer's buffer.
  BOOST_CHECK_THROW(t.async_wait(handler_with_throwing_slot{alive, &invoked}), std::bad_alloc);
  BOOST_TEST(alive.use_count() == 1);
  // With the buffer taken, the next goes to memory of its own.
  t.async_wait([&plain](error_code ec) { plain += !ec; });
  BOOST_CHECK_THROW(t.async_wait(handler_with_throwing_slot{alive, &invoked}), std::bad_alloc);
  BOOST_TEST(alive.use_count() == 1);
  BOOST_TEST(svc.stats().pending == 1u);
  svc.advance(1ms);
  io.run();
  BOOST_TEST(plain == 1);
  BOOST_TEST(invoked == 0);
}

// ---- std::bad_alloc from the handler's allocator ----------------------------------------

namespace {

template <class T>
struct failing_allocator {
  using value_type = T;
  bool* fail;
  explicit failing_allocator(bool* f) noexcept : fail(f) {}
  template <class U>
  failing_allocator(const failing_allocator<U>& o) noexcept : fail(o.fail) {}
  T* allocate(std::size_t n) {
    if (*fail) throw std::bad_alloc();
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept { std::allocator<T>().deallocate(p, n); }
  template <class U>
  bool operator==(const failing_allocator<U>& o) const noexcept { return fail == o.fail; }
};

bool same(const asio_wheel::wheel_stats& a, const asio_wheel::wheel_stats& b) {
  return a.pending == b.pending && a.expired == b.expired && a.cancelled == b.cancelled &&
         a.rejected == b.rejected;
}

} // namespace

BOOST_AUTO_TEST_CASE(bad_alloc_in_async_wait) {
  asio::io_context io(1);
  auto& svc = asio_wheel::install(io, manual(1024, 3));
  bool fail = false;
  int invoked_bad = 0, ok = 0;
  asio_wheel::timer t(io, 10ms), other(io, 20ms);
  auto good = [&ok](error_code ec) { ok += !ec; };
  t.async_wait(good);
  other.async_wait(good);
  const auto before = svc.stats();

  fail = true;
  // The first wait on a fresh timer (nothing on the wheel for it yet) and a further wait
  // on a timer that already has one: neither may leave a trace.
  asio_wheel::timer fresh(io, 5ms);
  BOOST_CHECK_THROW(fresh.async_wait(asio::bind_allocator(failing_allocator<void>(&fail),
                                                          [&](error_code) { ++invoked_bad; })),
                    std::bad_alloc);
  BOOST_CHECK_THROW(t.async_wait(asio::bind_allocator(failing_allocator<void>(&fail),
                                                      [&](error_code) { ++invoked_bad; })),
                    std::bad_alloc);
  fail = false;
  BOOST_TEST(same(svc.stats(), before));
  BOOST_TEST(svc.stats().pending == 2u);
  io.poll();
  BOOST_TEST(invoked_bad == 0);

  // max_pending (3) still counts exactly: one more fits, the next is refused.
  error_code third, fourth;
  fresh.async_wait(asio::bind_allocator(failing_allocator<void>(&fail), [&](error_code ec) { third = ec; }));
  fresh.async_wait([&](error_code ec) { fourth = ec; });
  io.restart();
  io.poll();
  BOOST_TEST(fourth == asio_wheel::error::too_many_timers);

  // Everything else completes as if nothing had happened.
  svc.advance(20ms);
  io.restart();
  io.run();
  BOOST_TEST(ok == 2);
  BOOST_TEST(!third);
  BOOST_TEST(invoked_bad == 0);
  BOOST_TEST(svc.stats().expired == 3u);
  BOOST_TEST(svc.stats().pending == 0u);
}

// ---- a step that cannot be posted ------------------------------------------------------

namespace {

// An io_context's executor whose execute() throws std::bad_alloc while *fail is set: a
// user's executor type inside any_io_executor, the one case where the wheel posts its
// steps on the user's executor (context_executor.hpp), and so the way to make a step's
// post fail here. (On an io_context itself a step's post allocates nothing: it uses the
// shard's own memory, see detail/post_memory.hpp and test_internals.)
struct flaky_executor {
  asio::io_context::executor_type inner;
  const bool* fail;

  asio::execution_context& query(asio::execution::context_t) const noexcept {
    return asio::query(inner, asio::execution::context);
  }
  static constexpr asio::execution::blocking_t query(asio::execution::blocking_t) noexcept {
    return asio::execution::blocking.never;
  }
  flaky_executor require(asio::execution::blocking_t::never_t) const noexcept { return *this; }
  // The tracked copy that counts as the context's work; it fails while *fail_work is
  // set (the wheel takes it when the first wait of an idle shard is counted).
  const bool* fail_work = nullptr;
  flaky_executor require(asio::execution::outstanding_work_t::tracked_t) const {
    if (fail_work && *fail_work) throw std::bad_alloc();
    return *this;
  }
  // While *drop is set, what it is given is destroyed unrun (an executor whose owner
  // stops it, say), and counted in *dropped; *on_drop, if given, runs first.
  const bool* drop = nullptr;
  int* dropped = nullptr;
  const std::function<void()>* on_drop = nullptr;
  template <class F>
  void execute(F&& f) const {
    if (*fail) throw std::bad_alloc();
    if (drop && *drop) {
      ++*dropped;
      if (on_drop) (*on_drop)();
      return;
    }
    const auto never = asio::require(inner, asio::execution::blocking.never);
#if ASIO_WHEEL_ASIO_VERSION >= 102600
    never.execute(std::forward<F>(f));
#else
    asio::execution::execute(never, std::forward<F>(f)); // the member is private before 1.26
#endif
  }
  friend bool operator==(const flaky_executor& a, const flaky_executor& b) noexcept {
    return a.inner == b.inner && a.fail == b.fail;
  }
  friend bool operator!=(const flaky_executor& a, const flaky_executor& b) noexcept {
    return !(a == b);
  }
};

// A manual-clock context whose wheel posts its steps on a flaky_executor: I/O objects
// built on flaky() fail to post while `fail` is set.
struct flaky_context {
  asio::io_context io{1};
  asio_wheel::wheel_service& svc = asio_wheel::install(io, manual());
  bool fail = false;
  bool fail_work = false;
  bool drop = false;
  int dropped = 0;
  asio::any_io_executor flaky() {
    return flaky_executor{io.get_executor(), &fail, &fail_work, &drop, &dropped};
  }

  // How the waits a test started completed: with operation_aborted, or otherwise.
  int aborted = 0, other = 0;
  auto tally() {
    return [this](error_code ec) { (ec == asio::error::operation_aborted ? aborted : other)++; };
  }
  // Posts a step (an advance by nothing) and runs it, with what it completes.
  void next_step() {
    svc.advance(0ms);
    io.restart();
    io.poll();
  }
};

} // namespace

// A cancel whose step cannot be posted throws and changes nothing: the wait is still
// pending, and a cancel after it aborts the wait once. Before, the waits moved to the
// ready queue and the shard counted a step as posted: no step ever came, and the aborted
// handler was lost.
BOOST_FIXTURE_TEST_CASE(a_cancel_whose_step_cannot_be_posted_changes_nothing, flaky_context) {
  asio_wheel::timer t(flaky(), 10ms);
  t.async_wait(tally());
  const auto before = svc.stats();
  BOOST_TEST(before.pending == 1u);

  fail = true;
  BOOST_CHECK_THROW(t.cancel(), std::bad_alloc);
  fail = false;
  BOOST_TEST(same(svc.stats(), before));
  io.poll();
  BOOST_TEST(aborted + other == 0);

  BOOST_TEST(t.cancel() == 1u);
  io.restart();
  io.poll();
  BOOST_TEST(aborted == 1);
  BOOST_TEST(other == 0);
  BOOST_TEST(svc.stats().pending == 0u);
  BOOST_TEST(svc.stats().cancelled == 1u);
}

// The same for a periodic timer, whose cancel also takes its schedule off the wheel:
// a cancel that throws leaves the pending tick and the schedule, and the tick after a
// cancel that went through is aborted once, with the schedule gone (nothing fires).
BOOST_FIXTURE_TEST_CASE(a_periodic_cancel_whose_step_cannot_be_posted_changes_nothing,
                        flaky_context) {
  asio_wheel::periodic_timer p(flaky(), 10ms);
  int aborted = 0, ticked = 0;
  auto on_tick = [&](error_code ec, std::uint64_t) {
    (ec == asio::error::operation_aborted ? aborted : ticked)++;
  };
  p.async_tick(on_tick);
  const auto before = svc.stats();

  fail = true;
  BOOST_CHECK_THROW(p.cancel(), std::bad_alloc);
  fail = false;
  BOOST_TEST(same(svc.stats(), before));
  svc.advance(10ms); // the schedule is still there: the tick comes
  io.poll();
  BOOST_TEST(ticked == 1);

  p.async_tick(on_tick);
  BOOST_TEST(p.cancel() == 1u);
  svc.advance(30ms);
  io.restart();
  io.poll();
  BOOST_TEST(aborted == 1);
  BOOST_TEST(ticked == 1);
  BOOST_TEST(svc.stats().pending == 0u);
}

// An advance whose step cannot be posted throws; the waits it made due stay due, and the
// next call that needs a step (here an advance by nothing) posts it. Before, the shard
// counted the failed post as posted and never posted another: the waits never completed.
BOOST_FIXTURE_TEST_CASE(an_advance_whose_step_cannot_be_posted_is_caught_up_by_the_next_post,
                        flaky_context) {
  asio_wheel::timer t(flaky(), 10ms);
  int fired = 0;
  t.async_wait([&](error_code ec) { fired += !ec; });

  fail = true;
  BOOST_CHECK_THROW(svc.advance(10ms), std::bad_alloc);
  fail = false;
  io.poll();
  BOOST_TEST(fired == 0);
  BOOST_TEST(svc.stats().pending == 1u);

  next_step();
  BOOST_TEST(fired == 1);
  BOOST_TEST(svc.stats().pending == 0u);
  BOOST_TEST(svc.stats().expired == 1u);
}

namespace {

// A handler that counts its invocations and the destructions of its last owner.
struct counted_handler {
  int* invoked;
  int* destroyed;
  counted_handler(int* i, int* d) noexcept : invoked(i), destroyed(d) {}
  counted_handler(counted_handler&& o) noexcept : invoked(o.invoked), destroyed(o.destroyed) {
    o.destroyed = nullptr;
  }
  counted_handler(const counted_handler&) = delete;
  ~counted_handler() {
    if (destroyed) ++*destroyed;
  }
  template <class... Args>
  void operator()(Args&&...) {
    ++*invoked;
  }
};

} // namespace

// A wait whose expiry has passed needs a step at once. If its post throws, async_wait
// throws and the wait leaves no trace: not pending, its handler destroyed and never
// invoked, as with Asio's own initiating functions. Before, the wait stayed on the wheel
// while the caller saw the exception, and the next step completed it after all. Both
// kinds of op: one in the timer's buffer, and one in memory of its own.
BOOST_FIXTURE_TEST_CASE(a_wait_whose_step_cannot_be_posted_leaves_no_trace, flaky_context) {
  asio_wheel::timer t(flaky(), 0ms);
  int invoked = 0, destroyed = 0;
  const auto before = svc.stats();

  fail = true;
  BOOST_CHECK_THROW(t.async_wait(counted_handler(&invoked, &destroyed)), std::bad_alloc);
  fail = false;
  BOOST_TEST(same(svc.stats(), before));
  BOOST_TEST(destroyed == 1);

  // The same with an op in memory of its own (a handler with an allocator of its own).
  fail = true;
  BOOST_CHECK_THROW(t.async_wait(asio::bind_allocator(std::allocator<void>(),
                                                      counted_handler(&invoked, &destroyed))),
                    std::bad_alloc);
  fail = false;
  BOOST_TEST(same(svc.stats(), before));
  BOOST_TEST(destroyed == 2);
  io.poll();
  BOOST_TEST(invoked == 0);

  // The timer works as before: a wait now completes once.
  int later = 0;
  t.async_wait([&](error_code ec) { later += !ec; });
  io.restart();
  io.poll();
  BOOST_TEST(later == 1);
  BOOST_TEST(invoked == 0);
  BOOST_TEST(svc.stats().pending == 0u);
}

// cancel_one whose step cannot be posted throws and changes nothing: the first wait,
// in the timer's buffer, still waits, and the next cancel_one aborts it, not the second.
// Before, the op left its queue before the post threw and was lost.
BOOST_FIXTURE_TEST_CASE(a_cancel_one_whose_step_cannot_be_posted_changes_nothing, flaky_context) {
  asio_wheel::timer t(flaky(), 10ms);
  std::vector<int> order;
  t.async_wait([&](error_code ec) { order.push_back(ec ? -1 : 1); });
  t.async_wait([&](error_code ec) { order.push_back(ec ? -2 : 2); });
  const auto before = svc.stats();

  fail = true;
  BOOST_CHECK_THROW(t.cancel_one(), std::bad_alloc);
  fail = false;
  BOOST_TEST(same(svc.stats(), before));

  BOOST_TEST(t.cancel_one() == 1u);
  io.poll();
  svc.advance(10ms);
  io.restart();
  io.poll();
  BOOST_TEST(order == (std::vector<int>{-1, 2}));
  BOOST_TEST(svc.stats().pending == 0u);
}

// A tick whose time has passed when it is asked for needs a step at once. If its post
// throws, async_tick throws and leaves no trace: the schedule is not on the wheel, the
// handler destroyed and never invoked, and the next async_tick gets the tick.
BOOST_FIXTURE_TEST_CASE(a_tick_whose_step_cannot_be_posted_leaves_no_trace, flaky_context) {
  asio_wheel::periodic_timer p(flaky(), 10ms);
  svc.advance(10ms); // the first tick's time passes with no async_tick asking for it
  io.poll();
  int invoked = 0, destroyed = 0;
  const auto before = svc.stats();

  fail = true;
  BOOST_CHECK_THROW(p.async_tick(counted_handler(&invoked, &destroyed)), std::bad_alloc);
  fail = false;
  BOOST_TEST(same(svc.stats(), before));
  BOOST_TEST(destroyed == 1);

  int ticked = 0;
  p.async_tick([&](error_code ec, std::uint64_t) { ticked += !ec; });
  io.restart();
  io.poll();
  BOOST_TEST(ticked == 1);
  BOOST_TEST(invoked == 0);
  BOOST_TEST(svc.stats().pending == 0u);
}

// A take served at once (an element has expired) whose step cannot be posted throws, and
// the element stays in the queue for the next take. Before, the element had moved into
// the take's op, which was then neither queued nor destroyed: both were lost.
BOOST_FIXTURE_TEST_CASE(a_take_whose_step_cannot_be_posted_leaves_the_element, flaky_context) {
  asio_wheel::delay_queue<int> q(flaky());
  q.push(7, 1ms);
  svc.advance(1ms);
  io.poll();
  int invoked = 0, destroyed = 0;

  fail = true;
  BOOST_CHECK_THROW(q.async_take(counted_handler(&invoked, &destroyed)), std::bad_alloc);
  fail = false;
  BOOST_TEST(destroyed == 1);
  BOOST_TEST(q.size() == 1u);

  int got = 0;
  q.async_take([&](error_code ec, int v) { got = ec ? -1 : v; });
  io.restart();
  io.poll();
  BOOST_TEST(got == 7);
  BOOST_TEST(invoked == 0);
  BOOST_TEST(q.size() == 0u);
}

// A handler throws in a step, and the step that should complete the rest of its batch
// cannot be posted: the handler's exception leaves run(), the rest stays ready, and the
// next step completes it. Before, the post threw from the destructor that puts the rest
// back (while the handler's exception unwound): std::terminate.
BOOST_FIXTURE_TEST_CASE(a_throwing_handler_whose_next_step_cannot_be_posted_loses_nothing,
                        flaky_context) {
  asio_wheel::timer first(flaky(), 10ms), second(flaky(), 10ms);
  int completed = 0;
  // Bound to the context's own executor, the handlers run inside the step.
  first.async_wait(asio::bind_executor(io, [&](error_code) {
    fail = true;
    throw std::runtime_error("handler");
  }));
  second.async_wait(asio::bind_executor(io, [&](error_code ec) { completed += !ec; }));
  svc.advance(10ms);
  BOOST_CHECK_THROW(io.poll(), std::runtime_error);
  fail = false;
  io.restart();
  io.poll();
  BOOST_TEST(completed == 0); // no step was posted

  next_step(); // posts one for what is ready
  BOOST_TEST(completed == 1);
  BOOST_TEST(svc.stats().pending == 0u);
}

// Timers and queues destroyed while their steps cannot be posted: a destructor must not
// throw, so their pending waits, ticks and takes are aborted all the same, and complete
// with operation_aborted, once each, at the next step. Before, the post's exception left
// the destructor: std::terminate.
BOOST_FIXTURE_TEST_CASE(objects_destroyed_when_their_step_cannot_be_posted_abort_their_waits,
                        flaky_context) {
  auto count = tally();
  {
    asio_wheel::timer t(flaky(), 1h);
    t.async_wait(count); // in the timer's buffer
    t.async_wait(count); // in memory of its own
    asio_wheel::periodic_timer p(flaky(), 1h);
    p.async_tick([&](error_code ec, std::uint64_t) { count(ec); });
    asio_wheel::delay_queue<int> q(flaky());
    q.push(1, 1h);
    q.async_take([&](error_code ec, int) { count(ec); });
    BOOST_TEST(svc.stats().pending == 4u);
    fail = true;
  }
  fail = false;
  BOOST_TEST(svc.stats().pending == 0u);
  io.poll();
  BOOST_TEST(aborted + other == 0); // no step was posted

  next_step(); // posts one for what is ready
  BOOST_TEST(aborted == 4);
  BOOST_TEST(other == 0);
}

// cancel_after starts the operation before it puts the deadline on the wheel. If the
// deadline has passed and its step cannot be posted, the initiation must not throw: the
// operation has started and will complete. The deadline waits on the wheel for the
// shard's next step instead, and cuts the wait short then, once. Before, async_wait
// threw while the wait stayed pending, and its handler ran later all the same.
BOOST_FIXTURE_TEST_CASE(a_deadline_whose_step_cannot_be_posted_fires_at_the_next_step,
                        flaky_context) {
  asio_wheel::timer t(flaky(), 1h);
  fail = true;
  BOOST_CHECK_NO_THROW(t.async_wait(asio_wheel::cancel_after(0ms, tally())));
  fail = false;
  BOOST_TEST(svc.stats().pending == 2u); // the wait and its deadline
  io.poll();
  BOOST_TEST(aborted + other == 0);

  next_step(); // which finds the deadline due
  BOOST_TEST(aborted == 1);
  BOOST_TEST(other == 0);
  BOOST_TEST(svc.stats().pending == 0u);
}

namespace {

// An operation that is not on the wheel and completes only when cancelled, through the
// handler's associated executor.
template <class Token>
auto async_until_cancelled(Token&& token) {
  return asio::async_initiate<Token, void(error_code)>(
      [](auto handler) {
        auto held = std::make_shared<decltype(handler)>(std::move(handler));
        asio::get_associated_cancellation_slot(*held).assign([held](asio::cancellation_type) {
          asio::post(asio::get_associated_executor(*held),
                     [held] { std::move(*held)(asio::error::operation_aborted); });
        });
      },
      token);
}

} // namespace

// The same when what throws is the count of the deadline, which takes the context's
// work on an idle shard: the deadline still goes on the wheel, as passed, and the next
// step emits it.
BOOST_FIXTURE_TEST_CASE(a_deadline_that_cannot_be_counted_fires_at_the_next_step, flaky_context) {
  fail_work = true;
  BOOST_CHECK_NO_THROW(async_until_cancelled(
      asio_wheel::cancel_after(1h, asio::bind_executor(flaky(), tally()))));
  fail_work = false;
  BOOST_TEST(svc.stats().pending == 0u); // not counted
  next_step();
  BOOST_TEST(aborted == 1);
  BOOST_TEST(other == 0);
}

// The deadline comes, but its emission cannot be dispatched to the operation's executor:
// the exception leaves run(), and the deadline goes back on the wheel for the next tick,
// so the wait is cut short once, a tick late. Before, the deadline was dropped: the
// wait would have run its full hour.
BOOST_FIXTURE_TEST_CASE(a_deadline_whose_emission_cannot_be_dispatched_fires_a_tick_later,
                        flaky_context) {
  asio_wheel::timer t(flaky(), 1h);
  t.async_wait(asio_wheel::cancel_after(10ms, tally()));
  svc.advance(10ms); // posts the step that finds the deadline due
  fail = true;       // and the emission's dispatch to the timer's executor fails
  BOOST_CHECK_THROW(io.poll(), std::bad_alloc);
  fail = false;
  // The wait, and its deadline back on the wheel, counted again (so that in steady mode
  // the driver is armed for it).
  BOOST_TEST(svc.stats().pending == 2u);
  next_step();
  BOOST_TEST(aborted + other == 0); // not within the same tick

  svc.advance(1ms);
  io.restart();
  io.poll();
  BOOST_TEST(aborted == 1);
  BOOST_TEST(other == 0);
  BOOST_TEST(svc.stats().pending == 0u);
}

// The same while the operation's executor keeps failing, with the shard's steps on the
// context's own executor (an object built on it came first), which do run: the emission
// is tried once a tick, not at every step. Before, the deadline went back as passed,
// and each failed emission posted a step that tried again at once: run() threw on every
// call without time moving, and with an executor that drops what it is given, would
// never have returned.
BOOST_FIXTURE_TEST_CASE(a_deadline_whose_emission_keeps_failing_is_tried_once_a_tick,
                        flaky_context) {
  asio_wheel::timer first(io); // the shard's steps go to io's executor
  asio_wheel::timer t(flaky(), 1h);
  t.async_wait(asio_wheel::cancel_after(10ms, tally()));
  svc.advance(10ms);
  fail = true;
  for (int tick = 0; tick < 3; ++tick) {
    BOOST_CHECK_THROW(io.poll(), std::bad_alloc);
    io.restart();
    BOOST_CHECK_NO_THROW(io.poll()); // nothing left to try within this tick
    BOOST_TEST((svc.stats().next_wakeup == svc.now() + 1ms));
    svc.advance(1ms);
    io.restart();
  }
  fail = false;
  drop = true; // the same when the executor drops the emission unrun
  for (int tick = 1; tick <= 3; ++tick) {
    io.poll(); // returns: the dropped emission's retry waits for the next tick
    BOOST_TEST(dropped == tick); // one emission a tick
    BOOST_TEST((svc.stats().next_wakeup == svc.now() + 1ms));
    svc.advance(1ms);
    io.restart();
  }
  drop = false;
  io.poll();
  BOOST_TEST(aborted == 1);
  BOOST_TEST(other == 0);
  BOOST_TEST(svc.stats().pending == 0u);
}

namespace {

// In steady mode, a socket read with a 2 ms deadline whose handler is bound to a
// flaky_executor: the deadline's first emission is dropped unrun (on_drop then runs; by
// default it lets later ones through), and its retry must still cancel the read.
struct dropped_emission_read {
  asio::io_context io{1};
  asio_wheel::wheel_service& svc;
  asio::local::stream_protocol::socket a{io}, b{io};
  bool fail = false, fail_work = false, drop = true;
  int dropped = 0, calls = 0;
  error_code got;
  std::function<void()> on_drop = [this] { drop = false; };
  std::function<void()> on_read = [] {};
  char buf[4] = {};

  explicit dropped_emission_read(const asio_wheel::wheel_options& o)
      : svc(asio_wheel::install(io, o)) {
    asio::local::connect_pair(a, b);
  }
  // Starts the read and runs until its first emission has been dropped.
  void start() {
    const asio::any_io_executor flaky =
        flaky_executor{io.get_executor(), &fail, &fail_work, &drop, &dropped, &on_drop};
    a.async_read_some(asio::buffer(buf),
                      asio_wheel::cancel_after(2ms, asio::bind_executor(flaky, [this](error_code ec,
                                                                                     std::size_t) {
                                                 ++calls;
                                                 got = ec;
                                                 on_read();
                                               })));
    while (dropped == 0) io.run_one();
  }
  // Runs out the context: the retry cancels the read, once, and nothing is left.
  void check_the_retry_cancels_the_read() {
    io.run_for(60s); // the bound only turns a lost retry into a failure, not a hang
    BOOST_TEST(io.stopped());
    BOOST_TEST(calls == 1);
    BOOST_TEST((got == asio::error::operation_aborted));
    BOOST_TEST(dropped == 1);
    BOOST_TEST(svc.stats().pending == 0u);
  }
};

} // namespace

// With nothing of the wheel's own pending but the deadline: it goes back for the next
// tick counted again, so that the driver, which wakes the wheel for pending operations
// only, is armed for the retry. Uncounted, the retry waited for a step that nothing
// brought, and the read was never cancelled.
BOOST_AUTO_TEST_CASE(steady_a_dropped_emission_is_retried_with_nothing_else_pending) {
  dropped_emission_read r{asio_wheel::wheel_options{}};
  r.start();
  r.check_the_retry_cancels_the_read();
}

// The same when max_pending is full as the deadline goes back: a wait on the other
// shard took the place its firing gave up. The retry is counted past the limit (it was
// admitted once). Refused, it sat uncounted in a slot of a shard with nothing pending,
// whose driver was therefore disarmed, and the read was never cancelled (a suspicion of
// an outside review, session 47).
BOOST_AUTO_TEST_CASE(steady_a_dropped_emission_is_retried_past_a_full_max_pending) {
  asio_wheel::wheel_options o;
  o.shards = 2; // by thread: this thread's shard and another's
  o.max_pending = 1;
  dropped_emission_read r{o};
  std::optional<asio_wheel::timer> other_shard;
  std::thread([&] { other_shard.emplace(r.io); }).join();
  int other_aborted = 0;
  r.on_drop = [&] {
    r.drop = false;
    other_shard->expires_after(1h);
    other_shard->async_wait([&](error_code ec) { other_aborted += ec == asio::error::operation_aborted; });
  };
  r.on_read = [&] { other_shard->cancel(); };
  r.start();
  BOOST_TEST(r.svc.stats().pending == 2u); // the wait, and the retry past the limit
  r.check_the_retry_cancels_the_read();
  BOOST_TEST(other_aborted == 1);
}

// A push whose expiry has passed expires at once, and with a take waiting needs a step
// to hand it over. If that post throws, the push still succeeds (its caller gets the
// key; an exception would leave it unable to tell a retry from a duplicate), and the
// take gets the element at the next step. Before, push threw with the element already
// in the queue.
BOOST_FIXTURE_TEST_CASE(a_push_whose_step_cannot_be_posted_expires_at_the_next_step,
                        flaky_context) {
  asio_wheel::delay_queue<int> q(flaky());
  int got = 0, calls = 0;
  q.async_take([&](error_code ec, int v) {
    ++calls;
    got = ec ? -1 : v;
  });
  fail = true;
  BOOST_CHECK_NO_THROW(q.push(7, 0ms));
  fail = false;
  BOOST_TEST(q.size() == 1u);
  io.poll();
  BOOST_TEST(calls == 0); // not handed over: no step has run since
  next_step();
  BOOST_TEST(calls == 1);
  BOOST_TEST(got == 7);
  BOOST_TEST(q.size() == 0u);
}

// The same for a timer's reset to a time that has passed: it takes effect, and the wait
// completes at the next step, once, with success. Before, reset_after threw, though the
// wait had been moved and completed all the same.
BOOST_FIXTURE_TEST_CASE(a_reset_whose_step_cannot_be_posted_takes_effect, flaky_context) {
  asio_wheel::timer t(flaky(), 1h);
  int fired = 0, failed = 0;
  t.async_wait([&](error_code ec) { ++(ec ? failed : fired); });
  fail = true;
  BOOST_CHECK_NO_THROW(t.reset_after(0ms));
  fail = false;
  io.poll();
  BOOST_TEST(fired + failed == 0);
  next_step();
  BOOST_TEST(fired == 1);
  BOOST_TEST(failed == 0);
  BOOST_TEST(svc.stats().pending == 0u);
}

// In steady mode the driver is armed for a deadline. When the operation completes first,
// the deadline leaves the wheel and the shard posts the driver's disarm; that post
// throws here. The disarm only saves a wake-up, so the completion goes on: its handler
// runs once and nothing stays pending, while the driver stays armed, to fire once for
// nothing. Before, the exception left the deadline's noexcept clean-up: std::terminate.
BOOST_AUTO_TEST_CASE(a_deadline_whose_disarm_cannot_be_posted_still_ends) {
  asio::io_context io{1};
  auto& svc = asio_wheel::install(io, asio_wheel::wheel_options{}); // steady: a driver
  bool fail = false;
  const asio::any_io_executor flaky = flaky_executor{io.get_executor(), &fail};
  std::function<void()> complete;
  int calls = 0;
  auto op = [&](auto&& token) {
    return asio::async_initiate<decltype(token), void(error_code)>(
        [&](auto handler) {
          auto held = std::make_shared<decltype(handler)>(std::move(handler));
          complete = [held] { std::move(*held)(error_code()); };
        },
        token);
  };
  op(asio_wheel::cancel_after(1h, asio::bind_executor(flaky, [&](error_code ec) {
    calls += !ec;
  })));
  BOOST_TEST(svc.stats().pending == 1u); // the deadline; the driver is armed for it

  fail = true;
  BOOST_CHECK_NO_THROW(complete()); // the deadline leaves: a disarm, which cannot be posted
  fail = false;
  BOOST_TEST(calls == 1);
  BOOST_TEST(svc.stats().pending == 0u);
  complete = nullptr;
  io.poll();
}

// ---- the io_context destroyed with a million waits pending ------------------------------

namespace {

// 1M in a normal build, 200k under sanitizers (memory and time of ASan/TSan).
constexpr std::size_t many = FAULTS_SANITIZED ? 200'000 : 1'000'000;

struct tally {
  std::atomic<std::size_t> invoked{0};
  std::atomic<std::size_t> destroyed{0};
};

// Counts its destructions; invoking it counts too. Moved-from copies do not count.
struct probe {
  tally* t;
  explicit probe(tally* x) : t(x) {}
  probe(probe&& o) noexcept : t(o.t) { o.t = nullptr; }
  probe(const probe&) = delete;
  ~probe() {
    if (t) t->destroyed.fetch_add(1, std::memory_order_relaxed);
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(context_destroyed_with_pending_waits) {
  tally t;
  {
    asio::io_context io(1);
    auto& svc = asio_wheel::install(io, manual());
    auto strand = asio::make_strand(io);
    // Expiries over every level (1 ms .. ~49 days, and never), owned by their handlers
    // as sessions own their timers: the timers die with the handlers, during shutdown.
    for (std::size_t i = 0; i < many; ++i) {
      auto timer = std::make_shared<asio_wheel::timer>(io);
      switch (i % 5) {
      case 0: timer->expires_after(std::chrono::milliseconds(1 + i % 200)); break;
      case 1: timer->expires_after(std::chrono::seconds(1 + i % 5000)); break;
      case 2: timer->expires_after(std::chrono::hours(1 + i % 1000)); break;
      case 3: timer->expires_at(asio_wheel::timer::time_point::max()); break;
      default: timer->expires_after(-1ms); break; // already due: queued, not yet run
      }
      auto h = [timer, p = probe(&t)](error_code) { p.t->invoked.fetch_add(1); };
      if (i % 3 == 0)
        timer->async_wait(asio::bind_executor(strand, std::move(h)));
      else
        timer->async_wait(std::move(h));
    }
    // Some handed over for completion (queued in the context), none run.
    svc.advance(1ms);
    BOOST_TEST(svc.stats().pending == many);
  }
  BOOST_TEST(t.invoked.load() == 0u);
  BOOST_TEST(t.destroyed.load() == many);
}

BOOST_AUTO_TEST_CASE(context_destroyed_after_timers) {
  // Timers destroyed first (their waits abort and are queued), then the context without
  // running: the aborted handlers are destroyed, not invoked.
  tally t;
  {
    asio::io_context io(1);
    asio_wheel::install(io, manual());
    std::vector<asio_wheel::timer> timers;
    const std::size_t n = many / 10;
    timers.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      timers.emplace_back(io, std::chrono::milliseconds(i % 1000));
      timers.back().async_wait([p = probe(&t)](error_code) { p.t->invoked.fetch_add(1); });
    }
    timers.clear();
  }
  BOOST_TEST(t.invoked.load() == 0u);
  BOOST_TEST(t.destroyed.load() == many / 10);
}

// ---- max_pending under load --------------------------------------------------------------

BOOST_AUTO_TEST_CASE(max_pending_single_thread) {
  asio::io_context io(1);
  auto& svc = asio_wheel::install(io, manual(1024, 1000));
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  std::size_t ok = 0, refused = 0, other = 0;
  bool inside = false;
  auto h = [&](error_code ec) {
    BOOST_TEST(!inside); // never completed inside async_wait
    if (!ec) ++ok;
    else if (ec == asio_wheel::error::too_many_timers) ++refused;
    else ++other;
  };
  for (std::size_t i = 0; i < 1500; ++i) {
    timers.push_back(std::make_unique<asio_wheel::timer>(io, std::chrono::milliseconds(1 + i % 50)));
    inside = true;
    timers.back()->async_wait(h);
    inside = false;
  }
  BOOST_TEST(svc.stats().pending == 1000u);
  BOOST_TEST(svc.stats().rejected == 500u);
  io.poll(); // the refusals
  BOOST_TEST(refused == 500u);
  BOOST_TEST(ok == 0u);

  // Half of the accepted ones expire; the room they leave is usable again.
  svc.advance(25ms);
  io.restart();
  io.poll();
  const std::size_t expired_now = ok;
  BOOST_TEST(expired_now > 0u);
  BOOST_TEST(svc.stats().pending == 1000u - expired_now);
  for (std::size_t i = 0; i < expired_now; ++i) {
    timers.push_back(std::make_unique<asio_wheel::timer>(io, 10ms));
    timers.back()->async_wait(h);
  }
  BOOST_TEST(svc.stats().pending == 1000u);
  BOOST_TEST(svc.stats().rejected == 500u);
  timers.back()->async_wait(h); // one over the limit again (a second wait on a timer)
  svc.advance(100ms);
  io.restart();
  io.run();
  BOOST_TEST(refused == 501u);
  BOOST_TEST(ok == 1000u + expired_now);
  BOOST_TEST(other == 0u);
  BOOST_TEST(svc.stats().pending == 0u);

  error_code ec = asio_wheel::error::too_many_timers;
  BOOST_TEST(ec.message().find("max_pending") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(max_pending_under_threaded_load) {
  // 2 threads run the context; 8 strands each keep up to 40 waits going while the limit
  // is 100: refusals happen all the time. Every wait completes exactly once, with
  // success or too_many_timers, and the counters agree.
  asio::io_context io(2);
  auto& svc = asio_wheel::install(io, manual(64, 100));
  const std::size_t per_strand = FAULTS_SANITIZED ? 3'000 : 20'000;
  constexpr std::size_t strands = 8;
  std::atomic<std::size_t> ok{0}, refused{0}, other{0}, started{0}, finished_strands{0};

  struct load : std::enable_shared_from_this<load> {
    asio::io_context& io;
    asio::strand<asio::io_context::executor_type> strand;
    std::vector<std::unique_ptr<asio_wheel::timer>> timers;
    std::size_t budget, outstanding = 0, turn = 0;
    std::atomic<std::size_t> *ok, *refused, *other, *started, *finished;
    load(asio::io_context& i, std::size_t b) : io(i), strand(asio::make_strand(i)), budget(b) {
      for (int k = 0; k < 40; ++k) timers.push_back(std::make_unique<asio_wheel::timer>(i));
    }
    void top_up() {
      while (outstanding < 40 && budget > 0) {
        --budget;
        ++outstanding;
        started->fetch_add(1);
        auto& t = *timers[turn++ % timers.size()];
        t.expires_after(std::chrono::milliseconds(turn % 3));
        t.async_wait(asio::bind_executor(strand, [self = shared_from_this()](error_code ec) {
          if (!ec) self->ok->fetch_add(1);
          else if (ec == asio_wheel::error::too_many_timers) self->refused->fetch_add(1);
          else self->other->fetch_add(1); // expires_after on a busy timer aborts it
          --self->outstanding;
          self->top_up();
        }));
      }
      if (outstanding == 0 && budget == 0) finished->fetch_add(1);
    }
  };

  std::vector<std::shared_ptr<load>> loads;
  for (std::size_t i = 0; i < strands; ++i) {
    loads.push_back(std::make_shared<load>(io, per_strand));
    auto& l = *loads.back();
    l.ok = &ok, l.refused = &refused, l.other = &other, l.started = &started;
    l.finished = &finished_strands;
    asio::post(l.strand, [p = loads.back()] { p->top_up(); });
  }
  auto work = asio::make_work_guard(io);
  std::vector<std::thread> runners;
  for (int i = 0; i < 2; ++i) runners.emplace_back([&io] { io.run(); });
  while (finished_strands.load() < strands) {
    svc.advance(1ms);
    std::this_thread::yield();
  }
  work.reset();
  for (auto& r : runners) r.join();

  BOOST_TEST(started.load() == per_strand * strands);
  BOOST_TEST(ok.load() + refused.load() + other.load() == started.load());
  BOOST_TEST(refused.load() > 0u);
  BOOST_TEST(ok.load() > 0u);
  const auto s = svc.stats();
  BOOST_TEST(s.rejected == refused.load());
  BOOST_TEST(s.expired == ok.load());
  BOOST_TEST(s.cancelled == other.load());
  BOOST_TEST(s.pending == 0u);
}

// ---- std::bad_alloc while a shard is built -----------------------------------------------

// Over-aligned allocations fail while this is set. A wheel's slots are cache-line aligned
// and the only such allocation here, so this makes a shard's constructor throw from
// inside (after it took its process-wide index), with nothing else in the way. The
// array forms are replaced too: the sanitizers' runtimes define their own, which would
// not come here.
static std::atomic<bool> fail_aligned_new{false};

static void* aligned_new(std::size_t n, std::align_val_t al) {
  if (fail_aligned_new.load()) throw std::bad_alloc();
  const auto align = static_cast<std::size_t>(al);
  // aligned_alloc wants a multiple of the alignment.
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t al) { return aligned_new(n, al); }
void* operator new[](std::size_t n, std::align_val_t al) { return aligned_new(n, al); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

BOOST_AUTO_TEST_CASE(a_shard_that_fails_to_build_gives_its_index_back) {
  using asio_wheel::detail::shard_for;
  asio_wheel::wheel_options one_shard;
  one_shard.shards = 1;
  // A shard built and destroyed: its index is the one the next shard takes.
  std::uint16_t freed = 0;
  {
    asio::io_context a;
    asio_wheel::install(a, one_shard);
    freed = shard_for(a.get_executor()).index();
  }
  // The next shard takes that index, then its wheel's slots fail: install throws, and the
  // index must be free again (it would be lost for the life of the process otherwise).
  asio::io_context failed;
  fail_aligned_new = true;
  BOOST_CHECK_THROW(asio_wheel::install(failed, one_shard), std::bad_alloc);
  fail_aligned_new = false;

  asio::io_context next;
  asio_wheel::install(next, one_shard);
  auto& shard = shard_for(next.get_executor());
  BOOST_TEST(shard.index() == freed);
  BOOST_TEST(&asio_wheel::detail::wheel_shard::at(freed) == &shard);

  // The context whose install failed has no wheel: a timer there installs the defaults
  // and works.
  asio_wheel::timer t(failed, 0ms);
  int done = 0;
  t.async_wait([&](error_code ec) { done += !ec; });
  failed.run();
  BOOST_TEST(done == 1);
}

// ---- std::bad_alloc from operator new, for the driver's wait ----------------------------

// Plain operator new fails while this is set; every other form of new and delete is
// replaced with it, so that memory from the sanitizers' runtimes never meets ours.
static std::atomic<bool> fail_plain_new{false};

static void* plain_new(std::size_t n) {
  if (fail_plain_new.load()) throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n) { return plain_new(n); }
void* operator new[](std::size_t n) { return plain_new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return plain_new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
  return operator new(n, t);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

// Arming the driver for an earlier tick cancels its armed wait, whose operation holds
// the driver's memory until its handler runs: the new wait's operation comes from the
// heap. When that fails, the wait that asked for the earlier tick is still started (a
// step is posted instead, which arms the driver when it runs), and both waits complete.
// Real time, but nothing measured: the near wait is 1 ms away, and run_one_for waits for
// it.
BOOST_AUTO_TEST_CASE(a_driver_that_cannot_arm_is_armed_by_a_step) {
  asio::io_context io(1);
  auto& svc = asio_wheel::install(io, {}); // steady time: only then is there a driver
  asio_wheel::timer far(io, 1h), near(io, 1ms);
  error_code far_ec, near_ec = asio::error::would_block;
  far.async_wait([&](error_code ec) { far_ec = ec; }); // the driver armed for 1 h
  // The waits live in their timers (small handlers): the driver's is the only allocation.
  // Boost.Test's own reports allocate, so the flag is cleared before any check.
  bool threw = false;
  fail_plain_new = true;
  try {
    near.async_wait([&](error_code ec) { near_ec = ec; });
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  fail_plain_new = false;
  BOOST_TEST(!threw);
  BOOST_TEST(svc.stats().pending == 2u);
  // Bounded, so that a driver left unarmed fails the test instead of hanging it.
  for (int i = 0; i < 100 && near_ec == asio::error::would_block; ++i) io.run_one_for(1s);
  BOOST_TEST(!near_ec);
  BOOST_TEST(far.cancel() == 1u);
  io.run();
  BOOST_TEST(far_ec == asio::error::operation_aborted);
  BOOST_TEST(svc.stats().pending == 0u);
}

// A timer's first wait lives in the timer; to leave it (cancelled or expired) the op
// moves to memory of its own, from the thread's op cache or operator new. When that
// fails, a cancel throws and changes nothing, and an expiry leaves run() with bad_alloc
// and comes again on the next step: the wait is neither lost nor completed twice. Before,
// both took the op off its timer first and lost it. On a thread of its own, whose op
// cache (and the depot behind it) the test empties for the op's size class first.
BOOST_AUTO_TEST_CASE(an_op_that_cannot_leave_its_timer_stays_and_completes_later) {
  using asio_wheel::detail::op_memory_allocate;
  using asio_wheel::detail::op_memory_deallocate;
  bool cancel_threw = false, expiry_threw = false;
  std::size_t pending_after_cancel = 0, pending_after_expiry = 0, cancelled = 0;
  int fired = 0, fired_after_expiry = -1;
  std::thread([&] {
    asio::io_context io(1);
    auto& svc = asio_wheel::install(io, manual());
    asio_wheel::timer t(io, 10ms);
    int aborted = 0;
    // Two references: a 32-byte op, one size class.
    t.async_wait([&fired, &aborted](error_code ec) { ++(ec ? aborted : fired); });
    constexpr std::size_t op_bytes = 32;
    std::vector<void*> held;
    held.reserve(100'000); // more than a thread's list and the depot hold of one class
    auto fail_from_now = [&] {
      fail_plain_new = true;
      while (held.size() < held.capacity()) {
        try {
          held.push_back(op_memory_allocate(op_bytes));
        } catch (const std::bad_alloc&) {
          break;
        }
      }
    };

    fail_from_now();
    try {
      t.cancel();
    } catch (const std::bad_alloc&) {
      cancel_threw = true;
    }
    fail_plain_new = false;
    pending_after_cancel = svc.stats().pending;

    svc.advance(10ms);
    fail_from_now();
    try {
      io.poll();
    } catch (const std::bad_alloc&) {
      expiry_threw = true;
    }
    fail_plain_new = false;
    pending_after_expiry = svc.stats().pending;
    fired_after_expiry = fired;
    io.restart();
    io.poll();
    cancelled = svc.stats().cancelled + static_cast<std::size_t>(aborted);
    for (void* p : held) op_memory_deallocate(p, op_bytes);
  }).join();
  BOOST_TEST(cancel_threw);
  BOOST_TEST(pending_after_cancel == 1u);
  BOOST_TEST(expiry_threw);
  BOOST_TEST(pending_after_expiry == 1u);
  BOOST_TEST(fired_after_expiry == 0);
  BOOST_TEST(fired == 1);
  BOOST_TEST(cancelled == 0u);
}
