// Randomized model-based test: 100k+ random operations on timers of a small wheel
// (16 slots, so rounds and cascades happen constantly), checked against a plain
// reference model. Every wait must complete exactly once, with the right error code,
// at exactly the first advance that reaches its expiry rounded up to a tick: never
// early and never later than one tick.
#define BOOST_TEST_MODULE model
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "manual_clock.hpp"

#include <asio_wheel.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <vector>

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto tick = 1ms;

struct wait_state {
  std::size_t timer = 0;
  bool done = false;
  std::optional<error_code> expected; // set once the model knows how it ends
};

class model_run {
public:
  model_run(std::size_t levels, std::uint64_t seed, clock_type::duration max_delay)
      : rng_(seed), max_delay_(max_delay) {
    auto o = asio_wheel_test::manual_options(levels, 16, tick);
    o.expiry_batch = 7; // small: completions spread over several steps
    svc_ = &asio_wheel::install(io_, o);
    epoch_ = svc_->now();
    timers_.resize(24);
    pending_.resize(timers_.size());
    for (auto& t : timers_) t.emplace(io_);
  }

  void run(int operations) {
    for (int i = 0; i < operations; ++i) {
      step();
      poll_and_check();
    }
    for (std::size_t t = 0; t < timers_.size(); ++t) abort_all(t, timers_[t]->cancel());
    poll_and_check();
    for (auto& [id, w] : waits_) BOOST_REQUIRE_MESSAGE(w.done, "wait " << id << " never completed");
    BOOST_TEST(svc_->stats().pending == 0u);
  }

private:
  // Expiry tick as the wheel computes it: rounded up.
  std::uint64_t due_tick(clock_type::time_point t) const {
    if (t == clock_type::time_point::max()) return UINT64_MAX;
    if (t <= epoch_) return 0;
    const auto ns = (t - epoch_).count(), per = clock_type::duration(tick).count();
    return static_cast<std::uint64_t>(ns / per + (ns % per != 0));
  }
  std::uint64_t now_tick() const {
    return static_cast<std::uint64_t>((svc_->now() - epoch_) / clock_type::duration(tick));
  }

  clock_type::duration random_delay() {
    switch (rng_() % 16) {
    case 0: return -clock_type::duration(static_cast<clock_type::rep>(rng_() % 5'000'000));
    case 1: return clock_type::duration::max();
    case 2: return 0ms;
    default:
      // Half-millisecond grain: expiries between ticks must round up.
      return 500us * static_cast<int>(rng_() % static_cast<std::uint64_t>(max_delay_ / 500us));
    }
  }

  void abort_all(std::size_t t, std::size_t reported) {
    BOOST_REQUIRE_EQUAL(reported, pending_[t].size());
    for (int id : pending_[t]) waits_[id].expected = asio::error::operation_aborted;
    pending_[t].clear();
  }

  void step() {
    const std::size_t t = rng_() % timers_.size();
    asio_wheel::timer& timer = *timers_[t];
    switch (rng_() % 9) {
    case 0:
    case 1:
    case 2: { // new wait, sometimes with its own cancellation slot
      const int id = next_id_++;
      waits_[id].timer = t;
      pending_[t].push_back(id);
      auto handler = [this, id](error_code ec) { completed(id, ec); };
      if (rng_() % 3 == 0) {
        auto& sig = signals_[id];
        timer.async_wait(asio::bind_cancellation_slot(sig.slot(), handler));
      } else {
        timer.async_wait(handler);
      }
      break;
    }
    case 3:
      abort_all(t, timer.cancel());
      break;
    case 4: {
      const auto d = random_delay();
      abort_all(t, timer.expires_after(d));
      break;
    }
    case 5:
      timer.reset_after(random_delay());
      break;
    case 6: { // per-operation cancellation of a random pending wait of this timer
      if (pending_[t].empty()) break;
      const std::size_t k = rng_() % pending_[t].size();
      const int id = pending_[t][k];
      auto it = signals_.find(id);
      if (it == signals_.end()) break;
      pending_[t].erase(pending_[t].begin() + static_cast<std::ptrdiff_t>(k));
      waits_[id].expected = asio::error::operation_aborted;
      it->second.emit(rng_() % 2 ? asio::cancellation_type::terminal : asio::cancellation_type::total);
      break;
    }
    case 7: { // destroy and recreate the timer
      const std::size_t n = pending_[t].size();
      timers_[t].reset();
      abort_all(t, n);
      timers_[t].emplace(io_);
      break;
    }
    default:
      svc_->advance(clock_type::duration(static_cast<clock_type::rep>(rng_() % 3'000'000)) *
                    (rng_() % 8 == 0 ? 40 : 1));
      break;
    }
  }

