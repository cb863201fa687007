// Glue for running Asio's own timer test against asio_wheel (see run.sh next to this
// file). run.sh renames boost::asio::system_timer to asio_wheel::timer and
// boost::asio::basic_waitable_timer to asio_wheel_conformance::basic_waitable_timer,
// which is asio_wheel's timer on the given executor. Asio's test names
// basic_waitable_timer<clock, traits, io_context::executor_type> for its converting
// move into the timer; with this alias that move is asio_wheel's own converting move
// from basic_timer<io_context::executor_type>.
#ifndef ASIO_WHEEL_TESTS_ASIO_CONFORMANCE_HPP
#define ASIO_WHEEL_TESTS_ASIO_CONFORMANCE_HPP

#include <asio_wheel/timer.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/wait_traits.hpp>

#include <type_traits>

namespace asio_wheel_conformance {

template <class Clock, class WaitTraits, class Executor>
struct timer_for {
  static_assert(std::is_same_v<Clock, asio_wheel::timer::clock_type>,
                "asio_wheel's timers run on std::chrono::steady_clock only");
  static_assert(std::is_same_v<WaitTraits, asio_wheel::timer::traits_type>,
                "asio_wheel's timers use the default wait traits only");
  using type = asio_wheel::basic_timer<Executor>;
};

template <class Clock, class WaitTraits = boost::asio::wait_traits<Clock>,
          class Executor = boost::asio::any_io_executor>
using basic_waitable_timer = typename timer_for<Clock, WaitTraits, Executor>::type;

} // namespace asio_wheel_conformance

#endif
