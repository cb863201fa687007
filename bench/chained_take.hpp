// S2, chained takes (the seed's BenchmarkPushAndTake, issue 13): push N elements onto a
// delay_queue with delays of i ns (i < N), wait until all have expired, then take all N,
// each take started from the previous take's handler. One op = one push + one take.
//
// What it shows: a take that completes at once, started inside a handler, completes in
// the running step (up to expiry_batch), without a posted step per element and the
// reactor round trip that comes with it. Reported: push, take and their sum, ns per
// element. Every element must be taken, in push order.
#ifndef ASIO_WHEEL_BENCH_CHAINED_TAKE_HPP
#define ASIO_WHEEL_BENCH_CHAINED_TAKE_HPP

#include "bench_common.hpp"

#include <asio_wheel/delay_queue.hpp>

#include <thread>

namespace bench {

inline void s2_run(bench_run& b) {
  if (!b.cfg.want_wheel()) return;
  const std::size_t n = b.p.w4_n; // 1M in a full run, 100k with --quick
  std::vector<double> push_ns, take_ns;
  for (int rep = 0; rep < b.p.reps; ++rep) {
    asio::io_context ctx(1);
    asio_wheel::delay_queue<std::size_t> q(ctx);
    push_ns.push_back(time_ns([&] {
      for (std::size_t i = 0; i < n; ++i) q.push(i, std::chrono::nanoseconds(i));
    }) / double(n));
    // Wait (untimed) until every element has expired: the wheel's steps hand them over.
    std::this_thread::sleep_for(std::chrono::nanoseconds(n) + std::chrono::milliseconds(2));
    ctx.poll();
    ctx.restart();
    std::size_t taken = 0, out_of_order = 0;
    auto take = [&](auto& self) -> void {
      q.async_take([&, self_ref = &self](error_code ec, std::size_t v) {
        if (ec || v != taken) ++out_of_order;
        if (++taken < n) (*self_ref)(*self_ref);
      });
    };
    take_ns.push_back(time_ns([&] {
      take(take);
      ctx.run();
    }) / double(n));
    if (taken != n || out_of_order != 0)
      b.fail.add("S2: " + std::to_string(taken) + " of " + std::to_string(n) + " taken, " +
                 std::to_string(out_of_order) + " out of order or failed");
  }
  const summary p = summarize(push_ns), t = summarize(take_ns);
  std::vector<row> g;
  g.push_back({"S2", impl_wheel, "push", n, p.min, p.median, NAN, ""});
  g.push_back({"S2", impl_wheel, "take_chained", n, t.min, t.median, NAN, ""});
  g.push_back({"S2", impl_wheel, "push+take", n, p.min + t.min, p.median + t.median, NAN,
               "target<=250ns"});
  b.out.add_group(std::move(g));
}

} // namespace bench

#endif
