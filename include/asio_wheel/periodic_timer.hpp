// basic_periodic_timer: ticks at a fixed period, for heartbeats and keepalives.
//
// Tick k is due at its slot, start + k * period, plus an optional jitter drawn from
// uniform [0, min(jitter, period)); start is the construction time or the last reset().
// The schedule never drifts: however late a handler runs, the next slot is computed
// from the previous slot, never from the completion time (except with `delay`).
//
// A tick is evaluated when its entry comes due on the wheel (or at once, as if by
// post, when async_tick is called after its due time has passed). With `now` the
// service's clock then and `due` the tick's slot plus its jitter, rounded up to the
// wheel's tick (the first time the wheel can complete it), `missed` = how many periods
// late it is: floor((now - due) / period), 0 for a tick on time. So rounding never
// counts, not even with a period shorter than the tick. What follows depends on the
// policy, as with tokio's MissedTickBehavior:
//   skip   the next tick is the first slot after now; the `missed` ones are dropped.
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
// Costs: one wheel entry for the timer, moved from tick to tick in O(1); each
// async_tick allocates one operation from the handler's allocator (recycled by default)
// and nothing else.
//
// Thread safety: as basic_timer (one object not used from two threads at once). The
// timer must be destroyed before its execution context.
#ifndef ASIO_WHEEL_PERIODIC_TIMER_HPP
#define ASIO_WHEEL_PERIODIC_TIMER_HPP

#include <asio_wheel/detail/handler_op.hpp>
#include <asio_wheel/detail/wait_op.hpp>
#include <asio_wheel/wheel_service.hpp>

#include <asio_wheel/detail/config.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

namespace asio_wheel {

// What a periodic timer does about ticks whose slot passed while nobody was waiting
// (or while the context was busy): see basic_periodic_timer.
enum class missed_tick { skip, burst, delay };

namespace detail {

using steady_time = std::chrono::steady_clock::time_point;
using steady_duration = std::chrono::steady_clock::duration;

// The operation of one async_tick: carries the missed count to the handler.
class tick_op : public wait_op {
public:
  explicit tick_op(func_type f) noexcept : wait_op(f) {}
  std::uint64_t missed = 0;
  std::tuple<std::uint64_t> take_values() noexcept { return {missed}; }
};

// Each timer's jitter stream gets its own seed: deterministic for a given order of
// construction (so tests reproduce), different between timers (so they spread).
inline std::atomic<std::uint64_t> periodic_seed{0x853c49e6748fea9bULL};

// The schedule of one periodic timer. It is itself the timer's wheel entry, linked
// while an async_tick waits, at the next tick's slot plus jitter. Every field but
// `service` and `policy` changes only under the service lock.
struct periodic_state : service_entry {
  wheel_service* service = nullptr;
  wait_entry waits;             // pending async_ticks; on the never list while non-empty
  steady_time next{};           // slot of the next tick to complete
  steady_time due{};            // next + its jitter, while the entry is on the wheel
  steady_duration period{};     // > 0
  steady_duration jitter{};     // >= 0; used capped at period
  missed_tick policy = missed_tick::skip;
  std::uint64_t rng = 0;        // splitmix64 state of the jitter

  periodic_state() noexcept {
    on_due = &periodic_state::tick_due;
    rng = periodic_seed.fetch_add(0x9e3779b97f4a7c15ULL, std::memory_order_relaxed);
  }

  // The due time of the tick at `slot`: slot + uniform [0, min(jitter, period)).
  steady_time jittered(steady_time slot) noexcept {
    const auto span = static_cast<std::uint64_t>(std::min(jitter, period).count());
    if (span == 0) return slot;
    std::uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    // The modulo's bias is below span / 2^64: nil for any jitter a clock can express.
    return saturating_add(slot, steady_duration(static_cast<steady_duration::rep>(z % span)));
  }

  // Puts the entry on the wheel for the next tick (lock held).
  void arm_locked() {
    due = jittered(next);
    service->schedule_locked(*this, due);
  }

