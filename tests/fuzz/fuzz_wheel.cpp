// libFuzzer target: bytes -> a sequence of operations on the timers, periodic timers,
// cancel_after waits and delay queue of a manual-clock wheel, checked step by step
// against the reference model that tests/test_model.cpp uses too
// (tests/reference_model.hpp, which states the rules). The model predicts what every
// call must return and, at each poll, exactly which operations complete, with which
// error code (and `missed` count, or element taken), in which order, and never early,
// never a tick late, never outside a poll; wheel_service::stats() is checked after every
// operation. This file only turns bytes into operations on the real objects and reports
// each to the model.
//
// The wheel geometry (slots 2..16, levels 1..4, tick 1 ms), expiry_batch and max_pending
// come from the first bytes, so cascading, rounds and batching are all exercised.
// Opcode bytes >= 196 drive a periodic_timer, cancel_after and a delay_queue on the same
// wheel instead (only without max_pending: the model's limit counts timer waits alone).
//
// Handler memory comes from a LIFO free-list allocator, so a freed operation's block is
// handed to the next one at once: stale pointers to a finished operation then alias a
// live one, which is what ASan alone would not show.
//
// Built by tests/fuzz/CMakeLists.txt as fuzz_wheel (clang, -fsanitize=fuzzer); with
// ASIO_WHEEL_FUZZ_STANDALONE defined it has its own main() that replays files given on
// the command line (the corpus regression test in ordinary builds).
#include "../asio_test.hpp"
#include "../reference_model.hpp"

#include <asio_wheel.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <utility>
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

// ---- the harness ----------------------------------------------------------------------

namespace model = asio_wheel_test::model;

constexpr std::size_t n_timers = 6;
constexpr std::size_t n_periodic = 3;

void model_mismatch(const char* what, long long a, long long b) { fail(what, a, b); }

class harness {
public:
  harness(asio_wheel::wheel_options o)
      : opts_(o), svc_(asio_wheel::install(io_, o)), strand_(asio::make_strand(io_)),
        time_(svc_.now(), o.tick), waits_(time_, n_timers, o.max_pending, &model_mismatch),
        periodic_(time_, n_periodic, &model_mismatch), deadlines_(time_, &model_mismatch),
        queue_(time_, &model_mismatch) {}

  ~harness() {
    // Destroy timers, then the context without polling: the aborted handlers are
    // destroyed, never invoked (LeakSanitizer checks that nothing leaks).
    for (auto& t : timers_) t.reset();
    for (auto& p : periodic_timers_) p.reset();
    delay_queue_.reset();
    deadline_timers_.clear();
  }

  // orderly_end: decided by the input's first byte, so that both ends are reached (a
  // byte read after the loop would almost always be 0: the loop ends when the input
  // does, 3000 steps take far more bytes than the fuzzer's inputs hold).
  void run(input& in, bool orderly_end) {
    for (int step = 0; step < 3000 && !in.empty(); ++step) {
      op(in);
      check_stats();
    }
    // Orderly end: every timer destroyed, every wait aborted or done.
    if (orderly_end) {
      for (std::size_t i = 0; i < n_timers; ++i) destroy(i);
      for (std::size_t i = 0; i < n_periodic; ++i) periodic_destroy(i);
      queue_destroy();
      for (auto& [id, t] : deadline_timers_) t.reset(); // aborts the waits
      deadlines_.destroy_all();
      poll();
      CHECK(waits_.outstanding() == 0, (long long)waits_.outstanding());
      CHECK(periodic_.outstanding() == 0 && queue_.outstanding() == 0 && deadlines_.outstanding() == 0);
      CHECK(svc_.stats().pending == 0);
    }
  }

private:
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

  // Pending operations of the objects other than the timers.
  std::size_t other_pending() const {
    return periodic_.pending() + deadlines_.pending() + queue_.pending();
  }

