// The reference model that tests/test_model.cpp and tests/fuzz/fuzz_wheel.cpp check the
// wheel against: plain bookkeeping, with no wheel and no Asio object in it. A harness
// performs each operation on the real objects and tells the model, which says what the
// operation must return and, at every poll, exactly which operations complete, how, and
// in which order.
//
//   wheel_time          the manual clock: epoch, tick, now; an expiry's due tick
//   timers              asio_wheel::timer objects in numbered places, and their waits
//                       (both tests)
//   periodic_timers     periodic_timer with missed_tick::skip, no jitter (the fuzzer)
//   cancel_after_waits  cancel_after/cancel_at on the wait of a timer of its own (the
//                       fuzzer)
//   delay_queue         one delay_queue<int>: its elements and takes (the fuzzer)
//
// What the wheel promises, as checked here (each class says the rest):
//   - a wait completes with success at the first poll once the wheel's tick has reached
//     its expiry rounded up to the tick: never early, never a tick late; a wait at
//     time_point::max() only by cancellation;
//   - cancel(), expires_*(), destruction, move-assignment over its timer and
//     per-operation cancellation (any type but none) complete it with operation_aborted,
//     and cancel()/expires_*() return how many they aborted; reset_*() moves the expiry
//     of the pending waits and aborts none;
//   - a wait beyond max_pending completes with too_many_timers, as if by post;
//   - every operation completes exactly once, and only inside a poll: never inside the
//     call that started it, nor in cancel(), emit(), advance() ...;
//   - successes that went through the wheel's slots complete in expiry-tick order
//     (except those that run on another executor, e.g. a strand);
//   - wheel_service::stats() agrees: pending, and expired/cancelled/rejected per wait.
//
// Protocol: the harness owns one wheel_time, moves it with every advance(), and gives it
// to the models. Handlers report with completed(...). A poll is begin_poll() on each
// model in use, io_context::poll(), then end_poll() on each. A mismatch calls the
// failure handler given to the model, which must not return (test_model: BOOST_FAIL,
// which throws; the fuzzer: print and abort()); if it does return, abort().
//
// Header-only and free of Boost.Test: the fuzzer includes it as "../reference_model.hpp"
// and builds in every mode the suites do (Boost or standalone Asio, C++17 or 20).
#ifndef ASIO_WHEEL_TESTS_REFERENCE_MODEL_HPP
#define ASIO_WHEEL_TESTS_REFERENCE_MODEL_HPP

#include "asio_test.hpp"

#include <asio_wheel.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace asio_wheel_test::model {

using clock_type = std::chrono::steady_clock;
using duration = clock_type::duration;
using time_point = clock_type::time_point;

// The due tick of a wait that only cancellation ends.
constexpr std::uint64_t never = ~std::uint64_t{0};

// Reports a mismatch: what went wrong and up to two numbers (ids, counts, codes).
using failure_handler = void (*)(const char* what, long long a, long long b);

// The base of the models: checks with the harness's failure handler.
class checked {
public:
  explicit checked(failure_handler fail) : fail_(fail) {}

protected:
  [[noreturn]] void failed(const char* what, long long a = 0, long long b = 0) const {
    fail_(what, a, b);
    std::abort();
  }
  void check(bool ok, const char* what, long long a = 0, long long b = 0) const {
    if (!ok) failed(what, a, b);
  }

private:
  failure_handler fail_;
};

// ---- the manual clock ---------------------------------------------------------------

// The wheel's virtual time: the service's now() when it was installed (the epoch), its
// tick, and now, moved by the harness exactly as it moves the service.
class wheel_time {
public:
  wheel_time(time_point epoch, duration tick) : epoch_(epoch), tick_(tick), now_(epoch) {}

  time_point epoch() const { return epoch_; }
  duration tick() const { return tick_; }
  time_point now() const { return now_; }
  void advance(duration d) { now_ += d; }

