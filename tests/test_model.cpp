// Randomized model-based test: 100k+ random operations on timers of a small wheel
// (16 slots, so rounds and cascades happen constantly), checked against the reference
// model that the fuzzer uses too (tests/reference_model.hpp). Every wait must complete
// exactly once, with the right error code, at exactly the first poll after an advance
// that reaches its expiry rounded up to a tick (never early, never later than one tick),
// and only inside a poll; cancel() and expires_after() must return how many waits they
// aborted, successes come in expiry order, and stats() must agree after every poll.
#define BOOST_TEST_MODULE model
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "manual_clock.hpp"
#include "reference_model.hpp"

#include <asio_wheel.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto tick = 1ms;
constexpr std::size_t n_timers = 24;

void model_mismatch(const char* what, long long a, long long b) {
  BOOST_FAIL("model mismatch: " << what << " (" << a << ", " << b << ")");
}

asio_wheel::wheel_options options(std::size_t levels) {
  auto o = asio_wheel_test::manual_options(levels, 16, tick);
  o.expiry_batch = 7; // small: completions spread over several steps
  return o;
}

class model_run {
public:
  model_run(std::size_t levels, std::uint64_t seed, clock_type::duration max_delay)
      : svc_(asio_wheel::install(io_, options(levels))), time_(svc_.now(), tick),
        model_(time_, n_timers, 0, &model_mismatch), rng_(seed), max_delay_(max_delay) {
    timers_.resize(n_timers);
    for (std::size_t t = 0; t < n_timers; ++t) {
      timers_[t].emplace(io_);
      model_.create(t);
    }
  }

  void run(int operations) {
    for (int i = 0; i < operations; ++i) {
      step();
      poll_and_check();
    }
    for (std::size_t t = 0; t < timers_.size(); ++t) BOOST_REQUIRE_EQUAL(timers_[t]->cancel(), model_.cancel(t));
    poll_and_check();
    BOOST_REQUIRE_MESSAGE(model_.outstanding() == 0, model_.outstanding() << " waits never completed");
    BOOST_TEST(svc_.stats().pending == 0u);
  }

private:
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

  void step() {
    const std::size_t t = rng_() % timers_.size();
    asio_wheel::timer& timer = *timers_[t];
    switch (rng_() % 9) {
    case 0:
    case 1:
    case 2: { // new wait, sometimes with its own cancellation slot
      const bool with_signal = rng_() % 3 == 0;
      const auto id = model_.start_wait(t, true, with_signal);
      auto handler = [this, id](error_code ec) {
        model_.completed(id, ec, svc_.now());
        signals_.erase(id);
      };
      if (with_signal) {
        auto& sig = signals_[id];
        timer.async_wait(asio::bind_cancellation_slot(sig.slot(), handler));
      } else {
        timer.async_wait(handler);
      }
      break;
    }
    case 3:
      BOOST_REQUIRE_EQUAL(timer.cancel(), model_.cancel(t));
      break;
    case 4: {
      const auto d = random_delay();
      BOOST_REQUIRE_EQUAL(timer.expires_after(d), model_.expires_after(t, d));
      BOOST_REQUIRE(timer.expiry() == model_.expiry(t));
      break;
    }
    case 5: {
      const auto d = random_delay();
      timer.reset_after(d);
      model_.reset_after(t, d);
      BOOST_REQUIRE(timer.expiry() == model_.expiry(t));
      break;
    }
    case 6: { // per-operation cancellation of a random pending wait of this timer
      const auto pending = model_.pending_waits(t);
      if (pending.empty()) break;
      const auto id = pending[rng_() % pending.size()];
      auto it = signals_.find(id);
      if (it == signals_.end()) break;
      model_.emitted(id, true);
      it->second.emit(rng_() % 2 ? asio::cancellation_type::terminal : asio::cancellation_type::total);
      break;
    }
    case 7: // destroy and recreate the timer
      model_.destroy(t);
      timers_[t].reset();
      timers_[t].emplace(io_);
      model_.create(t);
      break;
    default: {
      const auto d = clock_type::duration(static_cast<clock_type::rep>(rng_() % 3'000'000)) *
                     (rng_() % 8 == 0 ? 40 : 1);
      svc_.advance(d);
      time_.advance(d);
      BOOST_REQUIRE(svc_.now() == time_.now());
      break;
    }
    }
  }

  void poll_and_check() {
    model_.begin_poll();
    io_.restart();
    io_.poll();
    model_.end_poll();
    model_.forget_done(); // keeps the checks cheap
    model_.check_stats(svc_.stats());
  }

  asio::io_context io_;
  asio_wheel::wheel_service& svc_;
  asio_wheel_test::model::wheel_time time_;
  asio_wheel_test::model::timers model_;
  std::mt19937_64 rng_;
  clock_type::duration max_delay_;
  std::vector<std::optional<asio_wheel::timer>> timers_;
  std::map<asio_wheel_test::model::timers::wait_id, asio::cancellation_signal> signals_;
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
