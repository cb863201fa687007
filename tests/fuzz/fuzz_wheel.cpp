// libFuzzer target: bytes -> a sequence of timer operations on a manual-clock wheel,
// checked step by step against a reference model.
//
// The model keeps every wait (id -> timer, state, expiry tick) and predicts, at each
// poll, exactly which waits complete and with which error code:
//   - a pending wait completes with success once the wheel's tick has reached its
//     expiry tick (expiry rounded up to the tick): never early, never a tick late;
//   - cancel(), expires_*(), destruction, move-assignment over it and per-operation
//     cancellation complete it with operation_aborted, and cancel()/expires_*() return
//     how many they aborted;
//   - a wait beyond max_pending completes with too_many_timers;
//   - reset_*() moves the expiry of the pending waits and aborts none;
//   - every wait completes exactly once, and nothing completes outside a poll;
//   - successes that went through the wheel's slots complete in expiry-tick order;
//   - wheel_service::stats() agrees with the model after every operation.
// The wheel geometry (slots 2..16, levels 1..4, tick 1 ms), expiry_batch and max_pending
// come from the first bytes, so cascading, rounds and batching are all exercised.
// Opcode bytes >= 196 drive a periodic_timer, cancel_after and a delay_queue on the same
// wheel instead (see "the model of the other objects" below).
//
// Handler memory comes from a LIFO free-list allocator, so a freed operation's block is
// handed to the next one at once: stale pointers to a finished operation then alias a
// live one, which is what ASan alone would not show.
//
// Built by tests/fuzz/CMakeLists.txt as fuzz_wheel (clang, -fsanitize=fuzzer); with
// ASIO_WHEEL_FUZZ_STANDALONE defined it has its own main() that replays files given on
// the command line (the corpus regression test in ordinary builds).
#include "../asio_test.hpp"

#include <asio_wheel.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <vector>

// Emitting the signal of a wait that has already completed (while its timer lives) must
// be a no-op, even when a later wait reuses the op's memory. Define to 0 to leave that
// path out.
#ifndef ASIO_WHEEL_FUZZ_STALE_CANCEL
#define ASIO_WHEEL_FUZZ_STALE_CANCEL 1
#endif

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using duration = clock_type::duration;
using time_point = clock_type::time_point;

