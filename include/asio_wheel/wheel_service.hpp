// wheel_service: the timing wheels of an execution context, and install().
//
// A service (a shard) owns a wheel, a lock and a driver: one net::steady_timer
// on the context, armed for the first tick at which a slot comes due and only while
// something is on the wheel. When the driver fires, the service advances the wheel to
// the current tick and hands the waits that came due to their handlers, at most
// `expiry_batch` per step (the rest follow in a posted step, in order). The registered
// service is shard 0 and owns the others (wheel_options::shards); each I/O object
// lives on one shard.
//
// Guarantees: a wait never completes before its expiry by the service's clock; while
// the context keeps up it completes within one tick (plus dispatch) after it. Each
// wait completes exactly once. shutdown() (context destruction) destroys pending
// handlers without invoking them.
//
// Executors: each shard runs its driver and steps on the plain executor of the context
// (detail::context_executor), never on a user's strand and never tracking work; work
// is tracked only while waits are pending. Handlers run on their own associated
// executors. shutdown() releases every executor and every piece of work the service
// holds, so the order in which the context destroys its services does not matter.
//
// Thread safety: the service is safe to use from any thread; each shard takes a lock
// unless wheel_options::locking says otherwise (see options.hpp: with `automatic`, no
// lock only where the context promises one thread).
// The I/O objects themselves are, like steady_timer, not safe to share between
// threads without a strand.
#ifndef ASIO_WHEEL_WHEEL_SERVICE_HPP
#define ASIO_WHEEL_WHEEL_SERVICE_HPP

#include <asio_wheel/detail/context_executor.hpp>
#include <asio_wheel/detail/upper_clock.hpp>
#include <asio_wheel/detail/wait_op.hpp>
#include <asio_wheel/detail/wheel.hpp>
#include <asio_wheel/options.hpp>

#include <asio_wheel/detail/config.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace asio_wheel {

namespace detail {

// t + d, clamped to the time_point range.
inline std::chrono::steady_clock::time_point saturating_add(
    std::chrono::steady_clock::time_point t, std::chrono::steady_clock::duration d) noexcept {
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;
  if (d > duration::zero() && t > time_point::max() - d) return time_point::max();
  if (d < duration::zero() && t < time_point::min() - d) return time_point::min();
  return t + d;
}

} // namespace detail

class wheel_service : public net::execution_context::service {
public:
  using clock_type = std::chrono::steady_clock;
  using duration = clock_type::duration;
  using time_point = clock_type::time_point;

  // The key under which the context registers the service.
  static net::execution_context::id id;

  // With default options; what use_service<wheel_service>(ctx) creates.
  explicit wheel_service(net::execution_context& ctx);
  // Validates `opts` (std::invalid_argument on bad options): see install().
  wheel_service(net::execution_context& ctx, const wheel_options& opts);
  ~wheel_service() override;

  const wheel_options& options() const noexcept { return options_; }

  // The service's clock: steady_clock::now(), or the virtual time in manual mode.
  time_point now() const;

  // Manual mode: moves virtual time forward by d (>= 0), tick by tick, and queues the
  // completion of every wait that became due, in expiry order; run or poll the context
  // to invoke them. std::logic_error in steady mode, std::invalid_argument if d < 0.
  void advance(duration d);

  // Summed over the shards (max_lateness: the worst of them).
  wheel_stats stats() const;

  // How many independent wheels the service runs (wheel_options::shards, resolved).
  std::size_t shard_count() const noexcept { return 1 + extra_shards_.size(); }

  // ---- The implementation interface of asio_wheel's I/O objects. ----
  // Not for applications: these are the steps the I/O objects in this library are
  // made of, each taking the service's lock as needed.

  // Gives the shard the executor its driver and steps run on: the plain executor of
  // the context (detail::context_executor). The first call wins; shutdown() releases it.
  void attach(const net::any_io_executor& context_ex);
  // True once attach() ran: an I/O object then skips deriving the executor.
  bool attached() const noexcept { return attached_.load(std::memory_order_acquire); }