  // The tick came due (lock held): hands it to the first waiting async_tick and moves
  // the schedule on by the policy.
  static std::size_t tick_due(service_entry& e, op_queue& out, std::size_t) {
    auto& s = static_cast<periodic_state&>(e);
    if (s.waits.waits.empty()) return 0; // its only wait was cancelled per-operation
    const steady_time now = s.service->now_locked();
    const steady_time slot = s.next;
    // Late by whole periods after the first time the wheel could complete the tick.
    const steady_time on_time = s.service->rounded_up(s.due);
    const std::uint64_t missed =
        now > on_time ? static_cast<std::uint64_t>((now - on_time) / s.period) : 0;
    switch (s.policy) {
    case missed_tick::burst:
      s.next = saturating_add(slot, s.period);
      break;
    case missed_tick::skip: {
      // The slots whose time has passed, rounding or not, are dropped. slot + passed *
      // period <= now, so only the last step can overflow. The result is after now -
      // period: at worst one slot whose jittered time is still ahead.
      const auto passed = now > s.due ? (now - s.due) / s.period : 0;
      s.next = saturating_add(slot + passed * s.period, s.period);
      break;
    }
    case missed_tick::delay:
      s.next = saturating_add(now, s.period);
      break;
    }
    auto& op = static_cast<tick_op&>(s.waits.waits.front());
    s.waits.waits.pop_front();
    op.missed = missed;
    op.set_result(op_result::success);
    out.push_back(op);
    s.service->remove_pending_locked(op_result::success);
    if (s.waits.waits.empty())
      s.service->unschedule_locked(s.waits);
    else
      s.arm_locked();
    return 1;
  }
};

} // namespace detail

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
      : executor_(ex) {
    if (period <= duration::zero())
      throw std::invalid_argument("asio_wheel: periodic_timer period must be positive");
    wheel_service& svc = detail::use_wheel(ex);
    state_.service = &svc;
    state_.waits.expiry = time_point::max();
    state_.period = period;
    state_.policy = policy;
    state_.next = detail::saturating_add(svc.now(), period);
  }

  template <class ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&,
                                                   net::execution_context&>,
                             int> = 0>
  basic_periodic_timer(ExecutionContext& ctx, duration period,
                       missed_tick policy = missed_tick::skip)
      : basic_periodic_timer(executor_type(ctx.get_executor()), period, policy) {}

  // Pending async_ticks complete with operation_aborted.
  ~basic_periodic_timer() { cancel(); }

  // The wheel links the timer's state by address: not copyable, not movable.
  basic_periodic_timer(const basic_periodic_timer&) = delete;
  basic_periodic_timer& operator=(const basic_periodic_timer&) = delete;

  executor_type get_executor() noexcept { return executor_; }

  duration period() const {
    auto guard = state_.service->lock();
    return state_.period;
  }

  // The new period applies from the tick after the one already scheduled.
  // std::invalid_argument if p <= 0.
  void period(duration p) {
    if (p <= duration::zero())
      throw std::invalid_argument("asio_wheel: periodic_timer period must be positive");
    auto guard = state_.service->lock();
    state_.period = p;
  }

  // Restarts the schedule: the next tick is due at now + period (plus jitter); a
  // pending async_tick now waits for it. No handler is completed or posted.
  void reset() {
    wheel_service& svc = *state_.service;
    const time_point now = svc.now();
    auto guard = svc.lock();
    state_.next = detail::saturating_add(now, state_.period);
    if (state_.linked()) state_.arm_locked();
  }

  // Each tick from the next one on is due at its slot + uniform [0, j), j capped at the
  // period; 0 (the default) turns jitter off. Negative values count as 0.
  void jitter(duration j) {
    auto guard = state_.service->lock();
    state_.jitter = std::max(j, duration::zero());
  }

  // Pending async_ticks complete with operation_aborted; returns how many.
  std::size_t cancel() {
    wheel_service& svc = *state_.service;
    {
      auto guard = svc.lock();
      svc.unschedule_locked(state_);
    }
    return svc.cancel(state_.waits);
  }

  // Waits for the next tick. Completion signature
  // void(error_code, std::uint64_t missed); any completion token.
  template <class Token>
  auto async_tick(Token&& token) {
    return net::async_initiate<Token, void(error_code, std::uint64_t)>(
        initiate_async_tick(this), token);
  }

private:
  // The initiation object, with the I/O executor that adapters look for.
  class initiate_async_tick {
  public:
    using executor_type = Executor;

    explicit initiate_async_tick(basic_periodic_timer* self) noexcept : self_(self) {}

    executor_type get_executor() const noexcept { return self_->executor_; }

    template <class TickHandler>
    void operator()(TickHandler&& handler) const {
      detail::periodic_state& s = self_->state_;
      wheel_service& svc = *s.service;
      detail::wait_op* op = detail::make_handler_op<detail::tick_op>(
          std::forward<TickHandler>(handler), svc, s.waits, self_->executor_);
      auto guard = svc.lock();
      if (svc.stopped_locked()) {
        guard.unlock();
        op->destroy();
        return;
      }
      if (!svc.add_pending_locked()) {
        svc.complete_locked(op, detail::op_result::too_many);
        return;
      }
      s.waits.waits.push_back(*op);
      if (!s.waits.linked()) svc.schedule_locked(s.waits, time_point::max());
      if (!s.linked()) s.arm_locked();
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
