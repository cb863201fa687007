// expect: cancel_at takes std::chrono::steady_clock time points
// cancel_at with a system_clock time point: the wheel runs on steady_clock. With Boost
// 1.86 and later, whose own cancel_at takes any clock, an unqualified call could pick
// Boost's in silence; asio_wheel's takes the call and says why it cannot.
#include "asio_test.hpp"

#include <asio_wheel/cancel_after.hpp>

#include <chrono>

void start() {
  auto token = asio_wheel::cancel_at(std::chrono::system_clock::now(), [](error_code) {});
  (void)token;
}
