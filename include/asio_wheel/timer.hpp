// basic_timer: a drop-in for Asio's steady_timer on the context's wheel.
//
// Same interface and semantics as steady_timer, i.e. basic_waitable_timer<steady_clock>
// of Boost 1.81 through 1.90 (expiry, expires_at/after, cancel, cancel_one, the blocking
// wait, async_wait with any completion token, per-operation cancellation of every type,
// several waits at once, moves, rebind_executor, traits_type; the members Asio deprecated
// exist only where Asio has them: before Boost 1.87 and without BOOST_ASIO_NO_DEPRECATED),
// plus reset_at/reset_after: move the expiry of the pending waits without aborting them
// (O(1), no allocation, no handler run or posted), the idle-connection hot path.
//
// Guarantees: a wait completes with success at or after its expiry (never before, by
// wheel_service::now()), within about one tick of it while the context keeps up, and
// exactly once. A wait whose expiry has passed completes as if by post, never inside
// async_wait, and cancel(), cancel_one(), expires_*() and reset_*() still reach it until
// the service hands it to its executor; from then on they do not count it and it
// completes with success. Expiry times are rounded up to the wheel's tick for async_wait.
//
// The blocking wait() returns once the service's clock has reached expiry() (not rounded
// to the tick), at once if it already has; it never fails (the error_code overload
// clears ec) and does not involve the context, which need not be running. With the
// steady clock it sleeps (std::this_thread::sleep_until, repeated until
// steady_clock::now() >= expiry(), as Asio does). With the manual clock only advance()
// moves time, so wait() polls wheel_service::now() with a short sleep (50 us growing to
// 1 ms) until another thread has advanced it to expiry(). Waiting on a future expiry
// thus needs a second thread that advances (on the only thread, wait() never returns)
// and a wheel that takes its lock (not a context with concurrency hint UNSAFE, nor
// locking_mode::off).
//
// Costs: async_wait O(1); its operation lives in the timer when the handler is small
// (up to 16 bytes) and names no allocator, else it is one allocation from the handler's
// allocator (the per-thread cache when it names none); cancel O(1)
// per wait, cancel_one O(1), their aborted handlers batched into one posted step;
// reset_* O(1); wait() blocks its thread and uses no wheel entry or operation.
//
// Thread safety: like steady_timer, one timer object must not be used from two threads
// at once (wait() included); different timers on one context may be used from any
// threads. A cancellation slot may be emitted from any thread while the timer object
// exists. The timer must be destroyed before its execution context.
#ifndef ASIO_WHEEL_TIMER_HPP
#define ASIO_WHEEL_TIMER_HPP

#include <asio_wheel/detail/handler_op.hpp>
#include <asio_wheel/detail/timer_state.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <asio_wheel/detail/config.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <thread>
#include <type_traits>
#include <utility>

namespace asio_wheel {

template <class Executor = net::any_io_executor>
class basic_timer {
public:
  using executor_type = Executor;
  using clock_type = std::chrono::steady_clock;
  using duration = clock_type::duration;
  using time_point = clock_type::time_point;
  // As steady_timer's: basic_waitable_timer's default WaitTraits for the clock.
  using traits_type = net::wait_traits<clock_type>;

  // The timer type when rebound to another executor.
  template <class OtherExecutor>
  struct rebind_executor {
    using other = basic_timer<OtherExecutor>;
  };

  // A timer with no expiry set (time_point()), whose waits would complete at once.
  explicit basic_timer(const executor_type& ex)
      : executor_(ex), state_(detail::shard_for(ex)) {}

  template <class ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&,
                                                   net::execution_context&>,
                             int> = 0>
  explicit basic_timer(ExecutionContext& ctx) : basic_timer(executor_type(ctx.get_executor())) {}

  basic_timer(const executor_type& ex, time_point expiry) : basic_timer(ex) {
    state_.set_expiry(expiry);
  }

  basic_timer(const executor_type& ex, duration expiry) : basic_timer(ex) {
    state_.set_expiry(state_.deadline_after(expiry));
  }

  template <class ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&,
                                                   net::execution_context&>,
                             int> = 0>
  basic_timer(ExecutionContext& ctx, time_point expiry)
      : basic_timer(executor_type(ctx.get_executor()), expiry) {}

  template <class ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&,
                                                   net::execution_context&>,
                             int> = 0>
  basic_timer(ExecutionContext& ctx, duration expiry)
      : basic_timer(executor_type(ctx.get_executor()), expiry) {}

  // Pending waits move along with the timer; the moved-from timer is left with no
  // waits and the same executor, as if newly constructed.
  basic_timer(basic_timer&& other) noexcept
      : executor_(other.executor_), state_(other.state_.shard()) {
    state_.take_over(other.state_);
  }

  template <class OtherExecutor,
            std::enable_if_t<std::is_convertible_v<const OtherExecutor&, executor_type>, int> = 0>
  basic_timer(basic_timer<OtherExecutor>&& other) noexcept
      : executor_(other.executor_), state_(other.state_.shard()) {
    state_.take_over(other.state_);
  }

  // Pending waits of *this complete with operation_aborted; other's waits move over.
  basic_timer& operator=(basic_timer&& other) {
    if (this != &other) {
      state_.cancel();
      executor_ = other.executor_;
      state_.take_over(other.state_);
    }
    return *this;
  }

