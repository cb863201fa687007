// asio_wheel::timer: steady_timer semantics, reset_*, cancellation, completion tokens
// and associated characteristics, on the manual clock, and the edge cases timer
// libraries get wrong. The service itself (install() and its options, stats, shards,
// max_pending, expiry_batch, the steady driver) is in test_wheel_service.cpp.
#define BOOST_TEST_MODULE timer
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "counting_allocator.hpp"
#include "manual_clock.hpp"

#include <asio_wheel.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

using namespace std::chrono_literals;

namespace {

using asio_wheel_test::aborted;
using asio_wheel_test::manual_options;
using asio_wheel_test::recorder;
using fixture = asio_wheel_test::manual_context;

} // namespace

// ---- expiry: never early, at most one tick late ----

BOOST_AUTO_TEST_CASE(wait_completes_at_expiry_not_before_for_every_geometry) {
  for (auto o : {manual_options(), manual_options(1, 256), manual_options(1, 16), manual_options(3, 16)}) {
    fixture f(o);
    for (auto d : {1ms, 2ms, 255ms, 256ms, 257ms, 1000ms, 65536ms, 70001ms}) {
      asio_wheel::timer t(f.io, d);
      recorder r;
      t.async_wait(r.handler(f));
      const auto expiry = t.expiry();
      f.advance(d - 1ms);
      BOOST_TEST(r.calls == 0);
      f.advance(1ms);
      BOOST_TEST(r.calls == 1);
      BOOST_TEST(!r.ec);
      BOOST_TEST((r.at >= expiry));
    }
  }
}

BOOST_AUTO_TEST_CASE(expiry_between_ticks_rounds_up_never_down) {
  fixture f;
  asio_wheel::timer t(f.io, f.svc.now() + 2500us);
  recorder r;
  t.async_wait(r.handler(f));
  f.advance(2ms);
  BOOST_TEST(r.calls == 0);
  f.advance(499us);
  BOOST_TEST(r.calls == 0);
  f.advance(1us); // 2.5 ms: the tick containing it has not ended
  BOOST_TEST(r.calls == 0);
  f.advance(500us); // 3 ms: first tick boundary at or after expiry
  BOOST_TEST(r.calls == 1);
  BOOST_TEST((r.at - t.expiry() < 1ms)); // less than one tick late
}

