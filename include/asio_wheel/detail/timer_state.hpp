// timer_state: one timer's expiry and pending waits, and the timer's operations on its
// shard. The public basic_timer is a front end over it that adds the executor.
//
// The state is itself the timer's wait_list: linked on the wheel, at the expiry's tick,
// exactly while waits are pending (parked on the never list for time_point::max()).
// When it comes due, every pending wait completes with success.
#ifndef ASIO_WHEEL_DETAIL_TIMER_STATE_HPP
#define ASIO_WHEEL_DETAIL_TIMER_STATE_HPP

#include <asio_wheel/detail/prefetch.hpp>
#include <asio_wheel/detail/wheel_clock.hpp>
#include <asio_wheel/detail/wheel_op.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <atomic>
#include <cstddef>

namespace asio_wheel::detail {

struct timer_state : wait_list {
  explicit timer_state(wheel_shard& s) noexcept : wait_list(s.index()) {}

  // Where the timer lives; changes only by a move assignment (see take_over). Named by
  // its index (in the entry's padding), which keeps the timer a pointer smaller.
  wheel_shard& shard() const noexcept { return wheel_shard::at(shard_index()); }

  // now() + d on the timer's shard, saturated, with the not_due_before() reading it
  // started from (wheel_shard::deadline_after_with_bound).
  //
  // The clock is read before anything is loaded from the state, with the state's lines
  // (two or three, wherever it starts) asked for first. A clock read waits for the loads issued
  // before it, but not for prefetches: so the state's cache miss, for a timer not
  // touched lately, overlaps the read instead of coming before it, and the misses of
  // the reset that follows are one latency, not two (W2 reset_after at 1M timers: 194 ->
  // 125 ns on this project's VM; W11's touch_clock_floor measures the serialization).
  std::pair<steady_time, steady_time> deadline_after_with_bound(steady_duration d) const {
    const steady_time steady_base = steady_base_before_loads();
    return shard().deadline_after_with_bound(d, steady_base);
  }
  steady_time deadline_after(steady_duration d) const {
    return deadline_after_with_bound(d).first;
  }

  // The expiry. Written by the timer's own thread only: under the shard's lock, except
  // for reset_at's raise. Read by that thread, and by a step (expired), which
  // acquires it: having read an expiry, it sees the deadline tick raised for it.
  steady_time expiry() const noexcept { return expiry_.load(std::memory_order_relaxed); }
  void set_expiry(steady_time t) noexcept { expiry_.store(t, std::memory_order_release); }

  // The buffer for the operation of one pending wait, when it fits (see
  // handler_op::may_live_inline): then a pending wait costs no memory beyond the
  // timer, and an expiry reads the timer's own cache lines, not an op elsewhere.
  // Null while an op lives there. Called by the timer's own thread, without the lock.
  void* free_inline_buffer() noexcept { return holds_inline_op() ? nullptr : inline_op_; }

  // Whether a wait may be pending, as the timer's own thread knows it: set by
  // start_wait, cleared by the calls that leave no wait under the lock. A step that
  // completes the waits leaves it set, so it may say yes wrongly, never no: while it is
  // clear, no wait is pending and the timer is not on the wheel, nothing but its own
  // thread touches the timer, and cancel and expires_at need no lock (as Asio's timers
  // skip theirs). W1's churn takes two locks per wait instead of three.
  bool may_have_waits() const noexcept { return owner_thread_byte != 0; }

  // Admits `op` (a wait): it completes at the expiry (at once, as if by post, if that
  // has passed), with too_many_timers over max_pending.
  void start_wait(wheel_op& op);
  // Every pending wait completes with operation_aborted; returns how many.
  std::size_t cancel() { return may_have_waits() ? cancel_locking() : 0; }
  // The same for the timer's destructor, which must not throw: if the step's post
  // throws, the waits still leave (wheel_shard::abort_all_on_destruction_locked).
  void cancel_on_destruction() noexcept {
    if (may_have_waits()) cancel_on_destruction_locking();
  }
  // The oldest pending wait does; returns 1, or 0 if none.
  std::size_t cancel_one();
  // cancel(), then the new expiry; returns how many were aborted.
  std::size_t expires_at(steady_time t) {
    if (may_have_waits()) return expires_at_locking(t);
    set_expiry(t);
    return 0;
  }
  // Moves the expiry; pending waits stay and complete at the new one. O(1).
  //
  // A later finite expiry, the idle-connection path, takes no lock: it raises the
  // entry's deadline tick, then stores the expiry (wheel::raise). The lock's atomic
  // instructions would order the CPU's memory accesses on every reset, so that the
  // cache misses of resets to random timers could not overlap. Only while the old
  // expiry is still ahead of the clock (not_due_before), so that the wheel cannot have
  // taken the entry as due: then a later deadline leaves it in its slot (the lazy rule),
  // or, unlinked (no wait), only the expiry counts. Should the wheel take it as due
  // meanwhile (another thread's step, in the nanoseconds between), the step sees the
  // later expiry and puts it back (expired), or read the expiry before the store and
  // completes the waits: handed over before the reset, which then finds none, as
  // documented. Manual mode always takes the lock.
  void reset_at(steady_time t) {
    const steady_time steady_base = steady_base_before_loads();
    reset_at(t, shard().not_due_before(steady_base));
  }
  // reset_at(t), where `not_due_before` is a not_due_before() reading (reset_after
  // passes the one its deadline started from: one clock read, not two).
  void reset_at(steady_time t, steady_time not_due_before) {
    wheel_shard& shard = this->shard();
    const steady_time old = expiry();
    if (t >= old && t != steady_time::max() && old > not_due_before) {
      shard.raise(*this, t);
      set_expiry(t);
      return;
    }
    auto guard = shard.lock();
    set_expiry(t);
    // Takes effect whatever the executor does: a step or an arming it cannot take now
    // comes with the next call that needs one (a reset has no handler to protect).
    if (!ops.empty()) shard.schedule_nothrow_locked(*this, t);
  }
  // The timer moved from `from` (on shard `from.shard()`) to *this, which has no waits:
  // takes over its shard, expiry, place on the wheel and waits. `from` is left as a new
  // timer on its shard.
  void take_over(timer_state& from) noexcept;

  // The entry came due (the shard's step, lock held): every wait completes with
  // success, unless a reset raised the expiry past step.now meanwhile.
  static std::size_t expired(timer_state& timer, due_step& step);

private:
  // wheel_clock::steady_deadline_base(), read before anything is loaded from the state,
  // with its lines asked for (see deadline_after_with_bound).
  steady_time steady_base_before_loads() const noexcept {
    prefetch_bytes(this, sizeof(*this));
    return wheel_clock::steady_deadline_base();
  }
  void set_may_have_waits(bool on) noexcept { owner_thread_byte = on ? 1 : 0; }
  std::size_t cancel_locking();
  void cancel_on_destruction_locking() noexcept;
  std::size_t expires_at_locking(steady_time t);

  std::atomic<steady_time> expiry_{steady_time()};

  alignas(wheel_op) unsigned char inline_op_[inline_op_bytes];
};
// What a timer costs beyond its executor (W4): the wheel node with the shard's index in
// its padding (32), the wait list (8), the expiry (8) and one wait's op and handler
// (32). A field added here is a field every pending wait pays for.
static_assert(sizeof(void*) != 8 || sizeof(timer_state) == 80,
              "a timer's state is 80 bytes on 64-bit platforms");

} // namespace asio_wheel::detail

#endif
