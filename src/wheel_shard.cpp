// One wheel of a context: the driver, the steps, the pending count and the op protocol
// (see detail/wheel_shard.hpp).
#include <asio_wheel/detail/wheel_shard.hpp>

#include <asio_wheel/detail/prefetch.hpp>
#include <asio_wheel/detail/timer_state.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

namespace asio_wheel::detail {

namespace {

// Whether `op` is on `list` (for asserts: who owns an op).
[[maybe_unused]] bool holds(wait_list& list, const wheel_op& op) noexcept {
  return std::any_of(list.ops.begin(), list.ops.end(),
                     [&op](const wheel_op& o) { return &o == &op; });
}

// The indexes of live shards: handed out in order, reused after their shard is gone.
class shard_indexes {
public:
  std::uint16_t take() {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!free_.empty()) {
      const std::uint16_t i = free_.back();
      free_.pop_back();
      return i;
    }
    if (next_ == wheel_shard::max_live)
      throw std::length_error("asio_wheel: more than 65536 wheel shards alive at once "
                              "(io_contexts times shards per context)");
    return static_cast<std::uint16_t>(next_++);
  }
  void give_back(std::uint16_t i) {
    std::lock_guard<std::mutex> guard(mutex_);
    free_.push_back(i);
  }

private:
  std::mutex mutex_;
  std::size_t next_ = 0;
  std::vector<std::uint16_t> free_;
};

// Never destroyed: a shard may be destroyed during static destruction (a context with
// static storage duration), after a static shard_indexes would be gone.
shard_indexes& indexes() {
  static shard_indexes* const all = new shard_indexes;
  return *all;
}

} // namespace

std::atomic<wheel_shard*> wheel_shard::live_[wheel_shard::max_live];

wheel_shard::wheel_shard(net::execution_context& ctx, const wheel_options& opts,
                         steady_time epoch, bool locking,
                         std::atomic<std::size_t>& pending_total)
    : context_(ctx),
      options_(opts),
      mutex_(locking),
      wheel_(opts.slots, opts.levels),
      clock_(opts.clock, opts.tick, epoch),
      pending_total_(pending_total) {
  live_[index_.value].store(this, std::memory_order_release);
}

wheel_shard::~wheel_shard() { live_[index_.value].store(nullptr, std::memory_order_relaxed); }

wheel_shard::index_lease::index_lease() : value(indexes().take()) {}
wheel_shard::index_lease::~index_lease() { indexes().give_back(value); }

void wheel_shard::use_context_executor(const net::any_io_executor& context_ex) {
  auto guard = lock();
  // After shutdown the shard keeps no executor: nothing may outlive the services.
  if (!has_executor_.load(std::memory_order_relaxed) && !shut_down_) executor_ = context_ex;
  has_executor_.store(true, std::memory_order_release);
}

// ---- time ----

void wheel_shard::advance(steady_duration d) {
  assert(clock_.manual() && d >= steady_duration::zero()); // checked by the service
  auto guard = lock();
  clock_.advance_locked(d);
  const tick_t to = clock_.floor_tick(clock_.now());
  // What came due waits in the due list for the next step to hand it over: until then,
  // as after a step that its budget stopped, a backlog (due_backlog_locked). Said of
  // every advance to a new tick, whether or not anything came due, so that it depends
  // on time alone; but not before the first object on the shard (no executor, no step),
  // when nothing can have come due.
  if (to > wheel_.now() && executor_) due_backlog_ = true;
  wheel_.advance_to(to);
  // Also what a step whose next post threw left ready (post_step_from_cleanup_locked).
  if (has_work_locked() || due_backlog_) post_step_locked();
}

wheel_stats wheel_shard::stats() const {
  auto guard = lock();
  wheel_stats s = stats_;
  s.next_wakeup = clock_.tick_time(wheel_.next_slot_tick());
  return s;
}

// ---- entries ----

void wheel_shard::unschedule_locked(shard_entry& e) noexcept {
  wheel_.remove(e);
  disarm_when_idle_locked();
}