  // As above, from a timer on another executor that converts to ours.
  template <class OtherExecutor,
            std::enable_if_t<std::is_convertible_v<const OtherExecutor&, executor_type>, int> = 0>
  basic_timer& operator=(basic_timer<OtherExecutor>&& other) {
    basic_timer tmp(std::move(other));
    return *this = std::move(tmp);
  }

  // Pending waits complete with operation_aborted.
  ~basic_timer() { state_.cancel_on_destruction(); }

  basic_timer(const basic_timer&) = delete;
  basic_timer& operator=(const basic_timer&) = delete;

  const executor_type& get_executor() noexcept { return executor_; }

  time_point expiry() const { return state_.expiry(); }

  // Sets the expiry; pending waits complete with operation_aborted. Returns how many.
  std::size_t expires_at(time_point t) { return state_.expires_at(t); }

  // expires_at(now() + d), saturated: duration::max() means never, a negative d means
  // already expired.
  std::size_t expires_after(duration d) { return expires_at(state_.deadline_after(d)); }

  // Pending waits complete with operation_aborted. Returns how many.
  std::size_t cancel() { return state_.cancel(); }

  // The oldest pending wait completes with operation_aborted. Returns 1, or 0 if none.
  std::size_t cancel_one() { return state_.cancel_one(); }

  // Blocks the calling thread until the service's clock reaches expiry() (see the top of
  // this file); returns at once if it has already. Never fails, so never throws (where
  // steady_timer's would throw only for an error of select(), e.g. EINTR).
  void wait() {
    error_code ec;
    wait(ec);
  }

  // As wait(); ec is cleared.
  void wait(error_code& ec) {
    ec = error_code();
    const time_point t = state_.expiry();
    if (state_.shard().options().clock == clock_mode::steady) {
      // sleep_until may return early (a signal, a spurious wake-up): look again.
      while (clock_type::now() < t) std::this_thread::sleep_until(t);
      return;
    }
    // Manual clock: only advance(), on another thread, moves time.
    auto pause = std::chrono::microseconds(50);
    while (state_.shard().now() < t) {
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
    }
  }

#if !defined(BOOST_ASIO_NO_DEPRECATED) && !defined(ASIO_NO_DEPRECATED) && \
    ASIO_WHEEL_ASIO_VERSION < 103400
  // Asio's deprecated members (removed in Boost 1.87), for code that still uses them.
  // None of these operations can fail: each clears ec.
  std::size_t cancel(error_code& ec) {
    ec = error_code();
    return cancel();
  }
  std::size_t cancel_one(error_code& ec) {
    ec = error_code();
    return cancel_one();
  }
  // expiry().
  time_point expires_at() const { return expiry(); }
  std::size_t expires_at(time_point t, error_code& ec) {
    ec = error_code();
    return expires_at(t);
  }
  // expiry() - now by the service's clock, saturated to the duration's range.
  duration expires_from_now() const {
    const duration::rep a = state_.expiry().time_since_epoch().count();
    const duration::rep b = state_.shard().now().time_since_epoch().count();
    if (b < 0 && a > duration::max().count() + b) return duration::max();
    if (b > 0 && a < duration::min().count() + b) return duration::min();
    return duration(a - b);
  }
  // expires_after(d).
  std::size_t expires_from_now(duration d) { return expires_after(d); }
  std::size_t expires_from_now(duration d, error_code& ec) {
    ec = error_code();
    return expires_after(d);
  }
#endif

  // Moves the expiry and keeps the pending waits: they now complete at t. O(1); no
  // handler is completed, allocated or posted, and no exception comes out of the wheel
  // (a step its executor cannot take now comes with the next one).
  void reset_at(time_point t) { state_.reset_at(t); }

  // reset_at(now() + d), saturated like expires_after.
  void reset_after(duration d) {
    const auto [t, not_due_before] = state_.deadline_after_with_bound(d);
    state_.reset_at(t, not_due_before);
  }

  // Starts an asynchronous wait for the expiry. Completion signature
  // void(error_code); any completion token, defaulting to the
  // executor's default token (as_default_on).
  template <class WaitToken = net::default_completion_token_t<executor_type>>
  auto async_wait(WaitToken&& token = net::default_completion_token_t<executor_type>()) {
    return net::async_initiate<WaitToken, void(error_code)>(
        initiate_async_wait(this), token);
  }

private:
  template <class>
  friend class basic_timer;

  // The initiation object, with the I/O executor that adapters (cancel_after,
  // as_default_on...) look for.
  class initiate_async_wait {
  public:
    using executor_type = Executor;

    explicit initiate_async_wait(basic_timer* self) noexcept : self_(self) {}

    executor_type get_executor() const noexcept { return self_->executor_; }

    template <class WaitHandler>
    void operator()(WaitHandler&& handler) const {
      detail::timer_state& state = self_->state_;
      detail::wheel_op* op = detail::make_handler_op<detail::plain_wait_op>(
          std::forward<WaitHandler>(handler), state.shard(), state, self_->executor_,
          state.free_inline_buffer());
      state.start_wait(*op);
    }

  private:
    basic_timer* self_;
  };

  executor_type executor_;
  detail::timer_state state_;
};

// The timer on the default executor: what users name.
using timer = basic_timer<>;

} // namespace asio_wheel

#endif
