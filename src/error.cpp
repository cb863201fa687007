// asio_wheel's error category, and how an operation's result becomes an error_code.
#include <asio_wheel/error.hpp>

#include <asio_wheel/detail/wheel_op.hpp>

#include <string>

namespace asio_wheel::error {

namespace {

class wheel_category final : public error_category {
public:
  const char* name() const noexcept override { return "asio_wheel"; }
  std::string message(int value) const override {
    switch (value) {
    case too_many_timers:
      return "too many timers: wheel_options::max_pending waits are already pending";
    default:
      return "asio_wheel error " + std::to_string(value);
    }
  }
};

} // namespace

const error_category& category() noexcept {
  static const wheel_category instance;
  return instance;
}

} // namespace asio_wheel::error

namespace asio_wheel::detail {

error_code to_error_code(op_result r) noexcept {
  switch (r) {
  case op_result::success: return {};
  case op_result::aborted: return net::error::operation_aborted;
  case op_result::too_many: return error::make_error_code(error::too_many_timers);
  }
  return {};
}

} // namespace asio_wheel::detail
