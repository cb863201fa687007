// shard_mutex: the shard's lock, locked and unlocked inline.
//
// A shard's lock is taken twice by each wait that is started and cancelled (W1's churn),
// and at every step. On Linux, std::mutex is glibc's pthread mutex: an out-of-line call
// through the PLT that dispatches on the mutex's kind and keeps owner and user counts,
// about 75 instructions a lock and unlock (callgrind, W1: 152 of a churn's 676). This
// lock does the same work in a handful of inline instructions, and makes a system call
// only when a thread has to sleep or be woken.
//
// Like glibc's own lock it uses no atomic read-modify-write while the process has a
// single thread (glibc's documented __libc_single_threaded): a locked instruction waits
// for the store buffer to drain, and on W1 four of them cost more than the rest of
// the lock (measured: 78 ns a churn with them, against 55 with glibc's mutex). The flag
// goes from true to false only in the thread that creates the process's second thread,
// which synchronizes with that thread, so the lock's word is consistent across the
// change; a lock taken single-threaded and released after a thread was created is
// released with the atomic exchange, and wakes a thread that waits for it.
//
// The multi-threaded protocol is the classic three-state futex mutex:
//   state 0 = unlocked, 1 = locked with no sleeper, 2 = locked and maybe a sleeper.
// A thread that finds the lock held sets it to 2 before it sleeps, so the holder's
// unlock (which sees 2) wakes one sleeper. A woken thread takes the lock as 2, since
// other sleepers may remain: at worst that costs one needless wake-up. Like glibc's
// default mutex it never spins: on a machine with more runnable threads than cores
// (W8 with 4 threads on 2 cores) spinning measured slower.
//
// Elsewhere (not Linux, or a C library without __libc_single_threaded) shard_mutex is
// std::mutex.
#ifndef ASIO_WHEEL_DETAIL_SHARD_MUTEX_HPP
#define ASIO_WHEEL_DETAIL_SHARD_MUTEX_HPP

#if defined(__linux__) && defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#define ASIO_WHEEL_FUTEX_SHARD_MUTEX 1
#endif
#endif

#ifdef ASIO_WHEEL_FUTEX_SHARD_MUTEX

#include <atomic>
#include <cstdint>

#include <sys/single_threaded.h>

namespace asio_wheel::detail {

class shard_mutex {
public:
  shard_mutex() noexcept = default;
  shard_mutex(const shard_mutex&) = delete;
  shard_mutex& operator=(const shard_mutex&) = delete;

  void lock() noexcept {
    if (__libc_single_threaded && state_.load(std::memory_order_relaxed) == unlocked) {
      state_.store(locked, std::memory_order_relaxed);
      return;
    }
    if (!try_lock()) lock_contended(); // src/shard_mutex.cpp
  }

  bool try_lock() noexcept {
    std::uint32_t expected = unlocked;
    return state_.compare_exchange_strong(expected, locked, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }

  void unlock() noexcept {
    if (__libc_single_threaded) {
      // No other thread exists to sleep on the word: it is 1.
      check_locked(state_.load(std::memory_order_relaxed));
      state_.store(unlocked, std::memory_order_relaxed);
      return;
    }
    const std::uint32_t was = state_.exchange(unlocked, std::memory_order_release);
    check_locked(was);
    if (was == contended) wake_one(); // src/shard_mutex.cpp
  }

private:
  static constexpr std::uint32_t unlocked = 0, locked = 1, contended = 2;

  // Debug builds: unlocking a lock nobody holds is a bug in the caller.
  static void check_locked([[maybe_unused]] std::uint32_t state) noexcept {
#ifndef NDEBUG
    if (state == unlocked) unlock_of_unlocked();
#endif
  }
  [[noreturn]] static void unlock_of_unlocked() noexcept;
  void lock_contended() noexcept;
  void wake_one() noexcept;

  // The futex word: the kernel reads it as a plain 32-bit integer.
  std::atomic<std::uint32_t> state_{unlocked};
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                std::atomic<std::uint32_t>::is_always_lock_free);
};

} // namespace asio_wheel::detail

#else

#include <mutex>

namespace asio_wheel::detail {
using shard_mutex = std::mutex;
} // namespace asio_wheel::detail

#endif

#endif
