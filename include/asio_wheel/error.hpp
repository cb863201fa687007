// asio_wheel's own error codes, usable as error_code.
//
// timeout's default error condition is errc::timed_out (std::errc::timed_out in
// standalone mode), so `ec == errc::timed_out` holds for it, as for an OS timeout.
#ifndef ASIO_WHEEL_ERROR_HPP
#define ASIO_WHEEL_ERROR_HPP

#include <asio_wheel/detail/config.hpp>

#include <type_traits>

namespace asio_wheel::error {

enum wheel_errors {
  // The wait was refused because wheel_options::max_pending waits were already pending.
  too_many_timers = 1,
  // A basic_timed_stream's expiry passed before the operation completed (or before it
  // started); the stream's next layer has been closed.
  timeout = 2
};

// The category of wheel_errors; its name is "asio_wheel".
const error_category& category() noexcept;

inline error_code make_error_code(wheel_errors e) noexcept {
  return {static_cast<int>(e), category()};
}

} // namespace asio_wheel::error

#ifdef ASIO_WHEEL_STANDALONE
template <>
struct std::is_error_code_enum<asio_wheel::error::wheel_errors> : std::true_type {};
#else
template <>
struct boost::system::is_error_code_enum<asio_wheel::error::wheel_errors> : std::true_type {};
#endif

#endif
