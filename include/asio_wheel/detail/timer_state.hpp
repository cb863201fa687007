// timer_state: one timer's expiry and pending waits, and the timer's operations on its
// shard. The public basic_timer is a front end over it that adds the executor.
//
// The state is itself the timer's wait_list: linked on the wheel, at the expiry's tick,
// exactly while waits are pending (parked on the never list for time_point::max()).
// When it comes due, every pending wait completes with success.
#ifndef ASIO_WHEEL_DETAIL_TIMER_STATE_HPP
#define ASIO_WHEEL_DETAIL_TIMER_STATE_HPP

#include <asio_wheel/detail/wheel_clock.hpp>
#include <asio_wheel/detail/wheel_op.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <cstddef>

namespace asio_wheel::detail {

struct timer_state : wait_list {
  explicit timer_state(wheel_shard& s) noexcept : shard(&s) {}

  wheel_shard* shard;     // where the timer lives; changes only by a move assignment
  steady_time expiry{};   // written under the shard's lock once waits may be pending

  // The buffer for the operation of one pending wait, when it fits (see
  // handler_op::may_live_inline): then a pending wait costs no memory beyond the
  // timer, and an expiry reads the timer's own cache lines, not an op elsewhere.
  // Null while an op lives there. Called by the timer's own thread, without the lock.
  void* free_inline_buffer() noexcept { return holds_inline_op() ? nullptr : inline_op_; }

  // Admits `op` (a wait): it completes at the expiry (at once, as if by post, if that
  // has passed), with too_many_timers over max_pending.
  void start_wait(wheel_op& op);
  // Every pending wait completes with operation_aborted; returns how many.
  std::size_t cancel();
  // The oldest pending wait does; returns 1, or 0 if none.
  std::size_t cancel_one();
  // cancel(), then the new expiry; returns how many were aborted.
  std::size_t expires_at(steady_time t);
  // Moves the expiry; pending waits stay and complete at the new one. O(1): a later
  // expiry only overwrites the expiry and the entry's deadline tick (the wheel's lazy
  // rule, inline), with no relink, no call and no clock read. The idle-connection path.
  void reset_at(steady_time t) {
    auto guard = shard->lock();
    expiry = t;
    if (!ops.empty()) shard->schedule_locked(*this, t);
  }
  // The timer moved from `from` (on shard `from.shard`) to *this, which has no waits:
  // takes over its shard, expiry, place on the wheel and waits.
  void take_over(timer_state& from) noexcept;

  // The expiry came (the shard's step, lock held): every wait completes with success.
  static std::size_t expired(timer_state& timer, due_step& step);

private:

  alignas(wheel_op) unsigned char inline_op_[inline_op_bytes];
};

} // namespace asio_wheel::detail

#endif