  void op(input& in) {
    const std::size_t i = in.byte() % n_timers;
    const std::uint8_t k = in.byte();
    if (k >= 196) { // the other objects: periodic timers, cancel_after, delay queue
      // They add pending waits of their own, which the model's max_pending does not
      // count: only without a limit.
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
        waits_.create(i);
      }
      break;
    case 1: case 2: case 3: wait(i, in); break;
    case 4: // cancel
      if (timers_[i]) {
        const std::size_t expect = waits_.cancel(i);
        CHECK(timers_[i]->cancel() == expect, (long long)expect);
      }
      break;
    case 5: { // expires_after
      const duration d = read_duration(in);
      if (timers_[i]) {
        const std::size_t expect = waits_.expires_after(i, d);
        CHECK(timers_[i]->expires_after(d) == expect, (long long)expect);
        CHECK(timers_[i]->expiry() == waits_.expiry(i));
      }
      break;
    }
    case 6: { // expires_at, absolute
      const time_point t = in.byte() & 1 ? time_point::max() : time_.from_now(read_duration(in));
      if (timers_[i]) {
        const std::size_t expect = waits_.expires_at(i, t);
        CHECK(timers_[i]->expires_at(t) == expect, (long long)expect);
      }
      break;
    }
    case 7: { // reset_after / reset_at: pending waits move along
      const bool at = in.byte() & 1;
      const duration d = read_duration(in);
      if (timers_[i]) {
        if (at) timers_[i]->reset_at(time_.from_now(d)); else timers_[i]->reset_after(d);
        waits_.reset_after(i, d);
        CHECK(timers_[i]->expiry() == waits_.expiry(i));
      }
      break;
    }
    case 8: per_op_cancel(in); break;
    case 9: destroy(i); break;
    case 10: { // move (construct into an empty place, or assign over an existing timer)
      const std::size_t j = in.byte() % n_timers;
      if (!timers_[i] || i == j) break;
      waits_.move(i, j);
      if (timers_[j]) *timers_[j] = std::move(*timers_[i]);
      else timers_[j].emplace(std::move(*timers_[i]));
      CHECK(timers_[j]->expiry() == waits_.expiry(j));
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
      svc_.advance(d); // invokes nothing: the models fail on a completion outside a poll
      time_.advance(d);
      CHECK(svc_.now() == time_.now());
      break;
    }
    default: poll(); break;
    }
  }

  void wait(std::size_t i, input& in) {
    if (!timers_[i]) return;
    const std::uint8_t how = in.byte();
    const bool with_signal = how & 1, on_strand = how & 2;
    const std::size_t id = waits_.start_wait(i, !on_strand, with_signal);
    auto h = asio::bind_allocator(pool_allocator<void>(&pool_),
                                  [this, id](error_code ec) { waits_.completed(id, ec, svc_.now()); });
    auto& t = *timers_[i];
    if (with_signal) {
      auto& signal = signals_[id];
      signal = std::make_unique<asio::cancellation_signal>();
      if (on_strand)
        t.async_wait(asio::bind_cancellation_slot(signal->slot(), asio::bind_executor(strand_, std::move(h))));
      else
        t.async_wait(asio::bind_cancellation_slot(signal->slot(), std::move(h)));
    } else if (on_strand) {
      t.async_wait(asio::bind_executor(strand_, std::move(h)));
    } else {
      t.async_wait(std::move(h));
    }
  }

  void per_op_cancel(input& in) {
    const auto& waits = waits_.waits();
    if (waits.empty()) return;
    // Pick a wait by id, among the recent ones.
    const std::size_t back = in.u16() % std::min<std::size_t>(waits.size(), 64);
    auto it = waits.end();
    std::advance(it, -static_cast<std::ptrdiff_t>(back) - 1);
    const std::size_t id = it->first;
    if (!waits_.can_emit(id)) return;
    static constexpr asio::cancellation_type types[] = {
        asio::cancellation_type::terminal, asio::cancellation_type::partial,
        asio::cancellation_type::total, asio::cancellation_type::none};
    const auto type = types[in.byte() % 4];
    if (it->second.st != model::timers::state::pending && !ASIO_WHEEL_FUZZ_STALE_CANCEL) return;
    waits_.emitted(id, type != asio::cancellation_type::none);
    signals_.at(id)->emit(type);
  }

  void destroy(std::size_t i) {
    if (!timers_[i]) return;
    waits_.destroy(i);
    timers_[i].reset();
  }

  void poll() {
    time_.reach(); // the poll's step moves the wheel to the clock
    waits_.begin_poll();
    periodic_.begin_poll();
    deadlines_.begin_poll();
    queue_.begin_poll();
    io_.restart();
    io_.poll();
    periodic_.end_poll();
    for (std::size_t id : deadlines_.end_poll()) deadline_timers_.erase(id); // with its timer
    queue_.end_poll();
    waits_.end_poll();
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
    auto& timer = periodic_timers_[i];
    if (!timer) { // any op on a missing timer creates it
      const duration period = read_period(in);
      timer = std::make_unique<asio_wheel::periodic_timer>(io_, period, asio_wheel::missed_tick::skip);
      periodic_.create(i, period);
      CHECK(timer->period() == periodic_.period(i));
      return;
    }
    switch (what) {
    case 0: case 1: case 2: { // async_tick
      const std::size_t id = periodic_.start_tick(i);
      timer->async_tick(asio::bind_allocator(
          pool_allocator<void>(&pool_), [this, id](error_code ec, std::uint64_t missed) {
            periodic_.completed(id, ec, missed, svc_.now());
          }));
      break;
    }
    case 3: { // cancel
      const std::size_t n = periodic_.cancel(i);
      CHECK(timer->cancel() == n, (long long)n);
      break;
    }
    case 4: // reset: the schedule restarts one period from now
      timer->reset();
      periodic_.reset(i);
      break;
    default:
      if (in.byte() & 1) {
        periodic_destroy(i);
      } else { // period(p): from the tick after the one already scheduled
        const duration period = read_period(in);
        timer->period(period);
        periodic_.set_period(i, period);
        CHECK(timer->period() == periodic_.period(i));
      }
      break;
    }
  }

  void periodic_destroy(std::size_t i) {
    if (!periodic_timers_[i]) return;
    periodic_.destroy(i);
    periodic_timers_[i].reset();
  }

  // ---- cancel_after on a timer's wait ----

  void cancel_after_op(input& in) {
    const duration dw = read_small(in);
    const std::uint8_t how = in.byte();
    const duration dd = read_small(in);
    if (deadlines_.outstanding() >= 8) return;
    const std::size_t id = deadlines_.start(dw, dd);
    auto& timer = deadline_timers_[id];
    timer = std::make_unique<asio_wheel::timer>(io_);
    timer->expires_after(dw);
    auto h = asio::bind_allocator(pool_allocator<void>(&pool_),
                                  [this, id](error_code ec) { deadlines_.completed(id, ec); });
    if (how & 1)
      timer->async_wait(asio_wheel::cancel_at(time_.from_now(dd), std::move(h)));
    else
      timer->async_wait(asio_wheel::cancel_after(dd, std::move(h)));
  }

  // ---- delay_queue<int> ----

  // A key handed out earlier (live or stale), or a default-constructed one (-1).
  std::pair<asio_wheel::delay_queue<int>::key, int> pick_key(input& in) {
    const std::uint16_t b = in.u16();
    if (keys_.empty() || b % 16 == 0) return {{}, -1};
    return keys_[keys_.size() - 1 - (b >> 4) % std::min<std::size_t>(keys_.size(), 64)];
  }

  void queue_op(unsigned what, input& in) {
    if (what == 6) {
      if (delay_queue_) queue_destroy(); else queue_create();
      return;
    }
    if (!delay_queue_) queue_create();
    switch (what) {
    case 0: { // push
      const duration d = read_small(in);
      const int v = queue_.push(d);
      keys_.emplace_back(delay_queue_->push(v, d), v);
      break;
    }
    case 1: { // erase
      auto [k, v] = pick_key(in);
      const bool expect = queue_.erase(v);
      CHECK(delay_queue_->erase(k) == expect, (long long)v, (long long)expect);
      break;
    }
    case 2: { // reset: back on the wheel, even if it had expired
      auto [k, v] = pick_key(in);
      const duration d = read_small(in);
      const bool expect = queue_.reset(v, d);
      CHECK(delay_queue_->reset(k, d) == expect, (long long)v, (long long)expect);
      break;
    }
    case 3: case 4: { // async_take
      const std::size_t id = queue_.start_take();
      delay_queue_->async_take(asio::bind_allocator(
          pool_allocator<void>(&pool_), [this, id](error_code ec, int v) {
            queue_.completed(id, ec, v, svc_.now());
          }));
      break;
    }
    default: { // cancel
      const std::size_t n = queue_.cancel();
      CHECK(delay_queue_->cancel() == n, (long long)n);
      break;
    }
    }
    CHECK(delay_queue_->size() == queue_.size(), (long long)delay_queue_->size(), (long long)queue_.size());
  }

  void queue_create() {
    delay_queue_.emplace(io_);
    queue_.create();
  }

  void queue_destroy() {
    if (!delay_queue_) return;
    queue_.destroy(); // keys to its elements stay in keys_: stale for the next queue
    delay_queue_.reset();
  }

  void check_stats() { waits_.check_stats(svc_.stats(), other_pending(), counters_exact_); }

  pool pool_; // outlives the context: handlers still queued are freed into it
  asio_wheel::wheel_options opts_;
  asio::io_context io_;
  asio_wheel::wheel_service& svc_;
  asio::strand<asio::io_context::executor_type> strand_;
  // Gives the wheel its executor from the start: every advance() then posts a step, and
  // the wheel's time moves exactly at polls (wheel_time::reach). Never waited on.
  asio_wheel::timer anchor_{io_};
  // The model, and the time it runs on (moved with every advance()).
  model::wheel_time time_;
  model::timers waits_;
  model::periodic_timers periodic_;
  model::cancel_after_waits deadlines_;
  model::delay_queue queue_;
  bool counters_exact_ = true; // until an op on the other objects
  // The objects under test.
  std::array<std::optional<asio_wheel::timer>, n_timers> timers_;
  std::map<std::size_t, std::unique_ptr<asio::cancellation_signal>> signals_; // by wait id
  std::array<std::unique_ptr<asio_wheel::periodic_timer>, n_periodic> periodic_timers_;
  std::map<std::size_t, std::unique_ptr<asio_wheel::timer>> deadline_timers_; // until completed
  std::optional<asio_wheel::delay_queue<int>> delay_queue_;
  std::vector<std::pair<asio_wheel::delay_queue<int>::key, int>> keys_; // every key handed out
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
  const bool orderly_end = (geo >> 4) & 1;  // else: the context is destroyed with waits
  const std::uint8_t lim = in.byte();
  o.expiry_batch = lim % 5;                 // 0 (unlimited), 1..4
  o.max_pending = (lim >> 3) % 4 == 0 ? 1 + (lim >> 5) : 0;
  harness h(o);
  h.run(in, orderly_end);
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

