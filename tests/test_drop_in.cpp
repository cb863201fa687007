// asio_wheel::timer as a drop-in for boost::asio::steady_timer: the member list of
// basic_waitable_timer<steady_clock> (Boost 1.81 to 1.90) and, case by case, the
// behaviours that Asio's own timer test (test/system_timer.cpp) checks, on the manual
// clock. Nothing here sleeps or measures wall-clock time: the blocking wait() in steady
// mode is checked only for "never returns before the expiry".
// asio_wheel: requires Boost (it compares with boost::asio::steady_timer)
#define BOOST_TEST_MODULE drop_in
#include <boost/test/unit_test.hpp>

#include "manual_clock.hpp"

#include <asio_wheel.hpp>

#include <boost/asio.hpp>
#include <boost/asio/version.hpp>

#include <atomic>
#include <chrono>
#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
#include <concepts>
#endif
#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {

using fixture = asio_wheel_test::manual_context;
using steady_clock = std::chrono::steady_clock;
using io_executor = asio::io_context::executor_type;

const error_code aborted = asio::error::operation_aborted;

// Completions of the waits of one test, in the order they ran.
struct journal {
  struct entry {
    int id;
    error_code ec;
    steady_clock::time_point at;
  };
  std::vector<entry> entries;

  auto handler(int id, fixture& f) {
    return [this, id, &f](error_code ec) { entries.push_back({id, ec, f.svc.now()}); };
  }
  std::size_t size() const { return entries.size(); }
  const entry& at(std::size_t i) const { return entries.at(i); }
};

// ---- the member list, checked against steady_timer's (C++20: requires-expressions) ----

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L

template <class T> constexpr bool has_cancel = requires(T& t) { { t.cancel() } -> std::same_as<std::size_t>; };
template <class T> constexpr bool has_cancel_one = requires(T& t) { { t.cancel_one() } -> std::same_as<std::size_t>; };
template <class T> constexpr bool has_expiry = requires(const T& t) { { t.expiry() } -> std::same_as<typename T::time_point>; };
template <class T> constexpr bool has_expires_at = requires(T& t, typename T::time_point p) { { t.expires_at(p) } -> std::same_as<std::size_t>; };
template <class T> constexpr bool has_expires_after = requires(T& t, typename T::duration d) { { t.expires_after(d) } -> std::same_as<std::size_t>; };
template <class T> constexpr bool has_wait = requires(T& t) { { t.wait() } -> std::same_as<void>; };
template <class T> constexpr bool has_wait_ec = requires(T& t, error_code& ec) { { t.wait(ec) } -> std::same_as<void>; };
template <class T> constexpr bool has_get_executor = requires(T& t) { { t.get_executor() } -> std::same_as<const typename T::executor_type&>; };
// The members Asio deprecated: present before Boost 1.87 unless BOOST_ASIO_NO_DEPRECATED.
template <class T> constexpr bool has_cancel_ec = requires(T& t, error_code& ec) { { t.cancel(ec) } -> std::same_as<std::size_t>; };
template <class T> constexpr bool has_cancel_one_ec = requires(T& t, error_code& ec) { { t.cancel_one(ec) } -> std::same_as<std::size_t>; };
template <class T> constexpr bool has_expires_at_get = requires(const T& t) { { t.expires_at() } -> std::same_as<typename T::time_point>; };
template <class T> constexpr bool has_expires_at_ec = requires(T& t, typename T::time_point p, error_code& ec) { { t.expires_at(p, ec) } -> std::same_as<std::size_t>; };
template <class T> constexpr bool has_expires_from_now_get = requires(const T& t) { { t.expires_from_now() } -> std::same_as<typename T::duration>; };
template <class T> constexpr bool has_expires_from_now = requires(T& t, typename T::duration d) { { t.expires_from_now(d) } -> std::same_as<std::size_t>; };
template <class T> constexpr bool has_expires_from_now_ec = requires(T& t, typename T::duration d, error_code& ec) { { t.expires_from_now(d, ec) } -> std::same_as<std::size_t>; };

