// What every workload shares: the run's sizes (plan), completion counting, the
// end-of-workload accounting (settle) and a watchdog against lost handlers.
#ifndef ASIO_WHEEL_BENCH_BENCH_COMMON_HPP
#define ASIO_WHEEL_BENCH_BENCH_COMMON_HPP

#include "bench_util.hpp"

#include <asio_wheel/options.hpp>
#include <asio_wheel/timer.hpp>
#include <asio_wheel/wheel_service.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace asio = boost::asio;
using boost::system::error_code;

namespace bench {

using wheel_timer = asio_wheel::timer;
// The compact timer: the io_context's own executor type instead of any_io_executor.
using compact_timer = asio_wheel::basic_timer<asio::io_context::executor_type>;
using steady_timer = asio::steady_timer;

template <class Timer>
constexpr bool is_wheel = !std::is_same_v<Timer, steady_timer>;

template <class Timer>
const char* impl_name() {
  return is_wheel<Timer> ? impl_wheel : impl_steady;
}

// Sizes and repetitions of one run (full or --quick, then the command-line overrides).
struct plan {
  std::vector<std::size_t> ns;    // N for W1, W2, W3, W8
  std::size_t ops = 0;            // ops per repetition for W1, W2, W8
  int reps = 0;
  std::size_t w4_n = 0;           // pending waits measured by W4
  double w5_window_s = 0;         // W5 observation window
  std::size_t w5_n = 10000;
  std::size_t w6_n = 0;           // waits in W6
  int w6_reps = 0;
  std::size_t w9_ops = 0;         // reads per repetition in W9
  std::vector<std::size_t> w7_ns; // W7 compares W1/W2 at these N (first = base)
};

inline plan make_plan(const config& cfg) {
  plan p;
  if (cfg.quick) {
    p.ns = {10000};
    p.ops = 100000;
    p.reps = 2;
    p.w4_n = 100000;
    p.w5_window_s = 0.5;
    p.w6_n = 10000;
    p.w6_reps = 2;
    p.w9_ops = 20000;
    p.w7_ns = {10000, 100000};
  } else {
    p.ns = {10000, 100000, 1000000};
    p.ops = 1000000;
    p.reps = 5;
    p.w4_n = 1000000;
    p.w5_window_s = 5;
    p.w6_n = 1000000;
    p.w6_reps = 5;
    p.w9_ops = 1000000;
    p.w7_ns = {10000, 1000000};
    // 10M waits: about 2 GB for steady_timer; only where memory clearly allows it.
    if (mem_available() > (std::uint64_t(8) << 30)) p.w7_ns.push_back(10000000);
  }
  if (!cfg.ns.empty()) p.ns = cfg.ns;
  if (cfg.ops) p.ops = p.w9_ops = cfg.ops;
  if (cfg.reps > 0) p.reps = p.w6_reps = cfg.reps;
  return p;
}

// Everything a workload needs: the options, the sizes, and where results go.
struct bench_run {
  config cfg;
  plan p;
  report out;
  failures fail;

  // Added to every W1/W2/W8 deadline at N pending. Above 1M waits, arming them and the
  // repetitions take long enough that a good part of the [1 s, 60 s] waits would fire
  // while being measured (N would shrink and firing would dominate), so there both the
  // pending waits and the ops' waits move 300 s out, the same for both implementations
  // (the extra column says so). --deadline-offset overrides.
  // The first repetition index: -1 is the warm-up, run but not recorded.
  int first_rep() const { return cfg.warmup ? -1 : 0; }

  duration offset_for(std::size_t n) const {
    if (cfg.deadline_offset != duration::zero()) return cfg.deadline_offset;
    return n > 1000000 ? duration(300s) : duration::zero();
  }
};

// The extra-column note for a non-zero deadline offset.
inline std::string offset_note(duration offset) {
  if (offset == duration::zero()) return "";
  return ";deadline_offset_s=" + fmt("%.0f", std::chrono::duration<double>(offset).count());
}

// Ops in a repetition; the warm-up repetition (r < 0, not recorded) is shorter.
inline std::size_t ops_in_rep(std::size_t ops, int r) {
  return r < 0 ? std::min<std::size_t>(ops, 100000) : ops;
}

// ---------------------------------------------------------------------------------------
// Completion counting shared by the workloads.

struct counters {
  std::uint64_t ok = 0;       // completed with success (fired)
  std::uint64_t aborted = 0;  // completed with operation_aborted
  std::uint64_t other = 0;    // any other error: always a failure
  std::uint64_t total() const { return ok + aborted + other; }
};

// The handler of W1, W2, W4, W5: the same small function object for both
// implementations, so the handler costs and allocation sizes match.
struct count_handler {
  counters* c;
  void operator()(const error_code& ec) const {
    if (!ec) ++c->ok;
    else if (ec == asio::error::operation_aborted) ++c->aborted;
    else ++c->other;
  }
};

// Runs ready handlers until c has seen `expected` completions or nothing more comes.
inline void drain(asio::io_context& ctx, const counters& c, std::uint64_t expected) {
  for (int idle = 0; c.total() < expected && idle < 100;) {
    if (ctx.stopped()) ctx.restart();
    if (ctx.poll() == 0) {
      ++idle;
      std::this_thread::sleep_for(1ms);
    }
  }
  if (ctx.stopped()) ctx.restart();
  ctx.poll();
}

// Cancels every timer, runs the aborted handlers, and checks that `started` waits made
// exactly `started` completions. Returns a note for the extra column.
template <class Timer>
std::string settle(bench_run& b, const std::string& what, asio::io_context& ctx,
                   std::vector<Timer>& timers, counters& c, std::uint64_t started) {
  for (auto& t : timers) t.cancel();
  drain(ctx, c, started);
  timers.clear();  // destroying timers must not complete anything twice
  drain(ctx, c, started);
  std::string note;
  if (c.total() < started) {
    b.fail.add(what + ": lost " + std::to_string(started - c.total()) + " of " +
               std::to_string(started) + " handlers");
    note = ";LOST=" + std::to_string(started - c.total());
  } else if (c.total() > started) {
    b.fail.add(what + ": " + std::to_string(c.total() - started) + " handlers too many");
    note = ";EXTRA=" + std::to_string(c.total() - started);
  }
  if (c.other) {
    b.fail.add(what + ": " + std::to_string(c.other) + " completions with an unexpected error");
    note += ";ERRORS=" + std::to_string(c.other);
  }
  return note;
}

// Constructs n timers on ctx, each with one pending wait due at now + d[i] (+ offset).
template <class Timer>
void arm_pending(asio::io_context& ctx, std::vector<Timer>& timers,
                 const std::vector<duration>& d, duration offset, counters& c) {
  timers.reserve(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) timers.emplace_back(ctx);
  for (std::size_t i = 0; i < d.size(); ++i) {
    timers[i].expires_after(d[i] + offset);
    timers[i].async_wait(count_handler{&c});
  }
}

// Stops ctx if disarm() is not called within `limit`: a lost handler must not hang us.
class watchdog {
public:
  watchdog(asio::io_context& ctx, std::chrono::seconds limit)
      : thread_([this, &ctx, limit] {
          std::unique_lock lock(mutex_);
          if (!cv_.wait_for(lock, limit, [this] { return disarmed_; })) {
            fired_ = true;
            ctx.stop();
          }
        }) {}
  ~watchdog() { disarm(); }
  // Returns true if the watchdog had to stop the context.
  bool disarm() {
    {
      std::lock_guard lock(mutex_);
      disarmed_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
    return fired_;
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  bool fired_ = false;
  std::thread thread_;
};

} // namespace bench

#endif
