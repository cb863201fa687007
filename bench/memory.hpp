// W4 memory: resident bytes per pending wait, each implementation in a forked child;
// also what constructing a timer and starting its first wait cost there.
#ifndef ASIO_WHEEL_BENCH_MEMORY_HPP
#define ASIO_WHEEL_BENCH_MEMORY_HPP

#include "bench_common.hpp"

#include <optional>

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

namespace bench {

// ---------------------------------------------------------------------------------------
// W4 memory: RSS growth per pending wait (timer object + one wait) at N. Each
// implementation is measured in its own forked child, after malloc_trim, so neither
// reuses memory the other (or an earlier workload) freed.

// Carries a type into a generic lambda (std::type_identity is C++20).
template <class T>
struct type_tag {
  using type = T;
};

struct w4_result {
  double bytes_per_wait = 0;
  double construct_ns = 0;    // per timer: N constructions into a reserved vector
  double first_wait_ns = 0;   // per timer: expires_after + async_wait, the first on each
  // The same two, again, into the vector's memory once the first N are destroyed: the
  // first pass pays the kernel's first touch of every page (on this VM most of its
  // time), this one only the library.
  double construct_warm_ns = 0;
  double first_wait_warm_ns = 0;
  std::uint64_t lost = 0;
  std::uint64_t extra = 0;
};

template <class Timer>
w4_result w4_child(std::size_t n) {
  auto rng = make_rng("W4", n, 0);
  auto d = random_durations(rng, n, 1s, 60s);
  w4_result res;
  {
    // The context and its timer service exist before the baseline: what is measured
    // is the cost of each further pending wait, not the context's fixed cost.
    asio::io_context ctx(1);
    Timer(ctx).cancel();
    malloc_trim(0);
    const std::size_t rss0 = rss_bytes();
    counters c;
    std::vector<Timer> timers;
    // arm_pending's two loops, timed apart (one run: a rough figure, not a median).
    auto construct_and_wait = [&](double& construct_ns, double& first_wait_ns) {
      construct_ns = time_ns([&] {
        for (std::size_t i = 0; i < n; ++i) timers.emplace_back(ctx);
      }) / double(n);
      first_wait_ns = time_ns([&] {
        for (std::size_t i = 0; i < n; ++i) {
          timers[i].expires_after(d[i]);
          timers[i].async_wait(count_handler{&c});
        }
      }) / double(n);
    };
    timers.reserve(n);
    construct_and_wait(res.construct_ns, res.first_wait_ns);
    res.bytes_per_wait = double(rss_bytes() - rss0) / double(n);
    for (auto& t : timers) t.cancel();
    drain(ctx, c, n);
    // Second pass, into memory already touched.
    timers.clear();
    construct_and_wait(res.construct_warm_ns, res.first_wait_warm_ns);
    for (auto& t : timers) t.cancel();
    drain(ctx, c, 2 * n);
    res.lost = 2 * n - std::min<std::uint64_t>(2 * n, c.aborted);
    res.extra = c.total() > 2 * n ? c.total() - 2 * n : 0;
  }
  return res;
}

template <class Timer>
std::optional<w4_result> w4_measure(std::size_t n) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return std::nullopt;
  if (pid == 0) {
    close(fds[0]);
    w4_result r = w4_child<Timer>(n);
    ssize_t w = write(fds[1], &r, sizeof r);
    _exit(w == ssize_t(sizeof r) ? 0 : 1);
  }
  close(fds[1]);
  w4_result r;
  std::size_t got = 0;
  while (got < sizeof r) {
    ssize_t k = read(fds[0], reinterpret_cast<char*>(&r) + got, sizeof r - got);
    if (k <= 0) break;
    got += std::size_t(k);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != sizeof r || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return r;
}

inline void w4_run(bench_run& b) {
  const std::size_t n = b.p.w4_n;
  std::vector<row> g;
  double steady_bytes = NAN;
  auto one = [&](auto tag) {
    using Timer = typename decltype(tag)::type;
    const std::string what = std::string("W4 ") + impl_name<Timer>() + " N=" + fmt_n(n);
    constexpr bool compact = std::is_same_v<Timer, compact_timer>;
    row r{"W4", impl_name<Timer>(), compact ? "rss_compact" : "rss", n, NAN, NAN, NAN, ""};
    auto res = w4_measure<Timer>(n);
    if (!res) {
      b.fail.add(what + ": the measuring child failed");
      r.extra = "FAILED";
    } else {
      if (res->lost) b.fail.add(what + ": lost " + std::to_string(res->lost) + " handlers");
      if (res->extra) b.fail.add(what + ": " + std::to_string(res->extra) + " handlers too many");
      r.extra = "bytes_per_wait=" + fmt("%.1f", res->bytes_per_wait) +
                ";sizeof_timer=" + std::to_string(sizeof(Timer)) +
                ";construct_ns=" + fmt("%.1f", res->construct_ns) +
                ";first_wait_ns=" + fmt("%.1f", res->first_wait_ns) +
                ";construct_warm_ns=" + fmt("%.1f", res->construct_warm_ns) +
                ";first_wait_warm_ns=" + fmt("%.1f", res->first_wait_warm_ns);
      if (res->lost) r.extra += ";LOST=" + std::to_string(res->lost);
      if (is_wheel<Timer> && !std::isnan(steady_bytes)) {
        r.ratio = steady_bytes / res->bytes_per_wait;
        r.extra += ";x_of_steady=" + fmt("%.2f", res->bytes_per_wait / steady_bytes);
      }
      if (!is_wheel<Timer>) steady_bytes = res->bytes_per_wait;
    }
    g.push_back(r);
  };
  // steady_timer first only so that the wheel row can quote the ratio; the children are
  // independent, so the order does not affect either figure.
  if (b.cfg.want_steady()) one(type_tag<steady_timer>{});
  if (b.cfg.want_wheel()) one(type_tag<wheel_timer>{});
  if (b.cfg.want_wheel()) one(type_tag<compact_timer>{});
  b.out.add_group(std::move(g));
}

} // namespace bench

#endif
