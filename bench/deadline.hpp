// W9 cancel_after: per-request deadlines on socket reads, asio_wheel::cancel_after vs
// the steady_timer + cancellation_signal construction Boost 1.86's cancel_after uses.
#ifndef ASIO_WHEEL_BENCH_DEADLINE_HPP
#define ASIO_WHEEL_BENCH_DEADLINE_HPP

#include "bench_common.hpp"

#if __has_include(<asio_wheel/cancel_after.hpp>)
#include <asio_wheel/cancel_after.hpp>
#define ASIO_WHEEL_BENCH_HAVE_CANCEL_AFTER 1
#endif

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>

namespace bench {

// ---------------------------------------------------------------------------------------
// W9 cancel_after: a chain of 1-byte reads on a local socket pair, each with a 30 s
// deadline it never reaches. Per op: write one byte, async_read_some it.
//   none         : no deadline (the floor)
//   steady_timer : what Boost 1.86's cancel_after does: a state per op holding a
//                  steady_timer and a cancellation_signal; the timer's wait would emit the
//                  signal; the read completion cancels the timer, and the user's handler
//                  runs once both the read and the timer's aborted wait have completed.
//   asio_wheel   : asio_wheel::cancel_after(30s, handler)

struct w9_chain {
  asio::io_context* ctx = nullptr;
  asio::local::stream_protocol::socket* wr = nullptr;
  asio::local::stream_protocol::socket* rd = nullptr;
  char out_byte = 'x', in_byte = 0;
  std::uint64_t target = 0, completed = 0, errors = 0;
  void (*start)(w9_chain&) = nullptr;  // starts the next read with the variant's deadline

  void write_one() {
    error_code ec;
    wr->write_some(asio::buffer(&out_byte, 1), ec);
    if (ec) ++errors;
  }
  void next() {
    write_one();
    start(*this);
  }
  // The user's completion handler body, the same for every variant.
  void on_read(const error_code& ec, std::size_t n) {
    if (ec || n != 1) ++errors;
    if (++completed == target) ctx->stop();
    else next();
  }
};

struct w9_read_handler {
  w9_chain* chain;
  void operator()(const error_code& ec, std::size_t n) const { chain->on_read(ec, n); }
};

inline void w9_start_plain(w9_chain& c) {
  c.rd->async_read_some(asio::buffer(&c.in_byte, 1), w9_read_handler{&c});
}

#ifdef ASIO_WHEEL_BENCH_HAVE_CANCEL_AFTER
inline void w9_start_wheel(w9_chain& c) {
  c.rd->async_read_some(asio::buffer(&c.in_byte, 1),
                        asio_wheel::cancel_after(30s, w9_read_handler{&c}));
}
#endif

// The per-operation state of the steady_timer deadline (see the comment above W9).
struct w9_deadline_op {
  w9_chain* chain;
  steady_timer timer;
  asio::cancellation_signal signal;
  int refs = 2;               // the read and the timer wait
  bool read_done = false;
  error_code ec;
  std::size_t n = 0;

  w9_deadline_op(w9_chain* c) : chain(c), timer(*c->ctx) {}

  void release() {
    if (--refs > 0) return;
    w9_chain* c = chain;
    error_code e = ec;
    std::size_t k = n;
    delete this;
    c->on_read(e, k);
  }
};

inline void w9_start_steady(w9_chain& c) {
  auto* op = new w9_deadline_op(&c);
  op->timer.expires_after(30s);
  op->timer.async_wait([op](const error_code& ec) {
    if (!ec && !op->read_done) op->signal.emit(asio::cancellation_type::terminal);
    op->release();
  });
  c.rd->async_read_some(asio::buffer(&c.in_byte, 1),
                        asio::bind_cancellation_slot(op->signal.slot(),
                                                     [op](const error_code& ec, std::size_t n) {
                                                       op->read_done = true;
                                                       op->ec = ec;
                                                       op->n = n;
                                                       op->timer.cancel();
                                                       op->release();
                                                     }));
}

inline row w9_one(bench_run& b, const char* impl, const char* variant, void (*start)(w9_chain&)) {
  const std::string what = std::string("W9 ") + impl + " " + variant;
  asio::io_context ctx(1);
  asio::local::stream_protocol::socket wr(ctx), rd(ctx);
  asio::local::connect_pair(wr, rd);
  std::vector<double> samples;
  std::uint64_t errors = 0, short_by = 0;
  for (int r = b.first_rep(); r < b.p.reps; ++r) {  // r = -1: warm-up, not recorded
    const std::size_t ops = ops_in_rep(b.p.w9_ops, r);
    w9_chain c;
    c.ctx = &ctx;
    c.wr = &wr;
    c.rd = &rd;
    c.target = ops;
    c.start = start;
    ctx.restart();
    watchdog dog(ctx, 600s);
    double ns = time_ns([&] {
      c.next();
      ctx.run();
    });
    bool hung = dog.disarm();
    // Leftovers (e.g. deadline entries) are cleared outside the timed region.
    ctx.restart();
    ctx.poll();
    if (hung || c.completed != ops) short_by += ops - std::min<std::uint64_t>(ops, c.completed);
    errors += c.errors;
    if (r >= 0) samples.push_back(ns / double(ops));
  }
  if (short_by) b.fail.add(what + ": " + std::to_string(short_by) + " reads never completed");
  if (errors) b.fail.add(what + ": " + std::to_string(errors) + " reads failed");
  auto s = summarize(samples);
  row out{"W9", impl, variant, b.p.w9_ops, s.min, s.median, NAN, ""};
  out.extra = "errors=" + std::to_string(errors);
  if (short_by) out.extra += ";LOST=" + std::to_string(short_by);
  return out;
}

inline void w9_run(bench_run& b) {
  std::vector<row> g;
  if (b.cfg.impl == "all" && b.cfg.want_variant("no_deadline"))
    g.push_back(w9_one(b, "none", "no_deadline", w9_start_plain));
  if (b.cfg.want_steady() && b.cfg.want_variant("timer+signal"))
    g.push_back(w9_one(b, impl_steady, "timer+signal", w9_start_steady));
#ifdef ASIO_WHEEL_BENCH_HAVE_CANCEL_AFTER
  if (b.cfg.want_wheel() && b.cfg.want_variant("cancel_after"))
    g.push_back(w9_one(b, impl_wheel, "cancel_after", w9_start_wheel));
#else
  std::printf("W9: asio_wheel/cancel_after.hpp not present yet; asio_wheel row skipped\n");
#endif
  b.out.add_group(std::move(g));
}

} // namespace bench

#endif