  // The tick at which an expiry comes due, as the wheel computes it: rounded up to the
  // tick; 0 for anything up to the epoch; never for time_point::max().
  std::uint64_t due_tick(time_point t) const {
    if (t == time_point::max()) return never;
    if (t <= epoch_) return 0;
    const auto since = static_cast<std::uint64_t>((t - epoch_).count());
    const auto tick = static_cast<std::uint64_t>(tick_.count());
    return since / tick + (since % tick != 0);
  }
  // The tick the clock has reached: now rounded down.
  std::uint64_t current_tick() const {
    return static_cast<std::uint64_t>((now_ - epoch_).count() / tick_.count());
  }
  // Whether an advance() has moved to a new tick since the last poll: then what came
  // due waits for the poll's step to be handed over (the service's due backlog; the
  // harness keeps an object on the wheel, so that there is a step). reach() as a poll
  // begins.
  bool backlog() const { return current_tick() > reached_; }
  void reach() { reached_ = current_tick(); }
  // t + d saturated at the ends of time_point, as the timers compute expiries.
  static time_point add(time_point t, duration d) {
    if (d > duration::zero() && t > time_point::max() - d) return time_point::max();
    if (d < duration::zero() && t < time_point::min() - d) return time_point::min();
    return t + d;
  }
  time_point from_now(duration d) const { return add(now_, d); }

private:
  time_point epoch_;
  duration tick_;
  time_point now_;
  std::uint64_t reached_ = 0;
};

// ---- timers and their waits ---------------------------------------------------------

// asio_wheel::timer objects in places 0..count-1 and every wait started on them.
// Waits are numbered in the order they were started and kept (done ones too, so that a
// harness can still emit a finished wait's cancellation signal) until forget_done().
class timers : checked {
public:
  using wait_id = std::size_t;

  enum class state {
    pending, // on the wheel: completes with success once due, unless aborted
    aborted, // aborted: completes with operation_aborted at the next poll
    refused, // beyond max_pending: completes with too_many_timers at the next poll
    done     // completed
  };

  struct wait {
    std::size_t timer = 0;     // the place of its timer (follows moves)
    state st = state::pending;
    std::uint64_t due = 0;     // expiry tick while pending
    time_point expiry{};       // expiry while pending
    bool slotted = false;      // due after the tick it was (last) scheduled at
    bool ordered = true;       // completes on the wheel's executor (not via a strand)
    bool has_signal = false;   // started with a cancellation slot
    bool signal_live = false;  // ... whose slot handler's timer still exists
  };

  // The counters of wheel_stats that the model predicts exactly.
  struct counters {
    std::uint64_t expired = 0, cancelled = 0, rejected = 0;
  };

  // max_pending: the service's option (0: no limit). Only these waits count towards it:
  // a harness with other pending operations must not combine them with a limit.
  timers(const wheel_time& time, std::size_t count, std::size_t max_pending, failure_handler fail)
      : checked(fail), time_(time), exists_(count, false), expiry_(count), max_pending_(max_pending) {}

  // -- the timers --

  bool exists(std::size_t i) const { return exists_.at(i); }
  time_point expiry(std::size_t i) const { return expiry_.at(i); }

  // A timer constructed in place i without an expiry.
  void create(std::size_t i) {
    check(!exists_.at(i), "timers: create over a live timer", static_cast<long long>(i));
    exists_[i] = true;
    expiry_[i] = time_point();
  }

  // cancel(): every pending wait of timer i is aborted; returns how many.
  std::size_t cancel(std::size_t i) {
    std::size_t n = 0;
    for (auto& [id, w] : waits_)
      if (w.timer == i && w.st == state::pending) w.st = state::aborted, ++n;
    counters_.cancelled += n;
    return n;
  }

  // expires_at()/expires_after(): cancel(), then the new expiry; returns how many.
  std::size_t expires_at(std::size_t i, time_point t) {
    const std::size_t n = cancel(i);
    expiry_.at(i) = t;
    return n;
  }
  std::size_t expires_after(std::size_t i, duration d) { return expires_at(i, time_.from_now(d)); }

  // reset_at()/reset_after(): the pending waits move to the new expiry, none aborted.
  void reset_at(std::size_t i, time_point t) {
    expiry_.at(i) = t;
    const std::uint64_t due = time_.due_tick(t);
    for (auto& [id, w] : waits_)
      if (w.timer == i && w.st == state::pending) schedule(w, due, t);
  }
  void reset_after(std::size_t i, duration d) { reset_at(i, time_.from_now(d)); }

