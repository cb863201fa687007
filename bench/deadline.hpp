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

#include <cmath>
#include <memory>
#include <string>
#include <vector>

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
// The variants take turns in segments of w9_segment_ops reads, and a deadline's own cost
// (deadline_ns) is the median over the segments of its time minus the no-deadline loop's
// in the same turn.

// Reads per turn: about 14-22 ms of this loop, far shorter than the slow spells of a
// shared VM (seconds), so that a spell falls on the variants of a turn alike.
constexpr std::size_t w9_segment_ops = 10000;

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

// One variant of W9: its own context and socket pair, and what its repetitions measured.
struct w9_variant {
  const char* impl;
  const char* variant;
  void (*start)(w9_chain&);
  asio::io_context ctx{1};
  asio::local::stream_protocol::socket wr{ctx}, rd{ctx};
  std::vector<double> samples;     // ns per read, per repetition
  std::vector<double> segment_ns;  // ns per read, per segment of the recorded repetitions
  std::uint64_t errors = 0, short_by = 0;
  bool hung = false;               // the watchdog stopped a segment

  w9_variant(const char* i, const char* v, void (*s)(w9_chain&)) : impl(i), variant(v), start(s) {
    asio::local::connect_pair(wr, rd);
  }

  // One segment: a chain of `ops` reads, watched on its own (a lost handler must not
  // hang the run). Returns its ns.
  double run_segment(std::size_t ops) {
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
    if (dog.disarm()) hung = true;
    // Leftovers (e.g. deadline entries) are cleared outside the timed region.
    ctx.restart();
    ctx.poll();
    if (c.completed != ops) short_by += ops - std::min<std::uint64_t>(ops, c.completed);
    errors += c.errors;
    return ns;
  }

  row result(bench_run& b) const {
    const std::string what = std::string("W9 ") + impl + " " + variant;
    if (short_by) b.fail.add(what + ": " + std::to_string(short_by) + " reads never completed");
    if (hung) b.fail.add(what + ": the watchdog stopped a segment");
    if (errors) b.fail.add(what + ": " + std::to_string(errors) + " reads failed");
    auto s = summarize(samples);
    row out{"W9", impl, variant, b.p.w9_ops, s.min, s.median, NAN, ""};
    out.extra = "errors=" + std::to_string(errors);
    if (short_by) out.extra += ";LOST=" + std::to_string(short_by);
    return out;
  }
};

inline void w9_run(bench_run& b) {
  std::vector<std::unique_ptr<w9_variant>> variants;
  if (b.cfg.impl == "all" && b.cfg.want_variant("no_deadline"))
    variants.push_back(std::make_unique<w9_variant>("none", "no_deadline", w9_start_plain));
  if (b.cfg.want_steady() && b.cfg.want_variant("timer+signal"))
    variants.push_back(std::make_unique<w9_variant>(impl_steady, "timer+signal", w9_start_steady));
#ifdef ASIO_WHEEL_BENCH_HAVE_CANCEL_AFTER
  if (b.cfg.want_wheel() && b.cfg.want_variant("cancel_after"))
    variants.push_back(std::make_unique<w9_variant>(impl_wheel, "cancel_after", w9_start_wheel));
#else
  std::printf("W9: asio_wheel/cancel_after.hpp not present yet; asio_wheel row skipped\n");
#endif
  // The variants take turns, a segment each: the target is a ratio of differences
  // between loops of 1.3-2.2 us a read, so a slow spell of this shared machine that fell
  // on one variant's reads alone would move it by far more than the deadline costs.
  for (int r = b.first_rep(); r < b.p.reps; ++r) { // r = -1: warm-up, not recorded
    const std::size_t ops = ops_in_rep(b.p.w9_ops, r);
    std::vector<double> rep_ns(variants.size(), 0.0);
    for (std::size_t done = 0; done < ops; done += w9_segment_ops) {
      const std::size_t n = std::min(w9_segment_ops, ops - done);
      for (std::size_t i = 0; i < variants.size(); ++i) {
        const double ns = variants[i]->run_segment(n);
        rep_ns[i] += ns;
        if (r >= 0) variants[i]->segment_ns.push_back(ns / double(n));
      }
    }
    if (r >= 0)
      for (std::size_t i = 0; i < variants.size(); ++i)
        variants[i]->samples.push_back(rep_ns[i] / double(ops));
  }
  std::vector<row> g;
  for (const auto& v : variants) g.push_back(v->result(b));
  // The deadline's own cost, per segment: its time minus the no-deadline loop's in the
  // same turn, then the median of those (deadline_ns). Paired so, a spell that slowed
  // one turn cancels out; a difference of two medians would keep it.
  if (variants.size() > 1 && variants.front()->impl == std::string("none")) {
    const w9_variant& none = *variants.front();
    double steady_ns = NAN;
    for (std::size_t i = 1; i < variants.size(); ++i) {
      std::vector<double> own;
      for (std::size_t k = 0; k < variants[i]->segment_ns.size(); ++k)
        own.push_back(variants[i]->segment_ns[k] - none.segment_ns[k]);
      const double median = summarize(own).median;
      g[i].extra += ";deadline_ns=" + fmt("%.1f", median);
      if (variants[i]->impl == std::string(impl_steady)) steady_ns = median;
      else if (!std::isnan(steady_ns) && median > 0)
        g[i].extra += ";deadline_ratio=" + fmt("%.2f", steady_ns / median) + "x";
    }
  }
  b.out.add_group(std::move(g));
}

} // namespace bench

#endif