[[noreturn]] void fail(const char* what, long long a = 0, long long b = 0) {
  std::fprintf(stderr, "fuzz_wheel: model mismatch: %s (%lld, %lld)\n", what, a, b);
  std::abort();
}
// CHECK(cond), CHECK(cond, a) or CHECK(cond, a, b): the missing values padded with 0
// (C++17: no __VA_OPT__); the values are evaluated only when cond fails.
#define CHECK(...) CHECK_IMPL(__VA_ARGS__, 0LL, 0LL, 0)
#define CHECK_IMPL(cond, a, b, ...) \
  do {                              \
    if (!(cond)) fail(#cond, a, b); \
  } while (0)

// ---- input ----------------------------------------------------------------------------

class input {
public:
  input(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ == end_; }
  std::uint8_t byte() { return p_ == end_ ? 0 : *p_++; }
  std::uint32_t u16() { return byte() | (std::uint32_t{byte()} << 8); }
  std::uint32_t u32() { return u16() | (u16() << 16); }
private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

// ---- a LIFO free-list allocator for handlers --------------------------------------------

struct pool {
  std::map<std::size_t, std::vector<void*>> free;
  std::size_t live = 0;
  void* get(std::size_t n) {
    ++live;
    auto& list = free[n];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      return p;
    }
    return ::operator new(n);
  }
  void put(void* p, std::size_t n) {
    --live;
    free[n].push_back(p);
  }
  ~pool() {
    for (auto& [n, list] : free)
      for (void* p : list) ::operator delete(p);
  }
};

template <class T>
struct pool_allocator {
  using value_type = T;
  pool* p;
  explicit pool_allocator(pool* q) noexcept : p(q) {}
  template <class U>
  pool_allocator(const pool_allocator<U>& o) noexcept : p(o.p) {}
  T* allocate(std::size_t n) { return static_cast<T*>(p->get(n * sizeof(T))); }
  void deallocate(T* q, std::size_t n) noexcept { p->put(q, n * sizeof(T)); }
  template <class U>
  bool operator==(const pool_allocator<U>& o) const noexcept { return p == o.p; }
};

// ---- the model ------------------------------------------------------------------------

constexpr std::size_t n_timers = 6;
constexpr std::uint64_t never = ~std::uint64_t{0};

enum class wstate { pending, queued_abort, queued_too_many, done };

struct wait_rec {
  std::size_t timer;          // index of the timer it waits on (follows moves)
  wstate state = wstate::pending;
  std::uint64_t due = 0;      // expiry tick while pending
  time_point expiry{};        // expiry time while pending
  bool slotted = false;       // due > current tick when last scheduled
  bool ordered = true;        // completion runs inline (not via a strand)
  std::unique_ptr<asio::cancellation_signal> signal; // per-operation cancellation
  bool signal_live = false;   // its timer still exists: emitting is allowed
};

struct completion {
  std::size_t id;
  error_code ec;
  time_point at; // service clock when the handler ran
};

// ---- the model of the other objects ------------------------------------------------------
// periodic_timer (policy skip, no jitter), cancel_after on a timer's wait, and
// delay_queue<int>. Each completion is predicted exactly (which op, which error code,
// `missed`, the element taken) except where a timer's wait and its deadline come due in
// the same poll: then either outcome is accepted, exactly once.

constexpr std::size_t n_periodic = 3;

enum class ostate { pending, success, aborted, done };

struct tick_rec {
  std::size_t timer;
  ostate state = ostate::pending;
  std::uint64_t missed = 0; // predicted when the model fires the tick
  time_point slot{};        // the slot it completes for: never before it
};

struct periodic_rec {
  std::unique_ptr<asio_wheel::periodic_timer> timer;
  std::vector<std::size_t> ticks; // pending async_ticks, oldest first
  time_point next{};              // slot of the next tick
  duration period{};
};

struct tick_done {
  std::size_t id;
  error_code ec;
  std::uint64_t missed;
  time_point at;
};

struct deadline_rec {
  std::unique_ptr<asio_wheel::timer> timer; // its own timer: no other op touches the wait
  std::uint64_t wait_due = 0;               // the timer's expiry tick
  std::uint64_t deadline_due = 0;           // the deadline's tick
  bool killed = false;                      // timer destroyed at the end: aborted
};

struct elem_rec {
  bool live = true;     // in the queue (not taken, not erased, queue not destroyed)
  bool expired = false; // in the expired FIFO (moved there by a poll's step)
  time_point expiry{};
  std::uint64_t due = 0;
};

struct take_rec {
  ostate state = ostate::pending;
  int value = 0;        // the element it gets, once the model hands it one
  time_point expiry{};  // that element's expiry: never before it
};

struct take_done {
  std::size_t id;
  error_code ec;
  int value;
  time_point at;
};

class harness {
public:
  harness(asio_wheel::wheel_options o)
      : opts_(o), svc_(asio_wheel::install(io_, o)), strand_(asio::make_strand(io_)),
        epoch_(svc_.now()), now_(epoch_) {}

  ~harness() {
    // Destroy timers, then the context without polling: the aborted handlers are
    // destroyed, never invoked (LeakSanitizer checks that nothing leaks).
    for (auto& t : timers_) t.reset();
    for (auto& p : periodic_) p.timer.reset();
    queue_.reset();
    deadlines_.clear();
  }

  void run(input& in) {
    for (int step = 0; step < 3000 && !in.empty(); ++step) {
      op(in);
      check_stats();
    }
    // Orderly end: every timer destroyed, every wait aborted or done.
    if (in.byte() & 1) {
      for (std::size_t i = 0; i < n_timers; ++i) destroy(i);
      for (std::size_t i = 0; i < n_periodic; ++i) periodic_destroy(i);
      queue_destroy();
      for (auto& [id, c] : deadlines_) c.timer.reset(), c.killed = true; // aborts the waits
      poll();
      for (auto& [id, w] : waits_) CHECK(w.state == wstate::done, (long long)id);
      CHECK(ticks_.empty() && takes_.empty() && deadlines_.empty());
      CHECK(svc_.stats().pending == 0);
    }
  }

private:
  // The time of tick k (k small enough here not to overflow).
  time_point tick_time(std::uint64_t k) const {
    return epoch_ + static_cast<duration::rep>(k) * opts_.tick;
  }

  std::uint64_t tick_of(time_point t) const {
    if (t == time_point::max()) return never;
    if (t <= epoch_) return 0;
    const auto since = static_cast<std::uint64_t>((t - epoch_).count());
    const auto tick = static_cast<std::uint64_t>(opts_.tick.count());
    return since / tick + (since % tick != 0);
  }
  std::uint64_t current_tick() const {
    return static_cast<std::uint64_t>((now_ - epoch_).count() / opts_.tick.count());
  }
  static time_point add(time_point t, duration d) {
    if (d > duration::zero() && t > time_point::max() - d) return time_point::max();
    if (d < duration::zero() && t < time_point::min() - d) return time_point::min();
    return t + d;
  }

  duration read_duration(input& in) {
    switch (in.byte() % 8) {
    case 0: return std::chrono::milliseconds(in.byte() % 4);
    case 1: return std::chrono::milliseconds(in.u16() % 300) + std::chrono::microseconds(in.u16() % 1000);
    case 2: return std::chrono::milliseconds(in.u16());
    case 3: return -std::chrono::milliseconds(in.byte());
    case 4: return std::chrono::hours(1 + in.u16());
    case 5: return duration::max() - duration(in.byte());
    case 6: return duration::max();
    default: return std::chrono::nanoseconds(in.u16());
    }
  }

  std::size_t pending_count() const {
    std::size_t n = 0;
    for (auto& [id, w] : waits_) n += w.state == wstate::pending;
    for (auto& p : periodic_) n += p.ticks.size();
    n += 2 * deadlines_.size(); // each: the timer's wait and the deadline, until it completes
    return n + pending_takes();
  }

  // Every pending wait of timer i becomes queued for abort; returns how many.
  std::size_t abort_timer(std::size_t i) {
    std::size_t n = 0;
    for (auto& [id, w] : waits_)
      if (w.timer == i && w.state == wstate::pending) w.state = wstate::queued_abort, ++n;
    stats_cancelled_ += n;
    return n;
  }

  void op(input& in) {
    const std::size_t i = in.byte() % n_timers;
    const std::uint8_t k = in.byte();
    if (k >= 196) { // the other objects: periodic timers, cancel_after, delay queue
      // They add pending waits of their own, which the max_pending model above does
      // not count: only without a limit.
      if (opts_.max_pending != 0) return;
      counters_exact_ = false; // their cancelled/expired accounting is not modelled
      const unsigned x = k - 196;
      if (x < 24) periodic_op(i % n_periodic, x % 6, in);
      else if (x < 32) cancel_after_op(in);
      else queue_op(x % 7, in);
      return;
    }
    switch (k % 14) {
    case 0: // create
      if (!timers_[i]) {
        timers_[i].emplace(io_);
        expiry_[i] = time_point();
      }
      break;
    case 1: case 2: case 3: wait(i, in); break;
    case 4: // cancel
      if (timers_[i]) {
        const std::size_t expect = abort_timer(i);
        CHECK(timers_[i]->cancel() == expect, (long long)expect);
      }
      break;
    case 5: { // expires_after
      const duration d = read_duration(in);
      if (timers_[i]) {
        const std::size_t expect = abort_timer(i);
        CHECK(timers_[i]->expires_after(d) == expect, (long long)expect);
        expiry_[i] = add(now_, d);
        CHECK(timers_[i]->expiry() == expiry_[i]);
      }
      break;
    }
    case 6: { // expires_at, absolute
      const time_point t = in.byte() & 1 ? time_point::max() : add(now_, read_duration(in));
      if (timers_[i]) {
        const std::size_t expect = abort_timer(i);
        CHECK(timers_[i]->expires_at(t) == expect, (long long)expect);
        expiry_[i] = t;
      }
      break;
    }
    case 7: { // reset_after / reset_at: pending waits move along
      const bool at = in.byte() & 1;
      const duration d = read_duration(in);
      if (timers_[i]) {
        const std::size_t aborted_before = stats_cancelled_;
        if (at) timers_[i]->reset_at(add(now_, d)); else timers_[i]->reset_after(d);
        expiry_[i] = add(now_, d);
        CHECK(timers_[i]->expiry() == expiry_[i]);
        const std::uint64_t due = tick_of(expiry_[i]);
        for (auto& [id, w] : waits_)
          if (w.timer == i && w.state == wstate::pending)
            w.due = due, w.expiry = expiry_[i], w.slotted = due > current_tick();
        CHECK(aborted_before == stats_cancelled_);
      }
      break;
    }
    case 8: per_op_cancel(in); break;
    case 9: destroy(i); break;
    case 10: { // move (construct into an empty place, or assign over an existing timer)
      const std::size_t j = in.byte() % n_timers;
      if (!timers_[i] || i == j) break;
      if (timers_[j]) abort_timer(j);
      // Pending waits move over (their cancellation follows them); the slot handlers
      // of i's finished waits point at i, which is destroyed below.
      for (auto& [id, w] : waits_) {
        if (w.timer != i) continue;
        if (w.state == wstate::pending) w.timer = j;
        else w.signal_live = false;
      }
      if (timers_[j]) *timers_[j] = std::move(*timers_[i]);
      else timers_[j].emplace(std::move(*timers_[i]));
      expiry_[j] = expiry_[i];
      CHECK(timers_[j]->expiry() == expiry_[j]);
      // The moved-from timer has no waits; cancel() says so.
      CHECK(timers_[i]->cancel() == 0);
      timers_[i].reset();
      break;
    }
    case 11: case 12: { // advance
      duration d;
      switch (in.byte() % 4) {
      case 0: d = opts_.tick * (in.byte() % 4); break;
      case 1: d = opts_.tick * (in.u16() % 300); break;
      case 2: d = std::chrono::nanoseconds(in.u32() % 3'000'000); break;
      default: d = opts_.tick * (in.u16() % 70000); break;
      }
      svc_.advance(d);
      now_ += d;
      CHECK(svc_.now() == now_);
      CHECK(log_.size() == logged_, (long long)log_.size()); // advance() invokes nothing
      break;
    }
    default: poll(); break;
    }
  }

  void wait(std::size_t i, input& in) {
    if (!timers_[i]) return;
    const std::uint8_t how = in.byte();
    const bool refused = opts_.max_pending != 0 && pending_count() >= opts_.max_pending;
    const std::size_t id = next_id_++;
    wait_rec& w = waits_[id];
    w.timer = i;
    w.due = tick_of(expiry_[i]);
    w.expiry = expiry_[i];
    w.slotted = w.due > current_tick();
    w.ordered = !(how & 2);
    if (refused) {
      w.state = wstate::queued_too_many;
      ++stats_rejected_;
    }
    auto h = asio::bind_allocator(pool_allocator<void>(&pool_),
                                  [this, id](error_code ec) { log_.push_back({id, ec, svc_.now()}); });
    auto& t = *timers_[i];
    if (how & 1) {
      w.signal = std::make_unique<asio::cancellation_signal>();
      w.signal_live = true;
      if (how & 2)
        t.async_wait(asio::bind_cancellation_slot(w.signal->slot(), asio::bind_executor(strand_, std::move(h))));
      else
        t.async_wait(asio::bind_cancellation_slot(w.signal->slot(), std::move(h)));
    } else if (how & 2) {
      t.async_wait(asio::bind_executor(strand_, std::move(h)));
    } else {
      t.async_wait(std::move(h));
    }
    CHECK(log_.size() == logged_); // never completes inside async_wait
  }

  void per_op_cancel(input& in) {
    if (waits_.empty()) return;
    // Pick a wait by id, among the recent ones.
    const std::size_t back = in.u16() % std::min<std::size_t>(waits_.size(), 64);
    auto it = waits_.end();
    std::advance(it, -static_cast<std::ptrdiff_t>(back) - 1);
    wait_rec& w = it->second;
    if (!w.signal || !w.signal_live) return;
    static constexpr asio::cancellation_type types[] = {
        asio::cancellation_type::terminal, asio::cancellation_type::partial,
        asio::cancellation_type::total, asio::cancellation_type::none};
    const auto type = types[in.byte() % 4];
    if (w.state == wstate::pending) {
      if (type != asio::cancellation_type::none) {
        w.state = wstate::queued_abort;
        ++stats_cancelled_;
      }
    } else if (!ASIO_WHEEL_FUZZ_STALE_CANCEL) {
      return;
    }
    w.signal->emit(type);
  }

  void destroy(std::size_t i) {
    if (!timers_[i]) return;
    abort_timer(i);
    for (auto& [id, w] : waits_)
      if (w.timer == i) w.signal_live = false;
    timers_[i].reset();
  }

  void poll() {
    // What must complete now: everything queued, and every pending wait that is due.
    const std::uint64_t cur = current_tick();
    std::map<std::size_t, error_code> expect;
    for (auto& [id, w] : waits_) {
      if (w.state == wstate::queued_abort) expect[id] = asio::error::operation_aborted;
      else if (w.state == wstate::queued_too_many) expect[id] = asio_wheel::error::too_many_timers;
      else if (w.state == wstate::pending && w.due <= cur) expect[id] = error_code(), ++stats_expired_;
    }
    periodic_before_poll();
    queue_before_poll();
    io_.restart();
    io_.poll();
    periodic_after_poll();
    deadlines_after_poll();
    queue_after_poll();
    CHECK(log_.size() - logged_ == expect.size(), (long long)(log_.size() - logged_), (long long)expect.size());
    std::uint64_t last_due = 0;
    for (std::size_t k = logged_; k < log_.size(); ++k) {
      const completion& c = log_[k];
      auto e = expect.find(c.id);
      CHECK(e != expect.end(), (long long)c.id); // unexpected, or completed twice
      CHECK(e->second == c.ec, (long long)c.id, c.ec.value());
      wait_rec& w = waits_.at(c.id);
      if (!c.ec) {
        CHECK(c.at >= w.expiry, (long long)c.id); // never early
        if (w.slotted && w.ordered) {
          CHECK(w.due >= last_due, (long long)w.due, (long long)last_due);
          last_due = w.due;
        }
      }
      w.state = wstate::done;
      expect.erase(e);
    }
    logged_ = log_.size();
  }

  // ---- periodic_timer ----

  // A small duration, mostly around the wheel's tick (may be negative).
  duration read_small(input& in) {
    switch (in.byte() % 4) {
    case 0: return std::chrono::milliseconds(in.byte() % 8);
    case 1: return std::chrono::milliseconds(in.u16() % 300) + std::chrono::microseconds(in.u16() % 1000);
    case 2: return -std::chrono::milliseconds(in.byte() % 8);
    default: return std::chrono::nanoseconds(in.u32() % 20'000'000);
    }
  }

  duration read_period(input& in) {
    const std::uint8_t b = in.byte();
    if (b & 0x80) return std::chrono::microseconds(1 + in.u16() % 20000); // off the tick grid
    return std::chrono::milliseconds(1 + b % 16);
  }

  void periodic_op(std::size_t i, unsigned what, input& in) {
    periodic_rec& p = periodic_[i];
    if (!p.timer) { // any op on a missing timer creates it
      p.period = read_period(in);
      p.timer = std::make_unique<asio_wheel::periodic_timer>(io_, p.period, asio_wheel::missed_tick::skip);
      p.next = add(now_, p.period);
      CHECK(p.timer->period() == p.period);
      return;
    }
    switch (what) {
    case 0: case 1: case 2: { // async_tick
      const std::size_t id = next_id_++;
      ticks_[id].timer = i;
      p.ticks.push_back(id);
      p.timer->async_tick(asio::bind_allocator(
          pool_allocator<void>(&pool_), [this, id](error_code ec, std::uint64_t missed) {
            tick_log_.push_back({id, ec, missed, svc_.now()});
          }));
      CHECK(tick_log_.empty()); // never completes inside async_tick
      break;
    }
    case 3: { // cancel
      const std::size_t n = p.ticks.size();
      for (std::size_t id : p.ticks) ticks_.at(id).state = ostate::aborted;
      p.ticks.clear();
      CHECK(p.timer->cancel() == n, (long long)n);
      break;
    }
    case 4: // reset: the schedule restarts one period from now
      p.timer->reset();
      p.next = add(now_, p.period);
      break;
    default:
      if (in.byte() & 1) {
        periodic_destroy(i);
      } else { // period(p): from the tick after the one already scheduled
        p.period = read_period(in);
        p.timer->period(p.period);
        CHECK(p.timer->period() == p.period);
      }
      break;
    }
  }

  void periodic_destroy(std::size_t i) {
    periodic_rec& p = periodic_[i];
    if (!p.timer) return;
    for (std::size_t id : p.ticks) ticks_.at(id).state = ostate::aborted;
    p.ticks.clear();
    p.timer.reset();
  }

  // Fires the ticks that are due, as periodic_state::tick_due does with policy skip.
  void periodic_before_poll() {
    CHECK(tick_log_.empty(), (long long)tick_log_.size()); // nothing outside a poll
    const std::uint64_t cur = current_tick();
    for (auto& p : periodic_) {
      if (!p.timer) continue;
      while (!p.ticks.empty() && tick_of(p.next) <= cur) {
        const time_point slot = p.next;
        // Lateness counts from the slot rounded up to the wheel's tick; the slots
        // skipped count from the slot itself.
        const time_point on_time = tick_time(tick_of(slot));
        const std::uint64_t missed =
            now_ > on_time ? static_cast<std::uint64_t>((now_ - on_time) / p.period) : 0;
        const std::uint64_t passed =
            now_ > slot ? static_cast<std::uint64_t>((now_ - slot) / p.period) : 0;
        p.next = add(add(slot, static_cast<duration::rep>(passed) * p.period), p.period);
        tick_rec& t = ticks_.at(p.ticks.front());
        p.ticks.erase(p.ticks.begin());
        t.state = ostate::success;
        t.missed = missed;
        t.slot = slot;
      }
    }
  }

  void periodic_after_poll() {
    std::array<std::size_t, n_periodic> last{};
    for (const tick_done& c : tick_log_) {
      auto it = ticks_.find(c.id);
      CHECK(it != ticks_.end(), (long long)c.id);
      tick_rec& t = it->second;
      CHECK(t.state == ostate::success || t.state == ostate::aborted, (long long)c.id, (long long)t.state);
      if (t.state == ostate::success) {
        CHECK(!c.ec, (long long)c.id, c.ec.value());
        CHECK(c.missed == t.missed, (long long)c.missed, (long long)t.missed);
        CHECK(c.at >= t.slot, (long long)c.id); // never before its slot
        CHECK(c.id + 1 > last[t.timer], (long long)c.id, (long long)last[t.timer]); // in order
        last[t.timer] = c.id + 1;
      } else {
        CHECK(c.ec == asio::error::operation_aborted, (long long)c.id, c.ec.value());
      }
      ticks_.erase(it); // a second completion of it finds nothing
    }
    tick_log_.clear();
    for (auto& [id, t] : ticks_) // every tick fired or aborted has completed
      CHECK(t.state == ostate::pending, (long long)id, (long long)t.state);
  }

  // ---- cancel_after on a timer's wait ----

  void cancel_after_op(input& in) {
    const duration dw = read_small(in);
    const std::uint8_t how = in.byte();
    const duration dd = read_small(in);
    if (deadlines_.size() >= 8) return;
    const std::size_t id = next_deadline_++;
    deadline_rec& c = deadlines_[id];
    c.timer = std::make_unique<asio_wheel::timer>(io_);
    c.timer->expires_after(dw);
    c.wait_due = tick_of(add(now_, dw));
    c.deadline_due = tick_of(add(now_, dd));
    auto h = asio::bind_allocator(pool_allocator<void>(&pool_), [this, id](error_code ec) {
      deadline_log_.push_back({id, ec});
    });
    if (how & 1)
      c.timer->async_wait(asio_wheel::cancel_at(add(now_, dd), std::move(h)));
    else
      c.timer->async_wait(asio_wheel::cancel_after(dd, std::move(h)));
    CHECK(deadline_log_.empty()); // never completes inside async_wait
  }

  void deadlines_after_poll() {
    const std::uint64_t cur = current_tick();
    for (auto& [id, ec] : deadline_log_) {
      auto it = deadlines_.find(id);
      CHECK(it != deadlines_.end(), (long long)id); // unexpected, or completed twice
      const deadline_rec& c = it->second;
      const bool wait_due = c.wait_due <= cur, deadline_due = c.deadline_due <= cur;
      if (c.killed) {
        CHECK(ec == asio::error::operation_aborted, (long long)id, ec.value());
      } else if (wait_due && deadline_due) { // both came due since the last poll: either
        CHECK(!ec || ec == asio::error::operation_aborted, (long long)id, ec.value());
      } else if (wait_due) {
        CHECK(!ec, (long long)id, ec.value());
      } else {
        CHECK(deadline_due, (long long)id, (long long)c.deadline_due); // never early
        CHECK(ec == asio::error::operation_aborted, (long long)id, ec.value());
      }
      deadlines_.erase(it); // with its timer
    }
    deadline_log_.clear();
    for (auto& [id, c] : deadlines_) // what was due has completed
      CHECK(!c.killed && c.wait_due > cur && c.deadline_due > cur, (long long)id,
            (long long)std::min(c.wait_due, c.deadline_due));
  }

  // ---- delay_queue<int> ----

  // A key handed out earlier (live or stale), or a default-constructed one.
  std::pair<asio_wheel::delay_queue<int>::key, int> pick_key(input& in) {
    const std::uint16_t b = in.u16();
    if (keys_.empty() || b % 16 == 0) return {{}, -1};
    return keys_[keys_.size() - 1 - (b >> 4) % std::min<std::size_t>(keys_.size(), 64)];
  }

  bool elem_live(int v) const {
    auto it = elems_.find(v);
    return v >= 0 && it != elems_.end() && it->second.live;
  }

  std::size_t pending_takes() const {
    std::size_t n = 0;
    for (auto& [id, t] : takes_) n += t.state == ostate::pending;
    return n;
  }

  // The live expired element that goes first: earliest expiry, ties in push order.
  std::optional<int> front_expired() const {
    std::optional<int> best;
    for (auto& [v, e] : elems_) {
      if (!e.live || !e.expired) continue;
      if (!best || e.expiry < elems_.at(*best).expiry) best = v; // map order = push order
    }
    return best;
  }

  void hand(take_rec& t, int v) {
    elem_rec& e = elems_.at(v);
    t.state = ostate::success;
    t.value = v;
    t.expiry = e.expiry;
    e.live = false;
  }

  void queue_op(unsigned what, input& in) {
    if (what == 6) {
      if (queue_) queue_destroy(); else queue_.emplace(io_);
      return;
    }
    if (!queue_) queue_.emplace(io_);
    switch (what) {
    case 0: { // push
      const duration d = read_small(in);
      const int v = next_elem_++;
      elem_rec& e = elems_[v];
      e.expiry = add(now_, d);
      e.due = tick_of(e.expiry);
      keys_.emplace_back(queue_->push(v, d), v);
      break;
    }
    case 1: { // erase
      auto [k, v] = pick_key(in);
      const bool live = elem_live(v);
      CHECK(queue_->erase(k) == live, (long long)v, (long long)live);
      if (live) elems_.at(v).live = false;
      break;
    }
    case 2: { // reset: back on the wheel, even if it had expired
      auto [k, v] = pick_key(in);
      const duration d = read_small(in);
      const bool live = elem_live(v);
      CHECK(queue_->reset(k, d) == live, (long long)v, (long long)live);
      if (live) {
        elem_rec& e = elems_.at(v);
        e.expired = false;
        e.expiry = add(now_, d);
        e.due = tick_of(e.expiry);
      }
      break;
    }
    case 3: case 4: { // async_take
      const std::size_t id = next_id_++;
      // Nobody in line and an element expired: it is this take's at once (completes
      // as if by post); else the take waits in line.
      const bool first = pending_takes() == 0;
      take_rec& t = takes_[id];
      if (first)
        if (auto v = front_expired()) hand(t, *v);
      queue_->async_take(asio::bind_allocator(
          pool_allocator<void>(&pool_), [this, id](error_code ec, int v) {
            take_log_.push_back({id, ec, v, svc_.now()});
          }));
      CHECK(take_log_.empty()); // never completes inside async_take
      break;
    }
    default: { // cancel
      std::size_t n = 0;
      for (auto& [id, t] : takes_)
        if (t.state == ostate::pending) t.state = ostate::aborted, ++n;
      CHECK(queue_->cancel() == n, (long long)n);
      break;
    }
    }
    const auto live = std::count_if(elems_.begin(), elems_.end(), [](auto& e) { return e.second.live; });
    CHECK(queue_->size() == static_cast<std::size_t>(live), (long long)queue_->size(), (long long)live);
  }

  void queue_destroy() {
    if (!queue_) return;
    for (auto& [id, t] : takes_)
      if (t.state == ostate::pending) t.state = ostate::aborted;
    for (auto& [v, e] : elems_) e.live = false;
    elems_.clear(); // keys to them stay in keys_: stale for the next queue
    queue_.reset();
  }

  // The step expires what is due, then hands expired elements to the takes in line.
  void queue_before_poll() {
    CHECK(take_log_.empty(), (long long)take_log_.size()); // nothing outside a poll
    const std::uint64_t cur = current_tick();
    for (auto& [v, e] : elems_)
      if (e.live && !e.expired && e.due <= cur) e.expired = true;
    for (auto& [id, t] : takes_) { // map order = the order the takes were started
      if (t.state != ostate::pending) continue;
      auto v = front_expired();
      if (!v) break;
      hand(t, *v);
    }
    for (auto it = elems_.begin(); it != elems_.end();) // taken ones are gone for good
      it = it->second.live ? std::next(it) : elems_.erase(it);
  }

  void queue_after_poll() {
    for (const take_done& c : take_log_) {
      auto it = takes_.find(c.id);
      CHECK(it != takes_.end(), (long long)c.id); // unexpected, or completed twice
      const take_rec& t = it->second;
      CHECK(t.state == ostate::success || t.state == ostate::aborted, (long long)c.id, (long long)t.state);
      if (t.state == ostate::success) {
        CHECK(!c.ec, (long long)c.id, c.ec.value());
        CHECK(c.value == t.value, (long long)c.value, (long long)t.value); // expiry order
        CHECK(c.at >= t.expiry, (long long)c.id); // never before its expiry
      } else {
        CHECK(c.ec == asio::error::operation_aborted, (long long)c.id, c.ec.value());
        CHECK(c.value == 0, (long long)c.value);
      }
      takes_.erase(it);
    }
    take_log_.clear();
    for (auto& [id, t] : takes_) // every take served or aborted has completed
      CHECK(t.state == ostate::pending, (long long)id, (long long)t.state);
  }

  void check_stats() {
    const auto s = svc_.stats();
    CHECK(s.pending == pending_count(), (long long)s.pending, (long long)pending_count());
    if (counters_exact_) {
      CHECK(s.cancelled == stats_cancelled_, (long long)s.cancelled, (long long)stats_cancelled_);
      CHECK(s.rejected == stats_rejected_, (long long)s.rejected, (long long)stats_rejected_);
      CHECK(s.expired == stats_expired_, (long long)s.expired, (long long)stats_expired_);
    }
    CHECK(s.wakeups == 0); // manual clock: the driver never runs
  }

  pool pool_; // outlives the context: handlers still queued are freed into it
  asio_wheel::wheel_options opts_;
  asio::io_context io_;
  asio_wheel::wheel_service& svc_;
  asio::strand<asio::io_context::executor_type> strand_;
  const time_point epoch_;
  time_point now_;
  std::array<std::optional<asio_wheel::timer>, n_timers> timers_;
  std::array<time_point, n_timers> expiry_{};
  std::map<std::size_t, wait_rec> waits_;
  std::size_t next_id_ = 0;
  std::vector<completion> log_;
  std::size_t logged_ = 0;
  std::uint64_t stats_expired_ = 0, stats_cancelled_ = 0, stats_rejected_ = 0;
  bool counters_exact_ = true; // until an op on the other objects
  // periodic timers
  std::array<periodic_rec, n_periodic> periodic_;
  std::map<std::size_t, tick_rec> ticks_;       // until completed
  std::vector<tick_done> tick_log_;
  // cancel_after on timer waits
  std::map<std::size_t, deadline_rec> deadlines_; // until completed
  std::vector<std::pair<std::size_t, error_code>> deadline_log_;
  std::size_t next_deadline_ = 0;
  // the delay queue
  std::optional<asio_wheel::delay_queue<int>> queue_;
  std::map<int, elem_rec> elems_;               // by value (= push order); live ones kept
  std::vector<std::pair<asio_wheel::delay_queue<int>::key, int>> keys_; // every key handed out
  std::map<std::size_t, take_rec> takes_;       // until completed
  std::vector<take_done> take_log_;
  int next_elem_ = 0;
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in(data, size);
  asio_wheel::wheel_options o;
  o.clock = asio_wheel::clock_mode::manual;
  o.tick = 1ms;
  const std::uint8_t geo = in.byte();
  o.slots = std::size_t{2} << (geo % 4);    // 2, 4, 8, 16
  o.levels = 1 + (geo >> 2) % 4;            // 1..4
  const std::uint8_t lim = in.byte();
  o.expiry_batch = lim % 5;                 // 0 (unlimited), 1..4
  o.max_pending = (lim >> 3) % 4 == 0 ? 1 + (lim >> 5) : 0;
  harness h(o);
  h.run(in);
  return 0;
}

#ifdef ASIO_WHEEL_FUZZ_STANDALONE
// Replays inputs without libFuzzer: each argument is a file, or a directory of files.
#include <filesystem>
#include <fstream>
#include <iterator>

int main(int argc, char** argv) {
  std::size_t n = 0;
  auto replay = [&n](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(f), {}};
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    ++n;
  };
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) replay(e.path());
    } else {
      replay(p);
    }
  }
  std::printf("fuzz_wheel: %zu inputs replayed, all consistent with the model\n", n);
  return 0;
}
#endif