#define ASIO_WHEEL_SAME_MEMBER(name)                                                         \
  static_assert(name<asio::steady_timer> == name<asio_wheel::timer>,                         \
                #name ": asio_wheel::timer differs from steady_timer")

ASIO_WHEEL_SAME_MEMBER(has_cancel);
ASIO_WHEEL_SAME_MEMBER(has_cancel_one);
ASIO_WHEEL_SAME_MEMBER(has_expiry);
ASIO_WHEEL_SAME_MEMBER(has_expires_at);
ASIO_WHEEL_SAME_MEMBER(has_expires_after);
ASIO_WHEEL_SAME_MEMBER(has_wait);
ASIO_WHEEL_SAME_MEMBER(has_wait_ec);
ASIO_WHEEL_SAME_MEMBER(has_get_executor);
ASIO_WHEEL_SAME_MEMBER(has_cancel_ec);
ASIO_WHEEL_SAME_MEMBER(has_cancel_one_ec);
ASIO_WHEEL_SAME_MEMBER(has_expires_at_get);
ASIO_WHEEL_SAME_MEMBER(has_expires_at_ec);
ASIO_WHEEL_SAME_MEMBER(has_expires_from_now_get);
ASIO_WHEEL_SAME_MEMBER(has_expires_from_now);
ASIO_WHEEL_SAME_MEMBER(has_expires_from_now_ec);
static_assert(has_cancel_one<asio_wheel::timer> && has_wait<asio_wheel::timer> &&
              has_wait_ec<asio_wheel::timer>);
#endif

// A move-only handler with a private copy constructor, as in Asio's test.
struct move_only_handler {
  move_only_handler() = default;
  move_only_handler(move_only_handler&&) noexcept {}
  void operator()(const error_code&) {}

private:
  move_only_handler(const move_only_handler&);
};

// A handler that names its own allocator with the old member interface
// (allocator_type + get_allocator()), counting the blocks it holds.
struct counted_handler {
  template <class T>
  struct allocator {
    using value_type = T;
    explicit allocator(int* live) noexcept : live(live) {}
    template <class U>
    allocator(const allocator<U>& other) noexcept : live(other.live) {}
    T* allocate(std::size_t n) {
      ++*live;
      return static_cast<T*>(::operator new(sizeof(T) * n));
    }
    void deallocate(T* p, std::size_t) noexcept {
      --*live;
      ::operator delete(p);
    }
    template <class U>
    bool operator==(const allocator<U>& o) const noexcept { return live == o.live; }
    int* live;
  };
  using allocator_type = allocator<int>;

  explicit counted_handler(int* live) : live(live) {}
  allocator_type get_allocator() const noexcept { return allocator_type(live); }
  void operator()(const error_code&) {}
  int* live;
};

} // namespace

// ---- types ----

BOOST_AUTO_TEST_CASE(the_member_types_are_steady_timers) {
  using T = asio_wheel::timer;
  static_assert(std::is_same_v<T::clock_type, asio::steady_timer::clock_type>);
  static_assert(std::is_same_v<T::duration, asio::steady_timer::duration>);
  static_assert(std::is_same_v<T::time_point, asio::steady_timer::time_point>);
  static_assert(std::is_same_v<T::traits_type, asio::steady_timer::traits_type>);
  static_assert(std::is_same_v<T::traits_type, asio::wait_traits<steady_clock>>);
  static_assert(std::is_same_v<T::executor_type, asio::steady_timer::executor_type>);
  static_assert(std::is_same_v<T::rebind_executor<io_executor>::other,
                               asio_wheel::basic_timer<io_executor>>);
  static_assert(!std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T>);
  static_assert(std::is_move_constructible_v<T> && std::is_move_assignable_v<T>);
  // Moves convert towards the more general executor only, as steady_timer's do.
  using plain = asio_wheel::basic_timer<io_executor>;
  static_assert(std::is_constructible_v<T, plain&&> && std::is_assignable_v<T&, plain&&>);
  static_assert(!std::is_constructible_v<plain, T&&> && !std::is_assignable_v<plain&, T&&>);
  static_assert(std::is_constructible_v<asio::steady_timer, asio::basic_waitable_timer<steady_clock, asio::wait_traits<steady_clock>, io_executor>&&> ==
                std::is_constructible_v<T, plain&&>);
  // The constructors steady_timer has.
  static_assert(std::is_constructible_v<T, asio::io_context&>);
  static_assert(std::is_constructible_v<T, const T::executor_type&>);
  static_assert(std::is_constructible_v<T, asio::io_context&, T::time_point>);
  static_assert(std::is_constructible_v<T, asio::io_context&, T::duration>);
  static_assert(std::is_constructible_v<T, const T::executor_type&, T::time_point>);
  static_assert(std::is_constructible_v<T, const T::executor_type&, T::duration>);
  static_assert(std::is_constructible_v<T, io_executor>);
  static_assert(!std::is_convertible_v<asio::io_context&, T>); // explicit, like steady_timer's
  BOOST_TEST(true);
}

BOOST_AUTO_TEST_CASE(get_executor_returns_a_reference_to_the_timers_executor_like_steady_timer) {
  fixture f;
  asio_wheel::timer t(f.io);
  const auto& ex = t.get_executor();
  BOOST_TEST(&ex == &t.get_executor());
  BOOST_TEST((ex == asio::any_io_executor(f.io.get_executor())));
}

// ---- construction and expiry (system_timer_test) ----

