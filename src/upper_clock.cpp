#include <asio_wheel/detail/upper_clock.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <x86intrin.h>
#define ASIO_WHEEL_UPPER_CLOCK_TSC 1
#endif

namespace asio_wheel::detail {

#ifdef ASIO_WHEEL_UPPER_CLOCK_TSC

namespace {

using steady = std::chrono::steady_clock;
__extension__ using u128 = unsigned __int128;

// The calibration waits for this much steady time since the first sample. The rate is
// (now's sample - first) over that baseline: a late time read in the newer sample only
// makes it faster (readings run ahead, which is safe); the first sample is kept tight.
constexpr std::int64_t min_baseline_ns = 10'000'000;

struct sample {
  std::uint64_t tsc;       // read before ns
  std::int64_t ns;
  std::uint64_t tsc_after; // read after ns
};

// The TSC is read first: the vDSO's own ordered TSC read cannot pass it, so `ns` is a
// time at or after the one `tsc` stands for, which keeps extrapolations from it high.
// And again after: `ns` is a time at or before the one `tsc_after` stands for, so an
// extrapolation to tsc_after that comes out below ns is behind the clock, however long
// the thread was preempted between the reads.
sample take_sample() noexcept {
  const std::uint64_t tsc = __rdtsc();
  const std::int64_t ns = steady::now().time_since_epoch().count();
  _mm_lfence(); // the second TSC read waits for the clock read
  return {tsc, ns, __rdtsc()};
}

// Extrapolates only when the TSC is what steady_clock itself counts: an invariant TSC
// (CPUID 8000_0007h EDX bit 8) that the kernel chose as its clocksource, directly
// ("tsc") or through KVM's paravirtual clock ("kvm-clock", which most x86 cloud guests
// run on: the host publishes a TSC-to-nanoseconds scale, and the guest's clock reads
// the TSC and applies it, from the vDSO when the host marks the TSC stable). A scale
// the host changes is a change of rate like NTP's slewing: the margin covers it, and
// the check at each refresh falls back to steady_clock for good if it ever did not.
bool tsc_is_the_clock() noexcept try {
  if (const char* v = std::getenv("ASIO_WHEEL_STEADY_CLOCK_ONLY"); v && *v && *v != '0')
    return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  if ((d & (1u << 8)) == 0) return false;
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  return static_cast<bool>(f >> source) && (source == "tsc" || source == "kvm-clock");
} catch (...) {
  return false;
}

// The first sample anchors the rate for the life of the process, so its two reads must
// be close together: a thread preempted between them would pair a TSC value with a much
// later time and make the rate, and every extrapolation, too slow. A tight pair (both
// reads within this many cycles, about 4 us at 2.5 GHz) bounds that skew to 4e-4 of the
// 10 ms minimum baseline, 0.4 us over a 1 ms extrapolation: inside the margin.
constexpr std::uint64_t tight_read_cycles = 10'000;

std::optional<sample> take_tight_sample() noexcept {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const sample s = take_sample();
    if (s.tsc_after - s.tsc < tight_read_cycles) return s;
  }
  return std::nullopt;
}

// The process's first sample, or nothing when the TSC cannot be used (then now() reads
// steady_clock).
const std::optional<sample>& first_sample() {
  static const std::optional<sample> first =
      tsc_is_the_clock() ? take_tight_sample() : std::nullopt;
  return first;
}

// Set when a check found an extrapolation behind steady_clock: then never again.
std::atomic<bool> failed{false};
std::atomic<bool> calibrated{false};

// Per thread, so that the hot path shares no cache line. mult is nanoseconds per TSC
// cycle in 32.32 fixed point; 0 means "read steady_clock".
struct anchor {
  std::uint64_t tsc = 0;
  std::int64_t ns = 0;
  std::uint64_t mult = 0;
  std::uint64_t max_cycles = 0; // max_extrapolation in TSC cycles
  std::int64_t last_ns = 0;     // the latest reading now() returned on this thread
};
thread_local anchor this_thread;

std::int64_t extrapolate(const anchor& a, std::uint64_t cycles) noexcept {
  return a.ns + static_cast<std::int64_t>(
                    (static_cast<u128>(cycles) * a.mult) >> 32);
}

upper_clock::time_point refresh(anchor& a) noexcept {
  const std::optional<sample>& first = first_sample();
  if (!first || failed.load(std::memory_order_relaxed)) {
    a.mult = 0;
    return steady::now();
  }
  const sample s = take_sample();
  // Check the extrapolation being replaced, just past its window, against the TSC read
  // after the clock (see take_sample). Its error grows with the distance from the
  // anchor, so within the window it was at most half this bound.
  const std::uint64_t cycles = s.tsc_after - a.tsc;
  if (a.mult != 0 && cycles < 2 * a.max_cycles &&
      extrapolate(a, cycles) + 2 * upper_clock::margin.count() < s.ns)
    failed.store(true, std::memory_order_relaxed);

  a.tsc = s.tsc;
  a.ns = s.ns;
  // A rate from a loose pair (the thread preempted between the reads) would run fast:
  // safe, but later than it need be. Keep the last rate then, if there is one.
  const bool tight = s.tsc_after - s.tsc < tight_read_cycles;
  if (!tight && a.mult != 0 && !failed.load(std::memory_order_relaxed))
    return steady::time_point(steady::duration(s.ns));
  a.mult = 0;
  const std::int64_t baseline_ns = s.ns - first->ns;
  const std::uint64_t baseline_cycles = s.tsc - first->tsc;
  if (baseline_ns >= min_baseline_ns && baseline_cycles > 0 &&
      !failed.load(std::memory_order_relaxed)) {
    const auto mult = static_cast<std::uint64_t>(
        (static_cast<u128>(baseline_ns) << 32) / baseline_cycles);
    // A TSC slower than 4 MHz is no TSC we know: stay on steady_clock.
    if (mult != 0 && mult < (std::uint64_t{1} << 40)) {
      a.mult = mult;
      a.max_cycles = static_cast<std::uint64_t>(
          (static_cast<u128>(upper_clock::max_extrapolation.count()) << 32) / mult);
      calibrated.store(true, std::memory_order_relaxed);
    }
  }
  return steady::time_point(steady::duration(s.ns));
}

} // namespace

upper_clock::time_point upper_clock::now() noexcept {
  anchor& a = this_thread;
  const std::uint64_t cycles = __rdtsc() - a.tsc;
  std::int64_t ns = a.mult != 0 && cycles < a.max_cycles
                        ? extrapolate(a, cycles) + margin.count()
                        : refresh(a).time_since_epoch().count();
  // Never less than the thread's last reading, as steady_clock: a refresh replaces an
  // extrapolation that ran up to `margin` ahead with the clock itself, and two deadlines
  // set one after the other for d and d + 1 ns (a delay queue's pushes) must not come
  // out in the other order. Still an upper bound: the last reading was one.
  if (ns < a.last_ns) ns = a.last_ns;
  a.last_ns = ns;
  return time_point(std::chrono::nanoseconds(ns));
}

bool upper_clock::extrapolating() noexcept {
  return first_sample().has_value() && calibrated.load(std::memory_order_relaxed) &&
         !failed.load(std::memory_order_relaxed);
}

#else

upper_clock::time_point upper_clock::now() noexcept { return std::chrono::steady_clock::now(); }

bool upper_clock::extrapolating() noexcept { return false; }

#endif

} // namespace asio_wheel::detail