BOOST_AUTO_TEST_CASE(one_big_advance_completes_in_expiry_order) {
  fixture f(manual_options(2, 16));
  std::vector<int> order;
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  for (int ms : {500, 3, 40, 17, 300, 9000, 4}) {
    timers.push_back(std::make_unique<asio_wheel::timer>(f.io, std::chrono::milliseconds(ms)));
    timers.back()->async_wait([&order, ms](error_code) { order.push_back(ms); });
  }
  f.advance(10s);
  BOOST_TEST(order == (std::vector<int>{3, 4, 17, 40, 300, 500, 9000}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(passed_expiry_completes_as_if_by_post_and_is_still_cancellable) {
  fixture f;
  f.advance(10ms);
  asio_wheel::timer t(f.io, f.svc.now() - 5ms);
  recorder r;
  t.async_wait(r.handler(f));
  BOOST_TEST(r.calls == 0); // never inside async_wait
  f.settle();
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(!r.ec);

  // Until the service hands it over, cancel() still reaches it.
  recorder r2;
  t.async_wait(r2.handler(f));
  BOOST_TEST(t.cancel() == 1u);
  f.settle();
  BOOST_TEST(r2.calls == 1);
  BOOST_TEST(r2.ec == aborted);

  // ... and so does reset_after, which keeps it waiting.
  recorder r3;
  t.async_wait(r3.handler(f));
  t.reset_after(5ms);
  f.settle();
  BOOST_TEST(r3.calls == 0);
  f.advance(5ms);
  BOOST_TEST(r3.calls == 1);
  BOOST_TEST(!r3.ec);
}

// The README's order for expiries that had passed when their waits started: all due at
// once, after what was already due, timer by timer as each became due (a timer's waits
// together, in start order); steady_timer would run b, the oldest expiry, first.
BOOST_AUTO_TEST_CASE(waits_started_with_passed_expiries_complete_after_those_due_timer_by_timer) {
  fixture f;
  f.advance(10s);
  std::vector<std::string> order;
  auto note = [&order](const char* name) {
    return [&order, name](error_code ec) {
      BOOST_TEST(!ec);
      order.push_back(name);
    };
  };
  asio_wheel::timer c(f.io, 1ms);
  c.async_wait(note("c"));
  f.svc.advance(1ms); // c is due, not yet run
  asio_wheel::timer a(f.io, f.svc.now() - 1s);
  asio_wheel::timer b(f.io, f.svc.now() - 4s);
  a.async_wait(note("a1"));
  b.async_wait(note("b"));
  a.async_wait(note("a2"));
  BOOST_TEST(order.empty()); // never inside the initiating call
  f.settle();
  BOOST_TEST(order == (std::vector<std::string>{"c", "a1", "a2", "b"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_wait_for_now_does_not_sit_a_rotation_in_a_processed_slot) {
  for (auto o : {manual_options(1, 16), manual_options()}) {
    fixture f(o);
    f.advance(7ms); // slot 7 processed
    asio_wheel::timer t(f.io, f.svc.now());
    recorder r;
    t.async_wait(r.handler(f));
    f.settle();
    BOOST_TEST(r.calls == 1);
    asio_wheel::timer t2(f.io, f.svc.now() + 1ms);
    recorder r2;
    t2.async_wait(r2.handler(f));
    f.advance(1ms);
    BOOST_TEST(r2.calls == 1);
  }
}

// ---- cancel, expires_*, reset_* ----

BOOST_AUTO_TEST_CASE(cancel_aborts_every_pending_wait_and_counts_them) {
  fixture f;
  asio_wheel::timer t(f.io, 1s);
  recorder a, b;
  t.async_wait(a.handler(f));
  t.async_wait(b.handler(f));
  BOOST_TEST(f.svc.stats().pending == 2u);
  BOOST_TEST(t.cancel() == 2u);
  BOOST_TEST(a.calls == 0); // never inside cancel()
  f.settle();
  BOOST_TEST(a.calls == 1);
  BOOST_TEST(b.calls == 1);
  BOOST_TEST(a.ec == aborted);
  BOOST_TEST(t.cancel() == 0u);
  auto s = f.svc.stats();
  BOOST_TEST(s.pending == 0u);
  BOOST_TEST(s.cancelled == 2u);
  f.advance(2s);
  BOOST_TEST(a.calls == 1);
}

BOOST_AUTO_TEST_CASE(cancel_after_hand_over_returns_zero_and_the_handler_sees_success) {
  // Two timers due in the same tick are handed over in one step; when the first
  // handler cancels the second, that wait is already dequeued.
  fixture f;
  asio_wheel::timer first(f.io, 1ms), second(f.io, 1ms);
  recorder r;
  std::size_t cancelled = 99;
  first.async_wait([&](error_code) { cancelled = second.cancel(); });
  second.async_wait(r.handler(f));
  f.advance(1ms);
  BOOST_TEST(cancelled == 0u);
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(!r.ec);
}

BOOST_AUTO_TEST_CASE(advance_alone_hands_nothing_over_so_cancel_still_counts) {
  fixture f;
  asio_wheel::timer t(f.io, 1ms);
  recorder r;
  t.async_wait(r.handler(f));
  f.svc.advance(1ms); // due, but the completion step has not run
  BOOST_TEST(t.cancel() == 1u);
  f.settle();
  BOOST_TEST(r.ec == aborted);
}

BOOST_AUTO_TEST_CASE(expires_at_and_after_abort_pending_waits) {
  fixture f;
  asio_wheel::timer t(f.io, 1s);
  recorder r;
  t.async_wait(r.handler(f));
  BOOST_TEST(t.expires_after(2s) == 1u);
  BOOST_TEST(t.expires_at(f.svc.now() + 3s) == 0u);
  f.settle();
  BOOST_TEST(r.ec == aborted);
  recorder r2;
  t.async_wait(r2.handler(f));
  f.advance(3s - 1ms);
  BOOST_TEST(r2.calls == 0);
  f.advance(1ms);
  BOOST_TEST(r2.calls == 1);
  BOOST_TEST(!r2.ec);
}

BOOST_AUTO_TEST_CASE(reset_moves_the_deadline_without_completing_anything) {
  for (auto o : {manual_options(), manual_options(1, 16)}) {
    fixture f(o);
    asio_wheel::timer t(f.io, 100ms);
    recorder a, b;
    t.async_wait(a.handler(f));
    t.async_wait(b.handler(f));
    f.advance(50ms);
    t.reset_after(100ms); // later: now due at 150 ms
    BOOST_TEST(f.settle() == 0u); // nothing posted, nothing run
    f.advance(99ms);
    BOOST_TEST(a.calls == 0);
    f.advance(1ms);
    BOOST_TEST(a.calls == 1);
    BOOST_TEST(b.calls == 1);
    BOOST_TEST(!a.ec);
    BOOST_TEST(f.svc.stats().cancelled == 0u);

    recorder c;
    t.expires_after(10s);
    t.async_wait(c.handler(f));
    t.reset_at(f.svc.now() + 20ms); // earlier
    f.advance(20ms);
    BOOST_TEST(c.calls == 1);
    BOOST_TEST((t.expiry() == f.svc.now()));
  }
}

BOOST_AUTO_TEST_CASE(reset_without_pending_waits_just_sets_the_expiry) {
  fixture f;
  asio_wheel::timer t(f.io);
  t.reset_after(30ms);
  BOOST_TEST((t.expiry() == f.svc.now() + 30ms));
  BOOST_TEST(f.svc.stats().pending == 0u);
  recorder r;
  t.async_wait(r.handler(f));
  f.advance(30ms);
  BOOST_TEST(r.calls == 1);
}

BOOST_AUTO_TEST_CASE(repeated_resets_fire_once_at_the_last_deadline) {
  fixture f(manual_options(2, 16));
  asio_wheel::timer t(f.io, 5ms);
  recorder r;
  t.async_wait(r.handler(f));
  for (int i = 0; i < 1000; ++i) {
    f.advance(1ms);
    t.reset_after(5ms); // an idle connection that keeps talking
  }
  BOOST_TEST(r.calls == 0);
  f.advance(4ms);
  BOOST_TEST(r.calls == 0);
  f.advance(1ms);
  BOOST_TEST(r.calls == 1);
}

BOOST_AUTO_TEST_CASE(a_later_reset_fires_on_the_tick_of_the_new_expiry_across_levels) {
  // A later reset leaves the entry in its slot with the new deadline; when that slot
  // comes up, on whatever level, the entry must be re-placed, not completed.
  for (auto o : {manual_options(1, 16), manual_options(2, 16), manual_options(4, 16)}) {
    fixture f(o);
    const auto start = f.svc.now();
    asio_wheel::timer t(f.io, 10ms);
    recorder r;
    t.async_wait(r.handler(f));
    f.advance(5ms);
    t.reset_after(300ms); // due at 305 ms: beyond level 1 of a 16-slot wheel
    f.advance(4ms);
    t.reset_after(5000ms); // due at 5009 ms
    const auto expiry = t.expiry();
    while (r.calls == 0 && f.svc.now() < start + 6s) f.advance(1ms);
    BOOST_TEST(r.calls == 1);
    BOOST_TEST(!r.ec);
    BOOST_TEST((r.at == expiry)); // not before, and not a tick late
    BOOST_TEST(f.svc.stats().expired == 1u);
  }
}

// A later reset may land after the wheel took the entry as due and before the step
// collects it (in steady mode, from another thread's step, even on its lock-free path).
// The entry must then wait for the new tick, in order with the others; never complete
// early. Found by the fuzzer in a first version that compared the expiry with the
// step's clock, not with the tick the wheel has reached.
BOOST_AUTO_TEST_CASE(a_reset_after_the_wheel_took_the_timer_as_due_puts_it_back) {
  for (auto o : {manual_options(), manual_options(1, 16)}) {
    fixture f(o);
    asio_wheel::timer t(f.io, 10ms), other(f.io, 15ms);
    std::string order;
    t.async_wait([&](error_code ec) {
      BOOST_TEST(!ec);
      BOOST_TEST((f.svc.now() == t.expiry())); // not before, and not a tick late
      order += 't';
    });
    other.async_wait([&](error_code) { order += 'o'; });
    f.svc.advance(10ms); // t is in the due list, a step is posted, nothing ran
    t.reset_after(10ms); // due at 20 ms now
    f.settle();
    BOOST_TEST(order == "");
    BOOST_TEST(f.svc.stats().pending == 2u);
    f.svc.advance(10ms); // one advance over both ticks: 15 ms, then 20
    f.settle();
    BOOST_TEST(order == "ot");
    BOOST_TEST(f.svc.stats().expired == 2u);
  }
}

// ---- out-of-range times ----

BOOST_AUTO_TEST_CASE(time_point_max_and_duration_max_stay_pending_until_cancelled) {
  fixture f;
  asio_wheel::timer a(f.io, asio_wheel::timer::time_point::max());
  asio_wheel::timer b(f.io, asio_wheel::timer::duration::max());
  asio_wheel::timer c(f.io);
  c.expires_after(std::chrono::hours(24 * 365 * 200)); // far, but finite
  recorder ra, rb, rc;
  a.async_wait(ra.handler(f));
  b.async_wait(rb.handler(f));
  c.async_wait(rc.handler(f));
  f.advance(std::chrono::hours(24 * 365));
  BOOST_TEST(ra.calls + rb.calls + rc.calls == 0);
  BOOST_TEST(!f.io.stopped()); // pending waits are outstanding work
  BOOST_TEST(a.cancel() == 1u);
  BOOST_TEST(b.cancel() == 1u);
  BOOST_TEST(c.cancel() == 1u);
  f.settle();
  BOOST_TEST(ra.ec == aborted);
  BOOST_TEST(rb.ec == aborted);
  BOOST_TEST(rc.ec == aborted);
}

BOOST_AUTO_TEST_CASE(negative_durations_and_time_point_min_mean_already_expired) {
  fixture f;
  asio_wheel::timer a(f.io, -5s);
  asio_wheel::timer b(f.io, asio_wheel::timer::time_point::min());
  asio_wheel::timer c(f.io, asio_wheel::timer::duration::min());
  recorder ra, rb, rc;
  a.async_wait(ra.handler(f));
  b.async_wait(rb.handler(f));
  c.async_wait(rc.handler(f));
  f.settle();
  BOOST_TEST(ra.calls == 1);
  BOOST_TEST(rb.calls == 1);
  BOOST_TEST(rc.calls == 1);
  BOOST_TEST(!ra.ec);
}

// ---- handlers that touch their own timer ----

BOOST_AUTO_TEST_CASE(handler_can_rearm_cancel_reset_and_destroy_its_own_timer) {
  fixture f;
  auto t = std::make_unique<asio_wheel::timer>(f.io, 1ms);
  int fired = 0;
  std::function<void(error_code)> rearm = [&](error_code ec) {
    BOOST_TEST(!ec);
    if (++fired < 3) {
      t->expires_after(1ms);
      t->async_wait(rearm);
    }
  };
  t->async_wait(rearm);
  for (int i = 0; i < 5; ++i) f.advance(1ms);
  BOOST_TEST(fired == 3);

  // cancel() and reset_after() from inside: the timer's two waits were handed over
  // together, so the second is no longer cancellable and completes with success.
  recorder second;
  t->expires_after(1ms);
  t->async_wait([&](error_code) {
    BOOST_TEST(t->cancel() == 0u);
    t->reset_after(1s);
  });
  t->async_wait(second.handler(f));
  f.advance(1ms);
  BOOST_TEST(second.calls == 1);
  BOOST_TEST(!second.ec);

  t->expires_after(1ms);
  t->async_wait([&](error_code) { t.reset(); }); // destroy inside the handler
  f.advance(1ms);
  BOOST_TEST(!t);
  BOOST_TEST(f.svc.stats().pending == 0u);
}

BOOST_AUTO_TEST_CASE(handler_on_another_timer_can_cancel_a_later_one) {
  fixture f;
  asio_wheel::timer first(f.io, 1ms), second(f.io, 2ms);
  recorder r;
  second.async_wait(r.handler(f));
  first.async_wait([&](error_code) { BOOST_TEST(second.cancel() == 1u); });
  f.advance(1ms);
  BOOST_TEST(r.ec == aborted);
}

BOOST_AUTO_TEST_CASE(a_throwing_handler_leaves_run_and_nothing_is_lost) {
  fixture f;
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  int ran = 0;
  for (int i = 0; i < 10; ++i) {
    timers.push_back(std::make_unique<asio_wheel::timer>(f.io, 1ms));
    timers.back()->async_wait([&ran, i](error_code) {
      ++ran;
      if (i == 3) throw std::runtime_error("handler failed");
    });
  }
  f.svc.advance(1ms);
  f.io.restart();
  BOOST_CHECK_THROW(f.io.run(), std::runtime_error);
  BOOST_TEST(ran == 4);
  f.io.run(); // resumes: the rest complete, in order, exactly once
  BOOST_TEST(ran == 10);
  BOOST_TEST(f.svc.stats().expired == 10u);
  BOOST_TEST(f.svc.stats().pending == 0u);
  // The wheel still works.
  recorder r;
  timers[0]->expires_after(1ms);
  timers[0]->async_wait(r.handler(f));
  f.advance(1ms);
  BOOST_TEST(r.calls == 1);
}

// ---- completion tokens and associated characteristics ----

BOOST_AUTO_TEST_CASE(works_with_future_deferred_and_as_tuple) {
  fixture f;
  asio_wheel::timer t(f.io, 1ms);
  std::future<void> fut = t.async_wait(asio::use_future);
  f.advance(1ms);
  BOOST_TEST((fut.wait_for(0s) == std::future_status::ready));
  BOOST_CHECK_NO_THROW(fut.get());

  t.expires_after(1ms);
  auto op = t.async_wait(asio::deferred);
  recorder r;
  std::move(op)(r.handler(f));
  f.advance(1ms);
  BOOST_TEST(r.calls == 1);

  t.expires_after(1h);
  bool got = false;
  t.async_wait(asio::as_tuple([&](std::tuple<error_code> e) {
    got = std::get<0>(e) == aborted;
  }));
  t.cancel();
  f.settle();
  BOOST_TEST(got);

  t.expires_after(1h);
  std::future<void> aborted_future = t.async_wait(asio::use_future);
  t.cancel();
  f.settle();
  BOOST_CHECK_THROW(aborted_future.get(), system_error);
}

#if ASIO_WHEEL_TEST_COROUTINES
BOOST_AUTO_TEST_CASE(works_with_coroutines_and_as_default_on) {
  fixture f;
  int step = 0;
  asio::co_spawn(
      f.io,
      [&]() -> asio::awaitable<void> {
        auto t = asio::use_awaitable_t<>::as_default_on(asio_wheel::timer(co_await asio::this_coro::executor));
        t.expires_after(10ms);
        co_await t.async_wait();
        step = 1;
        t.expires_after(1h);
        auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        step = ec == aborted ? 2 : -1;
      },
      asio::detached);
  f.settle();
  f.advance(10ms);
  BOOST_TEST(step == 1);
  // The second wait is pending: destroying the context destroys the coroutine frame
  // (and its timer) without resuming it.
}

BOOST_AUTO_TEST_CASE(coroutine_timer_destroyed_at_context_shutdown_without_resuming) {
  int resumed = 0;
  {
    asio::io_context io;
    auto& svc = asio_wheel::install(io, manual_options());
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          asio_wheel::timer t(co_await asio::this_coro::executor, 1h);
          co_await t.async_wait(asio::use_awaitable);
          ++resumed;
        },
        asio::detached);
    io.poll();
    BOOST_TEST(svc.stats().pending == 1u);
  }
  BOOST_TEST(resumed == 0);
}
#endif // ASIO_WHEEL_TEST_COROUTINES

BOOST_AUTO_TEST_CASE(handler_runs_on_its_associated_executor) {
  fixture f;
  auto strand = asio::make_strand(f.io);
  asio_wheel::timer t(f.io, 1ms);
  bool in_strand = false;
  t.async_wait(asio::bind_executor(strand, [&](error_code) { in_strand = strand.running_in_this_thread(); }));
  f.advance(1ms);
  BOOST_TEST(in_strand);

  // A timer whose own executor is a strand delivers in that strand.
  asio_wheel::timer st(strand, 1ms);
  bool st_in_strand = false;
  st.async_wait([&](error_code) { st_in_strand = strand.running_in_this_thread(); });
  f.advance(1ms);
  BOOST_TEST(st_in_strand);

  // A handler bound to another context runs there, and that context has work until then.
  asio::io_context other;
  bool ran_in_other = false;
  t.expires_after(1ms);
  t.async_wait(asio::bind_executor(other, [&](error_code) {
    ran_in_other = other.get_executor().running_in_this_thread();
  }));
  other.poll();
  BOOST_TEST(!other.stopped()); // tracked work keeps it alive
  f.advance(1ms);
  BOOST_TEST(!ran_in_other);
  other.poll();
  BOOST_TEST(ran_in_other);
}

using asio_wheel_test::counting_allocator;

BOOST_AUTO_TEST_CASE(op_memory_comes_from_the_associated_allocator_and_is_freed_before_the_upcall) {
  fixture f;
  asio_wheel::timer t(f.io, 1ms);
  int live = 0, live_in_handler = -1;
  t.async_wait(asio::bind_allocator(counting_allocator<int>(&live),
                                    [&](error_code) { live_in_handler = live; }));
  BOOST_TEST(live == 1);
  f.advance(1ms);
  BOOST_TEST(live_in_handler == 0);
  BOOST_TEST(live == 0);
}

BOOST_AUTO_TEST_CASE(per_operation_cancellation_of_every_type_aborts_only_that_wait) {
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                    asio::cancellation_type::total}) {
    fixture f;
    asio_wheel::timer t(f.io, 1s);
    asio::cancellation_signal sig;
    recorder target, other;
    t.async_wait(asio::bind_cancellation_slot(sig.slot(), target.handler(f)));
    t.async_wait(other.handler(f));
    sig.emit(type);
    BOOST_TEST(target.calls == 0); // not inside emit
    f.settle();
    BOOST_TEST(target.calls == 1);
    BOOST_TEST(target.ec == aborted);
    BOOST_TEST(f.svc.stats().pending == 1u);
    f.advance(1s);
    BOOST_TEST(other.calls == 1);
    BOOST_TEST(!other.ec);
    sig.emit(type); // after completion: a no-op
    f.settle();
    BOOST_TEST(target.calls == 1);
  }
}

// A slot holds one handler: a second wait started on it takes it over, and the first
// wait can no longer be cancelled (as with Asio's timers). The first wait still keeps a
// pointer to the handler it installed, and wrote through it as it left: into the
// second wait's handler, which the slot had built in the same memory, so that the
// second wait could no longer be cancelled either (and a data race, under TSan, when
// the two ran on different threads). Now the handler's destructor tells its op.
BOOST_AUTO_TEST_CASE(a_slot_taken_over_by_a_second_wait_cancels_the_second) {
  fixture f;
  asio_wheel::timer first_timer(f.io, 1ms), second_timer(f.io, 10ms);
  asio::cancellation_signal sig;
  recorder first, second;
  first_timer.async_wait(asio::bind_cancellation_slot(sig.slot(), first.handler(f)));
  second_timer.async_wait(asio::bind_cancellation_slot(sig.slot(), second.handler(f)));
  f.advance(1ms); // the first wait leaves its timer
  BOOST_TEST(first.calls == 1);
  BOOST_TEST(!first.ec);
  sig.emit(asio::cancellation_type::terminal);
  f.settle();
  BOOST_TEST(second.calls == 1);
  BOOST_TEST(second.ec == aborted);
  BOOST_TEST(f.svc.stats().pending == 0u);
}

namespace {
// A handler of one pointer that names its cancellation slot itself: small enough, with
// its op's pointer to its cancellation handler, to live in the timer's buffer.
struct slot_wait {
  asio::cancellation_signal signal;
  int calls = 0;
  error_code ec;
  struct handler {
    slot_wait* self;
    using cancellation_slot_type = asio::cancellation_slot;
    cancellation_slot_type get_cancellation_slot() const noexcept { return self->signal.slot(); }
    void operator()(error_code e) const { ++self->calls, self->ec = e; }
  };
};
} // namespace

// One timer's waits outnumber expiry_batch: a step hands over the first and the rest
// wait for the next. Each op's cancellation handler forgets the timer as the op leaves
// (the op in the timer's buffer as it moves out, before the batch is cut): those that
// stay must still reach it, or their cancellation would be lost. The buffer's op is
// the second wait here, so that it stays: the first's handler is too big to live there.
BOOST_AUTO_TEST_CASE(waits_left_behind_by_the_batch_can_still_be_cancelled) {
  auto o = manual_options();
  o.expiry_batch = 1;
  fixture f(o);
  asio_wheel::timer t(f.io, 1ms);
  slot_wait first, small, last;
  t.async_wait(std::function<void(error_code)>(slot_wait::handler{&first}));
  using op = asio_wheel::detail::handler_op<asio_wheel::detail::plain_wait_op,
                                            slot_wait::handler, void>;
  BOOST_TEST_REQUIRE(op::may_live_inline);
  t.async_wait(slot_wait::handler{&small});
  t.async_wait(asio::bind_cancellation_slot(last.signal.slot(),
                                            [&last](error_code e) { ++last.calls, last.ec = e; }));
  f.svc.advance(1ms);
  f.io.restart();
  f.io.run_one(); // one step: the first wait handed over, two left
  BOOST_TEST_REQUIRE(first.calls == 1);
  BOOST_TEST_REQUIRE(small.calls + last.calls == 0);
  for (auto* w : {&first, &small, &last}) w->signal.emit(asio::cancellation_type::terminal);
  f.settle();
  BOOST_TEST(!first.ec);
  BOOST_TEST(small.calls == 1);
  BOOST_TEST(small.ec == aborted);
  BOOST_TEST(last.calls == 1);
  BOOST_TEST(last.ec == aborted);
  BOOST_TEST(f.svc.stats().pending == 0u);
}

namespace {
// Hands out one static block: every op lands at the same address.
alignas(std::max_align_t) unsigned char the_block[512];
template <class T>
struct one_block_allocator {
  using value_type = T;
  one_block_allocator() = default;
  template <class U>
  one_block_allocator(const one_block_allocator<U>&) {}
  T* allocate(std::size_t n) {
    BOOST_REQUIRE(n * sizeof(T) <= sizeof(the_block));
    return reinterpret_cast<T*>(the_block);
  }
  void deallocate(T*, std::size_t) {}
  template <class U>
  bool operator==(const one_block_allocator<U>&) const { return true; }
};
} // namespace

BOOST_AUTO_TEST_CASE(a_stale_signal_does_not_cancel_a_later_wait_that_reuses_the_op_memory) {
  fixture f;
  asio_wheel::timer t(f.io);
  asio::cancellation_signal first, second;
  recorder r1, r2;
  t.expires_after(1ms);
  t.async_wait(asio::bind_cancellation_slot(
      first.slot(), asio::bind_allocator(one_block_allocator<void>(), r1.handler(f))));
  f.advance(1ms);
  BOOST_TEST(r1.calls == 1);
  t.expires_after(10ms);
  t.async_wait(asio::bind_cancellation_slot(
      second.slot(), asio::bind_allocator(one_block_allocator<void>(), r2.handler(f))));
  first.emit(asio::cancellation_type::terminal); // stale: its wait completed already
  f.advance(10ms);
  BOOST_TEST(r2.calls == 1);
  BOOST_TEST(!r2.ec);
  second.emit(asio::cancellation_type::terminal); // and this one is stale now
  f.settle();
  BOOST_TEST(r2.calls == 1);
}

// ---- outstanding work ----

BOOST_AUTO_TEST_CASE(a_pending_wait_is_outstanding_work) {
  fixture f;
  asio_wheel::timer t(f.io, 1s);
  t.async_wait([](error_code) {});
  f.settle();
  BOOST_TEST(!f.io.stopped());
  t.cancel();
  f.settle();
  BOOST_TEST(f.io.stopped()); // nothing left: run() would return
}

BOOST_AUTO_TEST_CASE(steady_run_returns_once_the_last_wait_is_cancelled) {
  asio::io_context io;
  asio_wheel::timer t(io, 1h);
  t.async_wait([](error_code) {});
  asio::post(io, [&] { t.cancel(); });
  io.run(); // would hang if the driver stayed armed or work stayed counted
  auto& svc = asio::use_service<asio_wheel::wheel_service>(io);
  BOOST_TEST(svc.stats().cancelled == 1u);
  BOOST_TEST(svc.stats().wakeups == 0u);
}

// A pending wait reset to a passed time leaves its slot straight for the due list: the
// driver, armed for that slot, was never disarmed (no unschedule follows such a wait's
// completion), so run() went on until the old slot's tick, an hour here. The step that
// completes it now disarms the driver when nothing is left in a slot. Steady clock: the
// driver exists in steady mode only; the bound only ends a failure.
BOOST_AUTO_TEST_CASE(steady_run_returns_once_a_wait_reset_to_the_past_completes) {
  for (int how = 0; how < 2; ++how) {
    asio::io_context io;
    asio_wheel::timer t(io, 1h);
    int fired = 0;
    t.async_wait([&](error_code ec) { fired += !ec; });
    asio::post(io, [&] {
      if (how == 0)
        t.reset_after(-1ms);
      else
        t.reset_at(std::chrono::steady_clock::time_point::min());
    });
    io.run_for(30s);
    BOOST_TEST(io.stopped(), "reset " << how);
    BOOST_TEST(fired == 1);
  }
}

// ---- moves and rebinding ----

BOOST_AUTO_TEST_CASE(move_carries_pending_waits_and_their_cancellation_slots) {
  fixture f;
  asio_wheel::timer a(f.io, 5ms);
  asio::cancellation_signal sig;
  recorder r1, r2;
  a.async_wait(r1.handler(f));
  a.async_wait(asio::bind_cancellation_slot(sig.slot(), r2.handler(f)));
  asio_wheel::timer b(std::move(a));
  BOOST_TEST(a.cancel() == 0u);
  BOOST_TEST((b.expiry() == f.svc.now() + 5ms));
  sig.emit(asio::cancellation_type::terminal); // reaches the wait on its new owner
  f.settle();
  BOOST_TEST(r2.ec == aborted);
  f.advance(5ms);
  BOOST_TEST(r1.calls == 1);
  BOOST_TEST(!r1.ec);

  // Move assignment aborts the target's own waits.
  asio_wheel::timer c(f.io, 1s), d(f.io, 2s);
  recorder rc, rd;
  c.async_wait(rc.handler(f));
  d.async_wait(rd.handler(f));
  c = std::move(d);
  f.settle();
  BOOST_TEST(rc.ec == aborted);
  f.advance(2s);
  BOOST_TEST(rd.calls == 1);
  BOOST_TEST(!rd.ec);
}

// A moved-from timer is as if newly constructed on its executor (Asio's moved-from
// basic_waitable_timer too): expiry time_point(), so a wait on it completes at once. It
// kept the expiry that moved away, and such a wait waited for it (an hour here).
BOOST_AUTO_TEST_CASE(a_moved_from_timer_is_as_new) {
  fixture f;
  const auto never_set = std::chrono::steady_clock::time_point();
  for (const bool with_wait : {false, true}) { // off the wheel, and with a wait to carry
    asio_wheel::timer a(f.io, 1h);
    recorder carried;
    if (with_wait) a.async_wait(carried.handler(f));
    asio_wheel::timer b(std::move(a));
    BOOST_TEST((a.expiry() == never_set));
    BOOST_TEST((b.expiry() == f.svc.now() + 1h));
    asio_wheel::timer c(f.io, 2h);
    c = std::move(b);
    BOOST_TEST((b.expiry() == never_set));
    recorder r;
    a.async_wait(r.handler(f));
    b.async_wait(r.handler(f));
    f.settle();
    BOOST_TEST(r.calls == 2);
    BOOST_TEST(!r.ec);
    BOOST_TEST(carried.calls == 0); // c's now, still pending
    BOOST_TEST(c.cancel() == (with_wait ? 1u : 0u));
    f.settle();
  }
  BOOST_TEST(f.svc.stats().pending == 0u);
}

BOOST_AUTO_TEST_CASE(cancel_and_expires_after_reach_every_wait_however_it_came) {
  // cancel, cancel_one and expires_* skip the lock while the timer knows it has no
  // wait (timer_state::may_have_waits): each way a wait can come to a timer must make
  // them look, and each way all leave must still let a new wait be found.
  fixture f;
  recorder r1, r2, r3, r4, r5;
  asio_wheel::timer a(f.io, 5ms);
  a.async_wait(r1.handler(f));
  asio_wheel::timer b(std::move(a)); // the wait came by a move
  BOOST_TEST(a.cancel() == 0u);
  BOOST_TEST(b.cancel() == 1u);
  f.settle();
  BOOST_TEST(r1.ec == aborted);

  b.expires_after(1ms);
  b.async_wait(r2.handler(f));
  f.advance(1ms); // left by expiry: the timer was not told
  BOOST_TEST(r2.calls == 1);
  BOOST_TEST(b.expires_after(1ms) == 0u);
  b.async_wait(r3.handler(f));
  b.async_wait(r4.handler(f));
  BOOST_TEST(b.cancel_one() == 1u); // one left: still looked for
  BOOST_TEST(b.cancel_one() == 1u);
  BOOST_TEST(b.cancel_one() == 0u);
  f.settle();
  BOOST_TEST(r3.ec == aborted);
  BOOST_TEST(r4.ec == aborted);

  asio_wheel::timer c(f.io, 1s); // no wait
  b.async_wait(r5.handler(f));
  c = std::move(b); // the wait came by a move assignment
  BOOST_TEST(c.expires_after(2s) == 1u);
  f.settle();
  BOOST_TEST(r5.ec == aborted);
  asio_wheel::timer d(std::move(c)); // no wait: the expiry alone moves
  BOOST_TEST((d.expiry() == f.svc.now() + 2s));
  BOOST_TEST(d.cancel() == 0u);
  BOOST_TEST(f.svc.stats().pending == 0u);
}

BOOST_AUTO_TEST_CASE(converting_move_and_rebind_executor) {
  fixture f;
  using plain_timer = asio_wheel::basic_timer<asio::io_context::executor_type>;
  plain_timer p(f.io.get_executor(), 3ms);
  recorder r;
  p.async_wait(r.handler(f));
  asio_wheel::timer any(std::move(p));
  static_assert(std::is_same_v<asio_wheel::timer::rebind_executor<asio::strand<asio::io_context::executor_type>>::other,
                               asio_wheel::basic_timer<asio::strand<asio::io_context::executor_type>>>);
  static_assert(std::is_same_v<plain_timer::executor_type, asio::io_context::executor_type>);
  f.advance(3ms);
  BOOST_TEST(r.calls == 1);
  BOOST_TEST((any.get_executor() == asio::any_io_executor(f.io.get_executor())));
}

// ---- the steady clock ----

BOOST_AUTO_TEST_CASE(reset_after_is_never_early_by_the_steady_clock) {
  asio::io_context io;
  asio_wheel::timer t(io);
  for (int i = 0; i < 1000; ++i) {
    const auto before = std::chrono::steady_clock::now();
    t.reset_after(10ms);
    BOOST_TEST((t.expiry() >= before + 10ms));
  }
}

// ---- deadlines at the ends of time ----

// A 1 ns tick and a wait at time_point::max() - 1 ns: the entry sits in the top level,
// 2^32 ticks a rotation, rotations away. Advancing a year of virtual time must not
// visit it once a rotation (before the fix: 7 million visits, 232 ms).
BOOST_AUTO_TEST_CASE(a_wait_at_the_end_of_time_on_a_nanosecond_tick_completes_only_there) {
  fixture f(manual_options(4, 256, 1ns));
  asio_wheel::timer t(f.io, std::chrono::steady_clock::time_point::max() - 1ns);
  recorder r;
  t.async_wait(r.handler(f));
  f.advance(24h * 365);
  BOOST_TEST(r.calls == 0);
  BOOST_TEST(f.svc.stats().pending == 1u);
  f.advance(std::chrono::steady_clock::duration::max()); // saturates at the end of time
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(!r.ec);
}

// The last whole tick ends before time_point::max() (ticks count from the install's
// steady_clock::now()): a wait due after it rounds up to the clock's end, and
// completes when virtual time gets there (it saturates at max()). Before the fix it
// never completed, nor did a wait already due when time was at its end
// (expires_after(-1ns) there).
BOOST_AUTO_TEST_CASE(a_wait_in_the_partial_tick_before_the_end_of_time_completes_at_the_end) {
  using std::chrono::steady_clock;
  fixture f(manual_options(4, 256, 1h));
  const auto partial = (steady_clock::time_point::max() - f.svc.now()) % 1h;
  BOOST_REQUIRE(partial > 2ns); // all but certain with an hour's tick
  f.advance(steady_clock::time_point::max() - partial + 1ns - f.svc.now());
  asio_wheel::timer t(f.io, 1ns);
  recorder r;
  t.async_wait(r.handler(f));
  f.advance(1ns);
  BOOST_TEST((f.svc.now() == t.expiry()));
  BOOST_TEST(r.calls == 0); // rounded up, to the end of time
  f.advance(1h);            // saturates there
  BOOST_TEST((f.svc.now() == steady_clock::time_point::max()));
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(!r.ec);
  asio_wheel::timer already(f.io, -1ns);
  recorder a;
  already.async_wait(a.handler(f));
  f.settle();
  BOOST_TEST(a.calls == 1);
  BOOST_TEST(!a.ec);
  asio_wheel::timer never(f.io, steady_clock::time_point::max());
  recorder n;
  never.async_wait(n.handler(f));
  f.settle();
  BOOST_TEST(n.calls == 0); // max() itself is still never
  BOOST_TEST(never.cancel() == 1u);
}

// A reset to "never" on a wait already in a slot: it stays pending, costs nothing (the
// wheel test checks it leaves the slots), and can be brought back.
BOOST_AUTO_TEST_CASE(reset_to_never_keeps_the_wait_pending_until_reset_again) {
  fixture f(manual_options(1, 16));
  asio_wheel::timer t(f.io, 5ms);
  recorder r;
  t.async_wait(r.handler(f));
  BOOST_TEST((f.svc.stats().next_wakeup == f.svc.now() + 5ms));
  t.reset_at(std::chrono::steady_clock::time_point::max());
  // Before the fix the entry kept its slot, which came due every rotation (19 wake-ups
  // in 300 ms with these 16 slots of 1 ms): nothing may be left to wake up for.
  BOOST_TEST((f.svc.stats().next_wakeup == std::chrono::steady_clock::time_point::max()));
  f.advance(24h);
  BOOST_TEST(r.calls == 0);
  t.reset_after(2ms);
  f.advance(1ms);
  BOOST_TEST(r.calls == 0);
  f.advance(1ms);
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(!r.ec);
  t.expires_after(5ms);
  t.async_wait(r.handler(f));
  t.reset_after(std::chrono::steady_clock::duration::max());
  BOOST_TEST((f.svc.stats().next_wakeup == std::chrono::steady_clock::time_point::max()));
  f.advance(24h);
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(t.cancel() == 1u);
  f.settle();
  BOOST_TEST(r.calls == 2);
  BOOST_TEST(r.ec == aborted);
}

// ---- the wait that lives in its timer ----
// A small handler's operation lives inside the timer (detail::timer_state's inline
// buffer) while it waits, and moves to memory of its own whenever it leaves the timer's
// list: handed over at expiry, aborted, refused, or destroyed at shutdown. These cases
// free or move the timer while its wait is past that point; ASan sees any access to
// the old timer.

BOOST_AUTO_TEST_CASE(a_small_handler_is_the_kind_that_lives_in_its_timer) {
  // The cases below rely on their handlers living inline: a lambda of two words does.
  fixture f;
  recorder r;
  using handler = decltype(r.handler(f));
  using op = asio_wheel::detail::handler_op<asio_wheel::detail::plain_wait_op, handler, void>;
  BOOST_TEST(op::may_live_inline);
  // Too big for the buffer: memory of its own.
  using big = asio_wheel::detail::handler_op<asio_wheel::detail::plain_wait_op,
                                             std::function<void(error_code)>, void>;
  BOOST_TEST(!big::may_live_inline);
}

BOOST_AUTO_TEST_CASE(a_wait_handed_over_completes_after_a_handler_destroys_its_timer) {
  fixture f;
  auto first = std::make_unique<asio_wheel::timer>(f.io, 1ms);
  auto second = std::make_unique<asio_wheel::timer>(f.io, 1ms);
  recorder r;
  // Both expire in one step: the first handler destroys the second timer, whose wait
  // is already in the step's batch and must still complete, with success.
  first->async_wait([&second](error_code) { second.reset(); });
  second->async_wait(r.handler(f));
  f.advance(1ms);
  BOOST_TEST(!second);
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(!r.ec);
}

BOOST_AUTO_TEST_CASE(an_aborted_wait_completes_after_its_timer_is_gone) {
  fixture f;
  recorder r1, r2;
  {
    asio_wheel::timer t(f.io, 1s);
    t.async_wait(r1.handler(f)); // inline
    t.async_wait(r2.handler(f)); // memory of its own: the buffer is taken
  } // the destructor aborts both; they complete on the next step
  f.settle();
  BOOST_TEST(r1.calls == 1);
  BOOST_TEST(r1.ec == aborted);
  BOOST_TEST(r2.calls == 1);
  BOOST_TEST(r2.ec == aborted);
}

BOOST_AUTO_TEST_CASE(the_buffer_is_reused_and_waits_keep_their_order) {
  fixture f;
  asio_wheel::timer t(f.io, 5ms);
  std::vector<int> order;
  t.async_wait([&order](error_code ec) { order.push_back(ec ? -1 : 1); }); // inline
  t.async_wait([&order](error_code ec) { order.push_back(ec ? -2 : 2); }); // own memory
  BOOST_TEST(t.cancel_one() == 1u); // the oldest: the inline one leaves the buffer
  t.async_wait([&order](error_code ec) { order.push_back(ec ? -3 : 3); }); // inline again
  f.settle();
  BOOST_TEST(order == (std::vector<int>{-1}), boost::test_tools::per_element());
  f.advance(5ms);
  BOOST_TEST(order == (std::vector<int>{-1, 2, 3}), boost::test_tools::per_element());

  // Moved twice, with the inline wait in the middle of the list.
  t.expires_after(5ms);
  order.clear();
  t.async_wait([&order](error_code) { order.push_back(4); });
  t.async_wait([&order](error_code) { order.push_back(5); });
  BOOST_TEST(t.cancel_one() == 1u);
  t.async_wait([&order](error_code) { order.push_back(6); }); // inline, behind 5
  asio_wheel::timer u(std::move(t));
  asio_wheel::timer v(f.io);
  v = std::move(u);
  BOOST_TEST(t.cancel() == 0u);
  BOOST_TEST(u.cancel() == 0u);
  f.advance(5ms);
  BOOST_TEST(order == (std::vector<int>{4, 5, 6}), boost::test_tools::per_element());
  // v's buffer is free again: a later wait goes there and completes.
  recorder r;
  v.expires_after(1ms);
  v.async_wait(r.handler(f));
  f.advance(1ms);
  BOOST_TEST(r.calls == 1);
}

BOOST_AUTO_TEST_CASE(shutdown_destroys_a_wait_whose_handler_owns_its_timer) {
  // The handler (a shared_ptr: it lives inline) keeps its own timer alive: a cycle that
  // only shutdown breaks. Destroying the handler destroys the timer, so the handler
  // must not be in the timer's buffer by then (LSan reports the cycle if it is never
  // broken, ASan the use of freed memory if it is broken inside the buffer).
  std::weak_ptr<asio_wheel::timer> watch;
  {
    fixture f;
    auto t = std::make_shared<asio_wheel::timer>(f.io, 1s);
    watch = t;
    t->async_wait([t](error_code) {});
    t.reset();
    BOOST_TEST(!watch.expired());
  }
  BOOST_TEST(watch.expired());
}

BOOST_AUTO_TEST_CASE(a_wait_refused_over_max_pending_leaves_the_buffer_free) {
  auto o = manual_options();
  o.max_pending = 1;
  fixture f(o);
  asio_wheel::timer a(f.io, 1ms), b(f.io, 1ms);
  recorder ra, rb, rb2;
  a.async_wait(ra.handler(f));
  b.async_wait(rb.handler(f)); // refused: completes on the next step, from memory of its own
  f.settle();
  BOOST_TEST(rb.ec == asio_wheel::error::too_many_timers);
  f.advance(1ms);
  BOOST_TEST(!ra.ec);
  b.expires_after(1ms);
  b.async_wait(rb2.handler(f)); // b's buffer was given back
  f.advance(1ms);
  BOOST_TEST(rb2.calls == 1);
  BOOST_TEST(!rb2.ec);
}
