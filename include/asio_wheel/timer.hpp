// basic_timer: a drop-in for boost::asio::steady_timer on the context's wheel.
//
// Same interface and semantics as steady_timer (expiry, expires_at/after, cancel,
// async_wait with any completion token, per-operation cancellation of every type,
// several waits at once), plus reset_at/reset_after: move the expiry of the pending
// waits without aborting them (O(1), no allocation, no handler run or posted), the
// idle-connection hot path.
//
// Guarantees: a wait completes with success at or after its expiry (never before, by
// wheel_service::now()), within about one tick of it while the context keeps up, and
// exactly once. A wait whose expiry has passed completes as if by post, never inside
// async_wait, and cancel(), expires_*() and reset_*() still reach it until the service
// hands it to its executor; from then on cancel() does not count it and it completes
// with success. Expiry times are rounded up to the wheel's tick.
//
// Costs: async_wait O(1) plus one allocation from the handler's allocator; cancel O(1)
// per wait, its aborted handlers batched into one posted step; reset_* O(1).
//
// Thread safety: like steady_timer, one timer object must not be used from two threads
// at once; different timers on one context may be used from any threads. A cancellation
// slot may be emitted from any thread while the timer object exists.
// The timer must be destroyed before its execution context.
#ifndef ASIO_WHEEL_TIMER_HPP
#define ASIO_WHEEL_TIMER_HPP

#include <asio_wheel/detail/handler_op.hpp>
#include <asio_wheel/detail/wait_op.hpp>
#include <asio_wheel/wheel_service.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace asio_wheel {

template <class Executor = boost::asio::any_io_executor>
class basic_timer {
public:
  using executor_type = Executor;
  using clock_type = std::chrono::steady_clock;
  using duration = clock_type::duration;
  using time_point = clock_type::time_point;

  // The timer type when rebound to another executor.
  template <class OtherExecutor>
  struct rebind_executor {
    using other = basic_timer<OtherExecutor>;
  };

  // A timer with no expiry set (time_point()), whose waits would complete at once.
  explicit basic_timer(const executor_type& ex)
      : executor_(ex), service_(&detail::use_wheel(ex)) {}

  template <class ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&,
                                                   boost::asio::execution_context&>,
                             int> = 0>
  explicit basic_timer(ExecutionContext& ctx) : basic_timer(executor_type(ctx.get_executor())) {}

  basic_timer(const executor_type& ex, time_point expiry) : basic_timer(ex) {
    entry_.expiry = expiry;
  }

  basic_timer(const executor_type& ex, duration expiry) : basic_timer(ex) {
    entry_.expiry = service_->deadline_after(expiry);
  }

  template <class ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&,
                                                   boost::asio::execution_context&>,
                             int> = 0>
  basic_timer(ExecutionContext& ctx, time_point expiry)
      : basic_timer(executor_type(ctx.get_executor()), expiry) {}

  template <class ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&,
                                                   boost::asio::execution_context&>,
                             int> = 0>
  basic_timer(ExecutionContext& ctx, duration expiry)
      : basic_timer(executor_type(ctx.get_executor()), expiry) {}

  // Pending waits move along with the timer; the moved-from timer is left with no
  // waits and the same executor, as if newly constructed.
  basic_timer(basic_timer&& other) noexcept
      : executor_(other.executor_), service_(other.service_) {
    service_->move_entry(other.entry_, entry_);
  }

  template <class OtherExecutor,
            std::enable_if_t<std::is_convertible_v<const OtherExecutor&, executor_type>, int> = 0>
  basic_timer(basic_timer<OtherExecutor>&& other) noexcept
      : executor_(other.executor_), service_(other.service_) {
    service_->move_entry(other.entry_, entry_);
  }

  // Pending waits of *this complete with operation_aborted; other's waits move over.
  basic_timer& operator=(basic_timer&& other) {
    if (this != &other) {
      service_->cancel(entry_);
      executor_ = other.executor_;
      service_ = other.service_;
      service_->move_entry(other.entry_, entry_);
    }
    return *this;
  }

  // Pending waits complete with operation_aborted.
  ~basic_timer() { service_->cancel(entry_); }

  basic_timer(const basic_timer&) = delete;
  basic_timer& operator=(const basic_timer&) = delete;

  executor_type get_executor() noexcept { return executor_; }

  time_point expiry() const { return entry_.expiry; }

  // Sets the expiry; pending waits complete with operation_aborted. Returns how many.
  std::size_t expires_at(time_point t) { return service_->expires_at(entry_, t); }

  // expires_at(now() + d), saturated: duration::max() means never, a negative d means
  // already expired.
  std::size_t expires_after(duration d) { return expires_at(service_->deadline_after(d)); }

  // Pending waits complete with operation_aborted. Returns how many.
  std::size_t cancel() { return service_->cancel(entry_); }

  // Moves the expiry and keeps the pending waits: they now complete at t. O(1); no
  // handler is completed, allocated or posted.
  void reset_at(time_point t) { service_->reset_at(entry_, t); }

  // reset_at(now() + d), saturated like expires_after.
  void reset_after(duration d) { service_->reset_at(entry_, service_->deadline_after(d)); }

  // Starts an asynchronous wait for the expiry. Completion signature
  // void(boost::system::error_code); any completion token, defaulting to the
  // executor's default token (as_default_on).
  template <class WaitToken = boost::asio::default_completion_token_t<executor_type>>
  auto async_wait(WaitToken&& token = boost::asio::default_completion_token_t<executor_type>()) {
    return boost::asio::async_initiate<WaitToken, void(boost::system::error_code)>(
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
      wheel_service& svc = *self_->service_;
      detail::wait_op* op = detail::make_handler_op<detail::plain_wait_op>(
          std::forward<WaitHandler>(handler), svc, self_->entry_, self_->executor_);
      svc.start_wait(self_->entry_, op);
    }

  private:
    basic_timer* self_;
  };

  executor_type executor_;
  wheel_service* service_;
  detail::wait_entry entry_;
};

// The timer on the default executor: what users name.
using timer = basic_timer<>;

} // namespace asio_wheel

#endif
