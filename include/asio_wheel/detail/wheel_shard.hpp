// wheel_shard: one timing wheel of a context and everything that runs it.
//
// A shard owns the wheel (wheel.hpp), its clock (wheel_clock.hpp), a lock, the driver
// (one net::steady_timer on the context, armed for the first tick at which a slot comes
// due and only while something is in a slot), the ready queue of operations to complete
// on the next step, and the count of pending operations. The wheel_service owns the
// shards; each I/O object lives on one for good. What runs where: every step runs on the
// context's plain executor (context_executor.hpp); handlers run on their own.
//
// A step (the driver firing, or a posted step) reads the clock, advances the wheel to
// it, and hands over operations: first the ready queue, then the entries that came due,
// each through its on_due. It invokes them outside the lock, then goes round again for
// what its own handlers queued meanwhile (a chain of takes, a wait already expired), at
// most expiry_batch completions in all besides what was ready when it began (which all
// completes: see run_step); whatever is left gets a posted step.
//
// Entries. Every node on a shard's wheel is a shard_entry (a wheel_entry). Two kinds:
//   - a wait_list owns pending operations (a timer's waits, a periodic timer's pending
//     ticks, a delay queue's pending takes). Invariant: it is linked on the wheel iff
//     it holds operations; the op protocol below keeps it so. Only a timer's list has
//     a deadline and comes due (timer_state::expired: every wait completes); the
//     others are parked. So a list needs no function pointer, and a timer is 8 bytes
//     smaller.
//   - a due_entry is a step of its owner (a periodic tick, a delay-queue element, the
//     queue's hand-over step, a cancel_after deadline), with on_due, what happens when
//     it comes due.
// Two tricks the wheel is used for beyond deadlines:
//   - Parking on the never list. A periodic timer's or a delay queue's wait_list is
//     linked at time_point::max(): it never comes due and costs no wake-up, but
//     shutdown(), which walks the wheel, finds and destroys its operations.
//   - "Due now". An entry scheduled at time_point::min() goes straight to the due list:
//     its on_due runs in the next step, as if by post, in order with the other due
//     entries and within expiry_batch (a delay queue's hand-over, a refused deadline).
//
// The op protocol, each written once, here: admit (an operation joins a wait_list),
// complete_front_locked / complete_all_locked (operations leave with success into the
// step's batch) and abort_locked / abort_all_locked (they leave with
// operation_aborted, completed on the next step). An op is owned by exactly one of: a
// wait_list, the ready queue, a step's batch (then it is being invoked).
//
// What an on_due may do. It runs under the lock, inside the step, with a due_step. It
// may call the *_locked members of its shard, read step.now, and append the operations
// it completes to step.out (through complete_*_locked). It must not take the lock,
// invoke or destroy a handler, or destroy a user's value (whose destructor may call back
// into the shard). It returns how much of step.budget (>= 1) it used: the operations it
// appended, or 1 for an expiry that completes none itself, so that no kind of expiry
// escapes the batch; one with more to do than its budget re-schedules itself due now.
//
// Locking: every member not marked _locked takes the lock; _locked members expect the
// caller to hold it (lock()). With locking_mode::off the lock is a no-op.
#ifndef ASIO_WHEEL_DETAIL_WHEEL_SHARD_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_SHARD_HPP

#include <asio_wheel/detail/context_executor.hpp>
#include <asio_wheel/detail/legacy_executor.hpp>
#include <asio_wheel/detail/post_memory.hpp>
#include <asio_wheel/detail/shard_mutex.hpp>
#include <asio_wheel/detail/wheel.hpp>
#include <asio_wheel/detail/wheel_clock.hpp>
#include <asio_wheel/detail/wheel_op.hpp>
#include <asio_wheel/options.hpp>
#include <asio_wheel/wheel_service.hpp>

#include <asio_wheel/detail/cold.hpp>
#include <asio_wheel/detail/config.hpp>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace asio_wheel::detail {

class wheel_shard;

// What an on_due gets: its shard, the step's batch, what is left of the step's
// expiry_batch (>= 1), and the step's clock reading (never before the entry's time).
struct due_step {
  wheel_shard& shard;
  op_queue& out;
  std::size_t budget;
  steady_time now;
};

// A node of a shard's wheel (see the top of the file): a wait_list or a due_entry.
struct shard_entry : wheel_entry {
  // Set by wait_list only (kept in wheel_entry::owner_bits, which costs no space).
  bool is_wait_list() const noexcept {
    return owner_bits.load(std::memory_order_relaxed) & wait_list_bit;
  }

protected:
  static constexpr std::uint8_t wait_list_bit = 1;
  static constexpr std::uint8_t inline_op_bit = 2;
  static constexpr std::uint8_t schedule_bit = 4; // a scheduled_wait_list
};

// A step of its owner on the wheel: on_due runs when it comes due.
struct due_entry : shard_entry {
  using due_func = std::size_t (*)(due_entry&, due_step&);
  due_func on_due = nullptr;      // set by the owner; never null once linked
};

// An entry that owns pending operations, in the order they were started. Linked on the
// wheel iff `ops` is non-empty. A timer's list is linked at its expiry and comes due
// there; the others are parked on the never list, where they never come due.
struct wait_list : shard_entry {
  explicit wait_list(std::uint16_t shard_index) noexcept {
    owner_bits.store(wait_list_bit, std::memory_order_relaxed);
    owner_index.store(shard_index, std::memory_order_relaxed);
  }
  op_queue ops;

  // The index of the shard whose lock guards the list (wheel_shard::at). Fixed while
  // the list holds ops; a move assignment from an object on another shard changes it
  // while it holds none (wheel_shard::move_list_to_shard).
  std::uint16_t shard_index() const noexcept {
    return owner_index.load(std::memory_order_relaxed);
  }