  // The timer in place i destroyed: its waits are aborted, and no signal of a wait
  // started on it may be emitted any more.
  void destroy(std::size_t i) {
    check(exists_.at(i), "timers: destroy of no timer", static_cast<long long>(i));
    cancel(i);
    for (auto& [id, w] : waits_)
      if (w.timer == i) w.signal_live = false;
    exists_[i] = false;
  }

  // The timer in place i moved into place j (move-assigned over the timer there, or
  // move-constructed into the empty place), then the moved-from one destroyed (it has
  // no waits: cancel() on it returns 0). j's own waits are aborted; i's pending waits,
  // and their cancellation slots, follow to j; i's finished waits lose their signals.
  void move(std::size_t i, std::size_t j) {
    check(exists_.at(i) && i != j, "timers: bad move", static_cast<long long>(i), static_cast<long long>(j));
    if (exists_.at(j)) cancel(j);
    for (auto& [id, w] : waits_) {
      if (w.timer != i) continue;
      if (w.st == state::pending) w.timer = j;
      else w.signal_live = false;
    }
    exists_[j] = true;
    expiry_[j] = expiry_[i];
    exists_[i] = false;
  }

  // -- waits --

  // async_wait on timer i; `ordered`: its handler runs on the wheel's executor, not
  // dispatched to another (a strand). Returns the wait's id for completed().
  wait_id start_wait(std::size_t i, bool ordered, bool with_signal) {
    check(exists_.at(i), "timers: wait on no timer", static_cast<long long>(i));
    const bool refused = max_pending_ != 0 && pending() >= max_pending_;
    const wait_id id = next_id_++;
    wait& w = waits_[id];
    w.timer = i;
    w.ordered = ordered;
    w.has_signal = w.signal_live = with_signal;
    schedule(w, time_.due_tick(expiry_[i]), expiry_[i]);
    if (refused) {
      w.st = state::refused;
      ++counters_.rejected;
    }
    return id;
  }

  // Whether the harness may emit the wait's cancellation signal (it has one, and the
  // timer its slot handler belongs to still exists), even after it completed.
  bool can_emit(wait_id id) const {
    auto it = waits_.find(id);
    return it != waits_.end() && it->second.has_signal && it->second.signal_live;
  }

  // The wait's signal emitted; `cancels`: with a type other than none. A pending wait
  // is aborted; on any other the signal is stale and changes nothing.
  void emitted(wait_id id, bool cancels) {
    check(can_emit(id), "timers: emit of a dead signal", static_cast<long long>(id));
    wait& w = waits_.at(id);
    if (w.st == state::pending && cancels) {
      w.st = state::aborted;
      ++counters_.cancelled;
    }
  }

  const std::map<wait_id, wait>& waits() const { return waits_; }

  // The pending waits of timer i, oldest first.
  std::vector<wait_id> pending_waits(std::size_t i) const {
    std::vector<wait_id> ids;
    for (auto& [id, w] : waits_)
      if (w.timer == i && w.st == state::pending) ids.push_back(id);
    return ids;
  }

  // Waits on the wheel (wheel_stats::pending counts these).
  std::size_t pending() const {
    std::size_t n = 0;
    for (auto& [id, w] : waits_) n += w.st == state::pending;
    return n;
  }
  // Waits not completed yet.
  std::size_t outstanding() const {
    std::size_t n = 0;
    for (auto& [id, w] : waits_) n += w.st != state::done;
    return n;
  }
  const counters& stats() const { return counters_; }

  // Drops the finished waits (long runs). Their signals must not be emitted after this.
  void forget_done() {
    for (auto it = waits_.begin(); it != waits_.end();)
      it = it->second.st == state::done ? waits_.erase(it) : std::next(it);
  }

  // -- completions --

  // From a wait's handler: its error code and the service's now() when it ran.
  void completed(wait_id id, error_code ec, time_point at) {
    check(polling_, "timers: a wait completed outside a poll", static_cast<long long>(id), ec.value());
    log_.push_back({id, ec, at});
  }

