// periodic_state: one periodic timer's schedule and pending ticks, and its operations on
// its shard. The public basic_periodic_timer is a front end over it.
//
// Two wheel entries: the state itself, linked at the next tick's due time while a tick
// is pending, whose on_due (tick_due) evaluates the tick; and `ticks`, the wait_list of
// pending async_ticks, parked on the never list while non-empty (so that shutdown finds
// them), whose last op leaving by an abort takes the state off too. Every field but
// `shard` and `policy` changes only under the shard's lock; those two change only in a
// move (take_over), on the timer's own thread: `shard` while the state is off the wheel
// (no step reaches it), `policy` under the lock.
#ifndef ASIO_WHEEL_DETAIL_PERIODIC_STATE_HPP
#define ASIO_WHEEL_DETAIL_PERIODIC_STATE_HPP

#include <asio_wheel/detail/wheel_clock.hpp>
#include <asio_wheel/detail/wheel_op.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

namespace asio_wheel {

// What a periodic timer does about ticks whose slot passed while nobody was waiting
// (or while the context was busy): see basic_periodic_timer.
enum class missed_tick { skip, burst, delay };

namespace detail {

// The operation of one async_tick: carries the missed count to the handler.
class tick_op : public wheel_op {
public:
  explicit tick_op(func_type f) noexcept : wheel_op(f) {}
  std::uint64_t missed = 0;
  std::tuple<std::uint64_t> take_values() noexcept { return {missed}; }
};

// Each timer's jitter stream gets its own seed: deterministic for a given order of
// construction (so tests reproduce), different between timers (so they spread).
inline std::atomic<std::uint64_t> periodic_seed{0x853c49e6748fea9bULL};

struct periodic_state : due_entry {
  // The first tick is due one period from now; period > 0 (checked by the timer).
  periodic_state(wheel_shard& s, steady_duration p, missed_tick how) noexcept
      : shard(&s), ticks(s.index(), *this), period(p), policy(how) {
    on_due = &periodic_state::tick_due;
    rng = new_seed();
    next = saturating_add(s.now(), p);
  }

  wheel_shard* shard;
  scheduled_wait_list ticks;    // pending async_ticks; this entry is their schedule
  steady_time next{};           // slot of the next tick to complete
  steady_time due{};            // next + its jitter, while the entry is on the wheel
  // skip: when the last tick was evaluated; a next tick drawn at or before it is
  // dropped (schedule_next_locked). Only skip's evaluation sets it (policy is const):
  // min() for the other policies, and after a reset.
  steady_time skip_through = steady_time::min();
  // Slots skip dropped that way, counted in the next completion's `missed`: they passed
  // unobserved too.
  std::uint64_t dropped = 0;
  steady_duration period{};     // > 0
  steady_duration jitter{};     // >= 0; used capped at period
  missed_tick policy;
  std::uint64_t rng = 0;        // splitmix64 state of the jitter

  // Admits `op` (an async_tick) and, if no tick is scheduled, schedules the next one.
  // If it throws (a post on a user's executor), `op` is destroyed and the timer is as
  // it was.
  void start_tick(wheel_op& op) {
    auto guard = shard->lock();
    if (!shard->admit(guard, ticks, op, steady_time::max())) return;
    if (linked()) return;
    try {
      schedule_next_locked();
    } catch (...) {
      shard->unschedule_locked(*this);
      shard->withdraw(guard, ticks, op);
      throw;
    }
  }

  // Pending ticks complete with operation_aborted; returns how many.
  std::size_t cancel() {
    auto guard = shard->lock();
    // The ticks first: if the abort's post throws, the schedule is still there too.
    const std::size_t n = shard->abort_all_locked(ticks);
    shard->unschedule_locked(*this);
    return n;
  }

  // The same for the timer's destructor, which must not throw: if the step's post
  // throws, the ticks still leave (wheel_shard::abort_all_on_destruction_locked).
  void cancel_on_destruction() noexcept {
    auto guard = shard->lock();
    shard->abort_all_on_destruction_locked(ticks);
    shard->unschedule_locked(*this);
  }