  // The shard an I/O object constructed now lives on for good: the shards take turns,
  // so that timers started from different threads mostly take different locks. Each
  // shard is a wheel_service of its own (not registered with the context), owned and
  // shut down by the registered one, which is shard 0. Every call of the interface
  // below goes to the object's shard.
  wheel_service& pick_shard() noexcept;

  // now() + d, saturated to the time_point range. In steady mode "now" is
  // detail::upper_clock::now(): never behind steady_clock, at most a few microseconds
  // ahead, and without the serializing clock read. (CLOCK_MONOTONIC_COARSE would be
  // cheap too, but on the VMs we measured it lagged steady_clock by 3 to 23 ms, more
  // than its stated 4 ms resolution, so a deadline built on it could fire early.)
  time_point deadline_after(duration d) const {
    if (options_.clock == clock_mode::steady)
      return detail::saturating_add(detail::upper_clock::now(), d);
    return detail::saturating_add(now(), d);
  }

  // Queues `op` on the timer state `e` and puts `e` on the wheel for e.expiry. Completes
  // `op` with too_many_timers (as if by post) if max_pending waits are pending.
  void start_wait(detail::wait_entry& e, detail::wait_op* op);
  // Completes every wait of `e` with operation_aborted; returns how many.
  std::size_t cancel(detail::wait_entry& e);
  // Completes the oldest wait of `e` with operation_aborted; returns 1, or 0 if none.
  std::size_t cancel_one(detail::wait_entry& e);
  // Per-operation cancellation: completes the op whose cancellation handler is `c`
  // with operation_aborted if it is still waiting on c.owner; false if it is not
  // (handed over for completion already, or `c` is stale).
  bool cancel_op(const detail::op_cancellation& c);
  // cancel(e), then sets the expiry.
  std::size_t expires_at(detail::wait_entry& e, time_point t);
  // Moves the expiry; pending waits stay and complete at the new one. O(1).
  //
  // A later expiry, on an entry in a slot, only overwrites the expiry and the entry's
  // deadline tick, inline (wheel::reschedule's lazy rule): that is the idle-connection
  // path, with no relink, no call and no clock read beyond deadline_after()'s.
  void reset_at(detail::wait_entry& e, time_point t) {
    auto guard = lock();
    e.expiry = t;
    if (!e.waits.empty()) schedule_entry_locked(e, to_tick(t));
  }
  // The owner of `from` moved to where `to` is: `to` takes over its place and waits,
  // and their cancellation handlers now point at `to`.
  void move_entry(detail::wait_entry& from, detail::wait_entry& to) noexcept;

  // Lower-level steps for owners with their own entries (delay queue elements,
  // deadlines). The caller holds the lock (lock()) for the *_locked calls.
  class lock_type;
  std::unique_lock<lock_type> lock() const { return std::unique_lock<lock_type>(mutex_); }
  void schedule_locked(detail::service_entry& e, time_point t);
  void unschedule_locked(detail::service_entry& e);
  // Registers `op` as pending (counts toward max_pending and keeps the context's
  // work); false if max_pending refuses it.
  bool add_pending_locked();
  // The reverse, for an op leaving its owner's list; `r` says how it ends.
  void remove_pending_locked(detail::op_result r, std::size_t n = 1) noexcept;
  // Queues `op` for completion with `r` on the next step (never inline).
  void complete_locked(detail::wait_op* op, detail::op_result r);
  bool stopped_locked() const noexcept { return shutdown_; }
  // The time at which the wheel can first complete something due at t: t rounded up
  // to the wheel's tick (time_point::max() if that is out of range). Lateness is
  // measured from it, so that the rounding never counts as late.
  time_point rounded_up(time_point t) const noexcept { return tick_time(to_tick(t)); }
  // now() for a caller that holds the lock (an on_due step, which runs under it).
  time_point now_locked() const noexcept {
    return options_.clock == clock_mode::steady ? clock_type::now() : manual_now_;
  }

  class lock_type {
  public:
    explicit lock_type(bool enabled) noexcept : enabled_(enabled) {}
    void lock() { if (enabled_) mutex_.lock(); }
    void unlock() { if (enabled_) mutex_.unlock(); }
  private:
    std::mutex mutex_;
    bool enabled_;
  };

private:
  wheel_service(net::execution_context& ctx, const wheel_options& opts,
                time_point epoch, wheel_service* first);