  // Before io_context::poll(): every aborted or refused wait must complete in this
  // poll, and every pending one whose due tick the wheel has reached, with success.
  void begin_poll() {
    check(!polling_ && log_.empty(), "timers: begin_poll inside a poll");
    polling_ = true;
    const std::uint64_t cur = time_.current_tick();
    expect_.clear();
    for (auto& [id, w] : waits_) {
      if (w.st == state::aborted) expect_[id] = asio::error::operation_aborted;
      else if (w.st == state::refused) expect_[id] = asio_wheel::error::too_many_timers;
      else if (w.st == state::pending && w.due <= cur) expect_[id] = error_code(), ++counters_.expired;
    }
  }

  // After io_context::poll(): exactly those completed, each once, with its error code,
  // successes never before their expiry, slotted ones in due-tick order.
  void end_poll() {
    check(polling_, "timers: end_poll without begin_poll");
    polling_ = false;
    check(log_.size() == expect_.size(), "timers: completions in this poll, expected",
          static_cast<long long>(log_.size()), static_cast<long long>(expect_.size()));
    std::uint64_t last_due = 0;
    for (const record& c : log_) {
      auto e = expect_.find(c.id);
      check(e != expect_.end(), "timers: unexpected completion (or a second one) of wait", static_cast<long long>(c.id));
      check(e->second == c.ec, "timers: wrong error code for wait", static_cast<long long>(c.id), c.ec.value());
      wait& w = waits_.at(c.id);
      if (!c.ec) {
        check(c.at >= w.expiry, "timers: wait completed before its expiry", static_cast<long long>(c.id));
        if (w.slotted && w.ordered) {
          check(w.due >= last_due, "timers: completions out of expiry order (due, previous due)",
                static_cast<long long>(w.due), static_cast<long long>(last_due));
          last_due = w.due;
        }
      }
      w.st = state::done;
      expect_.erase(e);
    }
    log_.clear();
  }

  // stats() of the service against the model. `other_pending`: pending operations of
  // other objects on the same wheel; `exact_counters`: expired/cancelled/rejected come
  // from these waits alone (no other object on the wheel has completed anything).
  void check_stats(const asio_wheel::wheel_stats& s, std::size_t other_pending = 0,
                   bool exact_counters = true) const {
    const std::size_t expected_pending = pending() + other_pending;
    check(s.pending == expected_pending, "stats: pending, expected", static_cast<long long>(s.pending),
          static_cast<long long>(expected_pending));
    if (exact_counters) {
      check(s.cancelled == counters_.cancelled, "stats: cancelled, expected",
            static_cast<long long>(s.cancelled), static_cast<long long>(counters_.cancelled));
      check(s.rejected == counters_.rejected, "stats: rejected, expected", static_cast<long long>(s.rejected),
            static_cast<long long>(counters_.rejected));
      check(s.expired == counters_.expired, "stats: expired, expected", static_cast<long long>(s.expired),
            static_cast<long long>(counters_.expired));
    }
    check(s.wakeups == 0, "stats: wakeups on the manual clock", static_cast<long long>(s.wakeups));
  }

private:
  struct record {
    wait_id id;
    error_code ec;
    time_point at;
  };

  void schedule(wait& w, std::uint64_t due, time_point expiry) const {
    w.due = due;
    w.expiry = expiry;
    w.slotted = due > time_.current_tick();
  }

  const wheel_time& time_;
  std::vector<bool> exists_;
  std::vector<time_point> expiry_;
  std::size_t max_pending_;
  std::map<wait_id, wait> waits_;
  wait_id next_id_ = 0;
  counters counters_;
  bool polling_ = false;
  std::map<wait_id, error_code> expect_; // during a poll
  std::vector<record> log_;              // completions in this poll
};

// ---- periodic_timer -----------------------------------------------------------------

// periodic_timer objects (missed_tick::skip, no jitter) in places 0..count-1 and their
// pending async_ticks. At a poll the model fires, for each timer, its pending ticks
// oldest first while the next slot's tick has been reached, each with the `missed`
// count it computes. Each tick completes exactly once, in order, never before its slot;
// an aborted one with operation_aborted.
class periodic_timers : checked {
public:
  using tick_id = std::size_t;