BOOST_AUTO_TEST_CASE(every_constructor_form_sets_the_expiry_from_the_services_clock) {
  fixture f;
  f.advance(7ms);
  const auto now = f.svc.now();
  const io_executor ex = f.io.get_executor();

  asio_wheel::timer none(f.io), none_ex(ex);
  BOOST_TEST((none.expiry() == asio_wheel::timer::time_point()));
  BOOST_TEST((none_ex.expiry() == asio_wheel::timer::time_point()));

  asio_wheel::timer d1(f.io, 1s), d2(ex, 1s + 500ms);
  BOOST_TEST((d1.expiry() == now + 1s));
  BOOST_TEST((d2.expiry() == now + 1500ms));

  asio_wheel::timer p1(f.io, now + 3s), p2(ex, now + 4s);
  BOOST_TEST((p1.expiry() == now + 3s));
  BOOST_TEST((p2.expiry() == now + 4s));

  // expires_at and expires_after return how many waits they aborted: none here.
  BOOST_TEST(d2.expires_at(d2.expiry() + 1s) == 0u);
  BOOST_TEST((d2.expiry() == now + 2500ms));
  BOOST_TEST(d2.expires_after(1s + 200ms) == 0u);
  BOOST_TEST((d2.expiry() == now + 1200ms));
}

// ---- the blocking wait ----

BOOST_AUTO_TEST_CASE(wait_returns_at_once_when_the_expiry_has_passed) {
  fixture f;
  f.advance(1s);
  asio_wheel::timer t(f.io); // time_point(): long past
  t.wait();
  t.expires_at(f.svc.now());
  t.wait();
  t.expires_at(f.svc.now() - 1ms);
  t.wait();
  t.expires_at(asio_wheel::timer::time_point::min());
  t.wait();
  t.expires_after(-5s);
  error_code ec = asio::error::timed_out;
  t.wait(ec);
  BOOST_TEST(!ec); // cleared, as steady_timer's wait(ec) does
  t.expires_after(0s);
  t.wait();
  BOOST_TEST(f.settle() == 0u); // wait() posts and starts nothing
  BOOST_TEST(f.svc.stats().pending == 0u);
}

BOOST_AUTO_TEST_CASE(wait_blocks_until_another_thread_advances_the_manual_clock_to_the_expiry) {
  // As Asio's test does with t2: wait, expires_at(expiry() + 1s) and wait, expires_after
  // and wait(ec). Only the main thread advances, each time after the waiting thread said
  // it is about to wait; that thread records what the service's clock said each time
  // wait() returned.
  fixture f;
  asio_wheel::timer t(f.io, 1s + 500ms);
  const auto start = f.svc.now();
  std::vector<steady_clock::time_point> expiries, returned_at;
  std::promise<void> about_to_wait[3];
  std::atomic<int> returns{0};
  error_code ec = asio::error::timed_out;

  std::thread waiter([&] {
    expiries.push_back(t.expiry());
    about_to_wait[0].set_value();
    t.wait();
    returned_at.push_back(f.svc.now());
    returns = 1;
    t.expires_at(t.expiry() + 1s);
    expiries.push_back(t.expiry());
    about_to_wait[1].set_value();
    t.wait();
    returned_at.push_back(f.svc.now());
    returns = 2;
    t.expires_after(1s + 200ms);
    expiries.push_back(t.expiry());
    about_to_wait[2].set_value();
    t.wait(ec);
    returned_at.push_back(f.svc.now());
    returns = 3;
  });

  about_to_wait[0].get_future().get();
  f.svc.advance(1499ms);
  BOOST_TEST(returns.load() == 0); // the expiry is 1 ms away
  f.svc.advance(1ms);
  about_to_wait[1].get_future().get();
  f.svc.advance(999ms);
  BOOST_TEST(returns.load() == 1);
  f.svc.advance(1ms);
  about_to_wait[2].get_future().get();
  f.svc.advance(1199ms);
  BOOST_TEST(returns.load() == 2);
  f.svc.advance(1ms);
  waiter.join();

  BOOST_TEST(returns.load() == 3);
  BOOST_TEST(!ec);
  BOOST_REQUIRE(expiries.size() == 3u);
  BOOST_REQUIRE(returned_at.size() == 3u);
  BOOST_TEST((expiries[0] == start + 1500ms));
  BOOST_TEST((expiries[1] == start + 2500ms));
  BOOST_TEST((expiries[2] == start + 3700ms));
  for (std::size_t i = 0; i < 3; ++i)
    BOOST_TEST((returned_at[i] >= expiries[i]), "wait " << i << " returned before its expiry");
}

