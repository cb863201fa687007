// Workloads about waits that expire: W3 fire, W5 idle wake-ups, W6 long timers on a
// fine tick (manual clock).
#ifndef ASIO_WHEEL_BENCH_FIRE_HPP
#define ASIO_WHEEL_BENCH_FIRE_HPP

#include "bench_common.hpp"

namespace bench {

// ---------------------------------------------------------------------------------------
// W3 fire: N waits all due within 50 ms; run until every one has fired. The clock starts
// before the first async_wait, so scheduling is part of the cost; the timer objects
// themselves are constructed beforehand.

struct fire_state {
  asio::io_context* ctx = nullptr;
  std::uint64_t target = 0;   // completions after which run() is stopped
  std::uint64_t done = 0, ok = 0, aborted = 0, other = 0, early = 0;
  duration max_late{0};
  time_point last{};
};

struct fire_handler {
  fire_state* s;
  time_point expiry;
  void operator()(const error_code& ec) const {
    auto now = clock_type::now();
    if (!ec) {
      ++s->ok;
      if (now < expiry) ++s->early;
      s->max_late = std::max(s->max_late, now - expiry);
      s->last = now;
    } else if (ec == asio::error::operation_aborted) {
      ++s->aborted;
    } else {
      ++s->other;
    }
    // Stop as soon as the last wait completed, so that the measurement never depends on
    // how the implementation winds down its driver.
    if (++s->done == s->target) s->ctx->stop();
  }
};

// --w3-catch-up (scripts/bench --callgrind): start the timed region just after the
// wheel's clock entered a new 256-tick block (level 0's span), so that the 50 ms of W3
// deadlines all go on level 0. The wheel files a deadline by the highest base-256 digit in
// which it differs from its clock: deadlines past the end of the clock's block go a level
// up and are moved down once more when it ends. Which share of W3 does that depends on
// where t0 falls in a block and on how long ago the wheel last advanced: natively a few ms
// (so mostly none), under valgrind the ~0.3 s of untimed setup, which varies with the
// machine's load; the count then moved by up to 10% (at 79f97fd: 1003 to 1110 Ir/op).
template <class Timer>
void w3_catch_up(bench_run& b, const std::string& what, asio::io_context& ctx,
                 std::vector<Timer>& timers) {
  // One wait due now on each of the first 16 timers (timers join the shards, at most 16,
  // in turn) runs every shard's driver, which moves its clock to now.
  const std::size_t k = std::min<std::size_t>(timers.size(), 16);
  counters c;
  std::uint64_t started = 0;
  auto fire_now = [&] {
    for (std::size_t i = 0; i < k; ++i) {
      timers[i].expires_after(duration::zero());
      timers[i].async_wait(count_handler{&c});
    }
    started += k;
    drain(ctx, c, started);
  };
  auto check = [&] {
    if (c.total() != started || c.other)
      b.fail.add(what + ": " + std::to_string(c.total()) + " of " + std::to_string(started) +
                 " catch-up waits completed");
  };
  if constexpr (is_wheel<Timer>) {
    auto& svc = asio::use_service<asio_wheel::wheel_service>(ctx);
    // On a loaded machine the block may start before we get to wait for it, or we may
    // wake well after it: then try the next one.
    for (int attempt = 0; attempt < 10; ++attempt) {
      fire_now();
      // A wait 256 ticks out sits on level 1, so the driver's next wake-up (shared by the
      // shards, which tick together) is the first tick of a later block.
      timers[0].expires_after(256ms);
      timers[0].async_wait(count_handler{&c});
      const time_point block = svc.stats().next_wakeup;
      timers[0].cancel();
      drain(ctx, c, ++started);
      const time_point now = clock_type::now();
      if (block <= now || block - now > 1s) continue;
      std::this_thread::sleep_until(block);
      fire_now();
      if (clock_type::now() - block < 50ms) return check();
    }
    b.fail.add(what + ": --w3-catch-up: missed the start of a wheel block 10 times");
    return;
  }
  fire_now();  // steady_timer too, so that both do similar untimed work
  check();
}

template <class Timer>
row w3_one(bench_run& b, std::size_t n) {
  const std::string what = std::string("W3 ") + impl_name<Timer>() + " N=" + fmt_n(n);
  asio::io_context ctx(1);
  std::vector<Timer> timers;
  timers.reserve(n);
  for (std::size_t i = 0; i < n; ++i) timers.emplace_back(ctx);
  auto rng = make_rng("W3", n, 0);

  std::vector<double> per_op, total_ms, sched_ms;
  std::uint64_t early = 0, lost = 0, errors = 0;
  duration max_late{0};
  for (int r = 0; r < b.p.reps; ++r) {
    auto offsets = random_durations(rng, n, 0ms, 50ms);
    fire_state s;
    s.ctx = &ctx;
    s.target = n;
    if (b.cfg.w3_catch_up) w3_catch_up(b, what, ctx, timers);
    ctx.restart();
    time_point t0{}, t_sched{};
    bool hung = false;
    watchdog dog(ctx, 30s);
    time_ns([&] {
      t0 = clock_type::now();
      for (std::size_t i = 0; i < n; ++i) {
        timers[i].expires_at(t0 + offsets[i]);
        timers[i].async_wait(fire_handler{&s, t0 + offsets[i]});
      }
      t_sched = clock_type::now();
      ctx.run();
    });
    hung = dog.disarm();
    if (hung || s.ok != n) {
      lost += n - std::min<std::uint64_t>(n, s.ok);
      b.fail.add(what + ": " + std::to_string(s.ok) + " of " + std::to_string(n) +
                 " fired within 30 s");
      for (auto& t : timers) t.cancel();
      ctx.restart();
      ctx.poll();
      continue;
    }
    early += s.early;
    errors += s.other + s.aborted;
    max_late = std::max(max_late, s.max_late);
    double total = std::chrono::duration<double, std::nano>(s.last - t0).count();
    per_op.push_back(total / double(n));
    total_ms.push_back(total / 1e6);
    sched_ms.push_back(std::chrono::duration<double, std::milli>(t_sched - t0).count());
  }
  if (early) b.fail.add(what + ": " + std::to_string(early) + " handlers fired early");
  if (errors) b.fail.add(what + ": " + std::to_string(errors) + " waits did not succeed");
  timers.clear();
  ctx.restart();
  ctx.poll();

  auto s = summarize(per_op);
  row out{"W3", impl_name<Timer>(), "fire", n, s.min, s.median, NAN, ""};
  out.extra = "total_ms_min=" + fmt("%.1f", summarize(total_ms).min) +
              ";total_ms_median=" + fmt("%.1f", summarize(total_ms).median) +
              ";schedule_ms_median=" + fmt("%.1f", summarize(sched_ms).median) +
              ";early=" + std::to_string(early) +
              ";max_late_ms=" +
              fmt("%.3f", std::chrono::duration<double, std::milli>(max_late).count());
  if (lost) out.extra += ";LOST=" + std::to_string(lost);
  return out;
}

inline void w3_group(bench_run& b, std::size_t n) {
  std::vector<row> g;
  if (b.cfg.want_steady()) g.push_back(w3_one<steady_timer>(b, n));
  if (b.cfg.want_wheel()) g.push_back(w3_one<wheel_timer>(b, n));
  b.out.add_group(std::move(g));
}

// ---------------------------------------------------------------------------------------
// W5 idle wake-ups: 10k waits due in 60 s, nothing else. Over a window, how often does the
// wheel's driver wake up, and how many context switches does the process make?

template <class Timer>
row w5_one(bench_run& b) {
  const std::size_t n = b.p.w5_n;
  const std::string what = std::string("W5 ") + impl_name<Timer>();
  asio::io_context ctx(1);
  counters c;
  auto rng = make_rng("W5", n, 0);
  std::vector<Timer> timers;
  arm_pending(ctx, timers, random_durations(rng, n, 60s, 61s), 0s, c);
  ctx.poll();  // settle whatever arming scheduled

  auto wakeups = [&]() -> std::uint64_t {
    if constexpr (is_wheel<Timer>)
      return asio::use_service<asio_wheel::wheel_service>(ctx).stats().wakeups;
    else
      return 0;
  };
  const std::uint64_t w0 = wakeups(), csw0 = context_switches();
  const auto t0 = clock_type::now();
  ctx.run_for(std::chrono::duration_cast<duration>(std::chrono::duration<double>(b.p.w5_window_s)));
  const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  const std::uint64_t w1 = wakeups(), csw1 = context_switches();

  std::uint64_t fired = c.ok;
  std::string note = settle(b, what, ctx, timers, c, n);
  if (fired) b.fail.add(what + ": " + std::to_string(fired) + " waits due in 60 s fired early");
  row r{"W5", impl_name<Timer>(), "idle", n, NAN, NAN, NAN, ""};
  r.extra = std::string("wakeups_per_s=") +
            (is_wheel<Timer> ? fmt("%.2f", double(w1 - w0) / secs) : std::string("n/a")) +
            ";csw_per_s=" + fmt("%.2f", double(csw1 - csw0) / secs) +
            ";window_s=" + fmt("%.2f", secs) + note;
  return r;
}

inline void w5_run(bench_run& b) {
  std::vector<row> g;
  if (b.cfg.want_steady()) g.push_back(w5_one<steady_timer>(b));
  if (b.cfg.want_wheel()) g.push_back(w5_one<wheel_timer>(b));
  b.out.add_group(std::move(g));
}

// ---------------------------------------------------------------------------------------
// W6 long timers, fine tick: 1M waits due in [30 s, 90 s], tick 1 ms, manual clock moved
// 60 s in 1 ms steps; CPU time of the advancing (and of the handlers that fire), default
// geometry vs one level of 256 slots (Netty-style rounds). asio_wheel only.

struct w6_state {
  asio_wheel::wheel_service* svc = nullptr;
  time_point base{};
  std::uint64_t ok = 0, aborted = 0, other = 0, early = 0, before_30s = 0;
  duration max_late{0};
  std::uint64_t total() const { return ok + aborted + other; }
};

struct w6_handler {
  w6_state* s;
  time_point expiry;
  void operator()(const error_code& ec) const {
    if (ec == asio::error::operation_aborted) { ++s->aborted; return; }
    if (ec) { ++s->other; return; }
    auto now = s->svc->now();
    ++s->ok;
    if (now < expiry) ++s->early;
    if (now < s->base + 30s) ++s->before_30s;
    s->max_late = std::max(s->max_late, now - expiry);
  }
};

inline row w6_one(bench_run& b, bool levels1) {
  const std::size_t n = b.p.w6_n;
  const std::string variant =
      levels1 ? "levels1"
      : b.cfg.w6_slots ? std::to_string(b.cfg.w6_slots) + "x" + std::to_string(b.cfg.w6_levels)
                       : "default";
  const std::string what = std::string("W6 ") + variant + " N=" + fmt_n(n);
  auto rng = make_rng("W6", n, 0);
  std::vector<double> cpu_ms;
  std::uint64_t fired = 0;
  duration max_late{0};
  // One level takes ~50x longer (about 40 s of CPU per repetition at 1M), so the baseline
  // gets at most 3 repetitions; the extra column shows how many ran.
  const int reps = levels1 ? std::min(b.p.w6_reps, 3) : b.p.w6_reps;
  for (int r = 0; r < reps; ++r) {
    auto d = random_durations(rng, n, 30s, 90s);
    const auto expected_fired = std::uint64_t(std::count_if(
        d.begin(), d.end(), [](duration x) { return x <= 60s; }));
    asio::io_context ctx(1);
    asio_wheel::wheel_options o;
    o.clock = asio_wheel::clock_mode::manual;
    o.tick = 1ms;
    if (levels1) {
      o.levels = 1;
      o.slots = 256;
    } else if (b.cfg.w6_slots != 0) {
      o.slots = b.cfg.w6_slots;
      o.levels = b.cfg.w6_levels;
    }
    w6_state s;
    s.svc = &asio_wheel::install(ctx, o);
    s.base = s.svc->now();
    std::vector<wheel_timer> timers;
    timers.reserve(n);
    for (std::size_t i = 0; i < n; ++i) timers.emplace_back(ctx);
    for (std::size_t i = 0; i < n; ++i) {
      timers[i].expires_at(s.base + d[i]);
      timers[i].async_wait(w6_handler{&s, s.base + d[i]});
    }
    ctx.poll();
    double ns = cpu_ns([&] {
      for (int k = 0; k < 60000; ++k) {
        s.svc->advance(1ms);
        ctx.poll();
      }
    });
    cpu_ms.push_back(ns / 1e6);
    fired = s.ok;
    max_late = std::max(max_late, s.max_late);
    if (s.ok != expected_fired)
      b.fail.add(what + ": " + std::to_string(s.ok) + " fired in 60 s, expected " +
                 std::to_string(expected_fired));
    if (s.early || s.before_30s)
      b.fail.add(what + ": " + std::to_string(s.early) + " early, " +
                 std::to_string(s.before_30s) + " before 30 s");
    for (auto& t : timers) t.cancel();
    for (int i = 0; i < 100 && s.total() < n; ++i) {
      if (ctx.stopped()) ctx.restart();
      ctx.poll();
    }
    if (s.total() != n)
      b.fail.add(what + ": " + std::to_string(s.total()) + " completions for " +
                 std::to_string(n) + " waits");
    if (s.other) b.fail.add(what + ": " + std::to_string(s.other) + " unexpected errors");
  }
  auto c = summarize(cpu_ms);
  // ns columns: CPU per simulated millisecond (one advance(1ms) + poll).
  row out{"W6", impl_wheel, variant, n, c.min * 1e6 / 60000, c.median * 1e6 / 60000, NAN, ""};
  out.extra = "cpu_ms_min=" + fmt("%.1f", c.min) + ";cpu_ms_median=" + fmt("%.1f", c.median) +
              ";reps=" + std::to_string(reps) +
              ";fired=" + std::to_string(fired) + ";max_late_ms=" +
              fmt("%.3f", std::chrono::duration<double, std::milli>(max_late).count());
  return out;
}

inline void w6_run(bench_run& b) {
  if (!b.cfg.want_wheel()) return;
  std::vector<row> g;
  if (b.cfg.want_variant("default")) g.push_back(w6_one(b, false));
  if (b.cfg.want_variant("levels1")) g.push_back(w6_one(b, true));
  if (g.size() == 2 && g[1].median_ns > 0)
    g[0].extra += ";pct_of_levels1=" + fmt("%.2f", 100.0 * g[0].median_ns / g[1].median_ns) + "%";
  b.out.add_group(std::move(g));
}

} // namespace bench

#endif
