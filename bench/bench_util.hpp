// Plumbing for asio_wheel_bench: command line, result rows (table + CSV), statistics,
// process measurements (RSS, CPU time, context switches) and the pre-generated random
// inputs. Nothing here knows about timers; bench.cpp holds the workloads.
#ifndef ASIO_WHEEL_BENCH_UTIL_HPP
#define ASIO_WHEEL_BENCH_UTIL_HPP

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

namespace bench {

using clock_type = std::chrono::steady_clock;
using duration = clock_type::duration;
using time_point = clock_type::time_point;
using namespace std::chrono_literals;

// Implementation names as they appear in the table and the CSV.
inline constexpr const char* impl_wheel = "asio_wheel";
inline constexpr const char* impl_steady = "steady_timer";

// ---------------------------------------------------------------------------------------
// Command line.

struct config {
  bool quick = false;
  std::set<std::string> only;             // empty = every workload
  std::string csv = "bench/results/latest.csv";
  std::string impl = "all";               // all | wheel | steady
  std::string variant;                    // empty = every variant
  std::vector<std::size_t> ns;            // N list for W1/W2/W3/W8; empty = mode default
  std::size_t ops = 0;                    // ops per repetition; 0 = mode default
  int reps = 0;                           // repetitions; 0 = mode default
  bool warmup = true;                     // one unrecorded repetition first (W1/W2/W8/W9)
  // Added to the W1/W2 deadlines ([1 s, 60 s]). Under valgrind everything runs ~50x
  // slower, so without an offset some pending waits would fire inside the measured work.
  duration deadline_offset{0};
  // W3: start each timed region just after the wheel's clock entered a new level-0 block,
  // so that the count does not depend on the wall time of valgrind's slow setup (fire.hpp).
  bool w3_catch_up = false;
  // An idle second thread for the whole run (see main in bench.cpp).
  bool threaded = false;
  // W6's "default" variant with another wheel geometry (--geometry SLOTSxLEVELS);
  // 0 = the library's defaults.
  std::size_t w6_slots = 0, w6_levels = 0;

  bool want(const std::string& workload) const { return only.empty() || only.count(workload); }
  bool want_wheel() const { return impl == "all" || impl == "wheel"; }
  bool want_steady() const { return impl == "all" || impl == "steady"; }
  bool want_variant(const std::string& v) const { return variant.empty() || variant == v; }
};

inline void print_help() {
  std::puts(
      "asio_wheel_bench: asio_wheel::timer vs boost::asio::steady_timer (BENCHMARKS.md)\n"
      "\n"
      "  --quick            CI mode: N = 10k, 2 repetitions, small sizes; a few seconds\n"
      "  --only W1,W2,...   run only these workloads (W1..W9, W11, S2)\n"
      "  --csv PATH         CSV output (default bench/results/latest.csv; '' = none)\n"
      "  --impl wheel|steady|all   run one implementation only (for callgrind)\n"
      "  --variant NAME     run one variant only (e.g. cancel_locking_off, reset_after, drop_in)\n"
      "  --n LIST           N values for W1/W2/W3/W8 (e.g. 100000 or 10k,1M)\n"
      "  --ops K            operations per repetition (W1/W2/W8/W9)\n"
      "  --reps R           repetitions\n"
      "  --no-warmup        skip the unrecorded warm-up repetition (for callgrind)\n"
      "  --deadline-offset S  add S seconds to W1/W2 deadlines (for slow runs: valgrind)\n"
      "  --w3-catch-up      W3: time from the start of a wheel block (for callgrind)\n"
      "  --geometry SxL     W6 'default' variant with S slots and L levels (e.g. 1024x3)\n"
      "  --threaded         start an idle second thread first: every workload then runs in a\n"
      "                     process with threads, where mutexes use atomic instructions\n"
      "  --help             this text\n"
      "\n"
      "Columns: ns/op min and median over the repetitions; ratio = steady_timer median /\n"
      "this row's median (above 1: asio_wheel is faster; W4: steady bytes / these bytes).\n"
      "Exit status 1 if any handler was lost, fired early or completed wrongly.");
}

// "10k" -> 10000, "1M" -> 1000000, "250" -> 250.
inline std::size_t parse_count(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string suffix = end ? end : "";
  if (suffix == "k" || suffix == "K") v *= 1e3;
  else if (suffix == "m" || suffix == "M") v *= 1e6;
  else if (!suffix.empty() || end == s.c_str()) throw std::invalid_argument("bad count: " + s);
  return static_cast<std::size_t>(v);
}

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Returns nullopt when the program should exit (help printed or bad argument).
inline std::optional<config> parse_args(int argc, char** argv, int& exit_code) {
  config cfg;
  exit_code = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--help" || a == "-h") { print_help(); return std::nullopt; }
      else if (a == "--quick") cfg.quick = true;
      else if (a == "--only") { for (auto& w : split(value(), ',')) cfg.only.insert(w); }
      else if (a == "--csv") cfg.csv = value();
      else if (a == "--impl") cfg.impl = value();
      else if (a == "--variant") cfg.variant = value();
      else if (a == "--n") { for (auto& n : split(value(), ',')) cfg.ns.push_back(parse_count(n)); }
      else if (a == "--ops") cfg.ops = parse_count(value());
      else if (a == "--reps") cfg.reps = std::stoi(value());
      else if (a == "--no-warmup") cfg.warmup = false;
      else if (a == "--w3-catch-up") cfg.w3_catch_up = true;
      else if (a == "--threaded") cfg.threaded = true;
      else if (a == "--deadline-offset")
        cfg.deadline_offset = std::chrono::duration_cast<duration>(
            std::chrono::duration<double>(std::stod(value())));
      else if (a == "--geometry") {
        const auto parts = split(value(), 'x');
        if (parts.size() != 2) throw std::invalid_argument("--geometry takes SLOTSxLEVELS");
        cfg.w6_slots = std::stoul(parts[0]);
        cfg.w6_levels = std::stoul(parts[1]);
      }
      else throw std::invalid_argument("unknown argument " + a);
      if (cfg.impl != "all" && cfg.impl != "wheel" && cfg.impl != "steady")
        throw std::invalid_argument("--impl takes wheel, steady or all");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "asio_wheel_bench: %s (try --help)\n", e.what());
      exit_code = 2;
      return std::nullopt;
    }
  }
  return cfg;
}

