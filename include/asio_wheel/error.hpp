// asio_wheel's own error codes, usable as boost::system::error_code.
#ifndef ASIO_WHEEL_ERROR_HPP
#define ASIO_WHEEL_ERROR_HPP

#include <boost/system/error_code.hpp>

#include <type_traits>

namespace asio_wheel::error {

enum wheel_errors {
  // The wait was refused because wheel_options::max_pending waits were already pending.
  too_many_timers = 1
};

// The category of wheel_errors; its name is "asio_wheel".
const boost::system::error_category& category() noexcept;

inline boost::system::error_code make_error_code(wheel_errors e) noexcept {
  return {static_cast<int>(e), category()};
}

} // namespace asio_wheel::error

template <>
struct boost::system::is_error_code_enum<asio_wheel::error::wheel_errors> : std::true_type {};

#endif
