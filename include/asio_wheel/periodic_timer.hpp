// basic_periodic_timer: ticks at a fixed period, for heartbeats and keepalives.
//
// Tick k is due at its slot, start + k * period, plus an optional jitter drawn from
// uniform [0, min(jitter, period)); start is the construction time or the last reset().
// The schedule never drifts: however late a handler runs, the next slot is computed
// from the previous slot, never from the completion time (except with `delay`).
//
// A tick is evaluated when its entry comes due on the wheel (or at once, as if by
// post, when async_tick is called after its due time has passed). With `now` the
// service's clock then and `due` the tick's slot plus its jitter, `missed` = how many
// later slots have passed too, unobserved: floor((now - due) / period). A tick
// completed on time counts 0 when the period is at least the wheel's tick (rounding up
// to the tick delays it by less than a period); with a shorter period the wheel cannot
// complete every slot on its own, and the slots within its tick count. What follows
// depends on the policy, as with tokio's MissedTickBehavior:
//   skip   the next tick is the first slot after now; the `missed` ones are dropped.
//          With jitter, the first one whose jittered time is after now: the slot at or
//          before now whose jitter puts it later is kept (so a tick late by less than
//          its jitter loses no slot), and dropped if its jitter does not (the next
//          tick's `missed` counts it).
//   burst  the next tick is slot + period: the missed ticks complete one by one,
//          immediately, their `missed` counting down to 0.
//   delay  the schedule restarts from now: the next slot is now + period.
//
// Each tick completes one pending async_tick (several may be pending: they complete
// with consecutive ticks, in order). A timer with no pending async_tick is off the
// wheel and costs no wake-up; the ticks it does not observe are counted by the next.
// period(p) applies from the tick after the one already scheduled; reset() restarts
// the schedule at now + period. cancel() and destruction complete pending async_ticks
// with operation_aborted; per-operation cancellation (any type) works too.
//
// Costs: two wheel entries (the schedule, moved from tick to tick in O(1), and the list
// of pending async_ticks, off the slots); each async_tick allocates one operation from
// the handler's allocator (recycled by default) and nothing else.
//
// Moves carry the schedule and the pending async_ticks (see the move constructor).
//
// Thread safety: as basic_timer (one object not used from two threads at once). The
// timer must be destroyed before its execution context.
#ifndef ASIO_WHEEL_PERIODIC_TIMER_HPP
#define ASIO_WHEEL_PERIODIC_TIMER_HPP

#include <asio_wheel/detail/handler_op.hpp>
#include <asio_wheel/detail/periodic_state.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <asio_wheel/detail/config.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace asio_wheel {

template <class Executor = net::any_io_executor>
class basic_periodic_timer {
public:
  using executor_type = Executor;
  using clock_type = std::chrono::steady_clock;
  using duration = clock_type::duration;
  using time_point = clock_type::time_point;

  // The timer type when rebound to another executor.
  template <class OtherExecutor>
  struct rebind_executor {
    using other = basic_periodic_timer<OtherExecutor>;
  };

  // The first tick is due one period from now. std::invalid_argument if period <= 0.
  basic_periodic_timer(const executor_type& ex, duration period,
                       missed_tick policy = missed_tick::skip)
      : executor_(ex), state_(detail::shard_for(ex), checked(period), policy) {}

  template <class ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&,
                                                   net::execution_context&>,
                             int> = 0>
  basic_periodic_timer(ExecutionContext& ctx, duration period,
                       missed_tick policy = missed_tick::skip)
      : basic_periodic_timer(executor_type(ctx.get_executor()), period, policy) {}

  // The schedule (period, policy, jitter, the next tick) and the pending async_ticks
  // move along with the timer, which keeps its place on the wheel: nothing completes
  // or is posted. The moved-from timer keeps its executor, period, policy and jitter,
  // and is left as a new one: no pending ticks, the next due one period from now.
  basic_periodic_timer(basic_periodic_timer&& other) noexcept
      : executor_(other.executor_),
        state_(*other.state_.shard, other.state_.period, other.state_.policy) {
    state_.take_over(other.state_);
  }

  template <class OtherExecutor,
            std::enable_if_t<std::is_convertible_v<const OtherExecutor&, executor_type>, int> = 0>
  basic_periodic_timer(basic_periodic_timer<OtherExecutor>&& other) noexcept
      : executor_(other.executor_),
        state_(*other.state_.shard, other.state_.period, other.state_.policy) {
    state_.take_over(other.state_);
  }

  // Pending async_ticks of *this complete with operation_aborted; other's move over,
  // with its schedule.
  basic_periodic_timer& operator=(basic_periodic_timer&& other) {
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
  basic_periodic_timer& operator=(basic_periodic_timer<OtherExecutor>&& other) {
    basic_periodic_timer tmp(std::move(other));
    return *this = std::move(tmp);
  }

  // Pending async_ticks complete with operation_aborted.
  ~basic_periodic_timer() { state_.cancel_on_destruction(); }

  basic_periodic_timer(const basic_periodic_timer&) = delete;
  basic_periodic_timer& operator=(const basic_periodic_timer&) = delete;

  executor_type get_executor() noexcept { return executor_; }

  duration period() const {
    auto guard = state_.shard->lock();
    return state_.period;
  }

  // The new period applies from the tick after the one already scheduled.
  // std::invalid_argument if p <= 0.
  void period(duration p) {
    checked(p);
    auto guard = state_.shard->lock();
    state_.period = p;
  }

  // Restarts the schedule: the next tick is due at now + period (plus jitter); a
  // pending async_tick now waits for it. No handler is completed or posted.
  void reset() { state_.reset(); }

  // Each tick from the next one on is due at its slot + uniform [0, j), j capped at the
  // period; 0 (the default) turns jitter off. Negative values count as 0.
  void jitter(duration j) {
    auto guard = state_.shard->lock();
    state_.jitter = std::max(j, duration::zero());
  }

  // Pending async_ticks complete with operation_aborted; returns how many.
  std::size_t cancel() { return state_.cancel(); }

  // Waits for the next tick. Completion signature
  // void(error_code, std::uint64_t missed); any completion token.
  template <class Token>
  auto async_tick(Token&& token) {
    return net::async_initiate<Token, void(error_code, std::uint64_t)>(
        initiate_async_tick(this), token);
  }

private:
  template <class OtherExecutor>
  friend class basic_periodic_timer;

  static duration checked(duration period) {
    if (period <= duration::zero())
      throw std::invalid_argument("asio_wheel: periodic_timer period must be positive");
    return period;
  }

  // The initiation object, with the I/O executor that adapters look for.
  class initiate_async_tick {
  public:
    using executor_type = Executor;

    explicit initiate_async_tick(basic_periodic_timer* self) noexcept : self_(self) {}

    executor_type get_executor() const noexcept { return self_->executor_; }

    template <class TickHandler>
    void operator()(TickHandler&& handler) const {
      detail::periodic_state& s = self_->state_;
      detail::wheel_op* op = detail::make_handler_op<detail::tick_op>(
          std::forward<TickHandler>(handler), *s.shard, s.ticks, self_->executor_);
      s.start_tick(*op);
    }

  private:
    basic_periodic_timer* self_;
  };

  executor_type executor_;
  detail::periodic_state state_;
};

// The periodic timer on the default executor: what users name.
using periodic_timer = basic_periodic_timer<>;

} // namespace asio_wheel

#endif