  // Whether one of `ops` lives in the owner's inline buffer (wheel_op::is_inline). Set
  // and cleared under the shard's lock, after the op moved in or out; the owner's own
  // thread reads it without the lock to know if the buffer is free, and the acquire
  // pairs with the release that cleared it, after the op left the buffer.
  bool holds_inline_op() const noexcept {
    return owner_bits.load(std::memory_order_acquire) & inline_op_bit;
  }
  void set_holds_inline_op(bool on) noexcept {
    const std::uint8_t bits = owner_bits.load(std::memory_order_relaxed);
    owner_bits.store(on ? bits | inline_op_bit : bits & ~inline_op_bit,
                     std::memory_order_release);
  }

  bool has_schedule() const noexcept {
    return owner_bits.load(std::memory_order_relaxed) & schedule_bit;
  }
};

// A wait_list whose owner keeps another entry, its schedule, on the wheel only while
// the list holds ops: a periodic timer's ticks and the due time of its next tick. When
// an abort empties the list (the per-operation cancellation of the last tick), the
// schedule leaves the wheel with it (wheel_shard::abort_locked), so that the driver is
// not kept armed, and run() going, for a tick that nobody waits for.
struct scheduled_wait_list : wait_list {
  scheduled_wait_list(std::uint16_t shard_index, shard_entry& s) noexcept
      : wait_list(shard_index), schedule(s) {
    owner_bits.store(wait_list_bit | schedule_bit, std::memory_order_relaxed);
  }
  shard_entry& schedule;
};

// The per-operation cancellation handler of a pending op, installed in the handler's
// cancellation slot. It reaches the op through the wait_list that owns it, looking the
// op up by this handler's own address (as Asio's timers do), so an emission on a signal
// whose op's memory was reused is a harmless no-op. `owner` is written only under the
// shard's lock, and read there (but for the destructor's first look, below): when the
// owner moves (a timer move), move_list_locked re-points it, and an emission racing
// the move on another thread finds the op in whichever list holds it; when the op
// leaves the list (completed, aborted or destroyed), it is cleared, once and for good
// (wheel_op::forget_owner), so that an emission from then on, before the handler runs
// or after, reads nothing of the owner, which may have moved away or gone since (a
// timer in a std::vector that grows). So `owner` names a list only while the op is in
// it, and a list moves to another shard only while it holds no op (a move assignment
// cancels first): the list is `shard`'s. `shard` never changes: an emission, even one
// long after the op ended, takes its lock, as Asio's own handlers reach their service
// (the context outlives the signals of its operations).
//
// The op keeps a pointer to this handler (to re-point and clear `owner`), but the user
// may destroy the handler while the op still waits: a second operation started on the
// same slot replaces it, and so may clearing the slot or destroying the signal. So the
// destructor, while `owner` names a list, takes the shard's lock and tells the op
// (wheel_op::drop_cancellation): from then on the op writes nothing to the memory,
// which the slot may be reusing for another operation's handler on another thread.
// Once `owner` is null (the op left, or the context shut down), the destructor touches
// nothing but `owner`: a signal may outlive its context.
struct op_cancellation {
  op_cancellation(wheel_shard& s, wait_list& list) noexcept : shard(&s), owner(&list) {}
  op_cancellation(const op_cancellation&) = delete;
  op_cancellation& operator=(const op_cancellation&) = delete;
  ~op_cancellation(); // src/wheel_shard.cpp

  void operator()(net::cancellation_type type); // src/wheel_shard.cpp

  wheel_shard* const shard;
  // Written under the shard's lock only; atomic for the destructor's first look.
  std::atomic<wait_list*> owner;
};

class wheel_shard {
public:
  // The shard's lock: a shard_mutex, or nothing (locking_mode resolved to off).
  class lock_type {
  public:
    explicit lock_type(bool enabled) noexcept : enabled_(enabled) {}
    void lock() { if (enabled_) mutex_.lock(); }
    void unlock() { if (enabled_) mutex_.unlock(); }
  private:
    shard_mutex mutex_;
    bool enabled_;
  };
  using guard_type = std::unique_lock<lock_type>;

  // `opts` (validated) and `pending_total` belong to the service, which outlives the
  // shard. All shards of a service share the epoch, so that they tick together.
  wheel_shard(net::execution_context& ctx, const wheel_options& opts, steady_time epoch,
              bool locking, std::atomic<std::size_t>& pending_total);
  ~wheel_shard();
  wheel_shard(const wheel_shard&) = delete;
  wheel_shard& operator=(const wheel_shard&) = delete;

  net::execution_context& context() const noexcept { return context_; }
  const wheel_options& options() const noexcept { return options_; }

  // ---- the process-wide index of live shards ----
  //
  // Every shard holds an index, unique among the shards alive in the process, by which
  // a timer names it in two bytes of padding (wheel_entry::owner_index) instead of an
  // 8-byte pointer. Taken at construction (std::length_error beyond max_live shards
  // alive at once), given back at destruction for a later shard.
  static constexpr std::size_t max_live = std::size_t{1} << 16;
  std::uint16_t index() const noexcept { return index_.value; }
  // The live shard of index i. Needs no lock: an object learns an index from its
  // shard, so the shard's construction happens before any lookup of it.
  static wheel_shard& at(std::uint16_t i) noexcept {
    wheel_shard* s = live_[i].load(std::memory_order_relaxed);
    assert(s != nullptr && "a shard index outlived its shard");
    return *s;
  }

  // The executor the driver and the steps run on: the plain executor of the context
  // (context_executor.hpp), given by the first I/O object (the first call wins), and
  // released by shutdown(). Set lazily because only an I/O object's executor type says
  // how to derive it.
  void use_context_executor(const net::any_io_executor& context_ex);
  bool has_context_executor() const noexcept {
    return has_executor_.load(std::memory_order_acquire);
  }

  guard_type lock() const { return guard_type(mutex_); }

