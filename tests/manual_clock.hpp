// The manual-clock context that the deterministic suites start from: one io_context
// with a wheel whose time moves only by advance(); and a recorder of a wait's
// completions on it.
#ifndef ASIO_WHEEL_TESTS_MANUAL_CLOCK_HPP
#define ASIO_WHEEL_TESTS_MANUAL_CLOCK_HPP

#include "asio_test.hpp"

#include <asio_wheel.hpp>

#include <chrono>
#include <cstddef>

namespace asio_wheel_test {

inline asio_wheel::wheel_options manual_options(
    std::size_t levels = 4, std::size_t slots = 256,
    std::chrono::steady_clock::duration tick = std::chrono::milliseconds(1)) {
  asio_wheel::wheel_options o;
  o.clock = asio_wheel::clock_mode::manual;
  o.levels = levels;
  o.slots = slots;
  o.tick = tick;
  return o;
}

struct manual_context {
  asio::io_context io;
  asio_wheel::wheel_service& svc;

  explicit manual_context(const asio_wheel::wheel_options& o = manual_options())
      : svc(asio_wheel::install(io, o)) {}

  // Runs every ready handler. A context that ran out of work stays stopped, hence the
  // restart.
  std::size_t settle() {
    io.restart();
    return io.poll();
  }

  void advance(std::chrono::steady_clock::duration d) {
    svc.advance(d);
    settle();
  }
};

// The error code of an aborted wait.
inline const error_code aborted = asio::error::operation_aborted;

// Records the completions of a wait: how many, the last error code, and the wheel's
// time when the handler ran.
struct recorder {
  int calls = 0;
  error_code ec;
  std::chrono::steady_clock::time_point at{};
  auto handler(manual_context& f) {
    return [this, &f](error_code e) {
      ++calls;
      ec = e;
      at = f.svc.now();
    };
  }
};

} // namespace asio_wheel_test

#endif
