// cancel_after / cancel_at with the wheel's manual clock, on every kind of operation:
// our timer, steady_timer, socket reads, composed operations, coroutines, deferred;
// and a threaded race between completion and deadline (run under TSan by scripts/test).
#define BOOST_TEST_MODULE cancel_after
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "counting_allocator.hpp"
#include "manual_clock.hpp"

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/delay_queue.hpp>
#include <asio_wheel/timer.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <future>
#include <memory>
#include <optional>
#include <ratio>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace net = asio;
using namespace std::chrono_literals;
using asio_wheel::cancel_after;
using asio_wheel::cancel_at;
using socket_type = net::local::stream_protocol::socket;

namespace {

struct fixture : asio_wheel_test::manual_context {
  socket_type a{io}, b{io};

  fixture() { net::local::connect_pair(a, b); }

  std::size_t pending() const { return svc.stats().pending; }
};

// What a handler saw, and how often it ran.
struct outcome {
  int calls = 0;
  error_code ec;
  std::size_t n = 0;
};

auto record(outcome& o) {
  return [&o](error_code ec, std::size_t n = 0) {
    ++o.calls;
    o.ec = ec;
    o.n = n;
  };
}

} // namespace

BOOST_AUTO_TEST_CASE(our_timer_is_cut_short_at_the_deadline) {
  fixture f;
  asio_wheel::timer t(f.io, 1h);
  outcome o;
  t.async_wait(cancel_after(10ms, record(o)));
  BOOST_TEST(f.pending() == 2u); // the wait and its deadline
  f.advance(9ms);
  BOOST_TEST(o.calls == 0);
  f.advance(1ms);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST(f.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(our_timer_completing_in_time_removes_the_deadline) {
  fixture f;
  asio_wheel::timer t(f.io, 5ms);
  outcome o;
  t.async_wait(cancel_after(10ms, record(o)));
  f.advance(5ms);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(!o.ec);
  BOOST_TEST(f.pending() == 0u); // the deadline left the wheel with the completion
  f.advance(1h);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(f.svc.stats().expired == 1u); // only the wait; the deadline never fired
}

BOOST_AUTO_TEST_CASE(cancel_at_an_absolute_time) {
  fixture f;
  asio_wheel::timer t(f.io, 1h);
  outcome o;
  t.async_wait(cancel_at(f.svc.now() + 7ms, record(o)));
  f.advance(6ms);
  BOOST_TEST(o.calls == 0);
  f.advance(1ms);
  BOOST_TEST((o.ec == net::error::operation_aborted));
}

// The operation is a steady_timer (not on the wheel); its deadline is on the wheel.
// Deadlines in any duration type: rounded up to nanoseconds and saturated, never
// overflowing on the way (std::chrono::ceil computes in the argument's own type).
BOOST_AUTO_TEST_CASE(a_deadline_of_any_duration_type_is_exact_and_saturates) {
  using asio_wheel::detail::to_wheel_duration;
  using ns = std::chrono::nanoseconds;
  using thirds = std::chrono::duration<long long, std::ratio<1, 3>>;
  using fsec = std::chrono::duration<float>;
  using dms = std::chrono::duration<double, std::milli>;
  // count * 10^9 overflows in long long; the result (about 211 years) does not.
  BOOST_TEST(to_wheel_duration(thirds(20'000'000'000)).count() == 6'666'666'666'666'666'667);
  BOOST_TEST(to_wheel_duration(thirds(-20'000'000'000)).count() == -6'666'666'666'666'666'666);
  BOOST_TEST(to_wheel_duration(thirds(1)).count() == 333'333'334);   // up, never early
  BOOST_TEST(to_wheel_duration(thirds(-1)).count() == -333'333'333); // toward zero
  BOOST_TEST((to_wheel_duration(thirds::max()) == ns::max()));
  BOOST_TEST((to_wheel_duration(thirds::min()) == ns::min()));
  BOOST_TEST((to_wheel_duration(std::chrono::hours::max()) == ns::max()));
  BOOST_TEST((to_wheel_duration(std::chrono::hours::min()) == ns::min()));
  BOOST_TEST((to_wheel_duration(ns::max()) == ns::max()));
  BOOST_TEST((to_wheel_duration(ns::min()) == ns::min()));
  BOOST_TEST(to_wheel_duration(std::chrono::duration<unsigned long long, std::pico>(
                                   18'000'000'000'000'000'000ull))
                 .count() == 18'000'000'000'000'000);
  // Floating counts: just under the limit stays finite (float's ceil gave 2^63, and a
  // deadline that cancelled at once); beyond it, and NaN, is never.
  BOOST_TEST(to_wheel_duration(fsec(9'223'371'776.0f)).count() == 9'223'371'776'000'000'000);
  BOOST_TEST(to_wheel_duration(dms(9'223'372'036'854.7754)).count() > 9'223'372'036'000'000'000);
  BOOST_TEST(to_wheel_duration(dms(0.5)).count() == 500'000);
  BOOST_TEST(to_wheel_duration(dms(-0.0000015)).count() == -1);
  BOOST_TEST((to_wheel_duration(fsec(1e19f)) == ns::max()));
  BOOST_TEST((to_wheel_duration(fsec(-1e19f)) == ns::min()));
  BOOST_TEST((to_wheel_duration(fsec(std::numeric_limits<float>::infinity())) == ns::max()));
  BOOST_TEST((to_wheel_duration(fsec(std::numeric_limits<float>::quiet_NaN())) == ns::max()));
}

// What such a deadline did: one 211 years away cancelled after 16 years (the count
// wrapped); one 292 years away cancelled at once.
BOOST_AUTO_TEST_CASE(a_far_deadline_in_another_duration_type_does_not_cancel_early) {
  fixture f;
  asio_wheel::timer t(f.io, asio_wheel::timer::duration::max());
  outcome o, p;
  t.async_wait(cancel_after(std::chrono::duration<long long, std::ratio<1, 3>>(20'000'000'000),
                            record(o)));
  t.async_wait(cancel_after(std::chrono::duration<float>(9'223'371'776.0f), record(p)));
  f.settle();
  BOOST_TEST(p.calls == 0);
  f.advance(std::chrono::hours(24 * 6000));
  BOOST_TEST(o.calls == 0);
  BOOST_TEST(p.calls == 0);
  BOOST_TEST(t.cancel() == 2u);
  f.settle();
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST((p.ec == net::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(steady_timer_with_a_wheel_deadline) {
  fixture f;
  net::steady_timer st(f.io, 1h);
  outcome o;
  st.async_wait(cancel_after(10ms, record(o)));
  BOOST_TEST(f.pending() == 1u);
  f.advance(10ms);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST(f.pending() == 0u);

  outcome in_time;
  st.expires_after(0s);
  st.async_wait(cancel_after(10ms, record(in_time)));
  while (in_time.calls == 0) {
    f.io.restart();
    f.io.run_one();
  }
  BOOST_TEST(!in_time.ec);
  BOOST_TEST(f.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(socket_read_times_out) {
  fixture f;
  std::array<char, 16> buf{};
  outcome o;
  f.a.async_read_some(net::buffer(buf), cancel_after(10ms, record(o)));
  f.advance(9ms);
  BOOST_TEST(o.calls == 0);
  f.advance(1ms);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST(f.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(socket_read_completes_in_time) {
  fixture f;
  std::array<char, 16> buf{};
  outcome o;
  f.a.async_read_some(net::buffer(buf), cancel_after(10ms, record(o)));
  f.advance(5ms);
  net::write(f.b, net::buffer("hi", 2));
  f.settle();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(!o.ec);
  BOOST_TEST(o.n == 2u);
  BOOST_TEST(f.pending() == 0u);
  f.advance(1h);
  BOOST_TEST(o.calls == 1);
  // The socket is not disturbed by the deadline that never fired.
  outcome next;
  f.a.async_read_some(net::buffer(buf), record(next));
  net::write(f.b, net::buffer("x", 1));
  f.settle();
  BOOST_TEST(next.calls == 1);
  BOOST_TEST(!next.ec);
}

// use_future's handler names an executor; on Asio 1.22 it is a promise_executor, which
// any_io_executor cannot hold: the deadline is then emitted on the operation's executor.
BOOST_AUTO_TEST_CASE(use_future_is_cut_short_or_completes_in_time) {
  fixture f;
  std::array<char, 16> buf{};
  std::future<std::size_t> read =
      f.a.async_read_some(net::buffer(buf), cancel_after(10ms, net::use_future));
  asio_wheel::timer t(f.io, 1h);
  std::future<void> wait = t.async_wait(cancel_after(10ms, net::use_future));
  asio_wheel::timer in_time(f.io, 5ms);
  std::future<void> wait_in_time = in_time.async_wait(cancel_after(10ms, net::use_future));
  f.advance(9ms);
  BOOST_TEST((wait_in_time.wait_for(0s) == std::future_status::ready));
  BOOST_CHECK_NO_THROW(wait_in_time.get());
  BOOST_TEST((read.wait_for(0s) == std::future_status::timeout));
  f.advance(1ms);
  BOOST_TEST((read.wait_for(0s) == std::future_status::ready));
  BOOST_TEST((wait.wait_for(0s) == std::future_status::ready));
  auto aborted = [](const system_error& e) {
    return e.code() == net::error::operation_aborted;
  };
  BOOST_CHECK_EXCEPTION(read.get(), system_error, aborted);
  BOOST_CHECK_EXCEPTION(wait.get(), system_error, aborted);
  BOOST_TEST(f.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(async_read_composed_operation) {
  fixture f;
  std::array<char, 10> buf{};
  outcome o;
  net::async_read(f.a, net::buffer(buf), cancel_after(10ms, record(o)));
  net::write(f.b, net::buffer("abcd", 4));
  f.settle();
  BOOST_TEST(o.calls == 0);
  f.advance(10ms);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST(o.n == 4u); // what had arrived before the deadline

  outcome full;
  net::async_read(f.a, net::buffer(buf), cancel_after(10ms, record(full)));
  net::write(f.b, net::buffer("0123456789", 10));
  f.settle();
  BOOST_TEST(full.calls == 1);
  BOOST_TEST(!full.ec);
  BOOST_TEST(full.n == 10u);
  BOOST_TEST(f.pending() == 0u);
}

namespace {

// A composed operation of our own: two waits in a row on a wheel timer.
template <class Token>
auto async_two_waits(asio_wheel::timer& t, Token&& token) {
  return net::async_compose<Token, void(error_code)>(
      [&t, step = 0](auto& self, error_code ec = {}) mutable {
        if (!ec && step++ < 2) {
          t.expires_after(step == 1 ? 5ms : 1h);
          t.async_wait(std::move(self));
          return;
        }
        self.complete(ec);
      },
      token, t);
}

} // namespace

BOOST_AUTO_TEST_CASE(async_compose_operation) {
  fixture f;
  asio_wheel::timer t(f.io);
  outcome o;
  async_two_waits(t, cancel_after(20ms, [&o](error_code ec) { ++o.calls, o.ec = ec; }));
  f.advance(5ms); // the first wait completes; the second is then pending
  BOOST_TEST(o.calls == 0);
  f.advance(15ms);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST(f.pending() == 0u);
}

#if ASIO_WHEEL_TEST_COROUTINES
BOOST_AUTO_TEST_CASE(use_awaitable_throws_on_the_deadline) {
  fixture f;
  std::optional<error_code> seen;
  std::size_t got = 0;
  net::co_spawn(
      f.io,
      [&]() -> net::awaitable<void> {
        std::array<char, 8> buf{};
        try {
          co_await f.a.async_read_some(net::buffer(buf), cancel_after(10ms, net::use_awaitable));
          seen = error_code();
        } catch (const system_error& e) {
          seen = e.code();
        }
        // And one that completes in time.
        net::write(f.b, net::buffer("ok", 2));
        got = co_await f.a.async_read_some(net::buffer(buf), cancel_after(10ms, net::use_awaitable));
      },
      net::detached);
  f.settle();
  BOOST_TEST(!seen.has_value());
  f.advance(10ms);
  BOOST_REQUIRE(seen.has_value());
  BOOST_TEST((*seen == net::error::operation_aborted));
  BOOST_TEST(got == 2u);
  BOOST_TEST(f.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(as_tuple_use_awaitable) {
  fixture f;
  std::optional<error_code> seen;
  net::co_spawn(
      f.io,
      [&]() -> net::awaitable<void> {
        std::array<char, 8> buf{};
        auto [ec, n] = co_await f.a.async_read_some(
            net::buffer(buf), cancel_after(10ms, net::as_tuple(net::use_awaitable)));
        seen = ec;
        BOOST_TEST(n == 0u);
      },
      net::detached);
  f.settle();
  f.advance(10ms);
  BOOST_REQUIRE(seen.has_value());
  BOOST_TEST((*seen == net::error::operation_aborted));
  BOOST_TEST(f.pending() == 0u);
}
#endif // ASIO_WHEEL_TEST_COROUTINES

// A deferred operation's deadline counts from its launch, not from its creation.
BOOST_AUTO_TEST_CASE(deferred_counts_from_the_launch) {
  fixture f;
  asio_wheel::timer t(f.io, 1h);
  auto op = t.async_wait(cancel_after(10ms, net::deferred));
  f.advance(50ms);
  BOOST_TEST(f.pending() == 0u);
  outcome o;
  std::move(op)([&o](error_code ec) { ++o.calls, o.ec = ec; });
  f.advance(9ms);
  BOOST_TEST(o.calls == 0);
  f.advance(1ms);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(users_own_slot_still_cancels) {
  fixture f;
  std::array<char, 8> buf{};
  net::cancellation_signal sig;
  outcome o;
  f.a.async_read_some(net::buffer(buf),
                      cancel_after(1h, net::bind_cancellation_slot(sig.slot(), record(o))));
  f.settle();
  sig.emit(net::cancellation_type::terminal);
  f.settle();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST(f.pending() == 0u);
  // Our forwarder left the user's slot with the operation.
  BOOST_TEST(!sig.slot().has_handler());
  sig.emit(net::cancellation_type::terminal); // harmless
}

BOOST_AUTO_TEST_CASE(handler_executor_is_kept) {
  fixture f;
  auto strand = net::make_strand(f.io);
  asio_wheel::timer t(f.io, 1h);
  bool in_strand = false;
  t.async_wait(cancel_after(10ms, net::bind_executor(strand, [&](error_code ec) {
                                in_strand = strand.running_in_this_thread() &&
                                            ec == net::error::operation_aborted;
                              })));
  f.advance(10ms);
  BOOST_TEST(in_strand);
}

BOOST_AUTO_TEST_CASE(partial_cancellation_type_is_passed_on) {
  fixture f;
  asio_wheel::timer t(f.io, 1h);
  outcome o;
  t.async_wait(cancel_after(10ms, net::cancellation_type::partial, record(o)));
  f.advance(10ms);
  BOOST_TEST((o.ec == net::error::operation_aborted));
}

// Thousands of deadlines on one wheel, each gone with its operation.
#if ASIO_WHEEL_ASIO_VERSION >= 102400
// The partial form: the operation completes with Asio's default token for
// any_io_executor, deferred (where Asio has none, Boost 1.81 to 1.85, deferred too: it
// did not compile there). The deadline counts from the launch.
BOOST_AUTO_TEST_CASE(the_partial_form_completes_with_deferred) {
  fixture f;
  asio_wheel::timer t(f.io, 1h);
  auto op = t.async_wait(cancel_after(10ms));
  f.svc.advance(5ms);
  outcome o;
  std::move(op)(record(o));
  f.svc.advance(9ms);
  f.io.poll();
  BOOST_TEST(o.calls == 0);
  f.svc.advance(1ms);
  f.io.poll();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
}
#endif

BOOST_AUTO_TEST_CASE(many_operations_leave_nothing_behind) {
  fixture f;
  asio_wheel::timer t(f.io, 1ms);
  int done = 0;
  for (int i = 0; i < 2000; ++i)
    t.async_wait(cancel_after((i % 2) ? 1h : 500us, [&done](error_code) { ++done; }));
  f.advance(1ms);
  BOOST_TEST(done == 2000);
  BOOST_TEST(f.pending() == 0u);
}

// An operation still pending when its context is destroyed: Asio destroys its handler
// unrun, and the deadline's state goes with it. Both of the state's references must be
// given back: the initiation's, and the one the wrapped handler took while the
// initiation alone knew the state (a plain store, not a read-modify-write).
BOOST_AUTO_TEST_CASE(an_operation_destroyed_unrun_frees_its_deadline) {
  int live = 0; // blocks from the handler's allocator: the deadline's state among them
  int calls = 0;
  {
    asio_wheel_test::manual_context f;
    socket_type a{f.io}, b{f.io};
    net::local::connect_pair(a, b);
    std::array<char, 1> in{};
    b.async_read_some(net::buffer(in),
                      cancel_after(1h, net::bind_allocator(
                                           asio_wheel_test::counting_allocator<void>(&live),
                                           [&calls](error_code, std::size_t) { ++calls; })));
    f.settle();
    BOOST_TEST(live >= 1);
    BOOST_TEST(f.svc.stats().pending == 1u); // the deadline, on the wheel
  } // the sockets, then the context: the read never completes
  BOOST_TEST(calls == 0);
  BOOST_TEST(live == 0);
}

// An initiation that throws, and one that drops its handler unrun: the deadline's state
// is freed and nothing stays pending. When the handler is gone before the entry is armed,
// the initiation's own reference is the last, given back when it arms (which then puts
// nothing on the wheel); when it throws, while unwinding.
BOOST_AUTO_TEST_CASE(an_initiation_that_throws_or_drops_its_handler_frees_the_deadline) {
  asio_wheel_test::manual_context f;
  int live = 0;
  int calls = 0;
  auto handler = [&] {
    return cancel_after(1h, net::bind_allocator(asio_wheel_test::counting_allocator<void>(&live),
                                                net::bind_executor(f.io, [&calls](error_code) {
                                                  ++calls;
                                                })));
  };
  auto throwing = [](auto&& token) {
    return net::async_initiate<decltype(token), void(error_code)>(
        [](auto&&) { throw std::runtime_error("initiation"); }, token);
  };
  auto dropping = [](auto&& token) {
    return net::async_initiate<decltype(token), void(error_code)>(
        [](auto&& h) { [[maybe_unused]] auto gone = std::move(h); }, token);
  };
  BOOST_CHECK_THROW(throwing(handler()), std::runtime_error);
  BOOST_TEST(live == 0);
  dropping(handler());
  BOOST_TEST(live == 0);
  f.settle();
  BOOST_TEST(f.svc.stats().pending == 0u);
  f.advance(2h);
  BOOST_TEST(calls == 0);
}

// The operation completes on one thread while its deadline fires on another: exactly
// one completion, never a use of freed memory (the handler destroys the I/O object the
// emission would reach), whatever the interleaving. Run under TSan by scripts/test.
BOOST_AUTO_TEST_CASE(completion_races_the_deadline_across_threads) {
  net::io_context io(2);
  auto& svc = asio_wheel::install(io, asio_wheel_test::manual_options());
  auto guard = net::make_work_guard(io);
  std::vector<std::thread> runners;
  for (int i = 0; i < 2; ++i) runners.emplace_back([&io] { io.run(); });

  socket_type a(io), b(io);
  net::local::connect_pair(a, b);
  std::array<char, 1> buf{};
  int aborted = 0, completed = 0;
  constexpr int rounds = 4000;

  for (int i = 0; i < rounds; ++i) {
    std::atomic<int> calls{0};
    // A steady_timer that the handler destroys: an emission reaching it after the
    // handler would be a use after free.
    auto* st = new net::steady_timer(io);
    st->expires_after(0s);
    net::steady_timer* st2 = nullptr;
    if (i % 2) {
      // Odd rounds: a socket read, completed by a write from this thread.
      a.async_read_some(net::buffer(buf), cancel_after(1ms, [&](error_code ec, std::size_t) {
                          (ec ? aborted : completed) += 1;
                          calls.fetch_add(1, std::memory_order_release);
                        }));
      std::thread writer([&] { net::write(b, net::buffer("x", 1)); });
      svc.advance(1ms);
      writer.join();
      delete st;
    } else {
      // Even rounds: a steady_timer expiring now, racing a deadline due now.
      st2 = st;
      st2->async_wait(cancel_after(1ms, [&, st2](error_code ec) {
        (ec ? aborted : completed) += 1;
        delete st2;
        calls.fetch_add(1, std::memory_order_release);
      }));
      svc.advance(1ms);
    }
    while (calls.load(std::memory_order_acquire) == 0) std::this_thread::yield();
    // Drain what an aborted read left unread, so the next round starts clean.
    if (i % 2) {
      while (svc.stats().pending != 0) std::this_thread::yield();
      if (a.available() > 0) net::read(a, net::buffer(buf));
    }
    BOOST_REQUIRE(calls.load() == 1);
  }
  while (svc.stats().pending != 0) std::this_thread::yield();
  guard.reset();
  for (auto& t : runners) t.join();
  BOOST_TEST(aborted + completed == rounds);
  BOOST_TEST_MESSAGE("aborted " << aborted << ", completed " << completed);
}

namespace {

// An operation whose initiation names no I/O executor (a plain function object, as in
// a hand-written async_initiate). It completes only when cancelled, through the
// handler's associated executor.
template <class Token>
auto async_until_cancelled(Token&& token) {
  return net::async_initiate<Token, void(error_code)>(
      [](auto handler) {
        using handler_type = decltype(handler);
        auto slot = net::get_associated_cancellation_slot(handler);
        auto held = std::make_shared<handler_type>(std::move(handler));
        slot.assign([held](net::cancellation_type) {
          auto ex = net::get_associated_executor(*held);
          net::post(ex, [held] { std::move(*held)(net::error::operation_aborted); });
        });
      },
      token);
}

} // namespace

// Neither the initiation nor the handler names an executor: that does not compile (see
// tests/compile_fail). With only the handler naming one, the deadline goes on the wheel
// of that executor's context, and is emitted there.
BOOST_AUTO_TEST_CASE(without_an_io_executor_the_deadline_lives_where_the_handler_is_bound) {
  fixture f;
  asio_wheel_test::manual_context other;
  outcome o;
  async_until_cancelled(cancel_after(10ms, net::bind_executor(other.io, record(o))));
  f.advance(1h); // not on this context's wheel
  other.settle();
  BOOST_TEST(o.calls == 0);
  other.advance(9ms);
  BOOST_TEST(o.calls == 0);
  other.advance(1ms);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
}

// A handler bound to another context's executor: the deadline is emitted on the
// operation's own context, whose wheel holds it (an emission queued on the other context
// would hold this context's shard, and could outlive it). The completion still runs on
// the handler's executor.
BOOST_AUTO_TEST_CASE(a_handler_bound_to_another_context_is_cancelled_from_the_operations) {
  fixture f;
  asio_wheel_test::manual_context other;
  outcome o;
  asio_wheel::timer t(f.io, 1h);
  t.async_wait(cancel_after(10ms, net::bind_executor(other.io, record(o))));
  f.advance(10ms); // emitted here, the wait aborted, its completion sent to `other`
  BOOST_TEST(o.calls == 0);
  other.settle();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST(f.pending() == 0u);
}

namespace {

// An operation whose cancellation handler throws. It completes when the test calls
// complete(), through the handler's associated executor.
struct operation_that_throws_on_cancel {
  std::function<void()> complete;

  template <class Token>
  auto async_start(Token&& token) {
    return net::async_initiate<Token, void(error_code)>(
        [this](auto handler) {
          using handler_type = decltype(handler);
          auto held = std::make_shared<handler_type>(std::move(handler));
          net::get_associated_cancellation_slot(*held).assign(
              [](net::cancellation_type) { throw std::runtime_error("cancel"); });
          complete = [held] {
            auto ex = net::get_associated_executor(*held);
            net::post(ex, [held] { std::move(*held)(error_code()); });
          };
        },
        token);
  }
};

} // namespace

// The deadline's emission runs a cancellation handler that throws: the exception leaves
// run(), and the emission still ends. The operation's completion afterwards neither
// waits for it nor leaks the deadline's state. Before, the emission stayed marked as
// running: a completion on another thread would have waited for it forever, and on the
// emitting thread the state was never freed.
BOOST_AUTO_TEST_CASE(a_cancellation_handler_that_throws_ends_the_emission) {
  fixture f;
  int live = 0; // blocks from the handler's allocator: the deadline's state among them
  outcome o;
  operation_that_throws_on_cancel op;
  op.async_start(cancel_after(
      10ms, net::bind_allocator(asio_wheel_test::counting_allocator<void>(&live),
                                net::bind_executor(f.io, record(o)))));
  BOOST_TEST(live >= 1);
  f.svc.advance(10ms);
  BOOST_CHECK_THROW(f.io.poll(), std::runtime_error);
  BOOST_TEST(o.calls == 0);

  op.complete();
  f.io.restart();
  f.io.poll();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(!o.ec);
  op.complete = nullptr; // the operation's own copy of the handler
  BOOST_TEST(live == 0);
  BOOST_TEST(f.pending() == 0u);
}

namespace {

// An operation that completes inside its own cancellation handler, as a composed
// operation calling self.complete(operation_aborted) from its slot handler does; with
// `throws_after`, the cancellation handler then throws. It sets `*moved_out` once it
// holds the handler for the upcall, and `*upcall_returned` after it, when set.
struct operation_completed_by_its_cancellation {
  bool throws_after = false;
  bool* moved_out = nullptr;
  bool* upcall_returned = nullptr;

  template <class Token>
  auto async_start(Token&& token) {
    return net::async_initiate<Token, void(error_code)>(
        [throws = throws_after, moved_out = moved_out, returned = upcall_returned](auto handler) {
          using handler_type = decltype(handler);
          auto held = std::make_shared<std::optional<handler_type>>(std::move(handler));
          net::get_associated_cancellation_slot(**held).assign(
              [held, throws, moved_out, returned](net::cancellation_type) {
                handler_type h = std::move(**held);
                held->reset();
                if (moved_out) *moved_out = true;
                std::move(h)(net::error::operation_aborted);
                if (returned) *returned = true;
                if (throws) throw std::runtime_error("thrown after completing");
              });
        },
        token);
  }
};

} // namespace

// Completed inside the deadline's emission, the handler ran while the deadline's state,
// allocated with the handler's allocator, was still live (Asio wants an operation's
// memory back before its handler runs), and the emission then wrote to that state: a
// heap-use-after-free when the handler frees the allocator's arena (Asio's allocation
// example: a session's handler_memory, the session kept alive by its handlers). Now the
// handler runs once the emission has ended, with nothing of its allocator live.
BOOST_AUTO_TEST_CASE(an_operation_completed_inside_the_emission_has_its_memory_back_first) {
  fixture f;
  int live = 0;
  int live_in_handler = -1;
  outcome o;
  auto arena_user = std::make_unique<int>(0); // freed by the handler, as a session is
  operation_completed_by_its_cancellation op;
  op.async_start(cancel_after(
      10ms, net::bind_allocator(asio_wheel_test::counting_allocator<void>(&live),
                                net::bind_executor(f.io, [&](error_code ec) {
                                  live_in_handler = live;
                                  arena_user.reset();
                                  record(o)(ec);
                                }))));
  BOOST_TEST(live == 1); // the deadline's state
  f.svc.advance(10ms);
  f.io.poll();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST(live_in_handler == 0);
  BOOST_TEST(live == 0);
  BOOST_TEST(f.pending() == 0u);
}

// The operation completes while its deadline's emission is queued: both came due in
// one tick (a timer's wait and its deadline, both at 10 ms). The handler ran at once,
// the state kept by the queued emission, which freed it with the handler's allocator
// after the handler had run (a heap-use-after-free when the handler frees the arena).
// Now the completion waits for the emission, which skips it, and runs with nothing of
// its allocator live.
BOOST_AUTO_TEST_CASE(an_operation_completing_as_its_deadline_fires_has_its_memory_back_first) {
  fixture f;
  int live = 0;
  int live_in_handler = -1;
  outcome o;
  asio_wheel::timer t(f.io, 10ms);
  t.async_wait(cancel_after(10ms, net::bind_allocator(
                                      asio_wheel_test::counting_allocator<void>(&live),
                                      [&](error_code ec) {
                                        live_in_handler = live;
                                        record(o)(ec);
                                      })));
  BOOST_TEST(live == 2); // the wait's operation and the deadline's state
  f.svc.advance(10ms);
  f.io.poll();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(live_in_handler == 0);
  BOOST_TEST(live == 0);
  BOOST_TEST(f.pending() == 0u);
}

namespace {

// An operation on the context's plain executor (its I/O executor) whose cancellation
// handler completes it through the handler's associated executor (dispatch), as Asio
// lets an operation do outside its initiating function, or, with `inline_completion`,
// by invoking the handler there and then. The cancellation handler records whether it
// ran in `strand`.
template <class Strand = net::strand<net::io_context::executor_type>>
struct operation_dispatching_on_cancellation {
  net::io_context::executor_type io_ex;
  Strand strand;
  bool* cancelled_in_strand;
  bool inline_completion = false;

  struct initiation {
    using executor_type = net::io_context::executor_type;
    executor_type io_ex;
    Strand strand;
    bool* cancelled_in_strand;
    bool inline_completion;

    executor_type get_executor() const noexcept { return io_ex; }

    template <class Handler>
    void operator()(Handler handler) const {
      auto held = std::make_shared<std::optional<Handler>>(std::move(handler));
      net::get_associated_cancellation_slot(**held).assign(
          [held, s = strand, in = cancelled_in_strand,
           now = inline_completion](net::cancellation_type) {
            *in = s.running_in_this_thread();
            Handler h = std::move(**held);
            held->reset();
            if (now) {
              std::move(h)(net::error::operation_aborted);
              return;
            }
            auto ex = net::get_associated_executor(h);
            net::dispatch(ex, [h = std::move(h)]() mutable {
              std::move(h)(net::error::operation_aborted);
            });
          });
    }
  };

  template <class Token>
  auto async_start(Token&& token) {
    return net::async_initiate<Token, void(error_code)>(
        initiation{io_ex, strand, cancelled_in_strand, inline_completion}, token);
  }
};

// Sets its flag when destroyed (not when moved from).
struct destroy_flag {
  std::shared_ptr<bool> flag;
  explicit destroy_flag(std::shared_ptr<bool> f) : flag(std::move(f)) {}
  destroy_flag(destroy_flag&&) = default;
  destroy_flag(const destroy_flag&) = delete;
  ~destroy_flag() {
    if (flag) *flag = true;
  }
};

// An operation completed by its cancellation handler, which notes whether it was itself
// destroyed by the upcall (its memory is the signal's: freed with the signal's owner).
// Asio recycles that memory, so the sanitizers would not see the use after free.
struct operation_watching_its_cancellation_handler {
  bool* destroyed_by_upcall;

  template <class Token>
  auto async_start(Token&& token) {
    return net::async_initiate<Token, void(error_code)>(
        [out = destroyed_by_upcall](auto handler) {
          using handler_type = decltype(handler);
          auto held = std::make_shared<std::optional<handler_type>>(std::move(handler));
          auto destroyed = std::make_shared<bool>(false);
          net::get_associated_cancellation_slot(**held).assign(
              [held, out, destroyed, guard = destroy_flag(destroyed)](net::cancellation_type) {
                const std::shared_ptr<bool> d = destroyed; // locals: they outlive this object
                bool* const o = out;
                handler_type h = std::move(**held);
                held->reset();
                std::move(h)(net::error::operation_aborted);
                *o = *d;
              });
        },
        token);
  }
};

} // namespace

// An operation cancelled by a deadline bound to `strand`: the emission and the handler
// both run in the strand.
template <class Strand>
void check_the_deadline_is_emitted_in(fixture& f, const Strand& strand) {
  bool cancelled_in_strand = false, handled_in_strand = false;
  outcome o;
  operation_dispatching_on_cancellation<Strand> op{f.io.get_executor(), strand,
                                                   &cancelled_in_strand};
  op.async_start(cancel_after(10ms, net::bind_executor(strand, [&](error_code ec) {
                                handled_in_strand = strand.running_in_this_thread();
                                record(o)(ec);
                              })));
  f.svc.advance(10ms);
  f.io.poll();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST(cancelled_in_strand);
  BOOST_TEST(handled_in_strand);
  BOOST_TEST(f.pending() == 0u);
}

// A handler bound to a strand: the deadline is emitted in that strand, as Boost.Asio's
// own cancel_after does, so that the emission never overlaps the operation's steps on
// it (a composed operation's, on a pool of threads: a data race under TSan). It was
// emitted on the I/O executor; and a completion put off inside the emission then ran
// after the strand's call had ended, outside its strand.
BOOST_AUTO_TEST_CASE(the_deadline_is_emitted_in_the_handlers_strand) {
  fixture f;
  check_the_deadline_is_emitted_in(f, net::make_strand(f.io));
}

#if ASIO_WHEEL_TEST_TS_EXECUTORS
// The same with a legacy strand (io_context::strand, a Networking TS executor): the
// deadline was emitted on the I/O executor, outside the strand, since the library kept
// only an emission executor that any_io_executor could hold.
BOOST_AUTO_TEST_CASE(the_deadline_is_emitted_in_the_handlers_legacy_strand) {
  fixture f;
  check_the_deadline_is_emitted_in(f, net::io_context::strand(f.io));
}
#endif

// A handler bound to another context, its operation completing inside the emission (on
// the operation's context): the completion, put off until the emission ends, still runs on the
// handler's executor, not where the emission ran.
BOOST_AUTO_TEST_CASE(a_completion_put_off_runs_on_the_handlers_own_context) {
  fixture f;
  asio_wheel_test::manual_context other;
  outcome o;
  bool cancelled_in_strand = false;
  operation_dispatching_on_cancellation<> op{f.io.get_executor(), net::make_strand(f.io),
                                           &cancelled_in_strand, true};
  op.async_start(cancel_after(
      10ms, net::bind_executor(other.io, [&](error_code ec) { record(o)(ec); })));
  f.advance(10ms);
  BOOST_TEST(o.calls == 0);
  other.settle();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
}

// cancel_after inside cancel_after: the inner deadline reaches the operation through
// the outer one's forwarding of the user's slot. The operation completed inside that
// emission, and the outer deadline's state (whose signal held the running cancellation
// handler) was freed under it: a heap-use-after-free when the cancellation handler went
// on (the sanitizer builds), on another thread too. A forwarded emission is now a firing
// of the outer deadline, which the completion waits for.
BOOST_AUTO_TEST_CASE(a_nested_deadline_frees_nothing_its_emission_still_uses) {
  fixture f;
  int live = 0;
  int live_in_handler = -1;
  bool destroyed_by_upcall = false;
  outcome o;
  operation_watching_its_cancellation_handler op{&destroyed_by_upcall};
  op.async_start(cancel_after(
      1h, cancel_after(10ms, net::bind_allocator(
                                 asio_wheel_test::counting_allocator<void>(&live),
                                 net::bind_executor(f.io, [&](error_code ec) {
                                   live_in_handler = live;
                                   record(o)(ec);
                                 })))));
  BOOST_TEST(live == 2); // the two deadlines' states
  f.svc.advance(10ms);
  f.io.poll();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST(!destroyed_by_upcall);
  BOOST_TEST(live_in_handler == 0);
  BOOST_TEST(live == 0);
  BOOST_TEST(f.pending() == 0u);
}

// The handler of an operation completed inside the emission waits for the emission to
// end; when the cancellation handler then throws, it was destroyed, never invoked (a
// lost handler). Now it is posted, and runs once the exception has left run().
BOOST_AUTO_TEST_CASE(a_cancellation_handler_throwing_after_completing_loses_no_handler) {
  fixture f;
  int live = 0;
  outcome o;
  operation_completed_by_its_cancellation op{true};
  op.async_start(cancel_after(
      10ms, net::bind_allocator(asio_wheel_test::counting_allocator<void>(&live),
                                net::bind_executor(f.io, [&](error_code ec) { record(o)(ec); }))));
  f.svc.advance(10ms);
  BOOST_CHECK_THROW(f.io.poll(), std::runtime_error);
  BOOST_TEST(o.calls == 0); // not while the exception unwound
  f.io.restart();
  f.io.poll();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST((o.ec == net::error::operation_aborted));
  BOOST_TEST(live == 0);
  BOOST_TEST(f.pending() == 0u);
}

namespace {

// A handler whose move constructor may throw, and does once *armed is set.
struct move_bomb_handler {
  bool* armed;
  outcome* o;
  move_bomb_handler(bool* a, outcome* out) : armed(a), o(out) {}
  move_bomb_handler(move_bomb_handler&& other) : armed(other.armed), o(other.o) {
    if (*armed) throw std::runtime_error("handler move");
  }
  void operator()(error_code ec) { record(*o)(ec); }
};

// Completed inside the deadline's emission, a handler is moved into a deferred
// completion, and out of it when the emission ends. The first move ran where nothing
// may throw (std::terminate when it did), and when the second threw, the deferred
// completion and the deadline's state were lost. Now the exception leaves run(), as
// when Asio's own ops cannot move a handler: the handler is never invoked, and the
// deadline ends and gives its memory back (LeakSanitizer in the ASan build). The
// operation arms the handler's move once it holds the handler for the upcall (the
// first move throws), or once the upcall has returned (the second).
void move_throws_inside_the_emission_case(bool at_the_end) {
  fixture f;
  int live = 0;
  outcome o;
  bool armed = false;
  operation_completed_by_its_cancellation op{false, at_the_end ? nullptr : &armed,
                                             at_the_end ? &armed : nullptr};
  op.async_start(cancel_after(
      10ms, net::bind_allocator(asio_wheel_test::counting_allocator<void>(&live),
                                net::bind_executor(f.io, move_bomb_handler(&armed, &o)))));
  BOOST_TEST(live == 1); // the deadline's state
  f.svc.advance(10ms);
  BOOST_CHECK_THROW(f.io.poll(), std::runtime_error);
  f.io.restart();
  f.io.poll();
  BOOST_TEST(o.calls == 0);
  BOOST_TEST(live == 0);
  BOOST_TEST(f.pending() == 0u);
}

} // namespace

BOOST_AUTO_TEST_CASE(a_handler_whose_move_throws_inside_the_emission_leaves_nothing_behind) {
  move_throws_inside_the_emission_case(false);
}

BOOST_AUTO_TEST_CASE(a_handler_whose_move_throws_after_the_emission_leaves_nothing_behind) {
  move_throws_inside_the_emission_case(true);
}

// ---- a request loop in steady mode ----

namespace {

// A socket pair on a context in steady mode (the wheel's driver runs), and its wheel.
struct steady_pair {
  net::io_context io;
  socket_type a{io}, b{io};
  asio_wheel::wheel_service& svc = net::use_service<asio_wheel::wheel_service>(io);
  char byte = 0;

  steady_pair() { net::local::connect_pair(a, b); }

  // Reads one byte from `a` with a 10 s deadline.
  template <class Handler>
  void read_one(Handler h) {
    a.async_read_some(net::buffer(&byte, 1), cancel_after(10s, std::move(h)));
  }
  // Runs until nothing is left: at once, unless the shard still holds work. The bound
  // only ends such a failure.
  void run_until_idle() {
    io.restart();
    io.run_for(30s);
  }
};

} // namespace

// A request loop: each read's handler starts the next read with its own deadline. The
// deadline that leaves puts off the shard's idle actions (dropping the context's work,
// the driver's disarm) until the handler has returned, when the next one is on the
// wheel. Once the last read is in, they must still happen: run() returns without the
// driver ever firing (were they lost, the context's work would never be given back and
// run() would not return at all).
BOOST_AUTO_TEST_CASE(steady_request_loop_returns_once_its_last_deadline_ends) {
  steady_pair p;
  int reads = 0;
  std::function<void()> start_read = [&] {
    p.read_one([&](error_code ec, std::size_t) {
      BOOST_TEST(!ec);
      if (++reads < 100) start_read();
    });
  };
  net::write(p.b, net::buffer(std::string(100, 'x')));
  start_read();
  p.run_until_idle();
  BOOST_TEST(p.io.stopped());
  BOOST_TEST(reads == 100);
  BOOST_TEST(p.svc.stats().pending == 0u);
  BOOST_TEST(p.svc.stats().cancelled == 100u); // each deadline left unfired
  BOOST_TEST(p.svc.stats().wakeups == 0u);
}

// A request whose handler starts one whose deadline has passed already: it is due at
// once, in no slot, and its emission (of cancellation_type::none here, which the read
// ignores) leaves the read waiting. The idle actions held back by the first request's
// end still have work to do: the driver is armed for the first deadline with nothing
// left in a slot, and must be disarmed then, not when the second request ends. Were
// the new deadline's arm taken to settle them (only an arm that leaves a slot to wake
// for does), the driver would fire at the first deadline (200 ms), while the second
// read waits for its byte (300 ms). Real time, since the driver exists in steady mode
// only; passing does not depend on it.
BOOST_AUTO_TEST_CASE(steady_request_whose_next_deadline_has_passed_disarms_the_driver) {
  steady_pair p;
  int reads = 0;
  net::steady_timer writer(p.io);
  p.a.async_read_some(net::buffer(&p.byte, 1), cancel_after(200ms, [&](error_code ec, std::size_t) {
    BOOST_TEST(!ec);
    ++reads;
    p.a.async_read_some(net::buffer(&p.byte, 1),
                        cancel_after(-1s, net::cancellation_type::none,
                                     [&](error_code ec2, std::size_t) {
                                       BOOST_TEST(!ec2);
                                       ++reads;
                                     }));
    writer.expires_after(300ms);
    writer.async_wait([&](error_code) { net::write(p.b, net::buffer("y", 1)); });
  }));
  net::write(p.b, net::buffer("x", 1));
  p.run_until_idle();
  BOOST_TEST(p.io.stopped());
  BOOST_TEST(reads == 2);
  BOOST_TEST(p.svc.stats().pending == 0u);
  BOOST_TEST(p.svc.stats().wakeups == 0u);
}

// The same when the handler throws out of run(): the idle actions happen on the way
// out, and the next run() returns at once.
BOOST_AUTO_TEST_CASE(steady_handler_that_throws_still_settles_the_shard) {
  steady_pair p;
  p.read_one([](error_code, std::size_t) { throw std::runtime_error("handler"); });
  net::write(p.b, net::buffer("x", 1));
  BOOST_CHECK_THROW(p.io.run(), std::runtime_error);
  BOOST_TEST(p.svc.stats().pending == 0u);
  p.run_until_idle();
  BOOST_TEST(p.io.stopped());
  BOOST_TEST(p.svc.stats().wakeups == 0u);
}

// A read that completes in time, its handler bound to a thread that does not run the
// context: the deadline ends there, settling at once. It left the driver armed for the
// deadline's tick: its disarm check ran before the deadline was uncounted, and saw an
// operation still pending beside a slotted delay_queue element. run() was then held
// until the driver fired (10 s here, at this deadline's slot), though an element with no
// take must not hold it (an outside review, session 47).
BOOST_AUTO_TEST_CASE(steady_a_deadline_ended_off_the_context_lets_run_return) {
  steady_pair p;
  asio_wheel::delay_queue<int> q(p.io);
  q.push(1, 1h); // no take: holds neither run() nor the driver
  net::thread_pool pool(1);
  std::atomic<int> reads{0};
  p.read_one(net::bind_executor(pool, [&](error_code ec, std::size_t) {
    BOOST_TEST(!ec);
    ++reads;
  }));
  net::write(p.b, net::buffer("x", 1));
  p.run_until_idle();
  pool.join();
  BOOST_TEST(p.io.stopped()); // it ran out of work, not out of time
  BOOST_TEST(reads.load() == 1);
  BOOST_TEST(p.svc.stats().pending == 0u);
  BOOST_TEST(p.svc.stats().wakeups == 0u);
  BOOST_TEST(q.size() == 1u);
}
