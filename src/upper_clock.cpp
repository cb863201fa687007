#include <asio_wheel/detail/upper_clock.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
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

// The calibration waits for this much steady time since the first sample: two samples'
// read jitter (well under a microsecond) then skews the rate by less than 1e-4.
constexpr std::int64_t min_baseline_ns = 10'000'000;

struct sample {
  std::uint64_t tsc;
  std::int64_t ns;
};

// The TSC is read first: the vDSO's own ordered TSC read cannot pass it, so `ns` is a
// time at or after the one `tsc` stands for, which keeps extrapolations from it high.
sample take_sample() noexcept {
  const std::uint64_t tsc = __rdtsc();
  return {tsc, steady::now().time_since_epoch().count()};
}

// Extrapolates only when the TSC is what steady_clock itself counts: an invariant TSC
// (CPUID 8000_0007h EDX bit 8) that the kernel chose as its clocksource.
bool tsc_is_the_clock() noexcept try {
  if (const char* v = std::getenv("ASIO_WHEEL_STEADY_CLOCK_ONLY"); v && *v && *v != '0')
    return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  if ((d & (1u << 8)) == 0) return false;
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  return static_cast<bool>(f >> source) && source == "tsc";
} catch (...) {
  return false;
}

struct process_state {
  bool usable = tsc_is_the_clock();
  sample first = take_sample();
};

const process_state& process() {
  static const process_state s;
  return s;
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
};
thread_local anchor this_thread;

std::int64_t extrapolate(const anchor& a, std::uint64_t cycles) noexcept {
  return a.ns + static_cast<std::int64_t>(
                    (static_cast<u128>(cycles) * a.mult) >> 32);
}

upper_clock::time_point refresh(anchor& a) noexcept {
  const process_state& p = process();
  if (!p.usable || failed.load(std::memory_order_relaxed)) {
    a.mult = 0;
    return steady::now();
  }
  const sample s = take_sample();
  // Check the extrapolation being replaced, just past its window. Its error grows with
  // the distance from the anchor, so within the window it was at most half this bound.
  const std::uint64_t cycles = s.tsc - a.tsc;
  if (a.mult != 0 && cycles < 2 * a.max_cycles &&
      extrapolate(a, cycles) + 2 * upper_clock::margin.count() < s.ns)
    failed.store(true, std::memory_order_relaxed);

  a.tsc = s.tsc;
  a.ns = s.ns;
  a.mult = 0;
  const std::int64_t baseline_ns = s.ns - p.first.ns;
  const std::uint64_t baseline_cycles = s.tsc - p.first.tsc;
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
  if (a.mult != 0 && cycles < a.max_cycles)
    return time_point(std::chrono::nanoseconds(extrapolate(a, cycles) + margin.count()));
  return refresh(a);
}

bool upper_clock::extrapolating() noexcept {
  return process().usable && calibrated.load(std::memory_order_relaxed) &&
         !failed.load(std::memory_order_relaxed);
}

#else

upper_clock::time_point upper_clock::now() noexcept { return std::chrono::steady_clock::now(); }

bool upper_clock::extrapolating() noexcept { return false; }

#endif

} // namespace asio_wheel::detail
