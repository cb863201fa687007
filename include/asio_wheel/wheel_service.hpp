// wheel_service: the timing wheels of an execution context, and install().
//
// The service owns `shard_count()` independent wheels (detail::wheel_shard), each with
// its own lock and driver: one net::steady_timer on the context, armed for the first
// tick at which a wait comes due and only while waits are in the wheel's slots. An I/O
// object lives on the shard of the thread that constructs it (wheel_options::sharding)
// and stays there. When a driver
// fires, its shard advances the wheel to the current tick and hands the waits that came
// due to their handlers, at most `expiry_batch` per step (the rest follow in a posted
// step, in order).
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

#include <asio_wheel/options.hpp>

#include <asio_wheel/detail/config.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

namespace asio_wheel {

namespace detail {
class wheel_shard;
struct service_access;
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
  // completion of every wait that became due, in the order of their ticks (expiries
  // within one tick are one time at the wheel's resolution: those waits complete in no
  // particular order, as in steady mode; a delay_queue orders its elements within a
  // tick too); run or poll the context to invoke them. std::logic_error in steady mode,
  // std::invalid_argument if d < 0.
  void advance(duration d);

  // Summed over the shards (max_lateness: the worst of them; next_wakeup: the first).
  wheel_stats stats() const;

  // How many independent wheels the service runs (wheel_options::shards, resolved).
  std::size_t shard_count() const noexcept { return shards_.size(); }

private:
  friend struct detail::service_access;

  void shutdown() override;

  // The shard for an I/O object constructed now, by wheel_options::sharding: the
  // constructing thread's, or the next in turn.
  detail::wheel_shard& next_shard() noexcept;
  // The shard next_shard() always gives this thread (one shard, or by_thread), else
  // nullptr (round_robin over several).
  detail::wheel_shard* thread_shard() noexcept;

  const wheel_options options_;
  // Waits pending over all shards, counted only when max_pending is set.
  std::atomic<std::size_t> pending_total_{0};
  std::vector<std::unique_ptr<detail::wheel_shard>> shards_; // never empty
  std::atomic<std::size_t> next_shard_{0};
};

// Creates the context's wheel_service with these options. Throws std::invalid_argument
// for bad options (tick <= 0; slots not a power of two in [2, 2^20]; levels == 0 or
// levels * log2(slots) > 64; shards > 16, or shards > 1 with the manual clock; a
// geometry over 2^20 slots in all) and net::service_already_exists if the context
// already has one (a timer constructed on it creates one with defaults).
wheel_service& install(net::execution_context& ctx, const wheel_options& opts);

namespace detail {

// How the library's I/O objects reach a service's shards (detail::shard_for).
struct service_access {
  static wheel_shard& next_shard(wheel_service& s) noexcept { return s.next_shard(); }
  static wheel_shard* thread_shard(wheel_service& s) noexcept { return s.thread_shard(); }
};

} // namespace detail

} // namespace asio_wheel

#endif
