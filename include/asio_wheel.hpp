// asio_wheel: O(1) timers for Asio (Boost.Asio, or standalone Asio with
// ASIO_WHEEL_STANDALONE) on a hashed, hierarchical timing wheel.
#ifndef ASIO_WHEEL_HPP
#define ASIO_WHEEL_HPP

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/delay_queue.hpp>
#include <asio_wheel/error.hpp>
#include <asio_wheel/options.hpp>
#include <asio_wheel/periodic_timer.hpp>
#include <asio_wheel/timed_stream.hpp>
#include <asio_wheel/timer.hpp>
#include <asio_wheel/wheel_service.hpp>

#endif