BOOST_AUTO_TEST_CASE(wait_leaves_the_pending_async_waits_of_its_timer_alone) {
  fixture f;
  asio_wheel::timer t(f.io, 10ms);
  journal j;
  t.async_wait(j.handler(1, f));
  std::thread waiter([&] { t.wait(); });
  f.svc.advance(10ms);
  waiter.join();
  BOOST_TEST(j.size() == 0u); // wait() runs no handler
  f.settle();
  BOOST_REQUIRE(j.size() == 1u);
  BOOST_TEST(!j.at(0).ec);
}

BOOST_AUTO_TEST_CASE(wait_in_steady_mode_never_returns_before_the_expiry) {
  asio::io_context io; // steady clock; nobody runs the context: wait() does not need it
  asio_wheel::timer t(io, 2ms);
  t.wait();
  BOOST_TEST((steady_clock::now() >= t.expiry()));

  t.expires_at(t.expiry() + 1ms);
  t.wait();
  BOOST_TEST((steady_clock::now() >= t.expiry()));

  t.expires_after(1ms);
  error_code ec = asio::error::timed_out;
  t.wait(ec);
  BOOST_TEST(!ec);
  BOOST_TEST((steady_clock::now() >= t.expiry()));

  // Passed expiries return at once.
  for (auto p : {asio_wheel::timer::time_point::min(), asio_wheel::timer::time_point(),
                 steady_clock::now() - 1h, steady_clock::now()}) {
    t.expires_at(p);
    t.wait(ec);
    BOOST_TEST(!ec);
  }
  t.expires_after(-1s);
  t.wait();
}

// ---- async_wait (system_timer_test) ----

BOOST_AUTO_TEST_CASE(async_wait_completes_only_when_the_context_runs_and_not_before_the_expiry) {
  fixture f;
  asio_wheel::timer t(f.io, 5s);
  journal j;
  t.async_wait(j.handler(3, f));
  BOOST_TEST(j.size() == 0u); // no completion before the context runs
  f.advance(4999ms);
  BOOST_TEST(j.size() == 0u);
  f.svc.advance(1ms);
  BOOST_TEST(j.size() == 0u); // due, but nothing has run the context
  f.settle();
  BOOST_REQUIRE(j.size() == 1u);
  BOOST_TEST(!j.at(0).ec);
  BOOST_TEST((j.at(0).at >= t.expiry()));
}

BOOST_AUTO_TEST_CASE(a_handler_that_moves_the_expiry_and_waits_again_does_not_nest) {
  // Asio's decrement_to_zero: each completion sets expiry() + 1 s and waits again.
  fixture f;
  asio_wheel::timer t(f.io, 1s);
  const auto start = t.expiry();
  int count = 3;
  std::vector<steady_clock::time_point> at;
  std::function<void(error_code)> decrement_to_zero = [&](error_code) {
    at.push_back(f.svc.now());
    if (count > 0) {
      --count;
      const int before = count;
      t.expires_at(t.expiry() + 1s);
      t.async_wait(decrement_to_zero);
      BOOST_TEST(count == before); // completion cannot nest
    }
  };
  t.async_wait(decrement_to_zero);
  BOOST_TEST(count == 3);
  for (int expected = 2; expected >= 0; --expected) {
    f.advance(999ms);
    BOOST_TEST(count == expected + 1);
    f.advance(1ms);
    BOOST_TEST(count == expected);
  }
  f.advance(1s); // the fourth completion: count stays 0 and no fifth wait is started
  BOOST_TEST(count == 0);
  BOOST_REQUIRE(at.size() == 4u);
  for (std::size_t i = 0; i < at.size(); ++i)
    BOOST_TEST((at[i] >= start + std::chrono::seconds(i)));
  BOOST_TEST(f.svc.stats().pending == 0u);
}

// ---- cancel and cancel_one ----

BOOST_AUTO_TEST_CASE(cancel_from_another_timers_handler_aborts_the_wait_and_a_new_wait_runs_to_completion) {
  fixture f;
  asio_wheel::timer t5(f.io, 10s), t6(f.io, 1s);
  journal j;
  std::size_t cancelled = 99;
  t5.async_wait(j.handler(5, f));
  t6.async_wait([&](error_code) { cancelled = t5.cancel(); });
  f.advance(1s);
  BOOST_TEST(cancelled == 1u);
  BOOST_REQUIRE(j.size() == 1u);
  BOOST_TEST(j.at(0).ec == aborted);
  BOOST_TEST((t5.expiry() == f.svc.now() + 9s)); // cancel leaves the expiry alone

  t5.async_wait(j.handler(50, f));
  f.advance(8999ms);
  BOOST_TEST(j.size() == 1u);
  f.advance(1ms);
  BOOST_REQUIRE(j.size() == 2u);
  BOOST_TEST(j.at(1).id == 50);
  BOOST_TEST(!j.at(1).ec);
  BOOST_TEST((j.at(1).at >= t5.expiry()));
}

