// A timer's operations on its shard (see detail/timer_state.hpp).
#include <asio_wheel/detail/timer_state.hpp>

namespace asio_wheel::detail {

void timer_state::start_wait(wheel_op& op) {
  set_may_have_waits(true); // before the wait can exist (see may_have_waits)
  wheel_shard& shard = this->shard();
  auto guard = shard.lock();
  shard.admit(guard, *this, op, expiry());
}

std::size_t timer_state::cancel_locking() {
  wheel_shard& shard = this->shard();
  auto guard = shard.lock();
  const std::size_t n = shard.abort_all_locked(*this);
  set_may_have_waits(false); // after: if the abort throws, the waits are still there
  return n;
}

void timer_state::cancel_on_destruction_locking() noexcept {
  wheel_shard& shard = this->shard();
  auto guard = shard.lock();
  shard.abort_all_on_destruction_locked(*this);
  set_may_have_waits(false);
}

std::size_t timer_state::cancel_one() {
  if (!may_have_waits()) return 0;
  wheel_shard& shard = this->shard();
  auto guard = shard.lock();
  const std::size_t n = ops.empty() ? 0 : 1;
  if (n != 0) shard.abort_locked(*this, ops.front());
  set_may_have_waits(!ops.empty());
  return n;
}

std::size_t timer_state::expires_at_locking(steady_time t) {
  wheel_shard& shard = this->shard();
  auto guard = shard.lock();
  const std::size_t n = shard.abort_all_locked(*this);
  set_may_have_waits(false); // after: if the abort throws, the waits are still there
  set_expiry(t);
  return n;
}

void timer_state::take_over(timer_state& from) noexcept {
  // A move assignment from a timer on another shard: *this goes there first.
  if (&from.shard() != &shard()) wheel_shard::move_list_to_shard(*this, from.shard());
  // `from` is left as a new timer is (Asio's moved-from timer too): expiry time_point(),
  // so that a wait started on it completes at once, not at the expiry that moved away.
  if (!from.may_have_waits()) { // nothing on the wheel to move (a timer put in a vector)
    set_expiry(from.expiry());
    from.set_expiry(steady_time());
    return;
  }
  wheel_shard& shard = this->shard();
  auto guard = shard.lock();
  set_expiry(from.expiry());
  set_may_have_waits(true); // from's waits (it may have some) come here
  from.set_may_have_waits(false);
  if (from.holds_inline_op()) {
    // The op in from's buffer moves to ours, keeping its place among the waits.
    op_queue moved;
    while (!from.ops.empty()) {
      wheel_op& op = from.ops.front();
      from.ops.pop_front();
      moved.push_back(op.is_inline() ? op.relocate(inline_op_) : op);
    }
    from.ops.swap(moved);
    from.set_holds_inline_op(false);
    set_holds_inline_op(true);
  }
  shard.move_list_locked(from, *this);
  from.set_expiry(steady_time()); // off the wheel now: no step reads it
}

std::size_t timer_state::expired(timer_state& timer, due_step& step) {
  // The expiry first (acquire), then the deadline tick: reset_at raises the tick before
  // it stores the expiry, so the tick read is at least this expiry's. By ticks, not by
  // step.now: a deadline is its expiry rounded up to the tick, and completes in tick
  // order (and no division on the storm's path).
  const steady_time expiry = timer.expiry_.load(std::memory_order_acquire);
  if (!step.shard.reached_locked(timer)) {
    // reset_at raised it after the wheel took the entry as due: back at the raised
    // deadline tick, which the wheel has not reached.
    step.shard.relink_locked(timer);
    assert(!timer.is_due());
    return 1; // no completion, but a piece of the step's budget
  }
  step.shard.note_expiry_locked(expiry, step.now);
  return step.shard.complete_due_locked(timer, step);
}

} // namespace asio_wheel::detail
