// Software prefetches: asking for cache lines ahead of their use, without waiting for them.
// A prefetch never faults (null and freed addresses included), and neither a fence nor a
// clock read waits for it, which is what lets a miss overlap them (see timer_state).
#ifndef ASIO_WHEEL_DETAIL_PREFETCH_HPP
#define ASIO_WHEEL_DETAIL_PREFETCH_HPP

#include <cassert>
#include <cstddef>

namespace asio_wheel::detail {

// The line size that prefetch_bytes assumes (x86-64's and most ARM cores').
inline constexpr std::size_t cache_line_bytes = 64;

// Asks for the line that holds p, to be written.
inline void prefetch(const void* p) noexcept { __builtin_prefetch(p, 1); }

// Asks for every line of the n bytes from p, 1 <= n <= 128 (two lines' worth): at most three,
// wherever p falls in its line. The first and the last byte name the end lines, and the
// byte a line on from p the middle one when there are three.
inline void prefetch_bytes(const void* p, std::size_t n) noexcept {
  assert(n >= 1 && n <= 2 * cache_line_bytes);
  const auto* first = static_cast<const unsigned char*>(p);
  prefetch(first);
  if (n > cache_line_bytes) prefetch(first + cache_line_bytes);
  prefetch(first + n - 1);
}

} // namespace asio_wheel::detail

#endif