  void completed(int id, error_code ec) {
    auto it = waits_.find(id);
    BOOST_REQUIRE(it != waits_.end());
    BOOST_REQUIRE_MESSAGE(!it->second.done, "wait " << id << " completed twice");
    it->second.done = true;
    if (!it->second.expected) {
      // Only an expiry may complete a wait the model still holds pending.
      BOOST_REQUIRE_MESSAGE(!ec, "wait " << id << " ended with " << ec.message() << " unexpectedly");
      auto& list = pending_[it->second.timer];
      const auto pos = std::find(list.begin(), list.end(), id);
      BOOST_REQUIRE(pos != list.end());
      BOOST_REQUIRE_MESSAGE(due_tick(timers_[it->second.timer]->expiry()) <= now_tick(),
                            "wait " << id << " completed early");
      list.erase(pos);
      it->second.expected = ec;
    } else {
      BOOST_REQUIRE_EQUAL(ec, *it->second.expected);
    }
    signals_.erase(id);
  }

  void poll_and_check() {
    io_.restart();
    io_.poll();
    // Never late: after the poll, no wait is pending whose tick has been reached.
    const std::uint64_t now = now_tick();
    for (std::size_t t = 0; t < timers_.size(); ++t) {
      if (pending_[t].empty()) continue;
      BOOST_REQUIRE_MESSAGE(due_tick(timers_[t]->expiry()) > now,
                            "timer " << t << " is late: due tick " << due_tick(timers_[t]->expiry())
                                     << ", now " << now);
    }
    // Every aborted wait has been delivered.
    for (auto& [id, w] : waits_)
      if (w.expected && *w.expected == asio::error::operation_aborted)
        BOOST_REQUIRE_MESSAGE(w.done, "aborted wait " << id << " not delivered");
    // Forget finished waits to keep the checks cheap.
    for (auto it = waits_.begin(); it != waits_.end();)
      it = it->second.done ? waits_.erase(it) : std::next(it);
    BOOST_REQUIRE_EQUAL(svc_->stats().pending, waits_.size());
  }

  asio::io_context io_;
  asio_wheel::wheel_service* svc_ = nullptr;
  clock_type::time_point epoch_;
  std::mt19937_64 rng_;
  clock_type::duration max_delay_;
  std::vector<std::optional<asio_wheel::timer>> timers_;
  std::vector<std::vector<int>> pending_; // per timer, the ids the model holds pending
  std::map<int, wait_state> waits_;
  std::map<int, asio::cancellation_signal> signals_;
  int next_id_ = 0;
};

} // namespace

BOOST_AUTO_TEST_CASE(netty_wheel_levels_1_against_the_model) {
  // 16 slots of 1 ms: a rotation is 16 ms, delays up to 200 ms make many rounds.
  model_run(1, 1, 200ms).run(100'000);
}

BOOST_AUTO_TEST_CASE(hierarchical_levels_4_against_the_model) {
  // 16^4 ticks = 65.5 s span; delays up to 100 s cascade through every level and
  // wrap the top.
  model_run(4, 2, 100s).run(100'000);
}

BOOST_AUTO_TEST_CASE(hierarchical_levels_2_short_delays_against_the_model) {
  model_run(2, 3, 600ms).run(100'000);
}