  periodic_timers(const wheel_time& time, std::size_t count, failure_handler fail)
      : checked(fail), time_(time), timers_(count) {}

  bool exists(std::size_t i) const { return timers_.at(i).live; }
  duration period(std::size_t i) const { return timers_.at(i).period; }

  // Constructed with this period: the first slot is one period from now.
  void create(std::size_t i, duration period) {
    timer& p = timers_.at(i);
    check(!p.live, "periodic: create over a live timer", static_cast<long long>(i));
    p.live = true;
    p.period = period;
    p.next = time_.from_now(period);
  }

  tick_id start_tick(std::size_t i) {
    check(exists(i), "periodic: async_tick on no timer", static_cast<long long>(i));
    const tick_id id = next_id_++;
    ticks_[id].timer = i;
    timers_[i].ticks.push_back(id);
    return id;
  }

  // cancel(): returns how many ticks it aborts.
  std::size_t cancel(std::size_t i) {
    timer& p = timers_.at(i);
    const std::size_t n = p.ticks.size();
    for (tick_id id : p.ticks) ticks_.at(id).st = state::aborted;
    p.ticks.clear();
    return n;
  }
  // reset(): the schedule restarts one period from now.
  void reset(std::size_t i) {
    timer& p = timers_.at(i);
    p.next = time_.from_now(p.period);
  }
  // period(p): from the tick after the one already scheduled.
  void set_period(std::size_t i, duration period) { timers_.at(i).period = period; }

  void destroy(std::size_t i) {
    cancel(i);
    timers_.at(i).live = false;
  }

  // async_ticks waiting (each a wait on the wheel).
  std::size_t pending() const {
    std::size_t n = 0;
    for (auto& p : timers_) n += p.ticks.size();
    return n;
  }
  // Ticks not completed yet.
  std::size_t outstanding() const { return ticks_.size(); }

  void completed(tick_id id, error_code ec, std::uint64_t missed, time_point at) {
    check(polling_, "periodic: a tick completed outside a poll", static_cast<long long>(id), ec.value());
    log_.push_back({id, ec, missed, at});
  }

  // Fires the ticks that are due, as periodic_timer does with missed_tick::skip.
  void begin_poll() {
    check(!polling_ && log_.empty(), "periodic: begin_poll inside a poll");
    polling_ = true;
    const std::uint64_t cur = time_.current_tick();
    const time_point now = time_.now();
    for (auto& p : timers_) {
      if (!p.live) continue;
      while (!p.ticks.empty() && time_.due_tick(p.next) <= cur) {
        const time_point slot = p.next;
        // The later slots whose time has passed: skipped, and counted as missed (never
        // one on time while the period is at least the tick).
        const std::uint64_t passed = now > slot ? static_cast<std::uint64_t>((now - slot) / p.period) : 0;
        p.next = wheel_time::add(wheel_time::add(slot, static_cast<duration::rep>(passed) * p.period), p.period);
        tick& t = ticks_.at(p.ticks.front());
        p.ticks.erase(p.ticks.begin());
        t.st = state::fired;
        t.missed = passed;
        t.slot = slot;
      }
    }
  }

