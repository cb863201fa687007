#include <asio_wheel/detail/shard_mutex.hpp>

#ifdef ASIO_WHEEL_FUTEX_SHARD_MUTEX

#include <cstdio>
#include <cstdlib>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace asio_wheel::detail {

namespace {

// The word's address as the kernel sees it. FUTEX_PRIVATE: the shard is never shared
// between processes.
std::uint32_t* futex_word(std::atomic<std::uint32_t>& state) noexcept {
  return reinterpret_cast<std::uint32_t*>(&state);
}

} // namespace

void shard_mutex::lock_contended() noexcept {
  // Whoever held the lock may have left it as 1 (no sleeper) and another thread may
  // take it as 1 before this one: so this thread always marks it 2 on the way in,
  // and sleeps only while it is 2 (FUTEX_WAIT returns at once if it changed, or if a
  // signal interrupted the sleep; either way the loop tries again).
  while (state_.exchange(contended, std::memory_order_acquire) != unlocked)
    ::syscall(SYS_futex, futex_word(state_), FUTEX_WAIT_PRIVATE, contended, nullptr, nullptr, 0);
}

void shard_mutex::wake_one() noexcept {
  ::syscall(SYS_futex, futex_word(state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void shard_mutex::unlock_of_unlocked() noexcept {
  std::fputs("asio_wheel: shard_mutex unlocked while not locked\n", stderr);
  std::abort();
}

} // namespace asio_wheel::detail

#endif