BOOST_AUTO_TEST_CASE(cancel_one_from_another_timers_handler_aborts_only_the_oldest_of_two_waits) {
  fixture f;
  asio_wheel::timer t7(f.io, 3s), t8(f.io, 1s);
  journal j;
  std::size_t cancelled = 99;
  t7.async_wait(j.handler(1, f));
  t7.async_wait(j.handler(2, f));
  t8.async_wait([&](error_code) { cancelled = t7.cancel_one(); });
  f.advance(1s);
  BOOST_TEST(cancelled == 1u);
  BOOST_REQUIRE(j.size() == 1u);
  BOOST_TEST(j.at(0).id == 1);
  BOOST_TEST(j.at(0).ec == aborted);
  f.advance(1999ms);
  BOOST_TEST(j.size() == 1u);
  f.advance(1ms);
  BOOST_REQUIRE(j.size() == 2u);
  BOOST_TEST(j.at(1).id == 2);
  BOOST_TEST(!j.at(1).ec);
  BOOST_TEST((j.at(1).at >= t7.expiry()));
}

BOOST_AUTO_TEST_CASE(cancel_one_aborts_waits_oldest_first_one_per_call) {
  fixture f;
  asio_wheel::timer t(f.io, 1s);
  const auto expiry = t.expiry();
  BOOST_TEST(t.cancel_one() == 0u); // nothing pending
  journal j;
  for (int id = 1; id <= 3; ++id) t.async_wait(j.handler(id, f));
  BOOST_TEST(f.svc.stats().pending == 3u);
  BOOST_TEST(t.cancel_one() == 1u);
  BOOST_TEST(j.size() == 0u); // never inside cancel_one()
  BOOST_TEST(f.svc.stats().pending == 2u);
  BOOST_TEST(t.cancel_one() == 1u);
  f.settle();
  BOOST_REQUIRE(j.size() == 2u);
  BOOST_TEST(j.at(0).id == 1);
  BOOST_TEST(j.at(1).id == 2);
  BOOST_TEST(j.at(0).ec == aborted);
  BOOST_TEST(j.at(1).ec == aborted);
  BOOST_TEST((t.expiry() == expiry));

  // A wait started now queues behind the remaining one.
  t.async_wait(j.handler(4, f));
  BOOST_TEST(t.cancel_one() == 1u);
  f.settle();
  BOOST_REQUIRE(j.size() == 3u);
  BOOST_TEST(j.at(2).id == 3);

  // The last one is still on the wheel and completes at the expiry.
  f.advance(1s);
  BOOST_REQUIRE(j.size() == 4u);
  BOOST_TEST(j.at(3).id == 4);
  BOOST_TEST(!j.at(3).ec);
  BOOST_TEST(t.cancel_one() == 0u);
  auto s = f.svc.stats();
  BOOST_TEST(s.pending == 0u);
  BOOST_TEST(s.cancelled == 3u);
  BOOST_TEST(s.expired == 1u);
}

BOOST_AUTO_TEST_CASE(cancel_one_reaches_a_due_wait_until_it_is_handed_over) {
  fixture f;
  asio_wheel::timer t(f.io, 1ms);
  journal j;
  t.async_wait(j.handler(1, f));
  f.svc.advance(1ms); // due, but no step has run yet
  BOOST_TEST(t.cancel_one() == 1u);
  f.settle();
  BOOST_REQUIRE(j.size() == 1u);
  BOOST_TEST(j.at(0).ec == aborted);

  // Two timers due in one tick are handed over in one step: when the first handler
  // calls cancel_one() on the second, that wait is no longer counted and succeeds.
  asio_wheel::timer first(f.io, 1ms), second(f.io, 1ms);
  std::size_t cancelled = 99;
  first.async_wait([&](error_code) { cancelled = second.cancel_one(); });
  second.async_wait(j.handler(2, f));
  f.advance(1ms);
  BOOST_TEST(cancelled == 0u);
  BOOST_REQUIRE(j.size() == 2u);
  BOOST_TEST(!j.at(1).ec);
}

BOOST_AUTO_TEST_CASE(cancel_and_cancel_one_on_timers_at_the_end_of_time_count_their_own_waits) {
  // Asio's system_timer_cancel_test: 50 timers at time_point::max(), waits on a few of
  // them, with a move-only handler.
  fixture f;
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  for (int i = 0; i < 50; ++i) {
    timers.push_back(std::make_unique<asio_wheel::timer>(f.io));
    timers.back()->expires_at(asio_wheel::timer::time_point::max());
  }
  timers[2]->async_wait(move_only_handler());
  timers[41]->async_wait(move_only_handler());
  for (int i = 10; i < 20; ++i) timers[i]->async_wait(move_only_handler());
  f.advance(1s);
  BOOST_TEST(f.svc.stats().pending == 12u);
  BOOST_TEST(timers[2]->cancel() == 1u);
  BOOST_TEST(timers[41]->cancel_one() == 1u);
  for (int i = 10; i < 20; ++i) BOOST_TEST(timers[i]->cancel() == 1u);
  for (int i : {0, 1, 2, 3, 20, 41, 49}) {
    BOOST_TEST(timers[i]->cancel() == 0u);
    BOOST_TEST(timers[i]->cancel_one() == 0u);
  }
  f.settle();
  BOOST_TEST(f.svc.stats().pending == 0u);
  BOOST_TEST(f.svc.stats().cancelled == 12u);
}