// ---------------------------------------------------------------------------------------
// Results.

struct summary {
  double min = 0;
  double median = 0;
};

inline summary summarize(std::vector<double> v) {
  summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  std::size_t m = v.size() / 2;
  s.median = v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  return s;
}

// One line of the table and the CSV. min/median are ns per op unless the workload says
// otherwise (NaN = not applicable); ratio is filled in by the group's steady_timer row.
struct row {
  std::string workload, impl, variant;
  std::size_t n = 0;
  double min_ns = NAN, median_ns = NAN;
  double ratio = NAN;
  std::string extra;
};

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

inline std::string fmt_num(double v) {
  if (std::isnan(v)) return "-";
  if (v >= 100) return fmt("%.0f", v);
  if (v >= 10) return fmt("%.1f", v);
  return fmt("%.2f", v);
}

inline std::string fmt_n(std::size_t n) {
  if (n >= 1000000 && n % 1000000 == 0) return std::to_string(n / 1000000) + "M";
  if (n >= 1000 && n % 1000 == 0) return std::to_string(n / 1000) + "k";
  return std::to_string(n);
}

// Collects rows, prints them as they are completed, and writes the CSV at the end.
class report {
public:
  // Prints a group (the rows of one workload and N); fills each non-steady row's ratio
  // from the steady_timer row of the group when there is one.
  void add_group(std::vector<row> group) {
    const row* steady = nullptr;
    for (auto& r : group)
      if (r.impl == impl_steady) steady = &r;
    for (auto& r : group) {
      if (!std::isnan(r.ratio)) continue;                // set by the workload
      if (steady && !std::isnan(steady->median_ns) && r.median_ns > 0)
        r.ratio = steady->median_ns / r.median_ns;
    }
    for (auto& r : group) {
      print(r);
      rows_.push_back(r);
    }
  }

  void print_header() const {
    std::printf("%-4s %-13s %-21s %6s %10s %10s %7s  %s\n", "id", "impl", "variant", "N",
                "min_ns", "median_ns", "ratio", "extra");
    std::fflush(stdout);
  }

  const std::vector<row>& rows() const { return rows_; }

  // The row of a workload/impl/variant/N, if it was measured.
  const row* find(const std::string& w, const std::string& impl, const std::string& variant,
                  std::size_t n) const {
    for (auto& r : rows_)
      if (r.workload == w && r.impl == impl && r.variant == variant && r.n == n) return &r;
    return nullptr;
  }

