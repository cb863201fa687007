// Time on a shard: the conversion between time points and wheel ticks, and which clock
// is read where.
//
// Tick k is the time epoch + k * tick. A deadline becomes the first tick at or after it
// (to_tick rounds up), and the wheel is advanced only to the last tick the clock has
// reached (floor_tick rounds down): so an entry never comes due before its time.
//
// Which clock is read where (steady mode; in manual mode all three read virtual time,
// which only advance() moves):
//   - deadline_after(d), the base of every relative deadline (expires_after,
//     reset_after, push, cancel_after): upper_clock::now(), a cheap reading never
//     behind steady_clock and at most a few microseconds ahead. Reading later than the
//     truth only makes a deadline later, never earlier.
//   - now(), what the driver's step advances the wheel to and what lateness is
//     measured against: steady_clock::now(), the true clock. Never the upper bound
//     here: a reading ahead of the truth would advance the wheel past ticks the clock
//     has not reached, and waits would fire early. The step asserts it.
//   - wheel_service::now(), for users: steady_clock::now().
#ifndef ASIO_WHEEL_DETAIL_WHEEL_CLOCK_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_CLOCK_HPP

#include <asio_wheel/detail/upper_clock.hpp>
#include <asio_wheel/detail/wheel.hpp>
#include <asio_wheel/options.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace asio_wheel::detail {

using steady_time = std::chrono::steady_clock::time_point;
using steady_duration = std::chrono::steady_clock::duration;

// t + d, clamped to the time_point range.
inline steady_time saturating_add(steady_time t, steady_duration d) noexcept {
  if (d > steady_duration::zero() && t > steady_time::max() - d) return steady_time::max();
  if (d < steady_duration::zero() && t < steady_time::min() - d) return steady_time::min();
  return t + d;
}

class wheel_clock {
public:
  // tick > 0 (checked by install()).
  wheel_clock(clock_mode mode, steady_duration tick, steady_time epoch) noexcept
      : mode_(mode), epoch_(epoch), tick_(tick.count()), manual_now_(epoch) {}

  bool manual() const noexcept { return mode_ == clock_mode::manual; }
  steady_time epoch() const noexcept { return epoch_; }

  // The clock: steady_clock::now(), or virtual time. Virtual time is written under the
  // shard's lock (advance_locked) but read without it: wheel_service::now() is what a
  // handler asks to measure lateness (W6's benchmark handler, once per fire), and a lock
  // there would cost two atomic instructions a call in a process with threads.
  steady_time now() const noexcept {
    return manual() ? manual_now_.load(std::memory_order_acquire) : std::chrono::steady_clock::now();
  }

  // The base of a relative deadline in steady mode (see the top of the file); in
  // manual mode the base is now().
  static steady_time steady_deadline_base() noexcept { return upper_clock::now(); }

  // Manual mode: moves virtual time forward by d >= 0, saturated. The caller holds the
  // shard's lock: one writer at a time, so the load and the store need no exchange.
  void advance_locked(steady_duration d) noexcept {
    manual_now_.store(saturating_add(manual_now_.load(std::memory_order_relaxed), d),
                      std::memory_order_release);
  }

  // The first tick at or after t: never early. time_point::max() is never_tick.
  tick_t to_tick(steady_time t) const noexcept {
    if (t == steady_time::max()) return never_tick;
    if (t <= epoch_) return 0;
    const auto since = static_cast<std::uint64_t>((t - epoch_).count());
    const auto tick = static_cast<std::uint64_t>(tick_);
    return since / tick + (since % tick != 0);
  }

  // The last tick at or before t: how far a clock reading t lets the wheel advance.
  // At the clock's end, time_point::max() (where virtual time saturates), every finite
  // deadline has passed: those after the last whole tick too, which to_tick puts on
  // the tick after it, beyond max(). So there the wheel may advance to that tick.
  tick_t floor_tick(steady_time t) const noexcept {
    if (t <= epoch_) return 0;
    const auto whole = static_cast<tick_t>((t - epoch_).count() / tick_);
    if (t != steady_time::max()) return whole;
    const tick_t last_finite = to_tick(t - steady_duration(1));
    return last_finite > whole ? last_finite : whole;
  }

  // The time of tick k (time_point::max() if out of range, never_tick included).
  steady_time tick_time(tick_t k) const noexcept {
    const auto room = static_cast<std::uint64_t>((steady_time::max() - epoch_).count());
    if (k > room / static_cast<std::uint64_t>(tick_)) return steady_time::max();
    return epoch_ + steady_duration(static_cast<steady_duration::rep>(k) * tick_);
  }

private:
  const clock_mode mode_;
  const steady_time epoch_;           // the time of tick 0
  const steady_duration::rep tick_;   // the tick in clock units
  std::atomic<steady_time> manual_now_; // virtual time (manual mode)
};

} // namespace asio_wheel::detail

#endif