// ---- handler memory (system_timer_custom_allocation_test) ----

BOOST_AUTO_TEST_CASE(handler_memory_comes_from_its_allocator_and_is_all_returned) {
  fixture f;
  std::vector<std::unique_ptr<asio_wheel::timer>> timers;
  int live = 0;
  for (int i = 0; i < 100; ++i) {
    timers.push_back(std::make_unique<asio_wheel::timer>(f.io));
    timers.back()->expires_at(i < 50 ? asio_wheel::timer::time_point::max()
                                     : asio_wheel::timer::time_point::min());
    timers.back()->async_wait(counted_handler(&live));
  }
  BOOST_TEST(live > 0); // the operations live in the handlers' memory
  for (int i = 0; i < 50; ++i) BOOST_TEST(timers[i]->cancel() == 1u);
  f.settle(); // every wait completes (Asio's test calls run(), which would then return)
  BOOST_TEST(live == 0);
  BOOST_TEST(f.svc.stats().pending == 0u);
}

// ---- threads (system_timer_thread_test) ----

BOOST_AUTO_TEST_CASE(a_thread_running_the_context_completes_a_wait_started_between_two_blocking_waits) {
  // As in Asio's test: one thread runs the context; another blocks in t2.wait(), starts
  // an async wait on t1 and blocks again. Here the main thread moves the manual clock.
  fixture f;
  auto work = asio::make_work_guard(f.io);
  asio_wheel::timer t1(f.io), t2(f.io);
  t2.expires_after(2s);
  std::atomic<int> count{0};
  std::promise<void> started, completed;
  error_code t1_ec = asio::error::timed_out;
  steady_clock::time_point t1_at{}, t2_first{}, t2_second{}, back1{}, back2{};

  std::thread runner([&] { f.io.run(); });
  std::thread waiter([&] {
    t2_first = t2.expiry();
    t2.wait();
    back1 = f.svc.now();
    t1.expires_after(2s);
    t1.async_wait([&](error_code ec) {
      t1_ec = ec;
      t1_at = f.svc.now();
      ++count;
      completed.set_value();
    });
    t2.expires_after(4s);
    t2_second = t2.expiry();
    started.set_value();
    t2.wait();
    back2 = f.svc.now();
  });

  f.svc.advance(2s);
  started.get_future().get();
  f.svc.advance(2s); // t1 comes due: the runner completes it
  completed.get_future().get();
  BOOST_TEST(count.load() == 1);
  f.svc.advance(2s); // t2's second expiry
  waiter.join();
  work.reset();
  f.io.stop();
  runner.join();

  BOOST_TEST(count.load() == 1);
  BOOST_TEST(!t1_ec);
  BOOST_TEST((t1_at >= t1.expiry()));
  BOOST_TEST((back1 >= t2_first));
  BOOST_TEST((back2 >= t2_second));
}

// ---- moves (system_timer_move_test) ----

namespace {

asio_wheel::timer make_timer(asio::io_context& io, journal& j, int id, fixture& f) {
  asio_wheel::timer t(io);
  t.expires_after(1s);
  t.async_wait(j.handler(id, f));
  return t;
}

asio_wheel::basic_timer<io_executor> make_convertible_timer(asio::io_context& io, journal& j,
                                                            int id, fixture& f) {
  asio_wheel::basic_timer<io_executor> t(io);
  t.expires_after(1s);
  t.async_wait(j.handler(id, f));
  return t;
}

} // namespace