void wheel_shard::settle_idle() noexcept {
  // False once a settle or an arm since (settle_moot_locked) covered this caller's
  // deferral: both ran under the lock after it. A stale true only costs the lock.
  if (!settle_owed_.load(std::memory_order_relaxed)) return;
  auto guard = lock();
  settle_owed_.store(false, std::memory_order_relaxed);
  if (shut_down_) return; // shutdown took the work and the driver
  if (stats_.pending == 0) work_ = net::any_io_executor();
  disarm_when_idle_locked();
}

bool wheel_shard::context_runs_here_locked() const noexcept {
  const auto* ex = target_of<net::io_context::executor_type>(executor_);
  return ex != nullptr && ex->running_in_this_thread();
}

void wheel_shard::move_list_locked(wait_list& from, wait_list& to) noexcept {
  assert(to.ops.empty() && !to.linked() && !from.holds_inline_op());
  to.ops.swap(from.ops);
  wheel_.replace(from, to);
  for (wheel_op& op : to.ops) op.move_cancellation(to);
  assert(to.linked() == !to.ops.empty() && !from.linked());
}

ASIO_WHEEL_COLD void wheel_shard::forget_owners_locked(wait_list& list, wheel_op* moved,
                                                       std::size_t most) noexcept {
  std::size_t k = 0;
  for (wheel_op& op : list.ops) {
    if (k++ == most) break;
    if (&op != moved) op.forget_owner();
  }
}

ASIO_WHEEL_COLD void wheel_shard::take_first_ops_locked(wait_list& list, op_queue& out,
                                                        std::size_t most) noexcept {
  for (std::size_t k = 0; k < most; ++k) {
    wheel_op& leaving = list.ops.front();
    list.ops.pop_front();
    out.push_back(leaving);
  }
}

void wheel_shard::move_entry_locked(due_entry& from, due_entry& to) noexcept {
  assert(!to.linked() && to.on_due == from.on_due);
  // Parked until a tick's end, an entry is also named by address in after_tick_.
  std::replace(after_tick_.begin(), after_tick_.end(), &from, &to);
  wheel_.replace(from, to);
}

void wheel_shard::move_list_to_shard(wait_list& list, wheel_shard& to) noexcept {
  assert(&to != &at(list.shard_index()) && list.ops.empty() && !list.linked());
  list.owner_index.store(to.index(), std::memory_order_relaxed);
}

// ---- the op protocol ----

void wheel_shard::abort_locked(wait_list& list, wheel_op& op) {
  assert(holds(list, op));
  // What may throw first, with the op still waiting: the step's post, then its move
  // out of the owner's buffer. A cancel that throws changes nothing.
  post_step_locked();
  wheel_op& leaving = op.is_inline() ? *own_inline_locked(list) : op;
  list.ops.remove(leaving);
  complete_soon_locked(leaving, op_result::aborted);
  uncount_pending_locked(op_result::aborted);
  if (!list.ops.empty()) return;
  unschedule_locked(list);
  if (list.has_schedule()) unschedule_locked(static_cast<scheduled_wait_list&>(list).schedule);
}

void wheel_shard::withdraw(guard_type& guard, wait_list& list, wheel_op& op) noexcept {
  assert(guard.owns_lock() && holds(list, op));
  list.ops.remove(op);
  if (op.is_inline()) list.set_holds_inline_op(false);
  // Not counted as cancelled: as far as the stats go, it never was pending.
  release_pending_locked(1, idle_action::now);
  if (list.ops.empty() && list.linked()) unschedule_locked(list);
  discard(guard, op);
}

bool wheel_shard::cancel_op(const op_cancellation& c) {
  auto guard = lock();
  // Under the lock: a move may have re-pointed it, and the op's leaving cleared it.
  wait_list* const owner = c.owner.load(std::memory_order_relaxed);
  if (owner == nullptr) return false; // c's op has left its list: nothing to cancel
  wait_list& list = *owner;
  assert(list.shard_index() == index()); // c's op is in it (see op_cancellation)
  for (wheel_op& op : list.ops) {
    if (!op.cancelled_by(c)) continue;
    abort_locked(list, op); // ends the walk: the list changed
    return true;
  }
  return false;
}