  bool shut_down_locked() const noexcept { return shut_down_; }

  // ---- time (see wheel_clock.hpp for which clock is read where) ----

  // The clock: steady_clock::now(), or virtual time (read without the lock).
  steady_time now() const noexcept { return clock_.now(); }
  // now() + d for a deadline, saturated; in steady mode from the cheap upper bound.
  steady_time deadline_after(steady_duration d) const {
    return deadline_after_with_bound(d, wheel_clock::steady_deadline_base()).first;
  }
  // deadline_after(d) from `steady_base`, a steady_deadline_base() reading the caller
  // took (timer_state takes it before it loads from its own lines, and says why), with
  // the not_due_before() reading it makes: in steady mode the deadline's base itself
  // (one clock read, not two). Manual mode reads virtual time instead.
  std::pair<steady_time, steady_time> deadline_after_with_bound(steady_duration d,
                                                                steady_time steady_base) const {
    const steady_time bound = not_due_before(steady_base);
    return {saturating_add(clock_.manual() ? now() : bound, d), bound};
  }
  // Manual mode: moves virtual time forward and queues what came due (see
  // wheel_service::advance).
  void advance(steady_duration d);
  // This shard's counters.
  wheel_stats stats() const;

  // ---- entries (lock held) ----

  // Links `e` for time t, or moves it there (the wheel's lazy rule), then makes the
  // driver agree: a step if it is due now, an earlier arming if it comes before the
  // armed tick, a disarm when nothing is left in a slot.
  void schedule_locked(shard_entry& e, steady_time t) {
    driver_follows_locked(e, place_locked(e, t));
  }
  // A time the wheel has surely not reached yet, for an owner without the lock: an
  // entry whose expiry is later is not due (reset_at's lock-free path). The upper bound
  // of the clock in steady mode; in manual mode time_point::max(), so that nothing
  // counts as not due there: virtual time read without the lock may be older than what
  // an advance() on another thread has already moved the wheel to.
  // `steady_base` is a steady_deadline_base() reading the caller took (timer_state reads
  // it before it loads from its own lines).
  steady_time not_due_before(steady_time steady_base) const noexcept {
    return clock_.manual() ? steady_time::max() : steady_base;
  }
  // Whether the wheel has reached `e`'s deadline tick: false only for an entry taken
  // as due whose owner raised its deadline since (timer_state::expired).
  bool reached_locked(const shard_entry& e) const noexcept {
    return e.deadline_tick() <= wheel_.now();
  }
  // The first tick after the one the wheel stands at: when to try again something that
  // failed in this step. Not passed: a step would find it due at once, and what keeps
  // failing (a user's executor that throws on every dispatch) would then be retried in
  // a loop that never lets run() return; this way it is retried once a tick.
  steady_time next_tick_time_locked() const noexcept {
    return clock_.tick_time(wheel_.now() + 1);
  }
  // Schedules the unlinked `e` to come due behind everything due so far, the rest of
  // the tick the wheel stands at included: due now, unless expiry_batch stopped the
  // wheel inside that tick, whose other entries then come due after the ones due now.
  // Then `e` is parked (on the never list) until the step that finishes the tick puts
  // it in the due list, behind that tick's last entries and ahead of the next tick's
  // (run_step). Its owner calls forget_after_tick_locked before it unschedules `e` for
  // good. Throws what the driver's post throws, or bad_alloc (then `e` is as it was).
  void schedule_after_due_so_far_locked(due_entry& e) {
    if (wheel_.tick_unfinished())
      park_after_tick_locked(e);
    else
      schedule_locked(e, steady_time::min());
  }
  // The same for an owner that cannot let an exception out: if the step cannot be
  // posted, `e` is due all the same, for the next step; if it cannot be parked (out of
  // memory), it comes due at the next tick, late.
  void schedule_after_due_so_far_nothrow_locked(due_entry& e) noexcept {
    if (!wheel_.tick_unfinished()) {
      schedule_nothrow_locked(e, steady_time::min());
      return;
    }
    try {
      park_after_tick_locked(e);
    } catch (...) {
      schedule_nothrow_locked(e, next_tick_time_locked());
    }
  }
  // `e` no longer waits for the tick's end (its owner is going).
  void forget_after_tick_locked(const due_entry& e) noexcept {
    after_tick_.erase(std::remove(after_tick_.begin(), after_tick_.end(), &e), after_tick_.end());
  }
  // Whether entries due at the wheel's tick may still come due (wheel::tick_unfinished).
  bool tick_unfinished_locked() const noexcept { return wheel_.tick_unfinished(); }
  // Whether entries that the wheel made due may wait in the due list: the last step's
  // budget ran out before it had handed them all over, or advance() has moved to a new
  // tick since. The next step hands them over.
  bool due_backlog_locked() const noexcept { return due_backlog_; }
  // Whether an entry scheduled now for t would be due at once (its tick reached).
  bool due_at_once_locked(steady_time t) const noexcept {
    return clock_.to_tick(t) <= wheel_.now();
  }
  // schedule_locked for an owner that has nothing to undo, or cannot let an exception
  // out: if the driver cannot be told (a post or an arm that throws on a user's
  // executor; on an io_context neither can), `e` stays linked all the same and comes
  // due at the shard's next step or arming, late but never early.
  void schedule_nothrow_locked(shard_entry& e, steady_time t) noexcept {
    const tick_t k = place_locked(e, t);
    // Out of line only when driver_follows_locked would do something: a push into a
    // busy wheel, or into one whose arming is deferred while nothing is pending, stays
    // inline.
    if (e.is_due() ? !step_posted_
                   : arm_deferred_ ? stats_.pending != 0 : k < armed_ || k == never_tick)
      driver_follows_nothrow_locked(e, k);
  }
  // Links the unlinked `e` at the deadline tick it holds (wheel::relink), which its
  // owner may be raising meanwhile, and makes the driver agree as schedule_locked does.
  void relink_locked(shard_entry& e) { driver_follows_locked(e, wheel_.relink(e)); }
  // Without the lock, by the entry's owner only: raises `e`'s deadline tick to that of
  // t, a later finite time (wheel::raise). The driver needs no word: a later deadline
  // never needs an earlier wake-up.
  void raise(shard_entry& e, steady_time t) const noexcept {
    wheel::raise(e, clock_.to_tick(t));
  }
  // Unlinks `e` (no effect if it is not linked). Never throws, so that a cancel that
  // throws has changed nothing and clean-up can call it: if the disarm's post throws (a
  // user's executor; on an io_context it cannot), the driver is left armed, to fire
  // once for nothing. Called after the operations leaving are uncounted: its disarm
  // check asks whether anything is pending, and nothing asks again after an uncount.
  void unschedule_locked(shard_entry& e) noexcept;
  // The same, but what the shard does on being left idle waits for settle_idle(): see
  // uncount_pending_locked's `idle`.
  void unschedule_settling_later_locked(shard_entry& e) noexcept {
    wheel_.remove(e);
    settle_owed_.store(true, std::memory_order_relaxed);
  }
  // After scheduling an entry (a request loop's next deadline): a settle_idle() owed
  // now would do nothing (something is pending, so the work stays; the driver is
  // disarmed or has a slot to wake for), so it is not owed any more. A later change
  // that leaves the shard idle settles itself or owes a settle_idle() of its own.
  void settle_moot_locked() noexcept {
    if (settle_owed_.load(std::memory_order_relaxed) && !shut_down_ &&
        stats_.pending != 0 && !disarm_wanted_locked())
      settle_owed_.store(false, std::memory_order_relaxed);
  }
  // The owner of `from` moved to `to`: `to` takes over its place on the wheel and its
  // operations, whose cancellation handlers now point at `to`. `to` holds none, and
  // `from` no inline op (its owner moves that one into `to`'s buffer first).
  void move_list_locked(wait_list& from, wait_list& to) noexcept;
  // The same for an entry that owns no operations (a periodic timer's schedule, a
  // delay_queue's dispatch step): `to`, unlinked and of the same kind (on_due), takes
  // over the place of `from` on the wheel, wherever it is, parked until a tick's end
  // included.
  void move_entry_locked(due_entry& from, due_entry& to) noexcept;
  // `list` (no ops, off the wheel) now belongs to shard `to`: an object move-assigned
  // from one on another shard goes there. No lock: only the owner's own thread reads the
  // index, for a cancellation handler reaches a list only while its op is in it
  // (op_cancellation), and a list that holds ops never changes shards.
  static void move_list_to_shard(wait_list& list, wheel_shard& to) noexcept;

