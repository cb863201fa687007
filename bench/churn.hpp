// W1 churn, W2 idle reset, W7 scaling (W1/W2 over N) and W8 (W1 on two threads).
#ifndef ASIO_WHEEL_BENCH_CHURN_HPP
#define ASIO_WHEEL_BENCH_CHURN_HPP

#include "bench_common.hpp"

#include <atomic>
#include <optional>
#include <thread>
#include <type_traits>

namespace bench {

// ---------------------------------------------------------------------------------------
// W1 churn: with N waits pending, start one more wait on a spare timer, cancel it, and run
// its aborted handler.
//
// Also cancel_locking_off: asio_wheel with wheel_options::locking = off, which is what
// `automatic` resolves to for this concurrency-hint-1 context where Asio lets it read
// the hint (Boost 1.87 and later); with Boost 1.81 the default keeps the shard's lock.

template <class Timer>
row w1_one(bench_run& b, std::size_t n, bool locking_off = false) {
  const char* variant = locking_off ? "cancel_locking_off" : "cancel";
  const std::string what = std::string("W1 ") + impl_name<Timer>() + " " + variant + " N=" + fmt_n(n);
  asio::io_context ctx(1);
  if constexpr (is_wheel<Timer>) {
    if (locking_off) {
      asio_wheel::wheel_options o;
      o.locking = asio_wheel::locking_mode::off;
      asio_wheel::install(ctx, o);
    }
  }
  counters c;
  auto rng = make_rng("W1", n, 0);
  std::vector<Timer> timers;
  const duration offset = b.offset_for(n);
  arm_pending(ctx, timers, random_durations(rng, n, 1s, 60s), offset, c);
  Timer spare(ctx);
  ctx.poll();  // anything that became due while arming runs outside the measurement

  std::vector<double> samples;
  std::uint64_t started = n, unrun = 0;
  for (int r = b.first_rep(); r < b.p.reps; ++r) {  // r = -1: warm-up, not recorded
    const std::size_t ops = ops_in_rep(b.p.ops, r);
    auto d = random_durations(rng, ops, 1s, 60s);
    const std::uint64_t aborted_before = c.aborted;
    double ns = time_ns([&] {
      for (std::size_t i = 0; i < ops; ++i) {
        spare.expires_after(d[i] + offset);
        spare.async_wait(count_handler{&c});
        spare.cancel();
        if ((i & 1023) == 1023) ctx.poll();
      }
      ctx.poll();
    });
    started += ops;
    unrun += ops - std::min<std::uint64_t>(ops, c.aborted - aborted_before);
    if (r >= 0) samples.push_back(ns / double(ops));
  }
  std::uint64_t fired = c.ok;
  std::string note = settle(b, what, ctx, timers, c, started);
  auto s = summarize(samples);
  row r{"W1", impl_name<Timer>(), variant, n, s.min, s.median, NAN, ""};
  r.extra = "fired_meanwhile=" + std::to_string(fired);
  if (unrun) r.extra += ";aborted_run_after_timing=" + std::to_string(unrun);
  r.extra += offset_note(offset) + note;
  return r;
}

inline void w1_group(bench_run& b, std::size_t n) {
  if (b.out.find("W1", impl_wheel, "cancel", n) || b.out.find("W1", impl_steady, "cancel", n))
    return;  // already measured (W7 reuses W1)
  std::vector<row> g;
  if (b.cfg.want_steady() && b.cfg.want_variant("cancel")) g.push_back(w1_one<steady_timer>(b, n));
  if (b.cfg.want_wheel() && b.cfg.want_variant("cancel")) g.push_back(w1_one<wheel_timer>(b, n));
  if (b.cfg.want_wheel() && b.cfg.want_variant("cancel_locking_off"))
    g.push_back(w1_one<wheel_timer>(b, n, true));
  b.out.add_group(std::move(g));
}

// ---------------------------------------------------------------------------------------
// W2 idle reset: with N waits pending, push a random pending timer's deadline to
// now + random. steady_timer and the drop-in path: expires_after + async_wait (the old
// wait completes with operation_aborted). asio_wheel's own path: reset_after.
// Also reset_after_same: every reset to now + 30 s, as a server resets a connection's
// idle timeout on each request (never earlier than before: no relink, no lock).

enum class w2_path { drop_in, reset_after, reset_after_same };

template <class Timer, w2_path Path>
row w2_one(bench_run& b, std::size_t n) {
  const char* variant = Path == w2_path::reset_after        ? "reset_after"
                        : Path == w2_path::reset_after_same ? "reset_after_same"
                        : is_wheel<Timer>                  ? "drop_in"
                                                           : "expires_after";
  const std::string what = std::string("W2 ") + impl_name<Timer>() + " " + variant +
                           " N=" + fmt_n(n);
  asio::io_context ctx(1);
  counters c;
  auto rng = make_rng("W2", n, 0);
  std::vector<Timer> timers;
  const duration offset = b.offset_for(n);
  arm_pending(ctx, timers, random_durations(rng, n, 1s, 60s), offset, c);
  ctx.poll();

  std::vector<double> samples;
  std::uint64_t started = n;
  for (int r = b.first_rep(); r < b.p.reps; ++r) {  // r = -1: warm-up, not recorded
    const std::size_t ops = ops_in_rep(b.p.ops, r);
    auto d = random_durations(rng, ops, 1s, 60s);
    auto idx = random_indices(rng, ops, n);
    double ns = time_ns([&] {
      for (std::size_t i = 0; i < ops; ++i) {
        Timer& t = timers[idx[i]];
        if constexpr (Path == w2_path::reset_after) {
          t.reset_after(d[i] + offset);
        } else if constexpr (Path == w2_path::reset_after_same) {
          t.reset_after(duration(std::chrono::seconds(30)) + offset);
        } else {
          t.expires_after(d[i] + offset);
          t.async_wait(count_handler{&c});
        }
        if ((i & 1023) == 1023) ctx.poll();
      }
      ctx.poll();
    });
    if (Path == w2_path::drop_in) started += ops;
    if (r >= 0) samples.push_back(ns / double(ops));
  }
  std::uint64_t fired = c.ok;
  std::string note = settle(b, what, ctx, timers, c, started);
  auto s = summarize(samples);
  row r{"W2", impl_name<Timer>(), variant, n, s.min, s.median, NAN, ""};
  r.extra = "fired_meanwhile=" + std::to_string(fired) + offset_note(offset) + note;
  return r;
}

inline void w2_group(bench_run& b, std::size_t n) {
  if (b.out.find("W2", impl_steady, "expires_after", n) ||
      b.out.find("W2", impl_wheel, "reset_after", n))
    return;
  std::vector<row> g;
  if (b.cfg.want_steady() && b.cfg.want_variant("expires_after"))
    g.push_back(w2_one<steady_timer, w2_path::drop_in>(b, n));
  if (b.cfg.want_wheel() && b.cfg.want_variant("reset_after"))
    g.push_back(w2_one<wheel_timer, w2_path::reset_after>(b, n));
  if (b.cfg.want_wheel() && b.cfg.want_variant("reset_after_same"))
    g.push_back(w2_one<wheel_timer, w2_path::reset_after_same>(b, n));
  if (b.cfg.want_wheel() && b.cfg.want_variant("drop_in"))
    g.push_back(w2_one<wheel_timer, w2_path::drop_in>(b, n));
  b.out.add_group(std::move(g));
}

// ---------------------------------------------------------------------------------------
// W7 scaling: W1 and W2 medians at the larger N over the smallest N.

inline void w7_run(bench_run& b) {
  const auto& ns = b.p.w7_ns;
  for (std::size_t n : ns) {
    w1_group(b, n);
    w2_group(b, n);
  }
  struct series { const char* w; const char* impl; const char* variant; };
  const series all[] = {{"W1", impl_steady, "cancel"},       {"W1", impl_wheel, "cancel"},
                        {"W2", impl_steady, "expires_after"}, {"W2", impl_wheel, "reset_after"},
                        {"W2", impl_wheel, "drop_in"}};
  std::vector<row> g;
  for (auto& s : all) {
    const row* base = b.out.find(s.w, s.impl, s.variant, ns.front());
    if (!base) continue;
    for (std::size_t i = 1; i < ns.size(); ++i) {
      const row* r = b.out.find(s.w, s.impl, s.variant, ns[i]);
      if (!r) continue;
      row out{"W7", s.impl, std::string(s.w) + ":" + s.variant, ns[i], r->min_ns, r->median_ns,
              NAN, ""};
      out.extra = "growth_vs_" + fmt_n(ns.front()) + "=" +
                  fmt("%.2f", r->median_ns / base->median_ns) + "x";
      g.push_back(out);
    }
  }
  // Ratio here: steady_timer's growth over this row's growth (same workload and N).
  auto growth = [&](const row& r) {
    const row* base = b.out.find(r.variant.substr(0, 2), r.impl, r.variant.substr(3), ns.front());
    return r.median_ns / base->median_ns;
  };
  for (auto& r : g)
    for (auto& s : g)
      if (s.impl == impl_steady && s.n == r.n && s.variant.substr(0, 2) == r.variant.substr(0, 2))
        r.ratio = growth(s) / growth(r);
  b.out.add_group(std::move(g));
}

// ---------------------------------------------------------------------------------------
// W8 threads: W1 with the io_context run (polled) by T threads (2, and 4 on this 2-core
// machine to see oversubscription do no harm); each thread churns a timer of its own,
// built on that thread as a server builds a connection's timer, with N/T waits of its
// own pending, and any thread may run any aborted handler. The wheel is measured with
// each shard_policy (by_thread: the thread's own shard; round_robin: taking turns).

struct alignas(64) atomic_counters {
  std::atomic<std::uint64_t> ok{0}, aborted{0}, other{0};
  std::uint64_t total() const { return ok + aborted + other; }
};

struct atomic_count_handler {
  atomic_counters* c;
  void operator()(const error_code& ec) const {
    if (!ec) c->ok.fetch_add(1, std::memory_order_relaxed);
    else if (ec == asio::error::operation_aborted) c->aborted.fetch_add(1, std::memory_order_relaxed);
    else c->other.fetch_add(1, std::memory_order_relaxed);
  }
};

// The context of a W8 run: the wheel's service installed with `policy` (steady_timer
// ignores it). The default shard count, one per hardware thread, is kept.
inline void w8_install(asio::io_context& ctx, asio_wheel::shard_policy policy) {
  asio_wheel::wheel_options o;
  o.sharding = policy;
  asio_wheel::install(ctx, o);
}

template <class Timer>
row w8_one(bench_run& b, std::size_t n, int threads, asio_wheel::shard_policy policy) {
  const bool wheel = std::is_same_v<Timer, wheel_timer>;
  const char* policy_name = policy == asio_wheel::shard_policy::by_thread ? "by_thread" : "round_robin";
  const std::string variant = std::to_string(threads) + "_threads" +
                              (wheel ? std::string("_") + policy_name : std::string());
  const std::string what = std::string("W8 ") + impl_name<Timer>() + " " + variant + " N=" + fmt_n(n);
  asio::io_context ctx(threads);
  if (wheel) w8_install(ctx, policy);
  std::vector<atomic_counters> c(static_cast<std::size_t>(threads));
  std::vector<std::vector<Timer>> timers(static_cast<std::size_t>(threads));
  const duration offset = b.offset_for(n);
  // The pending waits, each thread's built on a thread of its own.
  for (int k = 0; k < threads; ++k)
    std::thread([&, k] {
      auto rng = make_rng("W8", n, std::size_t(k));
      auto d = random_durations(rng, n / std::size_t(threads), 1s, 60s);
      auto& mine = timers[std::size_t(k)];
      mine.reserve(d.size());
      for (auto& x : d) {
        mine.emplace_back(ctx);
        mine.back().expires_after(x + offset);
        mine.back().async_wait(atomic_count_handler{&c[std::size_t(k)]});
      }
    }).join();
  ctx.poll();

  std::vector<double> samples;
  std::uint64_t started = (n / std::size_t(threads)) * std::size_t(threads);
  for (int r = b.first_rep(); r < b.p.reps; ++r) {  // r = -1: warm-up, not recorded
    const std::size_t ops_per_thread = ops_in_rep(b.p.ops, r) / std::size_t(threads);
    std::vector<std::vector<duration>> d(static_cast<std::size_t>(threads));
    for (int k = 0; k < threads; ++k) {
      auto rng = make_rng("W8", n, std::size_t(100 + r * threads + k));
      d[std::size_t(k)] = random_durations(rng, ops_per_thread, 1s, 60s);
    }
    std::atomic<bool> go{false};
    std::atomic<int> ready{0};
    std::vector<std::thread> workers;
    for (int k = 0; k < threads; ++k)
      workers.emplace_back([&, k] {
        Timer t(ctx); // built here: by_thread puts it on this thread's shard
        ready.fetch_add(1, std::memory_order_release);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        auto& cnt = c[std::size_t(k)];
        for (std::size_t i = 0; i < ops_per_thread; ++i) {
          t.expires_after(d[std::size_t(k)][i] + offset);
          t.async_wait(atomic_count_handler{&cnt});
          t.cancel();
          if ((i & 1023) == 1023) ctx.poll();
        }
        ctx.poll();
      });
    while (ready.load(std::memory_order_acquire) != threads) std::this_thread::yield();
    started += ops_per_thread * std::size_t(threads);
    double ns = time_ns([&] {
      go.store(true, std::memory_order_release);
      for (auto& w : workers) w.join();
      ctx.poll();  // whatever the last cancels posted after the other threads' last poll
    });
    if (r >= 0) samples.push_back(ns / double(ops_per_thread * std::size_t(threads)));
  }

  std::uint64_t fired = 0;
  for (auto& x : c) fired += x.ok;
  for (auto& mine : timers)
    for (auto& t : mine) t.cancel();
  auto total = [&] {
    std::uint64_t sum = 0;
    for (auto& x : c) sum += x.total();
    return sum;
  };
  for (int idle = 0; total() < started && idle < 100;) {
    if (ctx.stopped()) ctx.restart();
    if (ctx.poll() == 0) { ++idle; std::this_thread::sleep_for(1ms); }
  }
  for (auto& v : timers) v.clear();
  if (ctx.stopped()) ctx.restart();
  ctx.poll();
  row out{"W8", impl_name<Timer>(), variant, n, NAN, NAN, NAN, ""};
  auto s = summarize(samples);
  out.min_ns = s.min;
  out.median_ns = s.median;
  out.extra = "Mops_per_s=" + fmt("%.2f", 1e3 / s.median) +
              ";fired_meanwhile=" + std::to_string(fired) +
              ";completions=" + std::to_string(total()) + "/" + std::to_string(started) +
              offset_note(offset);
  if (total() != started) {
    b.fail.add(what + ": " + std::to_string(total()) + " completions for " +
               std::to_string(started) + " waits");
    out.extra += ";LOST";
  }
  std::uint64_t other = 0;
  for (auto& x : c) other += x.other;
  if (other) b.fail.add(what + ": unexpected errors");
  return out;
}

// Per thread count: steady_timer, then the wheel with each shard policy.
inline void w8_group(bench_run& b, std::size_t n) {
  for (int threads : {2, 4}) {
    std::vector<row> g;
    if (b.cfg.want_steady())
      g.push_back(w8_one<steady_timer>(b, n, threads, asio_wheel::shard_policy::by_thread));
    if (b.cfg.want_wheel())
      for (auto policy : {asio_wheel::shard_policy::by_thread, asio_wheel::shard_policy::round_robin})
        g.push_back(w8_one<wheel_timer>(b, n, threads, policy));
    b.out.add_group(std::move(g));
  }
}

} // namespace bench

#endif