void wheel_shard::drop_cancellation(const op_cancellation& c) noexcept {
  auto guard = lock();
  wait_list* const owner = c.owner.load(std::memory_order_relaxed);
  if (owner == nullptr) return; // the op left meanwhile, and forgot c itself
  for (wheel_op& op : owner->ops) {
    if (!op.cancelled_by(c)) continue;
    op.drop_cancellation();
    return;
  }
}

op_cancellation::~op_cancellation() {
  // Acquire: pairs with the op's release as it left, after which it writes nothing here.
  if (owner.load(std::memory_order_acquire) != nullptr) shard->drop_cancellation(*this);
}

void op_cancellation::operator()(net::cancellation_type type) {
  using ct = net::cancellation_type;
  if ((type & (ct::terminal | ct::partial | ct::total)) != ct::none) shard->cancel_op(*this);
}

// ---- driving ----

bool wheel_shard::disarm_wanted_locked() const noexcept {
  return armed_ != never_tick && (!wheel_.has_slotted() || stats_.pending == 0) &&
         !disarm_posted_ && executor_;
}

void wheel_shard::driver_follows_nothrow_locked(const shard_entry& e, tick_t k) noexcept {
  try {
    driver_follows_locked(e, k);
  } catch (...) {
    // The post or the arm threw: step_posted_ and armed_ say so, and the next call that
    // needs a step or an arming sees the entry.
  }
}

void wheel_shard::disarm_when_idle_locked() noexcept {
  // Posted, not at once: a request loop that removes its deadline and adds the next
  // one (cancel_after) would otherwise re-arm the timerfd on every request.
  if (disarm_wanted_locked()) post_disarm_locked();
}

void wheel_shard::post_disarm_locked() noexcept {
  try {
    post_in_locked(disarm_memory_, [this] {
      auto guard = lock();
      disarm_posted_ = false;
      // Asked again: an arming or an operation since may have made it moot. After
      // shutdown the shard has no executor, so it is not wanted then either.
      if (disarm_wanted_locked()) disarm_locked();
    });
  } catch (...) {
    // The post threw (a user's executor; on an io_context it cannot). The disarm only
    // saves a wake-up, so the callers go on: the driver stays armed, fires once for
    // nothing, and until then keeps run() from returning.
    return;
  }
  disarm_posted_ = true; // only once posted: a post that throws leaves none
}

template <class F>
void wheel_shard::post_in_locked(post_memory& memory, F f) {
  // The handler takes the lock that the caller holds now, so the flag that the caller
  // sets once this returns is set before the handler reads it. Posts never run inline.
  // On an io_context, through its own executor type: any_io_executor would not pass the
  // handler's allocator (the post_memory) on to Asio.
  if (const auto* io = target_of<net::io_context::executor_type>(executor_))
    net::post(*io, posted_in<F>{&memory, std::move(f)});
  else
    net::post(executor_, std::move(f));
}

void wheel_shard::disarm_locked() {
  arm_deferred_ = wheel_.has_slotted();
  if (armed_ == never_tick) return;
  armed_ = never_tick;
  if (driver_) driver_->cancel();
}

void wheel_shard::arm_locked() {
  if (clock_.manual() || shut_down_ || !executor_) return;
  // An entry placed while a step collects, and the wheel behind the clock: armed now,
  // the driver would be for the tick the batch stopped in, which has passed, and fire
  // at once, a wake-up for nothing (a take's hand-over step, once a batch). The arming
  // is owed instead: the step pays it as it ends, or the step it posts (run_step).
  if (collecting_ && wheel_behind_) {
    arm_owed_ = true;
    return;
  }
  arm_owed_ = false;
  if (stats_.pending == 0) {
    // Nothing to wake for; what is slotted is armed for once something is pending.
    disarm_locked();
    return;
  }
  arm_deferred_ = false;
  const tick_t next = wheel_.next_slot_tick();
  if (next == armed_) return;
  if (next == never_tick) {
    disarm_locked(); // nothing in a slot: nothing deferred either
    return;
  }
  if (!driver_) driver_.emplace(executor_);
  // Re-arming cancels the previous wait; its handler then sees operation_aborted.
  // armed_ names the new tick only once its wait is started.
  armed_ = never_tick;
  driver_->expires_at(clock_.tick_time(next));
  auto on_fired = [this](const error_code& ec) { on_driver(ec); };
  try {
    // Its operation in the driver's own memory: from the heap only while the wait
    // cancelled just now still holds that (until its handler has run).
    driver_->async_wait(posted_in<decltype(on_fired)>{&driver_memory_, on_fired});
  } catch (...) {
    // That allocation failed, and nothing wakes the wheel now: expires_at cancelled the
    // armed wait. A step arms again when it ends (run_step), and on an io_context its
    // post cannot fail (post_memory): the call that armed goes on as if armed, and the
    // step tries again, and again while memory is exhausted. Only if that post throws
    // too (a user's executor) does the exception reach the caller.
    post_step_locked();
    return;
  }
  armed_ = next;
}