  // ---- the op protocol ----

  // Admits `op` to `list`: counted pending (holding the context's work), and `list`
  // linked for `when` if it was not. False if it was not admitted: after shutdown the op
  // is destroyed (with `guard` released first: a handler's destructor may call back in),
  // and over max_pending it completes with too_many_timers on the next step. If it
  // throws (a post or an allocation failed), the op was not admitted either: it is
  // destroyed so, and the shard is as it was. The initiating function throws then, and
  // its handler is never invoked, as with Asio's own.
  bool admit(guard_type& guard, wait_list& list, wheel_op& op, steady_time when);
  // For an initiation whose next step after admit threw (scheduling its owner): `op`
  // leaves `list` uncounted, as if never admitted, and is destroyed as admit does. Call
  // it from the catch handler, then rethrow. `op` is the last op of `list`.
  void withdraw(guard_type& guard, wait_list& list, wheel_op& op) noexcept;
  // For an initiation that failed before its op was admitted: destroys `op`, with
  // `guard` released first. Call it from the catch handler, then rethrow.
  static void discard(guard_type& guard, wheel_op& op) noexcept {
    op.forget_owner();
    guard.unlock();
    op.destroy();
  }
  // Makes sure a step runs soon: posts one, unless one is posted already. If the post
  // throws (only on a user's executor: see post_memory), no step is counted as posted.
  // Inline, as the test is all that most calls do (a chain's takes, a cancel's).
  //
  // Also while this thread runs a step of this shard, whose next round picks the work
  // up itself (run_step): a chain (a handler starting an operation that completes at
  // once) still runs in that step, and one posted step at a time covers all that the
  // step's handlers queue meanwhile (step_posted_). Without it, a handler that blocks
  // until such an operation completes (a use_future get) would wait for the step it
  // runs in; as with a steady_timer's wait, another thread running the context serves it.
  void post_step_locked() {
    if (!step_posted_ && executor_) post_new_step_locked();
  }
  // The same from a destructor, which must not throw (a step's clean-up, possibly
  // while a handler's exception unwinds): if the post throws (a user's executor; on an
  // io_context it cannot), what waits for the step stays where it is, and the next
  // call that needs a step posts one.
  void post_step_from_cleanup_locked() noexcept {
    try {
      post_step_locked();
    } catch (...) {
    }
  }
  // Completes `op`, which is on no list (it never waited, refused or served at once, or
  // has left one), with `r` on the next step: as if by post, never inline. Not after
  // shutdown.
  void complete_soon_locked(wheel_op& op, op_result r);
  // `op`, refused by `list` (never on its queue), in memory of its own: an inline op is
  // relocated out of the owner's buffer, which is then free. If that throws, `op` is
  // as it was.
  wheel_op& own_locked(wait_list& list, wheel_op& op) {
    if (!op.is_inline()) return op;
    wheel_op& moved = op.relocate(nullptr);
    list.set_holds_inline_op(false);
    return moved;
  }
  // Before an op leaves `list`: the op of `list` that lives in the owner's buffer, if
  // any, moves to memory of its own at its place in the queue; returns it there (null
  // if there was none). If it is among the first `leaving` ops, which are to leave, its
  // cancellation handler forgets the list as it moves (wheel_op::relocate). If the
  // move throws (bad_alloc), the queue is as it was, so that a cancel that throws
  // changes nothing and an expiry that throws loses no op.
  wheel_op* own_inline_locked(wait_list& list, std::size_t leaving = SIZE_MAX);
  // The ops of `list` leave, in order, with `r`, into `out` (each in memory of its own),
  // at most `most` of them; returns how many. The list's place on the wheel is left as
  // it was: the caller's to change.
  std::size_t take_ops_locked(wait_list& list, op_queue& out, op_result r,
                              std::size_t most = SIZE_MAX);
  // take_ops_locked's: the cancellation handlers of the first `most` ops of `list` but
  // `moved` (which did as it moved) forget the list. Out of line, so that the common
  // case, a timer's one wait in its buffer (W1's churn, W3's storm), which skips it,
  // stays small enough to be inlined. Those that wait on keep theirs: never cleared
  // and set again, for a handler's destructor may look at `owner` without the lock.
  ASIO_WHEEL_COLD static void forget_owners_locked(wait_list& list, wheel_op* moved,
                                                   std::size_t most) noexcept;
  // take_ops_locked's rare end, a batch that ends among one object's ops: the first
  // `most` leave into `out`. Out of line for the same reason: written in place, it
  // cost W1's churn 10 instructions per op (callgrind).
  ASIO_WHEEL_COLD static void take_first_ops_locked(wait_list& list, op_queue& out,
                                                    std::size_t most) noexcept;
  // The oldest op of `list` (non-empty) leaves it, in memory of its own, its
  // cancellation handler forgetting the list; returns it. If the move out of the
  // owner's buffer throws, the list is as it was.
  wheel_op& leave_front_locked(wait_list& list);
  // The oldest op of `list` (non-empty) leaves with success into `out`, and is counted
  // as no longer pending. The list's place on the wheel is the caller's to change.
  void succeed_front_locked(wait_list& list, op_queue& out);
  // In an on_due: the oldest op of `list` (non-empty) leaves with success into `out`.
  // The owner fills in its values first. `list` is unlinked once empty.
  void complete_front_locked(wait_list& list, op_queue& out);
  // A timer's expiry (`list` just popped off the due list): its ops leave with success
  // into step.out, at most step.budget of them, so that expiry_batch bounds one timer's
  // waits as it does many timers' (thousands of coroutines on one shared timer must not
  // run in one step, with no I/O between). Returns how many left. If some are left
  // over, the list goes back to the front of the due list, ahead of what came due after
  // it, for the next step (which the spent budget posts); else it is off the wheel.
  std::size_t complete_due_locked(wait_list& list, due_step& step);
  // `op` (on `list`) leaves with operation_aborted, completed on the next step.
  void abort_locked(wait_list& list, wheel_op& op);
  // Every op of `list` leaves so; returns how many. If the step's post throws, nothing
  // changed.
  std::size_t abort_all_locked(wait_list& list);
  // The same for the owner's destructor, which must not throw: if the step's post
  // throws (a user's executor; on an io_context it cannot), the ops are aborted all the
  // same and wait in the ready queue for the next step that a later call posts. (An
  // inline op still moves out of the dying owner: std::terminate only if memory for
  // that is exhausted, as at shutdown.)
  std::size_t abort_all_on_destruction_locked(wait_list& list) noexcept;
  // Per-operation cancellation: aborts the op whose cancellation handler is `c` if it
  // still waits on c.owner; false if not (handed over already, or `c` is stale).
  bool cancel_op(const op_cancellation& c);
  // ~op_cancellation, while it names a list: the op waiting there forgets it.
  void drop_cancellation(const op_cancellation& c) noexcept;