  // Restarts the schedule: the next tick is due at now + period.
  void reset() {
    const steady_time now = shard->now();
    auto guard = shard->lock();
    next = saturating_add(now, period);
    skip_through = steady_time::min();
    if (linked()) schedule_next_locked();
  }

  // The timer moved from `from` to *this, which has no pending ticks and is off the
  // wheel (new, or cancelled by a move assignment): takes over its shard, schedule,
  // place on the wheel and pending ticks. `from` keeps its period, policy and jitter,
  // and is left as a new timer would be: no ticks, the next due one period from now.
  void take_over(periodic_state& from) noexcept {
    assert(ticks.ops.empty() && !linked());
    // A move assignment from a timer on another shard: *this goes there first.
    if (from.shard != shard) {
      wheel_shard::move_list_to_shard(ticks, *from.shard);
      shard = from.shard;
    }
    const steady_time now = shard->now();
    auto guard = shard->lock();
    next = from.next;
    due = from.due;
    skip_through = from.skip_through;
    dropped = from.dropped;
    period = from.period;
    jitter = from.jitter;
    policy = from.policy;
    rng = from.rng;
    // The schedule first: while `from` is linked, its ticks are not empty.
    if (from.linked()) shard->move_entry_locked(from, *this);
    if (!from.ticks.ops.empty()) shard->move_list_locked(from.ticks, ticks);
    from.next = saturating_add(now, from.period);
    from.skip_through = steady_time::min();
    from.dropped = 0;
    from.rng = new_seed();
  }

private:
  static std::uint64_t new_seed() noexcept {
    return periodic_seed.fetch_add(0x9e3779b97f4a7c15ULL, std::memory_order_relaxed);
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

  // Puts the entry on the wheel for the next tick (lock held). A tick that skip kept
  // for its jitter, and whose jitter then put it at or before the evaluation that kept
  // it, had passed then: skip drops it, and any other slot up to that time, for the
  // first slot after it (it would otherwise complete at once, a burst, which skip never
  // makes), and the next completion counts them as missed.
  void schedule_next_locked() {
    due = jittered(next);
    if (due <= skip_through) {
      // next <= due <= skip_through: the product stays below skip_through - next.
      const auto behind = (skip_through - next) / period;
      next = saturating_add(next + behind * period, period);
      dropped += static_cast<std::uint64_t>(behind) + 1;
      due = jittered(next);
    }
    shard->schedule_locked(*this, due);
  }

  // The tick came due (lock held): hands it to the first pending async_tick and moves
  // the schedule on by the policy.
  static std::size_t tick_due(due_entry& e, due_step& step) {
    auto& s = static_cast<periodic_state&>(e);
    // Linked only while a tick waits: the per-operation cancellation of the last one
    // takes this entry off too (scheduled_wait_list).
    assert(!s.ticks.ops.empty());
    if (s.ticks.ops.empty()) return 1;
    const steady_time now = step.now;
    const steady_time slot = s.next;
    // The later slots whose time has passed: the ticks `missed` counts. Never one for a
    // tick completed on time with a period of at least the wheel's tick (the wheel is
    // less than a tick late, by rounding); with a shorter period, the slots within that
    // tick. skip drops exactly these, burst completes them next, delay starts afresh.
    const auto passed = now > s.due ? (now - s.due) / s.period : 0;
    const auto missed = static_cast<std::uint64_t>(passed);
    switch (s.policy) {
    case missed_tick::burst:
      s.next = saturating_add(slot, s.period);
      break;
    case missed_tick::skip:
      // slot + passed * period <= now, so only the last step can overflow. The result
      // is after now - period: at worst one slot whose jittered time may still be
      // ahead, and if the jitter drawn for it is not, it is dropped too (skip_through).
      s.next = saturating_add(slot + passed * s.period, s.period);
      s.skip_through = now;
      break;
    case missed_tick::delay:
      s.next = saturating_add(now, s.period);
      break;
    }
    static_cast<tick_op&>(s.ticks.ops.front()).missed = missed + std::exchange(s.dropped, 0);
    step.shard.complete_front_locked(s.ticks, step.out);
    if (!s.ticks.ops.empty()) s.schedule_next_locked();
    return 1;
  }
};

} // namespace detail

} // namespace asio_wheel

#endif