BOOST_AUTO_TEST_CASE(move_construction_and_assignment_carry_pending_waits_and_abort_the_targets) {
  fixture f1, f2;
  journal j1, j2;

  asio_wheel::timer t1 = make_timer(f1.io, j1, 1, f1);
  asio_wheel::timer t2 = make_timer(f2.io, j2, 2, f2);
  asio_wheel::timer t3 = std::move(t1);
  t2 = std::move(t1); // t2's own wait is aborted; t1 has nothing to give

  f2.settle();
  BOOST_REQUIRE(j2.size() == 1u);
  BOOST_TEST(j2.at(0).id == 2);
  BOOST_TEST(j2.at(0).ec == aborted);
  f1.advance(1s); // t3 carries t1's wait
  BOOST_REQUIRE(j1.size() == 1u);
  BOOST_TEST(j1.at(0).id == 1);
  BOOST_TEST(!j1.at(0).ec);

  // Converting moves, from a timer on io_context::executor_type.
  asio_wheel::timer t4 = make_convertible_timer(f1.io, j1, 4, f1);
  asio_wheel::timer t5 = make_convertible_timer(f2.io, j2, 5, f2);
  asio_wheel::timer t6 = std::move(t4);
  t2 = std::move(t4);
  f2.advance(1s);
  BOOST_REQUIRE(j2.size() == 2u);
  BOOST_TEST(j2.at(1).id == 5);
  BOOST_TEST(!j2.at(1).ec);
  f1.advance(1s);
  BOOST_REQUIRE(j1.size() == 2u);
  BOOST_TEST(j1.at(1).id == 4);
  BOOST_TEST(!j1.at(1).ec);

  // Converting move assignment: the target's waits abort, the source's move over.
  asio_wheel::timer t7 = make_timer(f1.io, j1, 7, f1);
  t7 = make_convertible_timer(f1.io, j1, 8, f1);
  f1.settle();
  BOOST_REQUIRE(j1.size() == 3u);
  BOOST_TEST(j1.at(2).id == 7);
  BOOST_TEST(j1.at(2).ec == aborted);
  f1.advance(1s);
  BOOST_REQUIRE(j1.size() == 4u);
  BOOST_TEST(j1.at(3).id == 8);
  BOOST_TEST(!j1.at(3).ec);
}

BOOST_AUTO_TEST_CASE(a_moved_from_timer_is_as_if_newly_constructed_on_the_same_executor) {
  fixture f;
  journal j;
  asio_wheel::timer a = make_timer(f.io, j, 1, f);
  asio_wheel::timer b = std::move(a);
  BOOST_TEST((a.get_executor() == b.get_executor()));
  BOOST_TEST(a.cancel() == 0u);
  BOOST_TEST(a.cancel_one() == 0u);
  a.expires_after(2s);
  a.async_wait(j.handler(2, f));
  f.advance(1s);
  BOOST_REQUIRE(j.size() == 1u);
  BOOST_TEST(j.at(0).id == 1);
  f.advance(1s);
  BOOST_REQUIRE(j.size() == 2u);
  BOOST_TEST(j.at(1).id == 2);
  BOOST_TEST(!j.at(1).ec);
}

// ---- per-operation cancellation (system_timer_op_cancel_test) ----

BOOST_AUTO_TEST_CASE(per_operation_cancellation_aborts_only_the_bound_wait_and_cancel_the_rest) {
  fixture f;
  asio::cancellation_signal signal;
  asio_wheel::timer t(f.io, 10s);
  int count = 0;
  auto increment = [&](error_code) { ++count; };
  t.async_wait(increment);
  t.async_wait(asio::bind_cancellation_slot(signal.slot(), increment));
  t.async_wait(increment);

  f.io.poll();
  BOOST_TEST(count == 0);
  BOOST_TEST(!f.io.stopped()); // pending waits are outstanding work

  signal.emit(asio::cancellation_type::all);
  f.io.run_one();
  f.io.poll();
  BOOST_TEST(count == 1);
  BOOST_TEST(!f.io.stopped());

  BOOST_TEST(t.cancel() == 2u);
  f.io.run();
  BOOST_TEST(count == 3);
  BOOST_TEST(f.io.stopped());
}

// ---- rebind_executor, as_default_on ----

BOOST_AUTO_TEST_CASE(rebind_executor_and_as_default_on_give_timers_of_the_same_family) {
  fixture f;
  using strand_timer = asio_wheel::timer::rebind_executor<asio::strand<io_executor>>::other;
  static_assert(std::is_same_v<strand_timer, asio_wheel::basic_timer<asio::strand<io_executor>>>);
  strand_timer s(asio::make_strand(f.io), 2ms);
  journal j;
  s.async_wait(j.handler(1, f));

  using deferred_timer = asio::deferred_t::as_default_on_t<asio_wheel::timer>;
  static_assert(std::is_same_v<deferred_timer::clock_type, steady_clock>);
  static_assert(std::is_same_v<deferred_timer::traits_type, asio::wait_traits<steady_clock>>);
  deferred_timer d(f.io, 1ms);
  auto op = d.async_wait(); // the default token: deferred, nothing started yet
  BOOST_TEST(f.svc.stats().pending == 1u);
  std::move(op)(j.handler(2, f));
  BOOST_TEST(f.svc.stats().pending == 2u);
  BOOST_TEST(d.cancel_one() == 1u);
  f.settle();
  BOOST_REQUIRE(j.size() == 1u);
  BOOST_TEST(j.at(0).id == 2);
  BOOST_TEST(j.at(0).ec == aborted);
  f.advance(2ms);
  BOOST_REQUIRE(j.size() == 2u);
  BOOST_TEST(j.at(1).id == 1);
  BOOST_TEST(!j.at(1).ec);
}