  // Counting for an owner that is pending without an op on a list (a cancel_after
  // deadline): the reverse of each other; false if max_pending refuses.
  bool count_pending_locked();
  // The same past max_pending, for a deadline counted once already (its emission
  // retried: deadline_state::give_back_unrun): refused, it would sit in a slot that the
  // driver, which wakes the wheel for pending operations only, might never wake for.
  void count_pending_past_limit_locked();
  // What an uncount that leaves nothing pending does: drop the context's work now, or
  // keep it until settle_idle(), which the caller promises to call.
  enum class idle_action { now, settle_later };
  void uncount_pending_locked(op_result r, std::size_t n = 1,
                              idle_action idle = idle_action::now) noexcept;
  // The idle actions that settle_later held back: drops the work if nothing is pending,
  // posts the disarm if the wheel is empty. For a completion that runs its user's
  // handler in between: a request loop starts its next deadline there, so the shard is
  // not idle after all, and neither the work nor the driver changes hands per request.
  // Without the lock when nothing is owed (settle_moot_locked).
  void settle_idle() noexcept;
  // Whether this thread is inside a run() (or poll) of the shard's context, which
  // therefore outlives what this thread does next (lock held).
  bool context_runs_here_locked() const noexcept;

  // In an on_due: a timer whose expiry was `expiry` completes at step.now; for the
  // stats' max_lateness. Asserts the never-early guarantee.
  void note_expiry_locked(steady_time expiry, steady_time now) noexcept;

  // Destroys every pending operation without invoking it and releases the executor,
  // the driver and the work (wheel_service::shutdown).
  void shutdown();

private:
  // count_pending_locked's first part: takes the context's work if nothing is pending
  // and nothing holds it yet; whether it did.
  bool take_work_locked();
  // Why a step runs.
  enum class step_cause { driver_fired, posted };

