// asio_wheel's error category, and how an operation's result becomes an error_code.
#include <asio_wheel/error.hpp>

#include <asio_wheel/detail/wheel_op.hpp>

#include <string>

namespace asio_wheel::error {

namespace {

#ifdef ASIO_WHEEL_STANDALONE
using error_condition = std::error_condition;
#else
using error_condition = boost::system::error_condition;
#endif

class wheel_category final : public error_category {
public:
  const char* name() const noexcept override { return "asio_wheel"; }
  std::string message(int value) const override {
    switch (value) {
    case too_many_timers:
      return "too many timers: wheel_options::max_pending waits are already pending";
    case timeout:
      return "timed out: the stream's expiry passed before the operation completed";
    default:
      return "asio_wheel error " + std::to_string(value);
    }
  }
  // timeout is an instance of the portable timed_out condition; the others map to
  // themselves, as the base class does.
  error_condition default_error_condition(int value) const noexcept override {
    if (value == timeout) return make_timed_out_condition();
    return error_condition(value, *this);
  }

private:
  static error_condition make_timed_out_condition() noexcept {
#ifdef ASIO_WHEEL_STANDALONE
    return std::make_error_condition(std::errc::timed_out);
#else
    return boost::system::errc::make_error_condition(boost::system::errc::timed_out);
#endif
  }
};

} // namespace

const error_category& category() noexcept {
  static const wheel_category instance;
  return instance;
}

} // namespace asio_wheel::error

namespace asio_wheel::detail {

error_code too_many_timers_code() noexcept {
  return error::make_error_code(error::too_many_timers);
}

} // namespace asio_wheel::detail
