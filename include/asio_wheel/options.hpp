// Configuration and statistics of a wheel_service.
#ifndef ASIO_WHEEL_OPTIONS_HPP
#define ASIO_WHEEL_OPTIONS_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace asio_wheel {

// steady: the wheel follows std::chrono::steady_clock, driven by one steady_timer.
// manual: time stands still until wheel_service::advance() moves it (for tests).
enum class clock_mode { steady, manual };

// Whether a wheel takes a lock around its state.
//   automatic  a lock, unless the context promises that nothing touches it from
//              another thread: BOOST_ASIO_CONCURRENCY_HINT_UNSAFE (ASIO_... standalone),
//              where Asio's own scheduler takes no lock either, read through the
//              context's configuration (net::config, Asio 1.32 and later: Boost 1.87,
//              standalone 1.32). A hint of 1 keeps the lock, as Asio's scheduler does:
//              one thread runs the context, others may still use it (a thread_pool(1)
//              has that hint). Older Asio has no documented way to read the hint, so
//              there `automatic` always locks.
//   on         always a lock.
//   off        no lock: the timers, the service and run() must then all be used from one
//              thread at a time (like BOOST_ASIO_CONCURRENCY_HINT_UNSAFE for Asio itself).
enum class locking_mode { automatic, on, off };

// Which shard an I/O object lives on, when the service runs several.
enum class shard_policy {
  // The constructing thread's: threads are numbered in the order in which they first
  // construct an I/O object, and thread k uses shard k % shards. A server that builds
  // each connection's timers on the thread that serves it then takes one lock per
  // thread, never shared while threads <= shards (tokio-rs/tokio#7226: per-worker
  // timer wheels, picked at random, contended and were reverted).
  by_thread,
  // The shards take turns: objects built on one thread spread over all of them.
  round_robin
};

// Options of a context's wheel; install() validates them. The defaults were chosen by
// benchmark (see README, "Choosing tick, slots and levels").
//
// Memory: every slot of every level of every shard is 129 bytes (eight list heads and a
// byte saying which of them takes the next entry, see detail/wheel.hpp), allocated and
// constructed at install(): slots * levels * shards * 129 bytes (the defaults: 129 KiB
// a shard). install() rejects geometries above 2^20 slots in all (129 MiB), such as
// 2^20 slots * 3 levels, with std::invalid_argument.
struct wheel_options {
  std::chrono::steady_clock::duration tick = std::chrono::milliseconds(1); // resolution
  std::size_t slots = 256;           // slots per level, power of two >= 2
  std::size_t levels = 4;            // 1 = Netty-style hashed wheel (rounds); >1 = hierarchical
  std::size_t max_pending = 0;       // most waits on the wheel at once, 0 = unlimited
  std::size_t expiry_batch = 1024;   // most completions per driver step, 0 = unlimited
  clock_mode clock = clock_mode::steady; // manual: time moves only by advance()
  // Independent wheels, each with its own lock and driver; `sharding` says which one an
  // I/O object lives on. 0: one per hardware thread (at most 16) when the wheel locks in
  // steady mode, else 1. Expiry order holds within a shard.
  std::size_t shards = 0;
  shard_policy sharding = shard_policy::by_thread;
  // See locking_mode. `off` with several shards is allowed but pointless (one thread).
  locking_mode locking = locking_mode::automatic;
};

// A snapshot of a wheel's counters (wheel_service::stats()). A wait is an operation
// waiting on the wheel: a timer's async_wait (one already due too; not the blocking
// wait(), which watches the clock), a periodic tick, a delay_queue take that waits for
// an element (not the elements, nor a take that finds one expired), a cancel_after
// deadline (which `expired` counts when it fires, `cancelled` when its operation
// completes first) and a timed_stream's deadline (a timer's wait inside the stream).
struct wheel_stats {
  std::size_t pending = 0;        // waits currently on the wheel
  std::uint64_t expired = 0;      // waits completed with success
  std::uint64_t cancelled = 0;    // waits completed with operation_aborted
  std::uint64_t rejected = 0;     // waits refused by max_pending
  std::uint64_t wakeups = 0;      // times the driving steady_timer fired
  std::chrono::nanoseconds max_lateness{0}; // worst completion time - expiry seen
  // The start of the next wheel tick that holds a wait in a slot: when the driver next
  // needs to wake while an operation is pending (steady mode), or where advance() next
  // finds work (manual mode).
  // time_point::max() when nothing is in a slot (waits set to never cost no wake-up).
  std::chrono::steady_clock::time_point next_wakeup = std::chrono::steady_clock::time_point::max();
};

} // namespace asio_wheel

#endif