void wheel_shard::on_driver(const error_code& ec) {
  if (ec == net::error::operation_aborted) return;
  {
    auto guard = lock();
    if (shut_down_) return;
    ++stats_.wakeups;
    armed_ = never_tick;
  }
  run_step(step_cause::driver_fired);
}

void wheel_shard::post_new_step_locked() {
  assert(!step_posted_ && executor_);
  post_in_locked(step_memory_, [this] { run_step(step_cause::posted); });
  step_posted_ = true; // only once posted: after a post that threw, the next call posts
}

void wheel_shard::run_step(step_cause cause) {
  auto guard = lock();
  if (shut_down_) return;
  if (cause == step_cause::posted) step_posted_ = false;
  // If anything throws, what is left gets a posted step: invoke's requeue posts one for
  // a handler's exception, and this scope covers the rest of the step (collecting, which
  // may move an inline op into a block of the per-thread cache, and arming the driver).
  struct step_scope {
    wheel_shard& self;
    guard_type& guard;
    const int exceptions = std::uncaught_exceptions();
    ~step_scope() {
      if (std::uncaught_exceptions() <= exceptions) return;
      if (!guard.owns_lock()) guard.lock();
      if (!self.shut_down_ && self.has_work_locked()) self.post_step_from_cleanup_locked();
    }
  } scope{*this, guard};

  // Rounds of collect and invoke, at most expiry_batch completions in all, beyond what
  // was ready when the step began: a chain (a handler starting an operation that
  // completes at once) runs here, without a post per element and the reactor round trip
  // that comes with each (post_step_locked posts one step for all that the step's
  // handlers queue); past the budget, the rest waits for that posted step, behind the
  // context's other work. A step with nothing chained takes the lock twice: to collect,
  // and to see that nothing is left.
  constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();
  std::size_t left = options_.expiry_batch == 0 ? unlimited : options_.expiry_batch;
  // What was ready when the step began (aborted and refused operations, takes that
  // completed at once, what a throwing handler left of a batch: the context's own doing
  // since the last step, not time's) all completes in it, outside the budget, as Asio's
  // cancelled handlers all run in its scheduler's next round. Were they bounded too, a
  // context whose handlers cancel more waits per round than expiry_batch (a busy
  // server's streams, each cancelling its wait when it goes quiet) would pile them up
  // in the ready queue without end, each holding its op's memory. The budget bounds
  // what time and chains add: expiries, and what the step's own handlers queue.
  std::size_t owed = ready_count_;
  for (;;) {
    // A round needs the time only while the wheel holds entries that it could make due,
    // or due ones, whose completions read it (lateness, a periodic timer's missed
    // ticks). A round that only completes ready operations, as each round of a chain of
    // takes served at once does, reads no clock: a steady_clock read is a vDSO call
    // whose ordered TSC read also waits for the loads before it (S2's chained take at
    // 1M: one element's miss each). Then nothing can come due, so the wheel is not behind.
    const bool timed = wheel_.has_slotted() || wheel_.has_due();
    const steady_time now = timed ? clock_.now() : steady_time();
    // The true clock, never an upper bound of it: else waits would fire early.
    assert(!timed || clock_.manual() || now <= std::chrono::steady_clock::now());
    // At most the step's budget made due at a time: taken while still in cache.
    // Entries parked until the tick's end go first (release_after_tick_locked).
    if (!clock_.manual()) {
      const bool released = after_tick_.empty() || release_after_tick_locked(left);
      wheel_behind_ = timed && !(released && wheel_.advance_to(clock_.floor_tick(now), left));
    }
    // Untimed, there is no due entry for collect_locked to hand over, the only thing
    // that reads `now` (timed's definition says so: nothing above made one due).
    op_queue batch;
    // collect_locked takes the ready queue first: the owed operations, then what
    // is left of the budget.
    assert(ready_count_ >= owed);
    const std::size_t budget = owed > unlimited - left ? unlimited : left + owed;
    std::size_t taken;
    {
      collecting_ = true;
      struct collected {
        bool& flag;
        ~collected() { flag = false; }
      } done{collecting_};
      taken = collect_locked(batch, now, budget);
    }
    // Only a budget spent stops collect before the due list is empty.
    due_backlog_ = wheel_.has_due();
    owed = 0;
    left = taken >= budget ? 0 : budget - taken;
    // Nothing slotted: nothing to arm for (arm_locked would find never_tick == armed_).
    // And an armed driver with nothing slotted is disarmed: a wait moved from its slot
    // straight to the due list (a reset to a passed time) left it armed for the slot,
    // and no unschedule follows such a wait's completion, so nothing else would; run()
    // would not return before the slot's tick.
    // Past the budget, a step is posted below, and it arms when it ends: armed now, for
    // the tick a storm's batch stopped in (passed), the driver would fire at once, a
    // wake-up and a timerfd arming for nothing per batch (a 200k-timer storm over five
    // ticks: 107 wake-ups, 16 without).
    const bool step_follows = left == 0 && has_work_locked();
    if (arm_owed_) {
      if (!step_follows) arm_locked();
    } else if (armed_ == never_tick) {
      if (wheel_.has_slotted() && !step_follows) arm_locked();
    } else if (disarm_wanted_locked()) {
      post_disarm_locked();
    }
    // Past the budget: post at once, so that another thread running the context can
    // take the next batch while this one is invoked.
    if (step_follows) post_step_locked();
    // An empty batch with budget left means collect found nothing ready or due.
    if (batch.empty()) return;
    guard.unlock();
    const bool whole = invoke(batch);
    guard.lock();
    if (shut_down_ || !has_work_locked()) return;
    // Left by the budget, or requeued after an exception that an executor captured
    // (which ends the step): a posted step. Otherwise the step's own handlers queued it.
    if (left == 0 || !whole) {
      post_step_locked();
      return;
    }
  }
}

