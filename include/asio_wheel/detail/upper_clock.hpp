// upper_clock: a cheap reading of steady_clock that is never behind it.
//
// Every relative deadline (expires_after, reset_after, cancel_after...) starts from "now",
// and reading steady_clock costs a vDSO call whose ordered TSC read serializes the CPU:
// on the reset_after hot path it stalls on the cache miss of the timer just touched, and
// doubles the cost of the reset. The never-early guarantee only needs an upper bound of
// now, not now itself: a deadline built on a reading later than the true time fires, at
// worst, that much later, and deadlines are rounded up to the tick anyway.
//
// upper_clock::now() returns such an upper bound. Where the kernel's own clocksource is
// an invariant TSC, read directly or through kvm-clock (x86-64 Linux), it extrapolates from a per-thread anchor (a TSC value
// paired with a steady_clock reading) with an unordered rdtsc, and adds `margin`, which
// covers the calibration error and NTP slewing over the at most `max_extrapolation`
// since the anchor. Older anchors are refreshed with one steady_clock read. Every refresh
// also checks the extrapolation it replaces: had it ever come out behind steady_clock,
// the process falls back to steady_clock for good. Elsewhere now() is steady_clock::now().
#ifndef ASIO_WHEEL_DETAIL_UPPER_CLOCK_HPP
#define ASIO_WHEEL_DETAIL_UPPER_CLOCK_HPP

#include <chrono>

namespace asio_wheel::detail {

struct upper_clock {
  using time_point = std::chrono::steady_clock::time_point;

  // Added to each extrapolated reading: the error bound of the extrapolation.
  static constexpr std::chrono::nanoseconds margin{2000};
  // The longest a per-thread anchor is extrapolated from before it is refreshed.
  static constexpr std::chrono::nanoseconds max_extrapolation{1000000};

  // At least steady_clock::now() at the moment of the call; at most about `margin`
  // later (a steady_clock read's own latency aside). Monotonic on each thread: never
  // less than the thread's previous reading.
  static time_point now() noexcept;

  // Whether now() extrapolates (false: it reads steady_clock). Becomes true once the
  // calibration has a long enough baseline, and false for good if a check fails.
  static bool extrapolating() noexcept;
};

} // namespace asio_wheel::detail

#endif