  // Something is ready or due, or the wheel has ticks to catch up on: a step has work.
  bool has_work_locked() const noexcept {
    return !ready_.empty() || wheel_.has_due() || wheel_behind_;
  }
  // schedule_locked's first half: links `e` for t, or moves it there (the lazy rule),
  // with no word to the driver; returns the tick.
  tick_t place_locked(shard_entry& e, steady_time t) {
    assert(e.is_wait_list() || static_cast<due_entry&>(e).on_due != nullptr);
    const tick_t k = clock_.to_tick(t);
    if (e.linked())
      wheel_.reschedule(e, k);
    else
      wheel_.insert(e, k);
    return k;
  }
  // `e` was just placed for tick k: a step if it is due now, an earlier arming if it
  // comes before the armed tick, a disarm when nothing is left in a slot. A deferred
  // arming (arm_deferred_) left the driver disarmed, so that any tick but never_tick
  // arms; an entry parked with no tick (a take) arms for what is slotted.
  void driver_follows_locked(const shard_entry& e, tick_t k) {
    if (e.is_due())
      post_step_locked();
    else if (k < armed_)
      arm_locked();
    else if (k == never_tick)
      arm_deferred_ ? arm_locked() : disarm_when_idle_locked();
  }
  // The same, swallowing what it throws (schedule_nothrow_locked).
  void driver_follows_nothrow_locked(const shard_entry& e, tick_t k) noexcept;
  // The driver is armed with nothing in a slot, or with nothing pending (arm_deferred_),
  // and no disarm is posted yet.
  bool disarm_wanted_locked() const noexcept;
  // Posts a disarm if disarm_wanted_locked(). Never throws: if the post does, the driver
  // stays armed, to fire once for nothing.
  void disarm_when_idle_locked() noexcept;
  // disarm_when_idle_locked's post, once disarm_wanted_locked() said yes. Apart, for
  // run_step: a call there to disarm_when_idle_locked itself kept the compiler from
  // inlining it into unschedule_locked (5 instructions more a cancel in W1, callgrind).
  void post_disarm_locked() noexcept;
  // Arms the driver for the wheel's next slotted tick while an operation is pending;
  // with none, disarms it (arm_deferred_).
  void arm_locked();
  // Disarms the driver at once; arm_deferred_ says whether something is left in a slot.
  void disarm_locked();
  // Puts the entries parked until the tick's end (after_tick_) in the due list once
  // the wheel has finished that tick, finishing it first, at most due_limit due;
  // whether it did (else the tick is still unfinished).
  bool release_after_tick_locked(std::size_t due_limit);
  // schedule_after_due_so_far_locked's parking of the unlinked `e` (so not parked
  // already: a parked entry is linked, on the never list); bad_alloc leaves it as it was.
  void park_after_tick_locked(due_entry& e) {
    assert(!e.linked());
    assert(std::find(after_tick_.begin(), after_tick_.end(), &e) == after_tick_.end());
    after_tick_.push_back(&e);
    schedule_nothrow_locked(e, steady_time::max()); // the never list: no post, no arming
  }
  // count_pending_locked's count undone for n, without a word in the stats: what
  // uncount_pending_locked does besides counting them expired or cancelled.
  void release_pending_locked(std::size_t n, idle_action idle) noexcept;
  // post_step_locked's post.
  void post_new_step_locked();
  // Posts f on the context's executor, its operation in `memory` on an io_context.
  template <class F>
  void post_in_locked(post_memory& memory, F f);
  void on_driver(const error_code& ec);
  void run_step(step_cause cause);
  // Moves ready and due operations into `batch`, at most `budget` (> 0) of them (a
  // timer's waits too: complete_due_locked); returns how many. `now` is the step's clock
  // reading.
  std::size_t collect_locked(op_queue& batch, steady_time now, std::size_t budget);
  // Completes the batch in order; false if it stopped after a completion dispatched to
  // another executor threw there (the rest went back to the ready queue).
  bool invoke(op_queue& batch);

  static std::atomic<wheel_shard*> live_[max_live]; // by index; null where free

  // The shard's index: taken before any other member is built and given back after
  // all of them are gone, also when a later member's constructor throws.
  struct index_lease {
    index_lease();  // std::length_error beyond max_live (src/wheel_shard.cpp)
    ~index_lease();
    index_lease(const index_lease&) = delete;
    index_lease& operator=(const index_lease&) = delete;
    const std::uint16_t value;
  };

  const index_lease index_;
  net::execution_context& context_;
  const wheel_options& options_;
  mutable lock_type mutex_;
  wheel wheel_;
  wheel_clock clock_;

  std::atomic<bool> has_executor_{false};
  net::any_io_executor executor_;     // the context's plain one
  post_memory step_memory_;           // the posted step's operation (step_posted_)
  post_memory disarm_memory_;         // the posted disarm's (disarm_posted_)
  post_memory driver_memory_;         // the driver's wait operation (armed_)
  net::any_io_executor work_;         // tracked while anything is pending
  std::optional<net::steady_timer> driver_;
  tick_t armed_ = never_tick;         // the tick the driver is armed for

  op_queue ready_;                    // to complete on the next step
  std::size_t ready_count_ = 0;       // ready_'s length
  // The last step's advance stopped short of the clock at its budget (the rest of a
  // storm is still in the slots): the next round or step goes on from there.
  bool wheel_behind_ = false;
  // due_backlog_locked(): set by each round of a step, and by advance().
  bool due_backlog_ = false;
  // A step's collect_locked is running (arm_locked).
  bool collecting_ = false;
  // An arming put off while a step collected (arm_locked): the step's end, or the
  // next step's if it posts one, arms.
  bool arm_owed_ = false;
  // The driver wakes the wheel for pending operations only (arm_locked): while none is
  // pending, entries in slots (a delay_queue's elements, waiting for no take) are not
  // armed for, so that they do not keep run() from returning. Set when the driver was
  // disarmed with entries in slots (disarm_locked), so that armed_ is then never_tick;
  // the first placement once an operation is pending arms (driver_follows_locked). An
  // operation becomes pending only with a placement: its list, empty (so unlinked)
  // while nothing was pending, is scheduled (admit), or its deadline is
  // (deadline_state).
  bool arm_deferred_ = false;
  // Entries parked until the wheel finishes its unfinished tick
  // (schedule_after_due_so_far_locked). Few: a delay queue's hand-over step each.
  std::vector<due_entry*> after_tick_;
  bool step_posted_ = false;
  bool disarm_posted_ = false;
  // An unschedule held back the idle actions (unschedule_settling_later_locked) and no
  // settle_idle() or settle_moot_locked() has covered them since. Written under the
  // lock; settle_idle() reads it without, to skip the lock in a request loop.
  std::atomic<bool> settle_owed_{false};
  bool shut_down_ = false;

