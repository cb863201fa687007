#include <asio_wheel/error.hpp>
#include <asio_wheel/wheel_service.hpp>

#include <asio_wheel/detail/bits.hpp>
#include <asio_wheel/detail/config.hpp>

#include <algorithm>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

// net::config (Asio 1.32: Boost 1.87, standalone 1.32) is the documented way to read a
// context's concurrency hint; older Asio has none.
#if defined(ASIO_WHEEL_STANDALONE) && __has_include(<asio/config.hpp>)
#include <asio/config.hpp>
#define ASIO_WHEEL_HAS_ASIO_CONFIG 1
#elif !defined(ASIO_WHEEL_STANDALONE) && __has_include(<boost/asio/config.hpp>)
#include <boost/asio/config.hpp>
#define ASIO_WHEEL_HAS_ASIO_CONFIG 1
#endif

namespace asio_wheel {

net::execution_context::id wheel_service::id;

namespace {

using clock_type = wheel_service::clock_type;
using duration = wheel_service::duration;
using time_point = wheel_service::time_point;
using detail::never_tick;
using detail::op_result;
using detail::tick_t;

constexpr std::size_t max_shards = 16;
// The most slot lists all shards may hold together: 2^23 lists of 16 bytes, 128 MiB,
// built in well under a second. (Every slot of every level of every shard is a list
// head, allocated and constructed by install().)
constexpr std::size_t max_slot_lists = std::size_t{1} << 23;

const wheel_options& validated(const wheel_options& o) {
  if (o.tick <= duration::zero())
    throw std::invalid_argument("asio_wheel: wheel_options::tick must be positive");
  if (o.slots < 2 || o.slots > detail::wheel::max_slots || !detail::has_single_bit(o.slots))
    throw std::invalid_argument("asio_wheel: wheel_options::slots must be a power of two "
                                "in [2, 1048576], got " + std::to_string(o.slots));
  if (o.levels == 0)
    throw std::invalid_argument("asio_wheel: wheel_options::levels must be at least 1");
  const auto bits = static_cast<std::size_t>(detail::countr_zero(o.slots));
  if (o.levels > 64 / bits)
    throw std::invalid_argument(
        "asio_wheel: wheel_options::levels * log2(slots) must not exceed 64 (the tick "
        "counter's bits), got " + std::to_string(o.levels) + " levels of " +
        std::to_string(o.slots) + " slots");
  if (o.shards > 1 && o.clock == clock_mode::manual)
    throw std::invalid_argument("asio_wheel: wheel_options::shards > 1 needs clock_mode::steady "
                                "(advance() moves one wheel)");
  if (o.shards > max_shards)
    throw std::invalid_argument("asio_wheel: wheel_options::shards must be at most " +
                                std::to_string(max_shards) + ", got " + std::to_string(o.shards));
  return o;
}

// wheel_options::locking resolved (see locking_mode).
bool wants_locking(net::execution_context& ctx, const wheel_options& o) {
  switch (o.locking) {
  case locking_mode::on: return true;
  case locking_mode::off: return false;
  case locking_mode::automatic: break;
  }
#ifdef ASIO_WHEEL_HAS_ASIO_CONFIG
  // The keys Asio's own scheduler reads: a hint of 1 means one thread runs the context,
  // and locking == false that nothing may touch it from another.
  const net::config config(ctx);
  return config.get("scheduler", "concurrency_hint", 0) != 1 &&
         config.get("scheduler", "locking", true);
#else
  (void)ctx;
  return true;
#endif
}

// wheel_options::shards resolved. Without a lock there is one thread, and one wheel.
std::size_t shard_count_for(net::execution_context& ctx, const wheel_options& o) {
  if (o.shards != 0) return o.shards;
  if (o.clock == clock_mode::manual || !wants_locking(ctx, o)) return 1;
  const std::size_t threads = std::thread::hardware_concurrency();
  return std::clamp<std::size_t>(threads, 1, max_shards);
}

// The shard count, checked against the memory the geometry takes with it.
std::size_t checked_shard_count(net::execution_context& ctx, const wheel_options& o) {
  const std::size_t shards = shard_count_for(ctx, o);
  // slots <= 2^20 and levels <= 64 (validated), shards <= 16: no overflow.
  const std::size_t lists = o.slots * o.levels * shards;
  if (lists > max_slot_lists)
    throw std::invalid_argument(
        "asio_wheel: wheel_options: " + std::to_string(o.slots) + " slots * " +
        std::to_string(o.levels) + " levels * " + std::to_string(shards) +
        " shards would take " + std::to_string(lists * sizeof(detail::entry_list) >> 20) +
        " MiB of slot lists; at most " + std::to_string(max_slot_lists) +
        " lists (128 MiB) are allowed: use fewer slots, levels or shards");
  return shards;
}

} // namespace

wheel_service::wheel_service(net::execution_context& ctx)
    : wheel_service(ctx, wheel_options{}) {}

wheel_service::wheel_service(net::execution_context& ctx, const wheel_options& opts)
    : wheel_service(ctx, validated(opts), clock_type::now(), nullptr) {
  for (std::size_t i = checked_shard_count(ctx, options_); i > 1; --i)
    extra_shards_.push_back(
        std::unique_ptr<wheel_service>(new wheel_service(ctx, options_, epoch_, this)));
}

// Shard 0 when `first` is null; a further shard otherwise, with shard 0's options and
// epoch (so that all shards tick together).
wheel_service::wheel_service(net::execution_context& ctx, const wheel_options& opts,
                             time_point epoch, wheel_service* first)
    : service(ctx),
      options_(opts),
      mutex_(wants_locking(ctx, opts)),
      wheel_(opts.slots, opts.levels),
      epoch_(epoch),
      tick_(opts.tick.count()),
      manual_now_(epoch_),
      first_(first ? first : this) {}

wheel_service::~wheel_service() = default;

wheel_service& install(net::execution_context& ctx, const wheel_options& opts) {
  validated(opts);
  // make_service throws service_already_exists when a wheel is there already.
  return net::make_service<wheel_service>(ctx, opts);
}

// ---- clock ----

time_point wheel_service::now() const {
  if (options_.clock == clock_mode::steady) return clock_type::now();
  auto guard = lock();
  return manual_now_;
}

time_point wheel_service::tick_time(tick_t k) const noexcept {
  const auto room = static_cast<std::uint64_t>((time_point::max() - epoch_).count());
  if (k > room / static_cast<std::uint64_t>(tick_)) return time_point::max();
  return epoch_ + duration(static_cast<duration::rep>(k) * tick_);
}

tick_t wheel_service::floor_tick(time_point t) const noexcept {
  if (t <= epoch_) return 0;
  return static_cast<tick_t>((t - epoch_).count() / tick_);
}

void wheel_service::advance(duration d) {
  if (options_.clock != clock_mode::manual)
    throw std::logic_error("asio_wheel: advance() needs clock_mode::manual");
  if (d < duration::zero())
    throw std::invalid_argument("asio_wheel: advance() takes a non-negative duration");
  auto guard = lock();
  manual_now_ = detail::saturating_add(manual_now_, d);
  wheel_.advance_to(floor_tick(manual_now_));
  if (wheel_.has_due()) post_step_locked();
}

wheel_stats wheel_service::stats() const {
  wheel_stats sum;
  {
    auto guard = lock();
    sum = stats_;
    sum.next_wakeup = tick_time(wheel_.next_slot_tick());
  }
  for (const auto& shard : extra_shards_) {
    const wheel_stats s = shard->stats();
    sum.pending += s.pending;
    sum.expired += s.expired;
    sum.cancelled += s.cancelled;
    sum.rejected += s.rejected;
    sum.wakeups += s.wakeups;
    sum.max_lateness = std::max(sum.max_lateness, s.max_lateness);
    sum.next_wakeup = std::min(sum.next_wakeup, s.next_wakeup);
  }
  return sum;
}

wheel_service& wheel_service::pick_shard() noexcept {
  if (extra_shards_.empty()) return *this;
  const std::size_t i = next_shard_.fetch_add(1, std::memory_order_relaxed) % shard_count();
  return i == 0 ? *this : *extra_shards_[i - 1];
}

// ---- registration ----

void wheel_service::attach(const net::any_io_executor& context_ex) {
  auto guard = lock();
  // After shutdown the shard keeps no executor: nothing may outlive the services.
  if (!attached_.load(std::memory_order_relaxed) && !shutdown_) executor_ = context_ex;
  attached_.store(true, std::memory_order_release);
}

bool wheel_service::add_pending_locked() {
  if (options_.max_pending != 0) {
    // The limit is over all shards: claim a place in shard 0's count.
    std::atomic<std::size_t>& total = first_->total_pending_;
    std::size_t n = total.load(std::memory_order_relaxed);
    do {
      if (n >= options_.max_pending) {
        ++stats_.rejected;
        return false;
      }
    } while (!total.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  }
  // A pending wait is outstanding work of the context, as with steady_timer: held as
  // one tracked executor while anything is pending.
  if (stats_.pending++ == 0)
    work_ = net::prefer(executor_, net::execution::outstanding_work.tracked);
  return true;
}

void wheel_service::remove_pending_locked(op_result r, std::size_t n) noexcept {
  if (n == 0) return;
  stats_.pending -= n;
  if (options_.max_pending != 0) first_->total_pending_.fetch_sub(n, std::memory_order_relaxed);
  if (r == op_result::success)
    stats_.expired += n;
  else
    stats_.cancelled += n;
  if (stats_.pending == 0) work_ = net::any_io_executor();
}

void wheel_service::complete_locked(detail::wait_op* op, op_result r) {
  op->set_result(r);
  ready_.push_back(*op);
  ++ready_count_;
  post_step_locked();
}

void wheel_service::schedule_locked(detail::service_entry& e, time_point t) {
  schedule_entry_locked(e, to_tick(t));
}

void wheel_service::unschedule_locked(detail::service_entry& e) {
  wheel_.remove(e);
  disarm_when_idle_locked();
}

void wheel_service::disarm_when_idle_locked() {
  // Posted, not at once: a request loop that removes its deadline and adds the next
  // one (cancel_after) would otherwise re-arm the timerfd on every request.
  if (armed_ != never_tick && wheel_.slotted() == 0 && !disarm_posted_ && executor_) {
    disarm_posted_ = true;
    net::post(executor_, [this] {
      auto guard = lock();
      disarm_posted_ = false;
      if (shutdown_ || armed_ == never_tick || wheel_.slotted() != 0) return;
      armed_ = never_tick;
      if (driver_) driver_->cancel();
    });
  }
}

// ---- the timer operations ----

std::size_t wheel_service::abort_waits_locked(detail::wait_entry& e) {
  std::size_t n = 0;
  while (!e.waits.empty()) {
    detail::wait_op& op = e.waits.front();
    e.waits.pop_front();
    op.set_result(op_result::aborted);
    ready_.push_back(op);
    ++n;
  }
  ready_count_ += n;
  if (n != 0) {
    // Post before releasing the pending count's work, so that the context never sees
    // zero outstanding work (and stops) while aborted handlers are queued.
    post_step_locked();
    remove_pending_locked(op_result::aborted, n);
    unschedule_locked(e);
  }
  return n;
}

void wheel_service::start_wait(detail::wait_entry& e, detail::wait_op* op) {
  auto guard = lock();
  if (shutdown_) {
    guard.unlock();
    op->destroy();
    return;
  }
  if (!add_pending_locked()) {
    complete_locked(op, op_result::too_many);
    return;
  }
  e.waits.push_back(*op);
  if (!e.linked()) schedule_entry_locked(e, to_tick(e.expiry));
}

std::size_t wheel_service::cancel(detail::wait_entry& e) {
  auto guard = lock();
  return abort_waits_locked(e);
}

void wheel_service::abort_wait_locked(detail::wait_entry& e, detail::wait_op& op) {
  e.waits.remove(op);
  complete_locked(&op, op_result::aborted);
  remove_pending_locked(op_result::aborted);
  if (e.waits.empty()) unschedule_locked(e);
}

std::size_t wheel_service::cancel_one(detail::wait_entry& e) {
  auto guard = lock();
  if (e.waits.empty()) return 0;
  abort_wait_locked(e, e.waits.front());
  return 1;
}

bool wheel_service::cancel_op(const detail::op_cancellation& c) {
  auto guard = lock();
  detail::wait_entry& e = *c.owner; // under the lock: a move may have re-pointed it
  for (detail::wait_op& op : e.waits) {
    if (op.cancellation() != &c) continue;
    abort_wait_locked(e, op); // ends the walk: the queue changed
    return true;
  }
  return false;
}

std::size_t wheel_service::expires_at(detail::wait_entry& e, time_point t) {
  auto guard = lock();
  const std::size_t n = abort_waits_locked(e);
  e.expiry = t;
  return n;
}

void wheel_service::move_entry(detail::wait_entry& from, detail::wait_entry& to) noexcept {
  auto guard = lock();
  to.expiry = from.expiry;
  to.waits.clear();
  to.waits.swap(from.waits);
  wheel_.replace(from, to);
  for (auto& op : to.waits)
    if (detail::op_cancellation* c = op.cancellation()) c->owner = &to;
}

// ---- driving ----

void wheel_service::post_step_locked() {
  if (step_posted_ || !executor_) return;
  step_posted_ = true;
  net::post(executor_, [this] { run_step(false); });
}

void wheel_service::arm_locked() {
  if (options_.clock != clock_mode::steady || shutdown_ || !executor_) return;
  const tick_t next = wheel_.next_slot_tick();
  if (next == armed_) return;
  if (next == never_tick) {
    armed_ = never_tick;
    if (driver_) driver_->cancel();
    return;
  }
  if (!driver_) driver_.emplace(executor_);
  armed_ = next;
  // Re-arming cancels the previous wait; its handler then sees operation_aborted.
  driver_->expires_at(tick_time(next));
  driver_->async_wait([this](const error_code& ec) { on_driver(ec); });
}

void wheel_service::on_driver(const error_code& ec) {
  if (ec == net::error::operation_aborted) return;
  {
    auto guard = lock();
    if (shutdown_) return;
    ++stats_.wakeups;
    armed_ = never_tick;
  }
  run_step(true);
}

void wheel_service::run_step(bool from_driver) {
  detail::op_queue batch;
  {
    auto guard = lock();
    if (shutdown_) return;
    if (!from_driver) step_posted_ = false;
    const time_point now = now_locked();
    if (options_.clock == clock_mode::steady) wheel_.advance_to(floor_tick(now));
    collect_locked(batch, now);
    if (!ready_.empty() || wheel_.has_due()) post_step_locked();
    if (armed_ == never_tick) arm_locked();
  }
  invoke(batch);
}

void wheel_service::collect_locked(detail::op_queue& batch, time_point now) {
  const std::size_t budget =
      options_.expiry_batch == 0 ? std::numeric_limits<std::size_t>::max()
                                 : options_.expiry_batch;
  // Ready operations (aborted, refused) leave in one splice when they fit the budget:
  // this runs under the lock that the threads starting and cancelling waits need.
  std::size_t taken = 0;
  if (ready_count_ <= budget) {
    batch.append(ready_);
    taken = ready_count_;
  } else {
    for (; taken < budget; ++taken) {
      detail::wait_op& op = ready_.front();
      ready_.pop_front();
      batch.push_back(op);
    }
  }
  ready_count_ -= taken;
  if (taken >= budget || !wheel_.has_due()) return;

  while (taken < budget) {
    auto* entry = static_cast<detail::service_entry*>(wheel_.pop_due());
    if (!entry) break;
    if (entry->on_due) {
      taken += entry->on_due(*entry, batch, budget - taken);
      continue;
    }
    // A timer: all its waits complete with success.
    auto& timer = static_cast<detail::wait_entry&>(*entry);
    // Expiries before the wheel existed count from its start (no overflow from
    // time_point::min()).
    const time_point expiry = std::max(timer.expiry, epoch_);
    if (now > expiry) {
      const auto late = std::chrono::duration_cast<std::chrono::nanoseconds>(now - expiry);
      if (late > stats_.max_lateness) stats_.max_lateness = late;
    }
    std::size_t n = 0;
    for (auto& op : timer.waits) op.set_result(op_result::success), ++n;
    batch.append(timer.waits);
    remove_pending_locked(op_result::success, n);
    taken += n;
  }
}

void wheel_service::invoke(detail::op_queue& batch) {
  // A handler may throw: the exception leaves run(), and what is left of the batch goes
  // back to the front of the ready queue, to complete, in order, on the next step.
  // The same happens after a completion dispatched to another executor (a strand):
  // Asio may run that handler inline and capture its exception, and a second capture
  // in one scheduler operation would merge both into multiple_exceptions. So, as with
  // steady_timer, each such completion gets a scheduler operation of its own.
  struct requeue_rest {
    wheel_service& self;
    detail::op_queue& rest;
    ~requeue_rest() {
      if (rest.empty()) return;
      const std::size_t n = rest.count();
      auto guard = self.lock();
      self.ready_.prepend(rest);
      self.ready_count_ += n;
      self.post_step_locked();
    }
  } guard{*this, batch};
  while (!batch.empty()) {
    detail::wait_op& op = batch.front();
    batch.pop_front();
    if (op.complete()) break;
  }
}

void wheel_service::shutdown() {
  for (auto& shard : extra_shards_) shard->shutdown();
  detail::op_queue doomed;
  std::optional<net::steady_timer> driver;
  net::any_io_executor work;
  net::any_io_executor executor;
  {
    auto guard = lock();
    shutdown_ = true;
    wheel_.for_each([&doomed](detail::wheel_entry& e) {
      auto& entry = static_cast<detail::service_entry&>(e);
      if (!entry.on_due) doomed.append(static_cast<detail::wait_entry&>(entry).waits);
    });
    wheel_.clear();
    doomed.append(ready_);
    ready_count_ = 0;
    if (options_.max_pending != 0)
      first_->total_pending_.fetch_sub(stats_.pending, std::memory_order_relaxed);
    stats_.pending = 0;
    armed_ = never_tick;
    driver.swap(driver_);
    work.swap(work_);
    executor.swap(executor_);
    attached_.store(true, std::memory_order_release);
  }
  // Destroyed outside the lock: a handler's destructor may destroy I/O objects that
  // call back into the service (a coroutine frame owning a timer, say).
  while (!doomed.empty()) {
    detail::wait_op& op = doomed.front();
    doomed.pop_front();
    op.destroy();
  }
}

// ---- errors ----

namespace detail {

void op_cancellation::operator()(net::cancellation_type type) {
  using ct = net::cancellation_type;
  if ((type & (ct::terminal | ct::partial | ct::total)) != ct::none) service->cancel_op(*this);
}

error_code to_error_code(op_result r) noexcept {
  switch (r) {
  case op_result::success: return {};
  case op_result::aborted: return net::error::operation_aborted;
  case op_result::too_many: return error::make_error_code(error::too_many_timers);
  }
  return {};
}

} // namespace detail

} // namespace asio_wheel
