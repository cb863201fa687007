#include <asio_wheel/error.hpp>

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