  void end_poll() {
    check(polling_, "periodic: end_poll without begin_poll");
    polling_ = false;
    std::vector<tick_id> last(timers_.size(), 0); // per timer: the last id completed + 1
    for (const record& c : log_) {
      auto it = ticks_.find(c.id);
      check(it != ticks_.end(), "periodic: unexpected completion (or a second one) of tick", static_cast<long long>(c.id));
      tick& t = it->second;
      check(t.st != state::pending, "periodic: tick completed before it was due", static_cast<long long>(c.id));
      if (t.st == state::fired) {
        check(!c.ec, "periodic: wrong error code for tick", static_cast<long long>(c.id), c.ec.value());
        check(c.missed == t.missed, "periodic: missed, expected", static_cast<long long>(c.missed),
              static_cast<long long>(t.missed));
        check(c.at >= t.slot, "periodic: tick completed before its slot", static_cast<long long>(c.id));
        check(c.id + 1 > last[t.timer], "periodic: ticks out of order (id, previous + 1)",
              static_cast<long long>(c.id), static_cast<long long>(last[t.timer]));
        last[t.timer] = c.id + 1;
      } else {
        check(c.ec == asio::error::operation_aborted, "periodic: wrong error code for aborted tick",
              static_cast<long long>(c.id), c.ec.value());
      }
      ticks_.erase(it);
    }
    log_.clear();
    for (auto& [id, t] : ticks_) // every tick fired or aborted has completed
      check(t.st == state::pending, "periodic: tick did not complete (id, state)", static_cast<long long>(id),
            static_cast<long long>(t.st));
  }

private:
  enum class state { pending, fired, aborted };
  struct tick {
    std::size_t timer = 0;
    state st = state::pending;
    std::uint64_t missed = 0; // predicted when the model fires it
    time_point slot{};        // the slot it completes for: never before it
  };
  struct timer {
    bool live = false;
    std::vector<tick_id> ticks; // pending, oldest first
    time_point next{};          // slot of the next tick
    duration period{};
  };
  struct record {
    tick_id id;
    error_code ec;
    std::uint64_t missed;
    time_point at;
  };

  const wheel_time& time_;
  std::vector<timer> timers_;
  std::map<tick_id, tick> ticks_; // until completed
  tick_id next_id_ = 0;
  bool polling_ = false;
  std::vector<record> log_;
};

// ---- cancel_after on a timer's wait -------------------------------------------------

// Each: a timer of its own (no other operation touches its wait) with one async_wait
// under cancel_after/cancel_at. It completes exactly once: with success if the timer's
// tick is reached first, operation_aborted if the deadline's is (either, when both come
// due between two polls), operation_aborted if the timer is destroyed. It counts as two
// pending waits on the wheel (the wait and the deadline) until it completes.
class cancel_after_waits : checked {
public:
  using deadline_id = std::size_t;

  cancel_after_waits(const wheel_time& time, failure_handler fail) : checked(fail), time_(time) {}

  // A timer expiring wait_after from now, waited on with a deadline deadline_after from
  // now.
  deadline_id start(duration wait_after, duration deadline_after) {
    const deadline_id id = next_id_++;
    deadline& c = deadlines_[id];
    c.wait_due = time_.due_tick(time_.from_now(wait_after));
    c.deadline_due = time_.due_tick(time_.from_now(deadline_after));
    return id;
  }

  // Every timer destroyed: each wait completes with operation_aborted.
  void destroy_all() {
    for (auto& [id, c] : deadlines_) c.killed = true;
  }

  // Not completed yet (each is two pending waits on the wheel).
  std::size_t outstanding() const { return deadlines_.size(); }
  std::size_t pending() const { return 2 * deadlines_.size(); }

  void completed(deadline_id id, error_code ec) {
    check(polling_, "cancel_after: completed outside a poll", static_cast<long long>(id), ec.value());
    log_.emplace_back(id, ec);
  }

  void begin_poll() {
    check(!polling_ && log_.empty(), "cancel_after: begin_poll inside a poll");
    polling_ = true;
  }

  // Returns the ids completed in this poll (the harness may drop their timers).
  std::vector<deadline_id> end_poll() {
    check(polling_, "cancel_after: end_poll without begin_poll");
    polling_ = false;
    const std::uint64_t cur = time_.current_tick();
    std::vector<deadline_id> finished;
    for (auto& [id, ec] : log_) {
      auto it = deadlines_.find(id);
      check(it != deadlines_.end(), "cancel_after: unexpected completion (or a second one)", static_cast<long long>(id));
      const deadline& c = it->second;
      const bool wait_due = c.wait_due <= cur, deadline_due = c.deadline_due <= cur;
      if (c.killed) {
        check(ec == asio::error::operation_aborted, "cancel_after: destroyed timer, wrong error code",
              static_cast<long long>(id), ec.value());
      } else if (wait_due && deadline_due) { // both came due since the last poll: either
        check(!ec || ec == asio::error::operation_aborted, "cancel_after: wrong error code", static_cast<long long>(id),
              ec.value());
      } else if (wait_due) {
        check(!ec, "cancel_after: timer first, wrong error code", static_cast<long long>(id), ec.value());
      } else {
        check(deadline_due, "cancel_after: completed before either was due (id, deadline tick)",
              static_cast<long long>(id), static_cast<long long>(c.deadline_due));
        check(ec == asio::error::operation_aborted, "cancel_after: deadline first, wrong error code",
              static_cast<long long>(id), ec.value());
      }
      deadlines_.erase(it);
      finished.push_back(id);
    }
    log_.clear();
    for (auto& [id, c] : deadlines_) // what was due has completed
      check(!c.killed && c.wait_due > cur && c.deadline_due > cur, "cancel_after: did not complete (id, tick)",
            static_cast<long long>(id), static_cast<long long>(std::min(c.wait_due, c.deadline_due)));
    return finished;
  }

private:
  struct deadline {
    std::uint64_t wait_due = 0;     // the timer's expiry tick
    std::uint64_t deadline_due = 0; // the deadline's tick
    bool killed = false;            // its timer destroyed: aborted
  };