  void shutdown() override;

  // Rounds up: never early.
  detail::tick_t to_tick(time_point t) const noexcept {
    if (t == time_point::max()) return detail::never_tick;
    if (t <= epoch_) return 0;
    const auto since = static_cast<std::uint64_t>((t - epoch_).count());
    const auto tick = static_cast<std::uint64_t>(tick_);
    return since / tick + (since % tick != 0);
  }
  time_point tick_time(detail::tick_t k) const noexcept;
  detail::tick_t floor_tick(time_point t) const noexcept; // rounds down
  // Links or moves `e` to tick k, then makes the driver agree: a step if it is due now,
  // an earlier arming if it comes before the armed tick, a disarm if it left the slots.
  void schedule_entry_locked(detail::service_entry& e, detail::tick_t k) {
    if (e.linked())
      wheel_.reschedule(e, k);
    else
      wheel_.insert(e, k);
    if (e.is_due())
      post_step_locked();
    else if (k < armed_)
      arm_locked();
    else if (k == detail::never_tick)
      disarm_when_idle_locked();
  }
  // The driver stays armed for a slot that may now be empty; it then wakes once for
  // nothing. An empty wheel disarms it, so that run() can return and no wake-up is
  // spent, but only after the handlers queued now have run: see the definition.
  void disarm_when_idle_locked();
  void arm_locked();
  void post_step_locked();
  void on_driver(const error_code& ec);
  void run_step(bool from_driver);
  // Hands over ready and due operations; `now` (the step's clock read) dates lateness.
  void collect_locked(detail::op_queue& batch, time_point now);
  void invoke(detail::op_queue& batch);
  std::size_t abort_waits_locked(detail::wait_entry& e);
  // Takes `op` off `e` and completes it with operation_aborted.
  void abort_wait_locked(detail::wait_entry& e, detail::wait_op& op);

  const wheel_options options_;
  mutable lock_type mutex_;
  detail::wheel wheel_;
  const time_point epoch_;             // the time of tick 0
  const duration::rep tick_;           // the tick in clock units
  time_point manual_now_;              // virtual time (manual mode)

  std::atomic<bool> attached_{false};
  net::any_io_executor executor_;     // the context's plain one, set by attach()
  net::any_io_executor work_;         // tracked while waits are pending
  std::optional<net::steady_timer> driver_;
  detail::tick_t armed_ = detail::never_tick; // tick the driver is armed for

  detail::op_queue ready_;             // handed over, to complete on the next step
  std::size_t ready_count_ = 0;        // ready_'s length
  bool step_posted_ = false;
  bool disarm_posted_ = false;
  bool shutdown_ = false;

  wheel_stats stats_;

  // Shard 0 (the registered service) owns the others; every shard points at it.
  wheel_service* const first_;
  std::vector<std::unique_ptr<wheel_service>> extra_shards_;
  std::atomic<std::size_t> next_shard_{0};
  // Waits pending over all shards, counted only when max_pending is set (in shard 0).
  std::atomic<std::size_t> total_pending_{0};
};

// Creates the context's wheel_service with these options. Throws std::invalid_argument
// for bad options (tick <= 0, slots not a power of two in [2, 2^20], levels == 0 or
// levels * log2(slots) > 64) and net::service_already_exists if the context
// already has one (a timer constructed on it creates one with defaults).
wheel_service& install(net::execution_context& ctx, const wheel_options& opts);

namespace detail {

// The wheel of `ex`'s execution context (created with defaults if it has none), with
// the context's plain executor attached for the driver: how every I/O object finds its
// shard.
template <class Executor>
wheel_service& use_wheel(const Executor& ex) {
  auto& shard = net::use_service<wheel_service>(
                    net::query(ex, net::execution::context))
                    .pick_shard();
  if (!shard.attached()) shard.attach(context_executor(ex));
  return shard;
}

} // namespace detail

} // namespace asio_wheel

#endif