// ---- generic code written for steady_timer ----

namespace {

// Uses every non-deprecated member of steady_timer with expiries in the past (so that
// nothing sleeps) and returns what it saw: the same for both types.
template <class Timer>
std::vector<int> exercise(asio::io_context& io) {
  std::vector<int> seen;
  auto record = [&seen](int id) {
    return [&seen, id](error_code ec) { seen.push_back(ec == aborted ? -id : id); };
  };
  Timer t(io);
  seen.push_back(t.expiry() == typename Timer::time_point() ? 1 : 0);
  t.wait();
  error_code ec = asio::error::timed_out;
  t.wait(ec);
  seen.push_back(ec ? 0 : 1);
  seen.push_back(static_cast<int>(t.expires_at(Timer::time_point::min())));
  for (int id = 1; id <= 3; ++id) t.async_wait(record(id));
  seen.push_back(static_cast<int>(t.cancel_one()));
  seen.push_back(static_cast<int>(t.cancel()));
  seen.push_back(static_cast<int>(t.cancel_one()));
  io.run(); // (its count of handlers differs: the wheel runs aborted handlers in batches)

  io.restart();
  t.expires_after(std::chrono::hours(1));
  t.async_wait(record(4));
  seen.push_back(static_cast<int>(t.expires_after(-std::chrono::seconds(1))));
  t.async_wait(record(5));
  io.run();

  io.restart();
  Timer moved(std::move(t));
  typename Timer::template rebind_executor<io_executor>::other plain(io.get_executor());
  plain.expires_at(Timer::clock_type::now() - std::chrono::seconds(1));
  plain.async_wait(record(6));
  t = Timer(std::move(plain));
  t.async_wait(record(7));
  io.run();
  seen.push_back(static_cast<int>(moved.cancel()));
  return seen;
}

} // namespace

BOOST_AUTO_TEST_CASE(generic_code_written_for_steady_timer_sees_the_same_results_with_ours) {
  asio::io_context a, b;
  const std::vector<int> steady = exercise<asio::steady_timer>(a);
  const std::vector<int> ours = exercise<asio_wheel::timer>(b);
  BOOST_TEST(steady == ours, boost::test_tools::per_element());
  // -1 -2 -3: cancel_one() took the oldest wait, cancel() the other two.
  BOOST_TEST(ours == (std::vector<int>{1, 1, 0, 1, 2, 0, -1, -2, -3, 1, -4, 5, 6, 7, 0}),
             boost::test_tools::per_element());
}

// ---- the members Asio deprecated ----

#if !defined(BOOST_ASIO_NO_DEPRECATED) && BOOST_ASIO_VERSION < 103400
BOOST_AUTO_TEST_CASE(deprecated_members_behave_as_their_replacements) {
  fixture f;
  asio_wheel::timer t(f.io, 5s);
  BOOST_TEST((t.expires_at() == t.expiry()));
  BOOST_TEST((t.expires_from_now() == 5s));
  f.advance(2s);
  BOOST_TEST((t.expires_from_now() == 3s));
  f.advance(4s);
  BOOST_TEST((t.expires_from_now() == -1s));
  t.expires_at(asio_wheel::timer::time_point::max());
  BOOST_TEST((t.expires_from_now() > 24h));
  t.expires_at(asio_wheel::timer::time_point::min());
  BOOST_TEST((t.expires_from_now() < -24h));

  journal j;
  error_code ec = asio::error::timed_out;
  t.async_wait(j.handler(1, f));
  BOOST_TEST(t.expires_from_now(1s) == 1u);
  BOOST_TEST((t.expiry() == f.svc.now() + 1s));
  t.async_wait(j.handler(2, f));
  BOOST_TEST(t.expires_from_now(2s, ec) == 1u);
  BOOST_TEST(!ec);
  t.async_wait(j.handler(3, f));
  ec = asio::error::timed_out;
  BOOST_TEST(t.expires_at(f.svc.now() + 3s, ec) == 1u);
  BOOST_TEST(!ec);
  t.async_wait(j.handler(4, f));
  t.async_wait(j.handler(5, f));
  ec = asio::error::timed_out;
  BOOST_TEST(t.cancel_one(ec) == 1u);
  BOOST_TEST(!ec);
  ec = asio::error::timed_out;
  BOOST_TEST(t.cancel(ec) == 1u);
  BOOST_TEST(!ec);
  f.settle();
  BOOST_REQUIRE(j.size() == 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    BOOST_TEST(j.at(i).id == static_cast<int>(i) + 1);
    BOOST_TEST(j.at(i).ec == aborted);
  }
}
#endif