  bool write_csv(const std::string& path) const {
    std::ofstream out(path);
    if (!out) return false;
    out << "workload,impl,variant,N,min_ns,median_ns,ratio_vs_steady,extra\n";
    auto num = [](double v) { return std::isnan(v) ? std::string() : fmt("%.3f", v); };
    for (auto& r : rows_)
      out << r.workload << ',' << r.impl << ',' << r.variant << ',' << r.n << ','
          << num(r.min_ns) << ',' << num(r.median_ns) << ',' << num(r.ratio) << ",\""
          << r.extra << "\"\n";
    return bool(out);
  }

private:
  static void print(const row& r) {
    std::printf("%-4s %-13s %-21s %6s %10s %10s %7s  %s\n", r.workload.c_str(),
                r.impl.c_str(), r.variant.c_str(), fmt_n(r.n).c_str(),
                fmt_num(r.min_ns).c_str(), fmt_num(r.median_ns).c_str(),
                std::isnan(r.ratio) ? "-" : fmt("%.2fx", r.ratio).c_str(), r.extra.c_str());
    std::fflush(stdout);
  }

  std::vector<row> rows_;
};

// Problems found by the completion checks; any of them makes the exit status 1.
class failures {
public:
  void add(const std::string& what) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    list_.push_back(what);
  }
  const std::vector<std::string>& list() const { return list_; }

private:
  std::vector<std::string> list_;
};

// ---------------------------------------------------------------------------------------
// Timing. bench_timed_region is a named, never-inlined function so that
// `valgrind --tool=callgrind --collect-atstart=no --toggle-collect=bench_timed_region*`
// counts exactly the measured work.

extern "C" [[gnu::noinline]] inline void bench_timed_region(void (*fn)(void*), void* arg) {
  fn(arg);
  asm volatile("" ::: "memory"); // keep the call a real call
}

// Wall-clock nanoseconds spent in f().
template <class F>
double time_ns(F&& f) {
  auto thunk = [](void* p) { (*static_cast<std::remove_reference_t<F>*>(p))(); };
  auto t0 = clock_type::now();
  bench_timed_region(thunk, &f);
  auto t1 = clock_type::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count();
}

inline double process_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

// Process CPU nanoseconds spent in f().
template <class F>
double cpu_ns(F&& f) {
  auto thunk = [](void* p) { (*static_cast<std::remove_reference_t<F>*>(p))(); };
  double c0 = process_cpu_ns();
  bench_timed_region(thunk, &f);
  return process_cpu_ns() - c0;
}

// ---------------------------------------------------------------------------------------
// Process measurements.

inline std::size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// MemAvailable from /proc/meminfo in bytes (0 if unknown).
inline std::uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

// Voluntary + involuntary context switches of the whole process so far.
inline std::uint64_t context_switches() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return std::uint64_t(ru.ru_nvcsw) + std::uint64_t(ru.ru_nivcsw);
}

// ---------------------------------------------------------------------------------------
// Random inputs, generated before the timed regions. Each (workload, N, stream) gets its
// own fixed seed, so selecting workloads with --only does not change the numbers.

inline std::mt19937_64 make_rng(const std::string& workload, std::size_t n, std::size_t stream) {
  std::uint64_t seed = 42;
  for (char c : workload) seed = seed * 131 + std::uint64_t(c);
  seed = seed * 1000003 + n;
  seed = seed * 1000003 + stream;
  return std::mt19937_64(seed);
}

// count durations uniform in [lo, hi] (nanosecond resolution).
inline std::vector<duration> random_durations(std::mt19937_64& rng, std::size_t count,
                                              duration lo, duration hi) {
  std::uniform_int_distribution<std::int64_t> dist(
      std::chrono::duration_cast<std::chrono::nanoseconds>(lo).count(),
      std::chrono::duration_cast<std::chrono::nanoseconds>(hi).count());
  std::vector<duration> out(count);
  for (auto& d : out)
    d = std::chrono::duration_cast<duration>(std::chrono::nanoseconds(dist(rng)));
  return out;
}

// count indices uniform in [0, n).
inline std::vector<std::uint32_t> random_indices(std::mt19937_64& rng, std::size_t count,
                                                 std::size_t n) {
  std::uniform_int_distribution<std::uint32_t> dist(0, static_cast<std::uint32_t>(n - 1));
  std::vector<std::uint32_t> out(count);
  for (auto& i : out) i = dist(rng);
  return out;
}

} // namespace bench

#endif
