// The Asio the test suites use: Boost.Asio, or standalone Asio when the library is
// built for it (ASIO_WHEEL_STANDALONE). Either way the suites name it `asio`, and the
// error code `error_code`, so one source serves both modes.
#ifndef ASIO_WHEEL_TESTS_ASIO_TEST_HPP
#define ASIO_WHEEL_TESTS_ASIO_TEST_HPP

#include <asio_wheel/detail/config.hpp>

#ifdef ASIO_WHEEL_STANDALONE
#include <asio.hpp>
#define ASIO_WHEEL_TEST_HINT_UNSAFE ASIO_CONCURRENCY_HINT_UNSAFE
#else
#include <boost/asio.hpp>
namespace asio = boost::asio;
#define ASIO_WHEEL_TEST_HINT_UNSAFE BOOST_ASIO_CONCURRENCY_HINT_UNSAFE
#endif

// Coroutine tests need the language feature and an Asio that supports it.
#if defined(__cpp_impl_coroutine) &&                                                    \
    (defined(ASIO_HAS_CO_AWAIT) || defined(BOOST_ASIO_HAS_CO_AWAIT))
#define ASIO_WHEEL_TEST_COROUTINES 1
#else
#define ASIO_WHEEL_TEST_COROUTINES 0
#endif

using asio_wheel::error_code;

#endif
