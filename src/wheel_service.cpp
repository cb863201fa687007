// The service: option checks, the shards, and what it answers for all of them.
#include <asio_wheel/wheel_service.hpp>

#include <asio_wheel/detail/bits.hpp>
#include <asio_wheel/detail/config.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <algorithm>
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

using duration = wheel_service::duration;

constexpr std::size_t max_shards = 16;
// The most slots all shards may hold together: 2^20 slots of 129 bytes (their chains'
// list heads and turn, wheel::slot_bytes), 129 MiB, built in well under a second.
// (Every slot of every level of every shard is allocated and constructed by install().)
constexpr std::size_t max_total_slots = std::size_t{1} << 20;

const wheel_options& validated(const wheel_options& o) {
  if (o.tick <= duration::zero())
    throw std::invalid_argument("asio_wheel: wheel_options::tick must be positive");
  if (o.slots < 2 || o.slots > detail::wheel::max_slots || !detail::has_single_bit(o.slots))
    throw std::invalid_argument("asio_wheel: wheel_options::slots must be a power of two "
                                "in [2, 1048576], got " + std::to_string(o.slots));
  // Tick k is the time epoch + k * tick (detail/wheel_clock.hpp). A tick so long that one
  // rotation of level 0 passes time_point::max() puts the ticks of finite deadlines past
  // the clock's end: such waits would round up to a time that never comes. Half the
  // clock's range leaves room for the epoch (steady_clock::now() at install).
  if (o.tick > duration::max() / 2 / static_cast<duration::rep>(o.slots))
    throw std::invalid_argument(
        "asio_wheel: wheel_options::tick * slots must be at most half of steady_clock's "
        "range (about 146 years), so that the wheel's ticks are times the clock reaches; got " +
        std::to_string(o.tick.count()) + " clock units * " + std::to_string(o.slots) + " slots");
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
  if (o.clock != clock_mode::steady && o.clock != clock_mode::manual)
    throw std::invalid_argument("asio_wheel: wheel_options::clock is not a clock_mode");
  if (o.locking != locking_mode::automatic && o.locking != locking_mode::on &&
      o.locking != locking_mode::off)
    throw std::invalid_argument("asio_wheel: wheel_options::locking is not a locking_mode");
  if (o.sharding != shard_policy::by_thread && o.sharding != shard_policy::round_robin)
    throw std::invalid_argument("asio_wheel: wheel_options::sharding is not a shard_policy");
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
  // The key Asio's own scheduler reads: locking == false (the UNSAFE hints) says that
  // nothing touches the context from another thread. A hint of 1 does not: it says one
  // thread runs the context, and Asio still locks for the others (a thread_pool(1) has
  // that hint, and is used from every thread but its own).
  const net::config config(ctx);
  return config.get("scheduler", "locking", true);
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
  const std::size_t slots = o.slots * o.levels * shards;
  if (slots > max_total_slots)
    throw std::invalid_argument(
        "asio_wheel: wheel_options: " + std::to_string(o.slots) + " slots * " +
        std::to_string(o.levels) + " levels * " + std::to_string(shards) +
        " shards would take " + std::to_string(slots * detail::wheel::slot_bytes >> 20) +
        " MiB of slots; at most " + std::to_string(max_total_slots) + " slots (" +
        std::to_string(max_total_slots * detail::wheel::slot_bytes >> 20) +
        " MiB) are allowed: use fewer slots, levels or shards");
  return shards;
}

} // namespace

wheel_service::wheel_service(net::execution_context& ctx)
    : wheel_service(ctx, wheel_options{}) {}

wheel_service::wheel_service(net::execution_context& ctx, const wheel_options& opts)
    : service(ctx), options_(validated(opts)) {
  const std::size_t count = checked_shard_count(ctx, options_);
  const bool locking = wants_locking(ctx, options_);
  const auto epoch = clock_type::now(); // every shard's tick 0: they tick together
  shards_.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    shards_.push_back(std::make_unique<detail::wheel_shard>(ctx, options_, epoch, locking,
                                                            pending_total_));
}

wheel_service::~wheel_service() {
  // Threads' cached lookups (detail::shard_of) may name this service.
  detail::service_generation.fetch_add(1, std::memory_order_release);
}

wheel_service& install(net::execution_context& ctx, const wheel_options& opts) {
  validated(opts);
  // make_service throws service_already_exists when a wheel is there already.
  return net::make_service<wheel_service>(ctx, opts);
}

// In manual mode there is one shard (validated), which keeps the virtual time.
wheel_service::time_point wheel_service::now() const { return shards_.front()->now(); }

void wheel_service::advance(duration d) {
  if (options_.clock != clock_mode::manual)
    throw std::logic_error("asio_wheel: advance() needs clock_mode::manual");
  if (d < duration::zero())
    throw std::invalid_argument("asio_wheel: advance() takes a non-negative duration");
  shards_.front()->advance(d);
}

wheel_stats wheel_service::stats() const {
  wheel_stats sum = shards_.front()->stats();
  for (std::size_t i = 1; i < shards_.size(); ++i) {
    const wheel_stats s = shards_[i]->stats();
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

namespace {

// Threads in the order in which they first asked for a shard (shard_policy::by_thread).
std::atomic<std::size_t> threads_numbered{0};

std::size_t this_thread_number() noexcept {
  thread_local const std::size_t number =
      threads_numbered.fetch_add(1, std::memory_order_relaxed);
  return number;
}

} // namespace

detail::wheel_shard& wheel_service::next_shard() noexcept {
  if (shards_.size() == 1) return *shards_.front();
  const std::size_t i = options_.sharding == shard_policy::round_robin
                            ? next_shard_.fetch_add(1, std::memory_order_relaxed)
                            : this_thread_number();
  return *shards_[i % shards_.size()];
}

detail::wheel_shard* wheel_service::thread_shard() noexcept {
  if (shards_.size() != 1 && options_.sharding == shard_policy::round_robin) return nullptr;
  return &next_shard();
}

void wheel_service::shutdown() {
  for (auto& shard : shards_) shard->shutdown();
}

} // namespace asio_wheel