bool wheel_shard::release_after_tick_locked(std::size_t due_limit) {
  // Finishes the unfinished tick alone, within the step's budget, so that the next
  // tick's entries come due only after the parked ones; if the budget stops it again,
  // they wait for the round that finishes it. Put due now without a word to the driver:
  // this step collects them.
  if (wheel_.tick_unfinished() && !wheel_.advance_to(wheel_.now(), due_limit)) return false;
  for (due_entry* e : after_tick_) {
    assert(e->linked() && !e->is_due()); // parked; its owner forgets it before unlinking
    place_locked(*e, steady_time::min());
  }
  after_tick_.clear();
  return true;
}

namespace {

// Asks for the lines of the state that holds `e` (null: nothing), a timer's as the most
// common, beyond the entry's first line, which the wheel's pop asked for. The step reads
// all of a timer's state when it expires: its waits, its expiry and the inline op with
// its handler. Asked for as many pops ahead as the entry's line, the misses of a storm's
// timers overlap instead of each expiry waiting for its own (W3 at 1M: 157-218 -> 134 ms,
// W6: 52-88 -> 51-52 ms, alternating with the build before, on a VM whose memory was
// slow). For another owner (a due_entry's: a queue element, a deadline) these are the
// same bytes from its entry on.
void ask_for_owner(const wheel_entry* e) noexcept {
  static_assert(sizeof(timer_state) > cache_line_bytes &&
                    sizeof(timer_state) <= 2 * cache_line_bytes,
                "the state's bytes past its first line's worth are one line's worth or less");
  if (e == nullptr) return;
  // prefetch_bytes(e, sizeof(timer_state)) but for the first line, already asked for.
  const auto* first = reinterpret_cast<const unsigned char*>(e);
  prefetch_bytes(first + cache_line_bytes, sizeof(timer_state) - cache_line_bytes);
}

} // namespace