  const wheel_time& time_;
  std::map<deadline_id, deadline> deadlines_; // until completed
  deadline_id next_id_ = 0;
  bool polling_ = false;
  std::vector<std::pair<deadline_id, error_code>> log_;
};

// ---- delay_queue<int> ---------------------------------------------------------------

// One delay_queue<int> (created and destroyed by the harness) whose elements are the
// values 0, 1, 2 ... in push order, and its async_takes. At a poll the queue expires
// what is due, then hands expired elements to the takes in line: earliest expiry first,
// ties in push order. An element pushed or reset with its delay passed (its tick
// reached) has expired at once, and a take started when none is in line and an
// element has expired gets it at once (completes as if by post); both unless an
// advance() since the last poll has made elements due that only the poll hands over
// (wheel_time::backlog): then they wait for the poll, which puts them in order. Takes
// complete exactly once, in the order started, never before their element's expiry;
// aborted ones with operation_aborted and the value 0.
class delay_queue : checked {
public:
  using take_id = std::size_t;

  delay_queue(const wheel_time& time, failure_handler fail) : checked(fail), time_(time) {}

  bool exists() const { return live_; }
  void create() {
    check(!live_, "delay_queue: create over a live queue");
    live_ = true;
  }
  // Destroyed: its takes are aborted, its elements gone (keys to them are stale).
  void destroy() {
    for (auto& [id, t] : takes_)
      if (t.st == state::pending) t.st = state::aborted;
    elems_.clear();
    live_ = false;
  }

  // push(value, d): returns the value pushed.
  int push(duration d) {
    const int v = next_value_++;
    elem& e = elems_[v];
    e.expiry = time_.from_now(d);
    e.due = time_.due_tick(e.expiry);
    e.expired = e.due <= time_.current_tick() && !time_.backlog(); // passed: expired at once
    return v;
  }
  // Whether the element with this value is in the queue (-1: a default-constructed key).
  bool contains(int v) const {
    auto it = elems_.find(v);
    return v >= 0 && it != elems_.end() && it->second.live;
  }
  // erase(key of v): returns what erase() must return.
  bool erase(int v) {
    const bool live = contains(v);
    if (live) elems_.at(v).live = false;
    return live;
  }
  // reset(key of v, d): back on the wheel, even if it had expired; returns what reset()
  // must return.
  bool reset(int v, duration d) {
    const bool live = contains(v);
    if (live) {
      elem& e = elems_.at(v);
      e.expiry = time_.from_now(d);
      e.due = time_.due_tick(e.expiry);
      e.expired = e.due <= time_.current_tick() && !time_.backlog(); // as in push
    }
    return live;
  }

  take_id start_take() {
    const take_id id = next_id_++;
    const bool first = pending() == 0;
    take& t = takes_[id];
    if (first && !time_.backlog())
      if (auto v = front_expired()) hand(t, *v);
    return id;
  }
  // cancel(): returns how many takes it aborts.
  std::size_t cancel() {
    std::size_t n = 0;
    for (auto& [id, t] : takes_)
      if (t.st == state::pending) t.st = state::aborted, ++n;
    return n;
  }