  wheel_stats stats_;
  // Pending over all shards, the service's: counted only when max_pending is set.
  std::atomic<std::size_t>& pending_total_;
};

// ---- inline: the members on every wait's path (start, expire, cancel) ----

inline bool wheel_shard::take_work_locked() {
  // A pending wait is outstanding work of the context, as with steady_timer: held as
  // one tracked executor while anything is pending (and, after an uncount that settles
  // later, until settle_idle). Taken before the count: if that throws, nothing is
  // counted.
  const bool takes_work = stats_.pending == 0 && work_ == nullptr;
  if (takes_work) work_ = net::prefer(executor_, net::execution::outstanding_work.tracked);
  return takes_work;
}

inline bool wheel_shard::count_pending_locked() {
  const bool takes_work = take_work_locked();
  if (options_.max_pending != 0) {
    // One limit over all shards: claim a place in the service's count.
    std::size_t n = pending_total_.load(std::memory_order_relaxed);
    do {
      if (n >= options_.max_pending) {
        ++stats_.rejected;
        if (takes_work) work_ = net::any_io_executor();
        return false;
      }
    } while (!pending_total_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  }
  ++stats_.pending;
  return true;
}

inline void wheel_shard::count_pending_past_limit_locked() {
  take_work_locked();
  if (options_.max_pending != 0) pending_total_.fetch_add(1, std::memory_order_relaxed);
  ++stats_.pending;
}

inline void wheel_shard::uncount_pending_locked(op_result r, std::size_t n,
                                                idle_action idle) noexcept {
  if (n == 0) return;
  release_pending_locked(n, idle);
  if (r == op_result::success)
    stats_.expired += n;
  else
    stats_.cancelled += n;
}

inline void wheel_shard::release_pending_locked(std::size_t n, idle_action idle) noexcept {
  assert(stats_.pending >= n);
  stats_.pending -= n;
  if (options_.max_pending != 0) pending_total_.fetch_sub(n, std::memory_order_relaxed);
  if (stats_.pending == 0 && idle == idle_action::now) work_ = net::any_io_executor();
}

inline bool wheel_shard::admit(guard_type& guard, wait_list& list, wheel_op& op, steady_time when) {
  assert(guard.owns_lock() && list.linked() == !list.ops.empty());
  if (shut_down_) {
    discard(guard, op);
    return false;
  }
  try {
    if (!count_pending_locked()) {
      // The step first: if its post throws, the op is still as the caller made it.
      post_step_locked();
      complete_soon_locked(own_locked(list, op), op_result::too_many);
      return false;
    }
  } catch (...) {
    discard(guard, op);
    throw;
  }
  list.ops.push_back(op);
  if (op.is_inline()) list.set_holds_inline_op(true);
  if (!list.linked()) {
    // Scheduling may post a step (a passed expiry) or arm the driver, and a post on a
    // user's executor may throw (on an io_context neither can: see arm_locked).
    try {
      schedule_locked(list, when);
    } catch (...) {
      withdraw(guard, list, op);
      throw;
    }
  }
  return true;
}

inline wheel_op* wheel_shard::own_inline_locked(wait_list& list, std::size_t leaving) {
  if (!list.holds_inline_op()) return nullptr;
  if (list.ops.single()) {
    // The common case (a timer's one wait): it moves, then the queue holds it there.
    wheel_op& moved = list.ops.front().relocate(nullptr, leaving > 0);
    list.ops.clear();
    list.ops.push_back(moved);
    list.set_holds_inline_op(false);
    return &moved;
  }
  // The ops ahead of it go to `ahead` (almost always none: the inline op is a timer's
  // first wait), then it leaves the queue to move, and all goes back in order.
  op_queue ahead;
  std::size_t place = 0; // the inline op's place in the queue
  for (; !list.ops.front().is_inline(); ++place) {
    wheel_op& op = list.ops.front();
    list.ops.pop_front();
    ahead.push_back(op);
  }
  wheel_op& pinned = list.ops.front();
  list.ops.pop_front();
  wheel_op* moved = &pinned;
  try {
    moved = &pinned.relocate(nullptr, place < leaving);
  } catch (...) {
    ahead.push_back(pinned); // relocate left it as it was
    ahead.append(list.ops);
    list.ops.swap(ahead);
    throw;
  }
  ahead.push_back(*moved);
  ahead.append(list.ops);
  list.ops.swap(ahead);
  list.set_holds_inline_op(false);
  return moved;
}

inline void wheel_shard::complete_soon_locked(wheel_op& op, op_result r) {
  assert(!shut_down_); // nothing would ever complete or destroy it
  assert(!op.is_inline());
  // The step first: if its post throws, the op is not queued (the caller still has it).
  post_step_locked();
  op.forget_owner();
  op.set_result(r);
  ready_.push_back(op);
  ++ready_count_;
}

inline wheel_op& wheel_shard::leave_front_locked(wait_list& list) {
  assert(!list.ops.empty());
  wheel_op* op = &list.ops.front();
  if (op->is_inline())
    op = own_inline_locked(list); // forgets the list as it moves (wheel_op::relocate)
  else
    op->forget_owner();
  list.ops.pop_front();
  return *op;
}

inline void wheel_shard::succeed_front_locked(wait_list& list, op_queue& out) {
  wheel_op& op = leave_front_locked(list);
  op.set_result(op_result::success);
  out.push_back(op);
  uncount_pending_locked(op_result::success);
}

inline void wheel_shard::complete_front_locked(wait_list& list, op_queue& out) {
  succeed_front_locked(list, out);
  if (list.ops.empty()) unschedule_locked(list);
}

inline std::size_t wheel_shard::take_ops_locked(wait_list& list, op_queue& out, op_result r,
                                                std::size_t most) {
  // The op moving out of the owner's buffer, if it leaves, forgets the list as it moves
  // (relocate).
  wheel_op* const moved = own_inline_locked(list, most);
  // Every op's result, those that stay too (each is set again when it leaves): the
  // common case, all of them leaving, then pays one comparison more than without a
  // bound.
  std::size_t n = 0;
  for (wheel_op& op : list.ops) op.set_result(r), ++n;
  if (n != 1 || moved == nullptr) forget_owners_locked(list, moved, most);
  if (n <= most) {
    out.append(list.ops);
    return n;
  }
  take_first_ops_locked(list, out, most);
  return most;
}

inline std::size_t wheel_shard::complete_due_locked(wait_list& list, due_step& step) {
  assert(!list.linked() && step.budget > 0);
  if (list.ops.single()) { // the common case, a timer's one wait (the storm's path)
    succeed_front_locked(list, step.out); // already off the wheel: nothing to unschedule
    return 1;
  }
  const std::size_t n = take_ops_locked(list, step.out, op_result::success, step.budget);
  uncount_pending_locked(op_result::success, n);
  if (!list.ops.empty()) wheel_.unpop_due(list);
  return n;
}

inline std::size_t wheel_shard::abort_all_locked(wait_list& list) {
  if (list.ops.empty()) return 0;
  // The step first: if its post throws, the waits stay as they were (a cancel that
  // throws changed nothing). And before the pending count's work is released, so that
  // the context never sees zero outstanding work (and stops) while aborted handlers are
  // queued. The step takes the lock held here: it sees what follows.
  post_step_locked();
  std::size_t n = 1;
  if (list.holds_inline_op() && list.ops.single()) {
    // The common case, a timer's one wait in its buffer, spelled out: a cancel-and-restart
    // loop (W1) runs through here (take_ops_locked's general way took 2 ns more at 1M).
    wheel_op& moved = list.ops.front().relocate(nullptr); // if this throws, nothing left
    list.ops.clear();
    list.set_holds_inline_op(false);
    moved.set_result(op_result::aborted);
    ready_.push_back(moved);
  } else {
    n = take_ops_locked(list, ready_, op_result::aborted);
  }
  ready_count_ += n;
  uncount_pending_locked(op_result::aborted, n);
  unschedule_locked(list);
  return n;
}

inline std::size_t wheel_shard::abort_all_on_destruction_locked(wait_list& list) noexcept {
  if (list.ops.empty()) return 0;
  const std::size_t n = take_ops_locked(list, ready_, op_result::aborted);
  ready_count_ += n;
  // Before the pending count's work is released, as in abort_all_locked.
  post_step_from_cleanup_locked();
  uncount_pending_locked(op_result::aborted, n);
  unschedule_locked(list);
  return n;
}

inline void wheel_shard::note_expiry_locked(steady_time expiry, steady_time now) noexcept {
  // Expiries before the wheel existed count from its start (no overflow from
  // time_point::min()).
  expiry = std::max(expiry, clock_.epoch());
  assert(now >= expiry); // never early
  if (now > expiry) {
    const auto late = std::chrono::duration_cast<std::chrono::nanoseconds>(now - expiry);
    if (late > stats_.max_lateness) stats_.max_lateness = late;
  }
}

// Bumped by every wheel_service's destructor: a cached service pointer taken before is
// stale, since another context may now live at its context's address.
inline std::atomic<std::uint64_t> service_generation{0};

// The context whose wheel_service this thread found last, that service, and the shard
// this thread's objects go to there when that never changes (one shard, or
// shard_policy::by_thread): most threads construct their I/O objects on one context,
// and use_service takes the registry's mutex and walks its list. A hit needs the same
// context address and no wheel_service destroyed since (an I/O object's context is
// alive while it is built).
struct service_cache {
  const net::execution_context* context = nullptr;
  wheel_service* service = nullptr;
  wheel_shard* thread_shard = nullptr; // nullptr: round robin, ask the service
  std::uint64_t generation = 0;
};
inline thread_local service_cache last_service;

// The shard of `ctx` that an I/O object constructed now on this thread lives on.
inline wheel_shard& shard_of(net::execution_context& ctx) {
  service_cache& c = last_service;
  const std::uint64_t generation = service_generation.load(std::memory_order_acquire);
  if (c.context != &ctx || c.generation != generation) {
    wheel_service& svc = net::use_service<wheel_service>(ctx);
    c = service_cache{&ctx, &svc, service_access::thread_shard(svc), generation};
  }
  return c.thread_shard ? *c.thread_shard : service_access::next_shard(*c.service);
}

// The shard of `ex`'s execution context that an I/O object constructed now lives on
// (the service is created with defaults if the context has none), with the context's
// plain executor given to it. A TS executor (io_context::strand) is asked through
// standard_executor.
template <class Executor>
wheel_shard& shard_for(const Executor& ex) {
  const auto& standard = standard_executor(ex);
  wheel_shard& shard = shard_of(net::query(standard, net::execution::context));
  if (!shard.has_context_executor()) shard.use_context_executor(context_executor(standard));
  return shard;
}

} // namespace asio_wheel::detail

#endif
