// expect: the operation has no I/O executor and the handler names none
// cancel_after on an operation whose initiation has no get_executor(), with a handler
// that names no executor either: there is no context to hold the deadline and no safe
// place to emit it (it used to fall back to system_executor, on a thread of its own).
#include "asio_test.hpp"

#include <asio_wheel/cancel_after.hpp>

#include <chrono>

void start() {
  auto token = asio_wheel::cancel_after(std::chrono::seconds(1), [](error_code) {});
  asio::async_initiate<decltype(token), void(error_code)>(
      [](auto handler) { std::move(handler)(error_code()); }, token);
}