  // size(): the elements in the queue.
  std::size_t size() const {
    return static_cast<std::size_t>(
        std::count_if(elems_.begin(), elems_.end(), [](auto& e) { return e.second.live; }));
  }
  // Takes waiting in line (each a wait on the wheel).
  std::size_t pending() const {
    std::size_t n = 0;
    for (auto& [id, t] : takes_) n += t.st == state::pending;
    return n;
  }
  // Takes not completed yet.
  std::size_t outstanding() const { return takes_.size(); }

  void completed(take_id id, error_code ec, int value, time_point at) {
    check(polling_, "delay_queue: a take completed outside a poll", static_cast<long long>(id), ec.value());
    log_.push_back({id, ec, value, at});
  }

  // The queue's step: expires what is due, then hands expired elements to the takes in
  // line.
  void begin_poll() {
    check(!polling_ && log_.empty(), "delay_queue: begin_poll inside a poll");
    polling_ = true;
    const std::uint64_t cur = time_.current_tick();
    for (auto& [v, e] : elems_)
      if (e.live && !e.expired && e.due <= cur) e.expired = true;
    for (auto& [id, t] : takes_) { // map order = the order the takes were started
      if (t.st != state::pending) continue;
      auto v = front_expired();
      if (!v) break;
      hand(t, *v);
    }
    for (auto it = elems_.begin(); it != elems_.end();) // taken ones are gone for good
      it = it->second.live ? std::next(it) : elems_.erase(it);
  }

  void end_poll() {
    check(polling_, "delay_queue: end_poll without begin_poll");
    polling_ = false;
    for (const record& c : log_) {
      auto it = takes_.find(c.id);
      check(it != takes_.end(), "delay_queue: unexpected completion (or a second one) of take", static_cast<long long>(c.id));
      const take& t = it->second;
      check(t.st != state::pending, "delay_queue: take completed before it was served", static_cast<long long>(c.id));
      if (t.st == state::served) {
        check(!c.ec, "delay_queue: wrong error code for take", static_cast<long long>(c.id), c.ec.value());
        check(c.value == t.value, "delay_queue: took, expected", c.value, t.value); // expiry order
        check(c.at >= t.expiry, "delay_queue: take completed before its element's expiry", static_cast<long long>(c.id));
      } else {
        check(c.ec == asio::error::operation_aborted, "delay_queue: wrong error code for aborted take",
              static_cast<long long>(c.id), c.ec.value());
        check(c.value == 0, "delay_queue: aborted take got a value", c.value);
      }
      takes_.erase(it);
    }
    log_.clear();
    for (auto& [id, t] : takes_) // every take served or aborted has completed
      check(t.st == state::pending, "delay_queue: take did not complete (id, state)", static_cast<long long>(id),
            static_cast<long long>(t.st));
  }

private:
  enum class state { pending, served, aborted };
  struct elem {
    bool live = true;     // in the queue (not taken, not erased)
    bool expired = false; // among the expired: moved there by a poll's step, or pushed
                          // (or reset) with its delay passed
    time_point expiry{};
    std::uint64_t due = 0;
  };
  struct take {
    state st = state::pending;
    int value = 0;       // the element it gets, once the model hands it one
    time_point expiry{}; // that element's expiry: never before it
  };
  struct record {
    take_id id;
    error_code ec;
    int value;
    time_point at;
  };

  // The live expired element that goes first: earliest expiry, ties in push order.
  std::optional<int> front_expired() const {
    std::optional<int> best;
    for (auto& [v, e] : elems_) {
      if (!e.live || !e.expired) continue;
      if (!best || e.expiry < elems_.at(*best).expiry) best = v; // map order = push order
    }
    return best;
  }

  void hand(take& t, int v) {
    elem& e = elems_.at(v);
    t.st = state::served;
    t.value = v;
    t.expiry = e.expiry;
    e.live = false;
  }

  const wheel_time& time_;
  bool live_ = false;
  std::map<int, elem> elems_; // by value (= push order); live ones kept
  std::map<take_id, take> takes_; // until completed
  int next_value_ = 0;
  take_id next_id_ = 0;
  bool polling_ = false;
  std::vector<record> log_;
};

} // namespace asio_wheel_test::model

#endif