std::size_t wheel_shard::collect_locked(op_queue& batch, steady_time now, std::size_t budget) {
  assert(budget > 0);
  // Ready operations (aborted, refused) leave in one splice when they fit the budget:
  // this runs under the lock that the threads starting and cancelling waits need.
  std::size_t taken = 0;
  if (ready_count_ <= budget) {
    batch.append(ready_);
    taken = ready_count_;
  } else {
    for (; taken < budget; ++taken) {
      wheel_op& op = ready_.front();
      ready_.pop_front();
      batch.push_back(op);
    }
  }
  ready_count_ -= taken;

  while (taken < budget) {
    auto* entry = static_cast<shard_entry*>(wheel_.pop_due());
    if (!entry) break;
    ask_for_owner(wheel_.due_ahead_entry());
    due_step step{*this, batch, budget - taken, now};
    if (entry->is_wait_list()) {
      // Only a timer's list has a deadline (the others are parked): it expired.
      try {
        taken += timer_state::expired(static_cast<timer_state&>(*entry), step);
      } catch (...) {
        // Its op could not move out of the timer's buffer (bad_alloc), and nothing left
        // the list: it is due again, ops and all, for the step that the step's scope
        // posts (run_step).
        if (!entry->linked()) wheel_.relink(*entry);
        throw;
      }
    } else {
      auto& due = static_cast<due_entry&>(*entry);
      assert(due.on_due != nullptr);
      taken += due.on_due(due, step);
    }
  }
  return taken;
}

bool wheel_shard::invoke(op_queue& batch) {
  // A handler may throw: the exception leaves run(), and what is left of the batch goes
  // back to the front of the ready queue, to complete, in order, on the next step.
  // The same happens when a completion dispatched to another executor (a strand) ran
  // inline and threw: that executor captured the exception, to rethrow it when this
  // step returns, and a second capture in the step would merge both into one
  // multiple_exceptions. So, as with steady_timer, each exception leaves run() alone,
  // while completions that do not throw, on any executor, share a step.
  struct requeue_rest {
    wheel_shard& self;
    op_queue& rest;
    ~requeue_rest() {
      if (rest.empty()) return;
      const std::size_t n = rest.count();
      auto guard = self.lock();
      self.ready_.prepend(rest);
      self.ready_count_ += n;
      self.post_step_from_cleanup_locked();
    }
  } guard{*this, batch};
  while (!batch.empty()) {
    wheel_op& op = batch.front();
    batch.pop_front();
    if (op.complete()) return false; // an executor captured an exception
  }
  return true;
}

void wheel_shard::shutdown() {
  op_queue doomed;
  std::optional<net::steady_timer> driver;
  net::any_io_executor work;
  net::any_io_executor executor;
  {
    auto guard = lock();
    shut_down_ = true;
    // Every pending op is on a wait_list, and every non-empty wait_list is on the
    // wheel (parked on the never list if it has no deadline of its own).
    wheel_.for_each([this, &doomed](wheel_entry& e) {
      auto& entry = static_cast<shard_entry&>(e);
      if (entry.is_wait_list())
        take_ops_locked(static_cast<wait_list&>(entry), doomed, op_result::aborted);
    });
    wheel_.clear();
    after_tick_.clear();
    doomed.append(ready_);
    ready_count_ = 0;
    if (options_.max_pending != 0)
      pending_total_.fetch_sub(stats_.pending, std::memory_order_relaxed);
    stats_.pending = 0;
    armed_ = never_tick;
    driver.swap(driver_);
    work.swap(work_);
    executor.swap(executor_);
    has_executor_.store(true, std::memory_order_release);
  }
  // Destroyed outside the lock: a handler's destructor may destroy I/O objects that
  // call back into the shard (a coroutine frame owning a timer, say).
  while (!doomed.empty()) {
    wheel_op& op = doomed.front();
    doomed.pop_front();
    op.destroy();
  }
}

} // namespace asio_wheel::detail
