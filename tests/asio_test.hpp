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

// Asio before 1.24 (standalone 1.22 and 1.23; every supported Boost has 1.26 or later)
// has deferred and as_tuple only in asio::experimental: the suites name them asio::.
#if ASIO_WHEEL_ASIO_VERSION < 102400
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/deferred.hpp>
namespace asio {
using experimental::as_tuple;
using experimental::as_tuple_t;
using experimental::deferred;
using experimental::deferred_t;
} // namespace asio
#endif

// Coroutine tests need the language feature and an Asio that supports it.
#if defined(__cpp_impl_coroutine) &&                                                    \
    (defined(ASIO_HAS_CO_AWAIT) || defined(BOOST_ASIO_HAS_CO_AWAIT))
#define ASIO_WHEEL_TEST_COROUTINES 1
#else
#define ASIO_WHEEL_TEST_COROUTINES 0
#endif

// Networking TS executors (io_context::strand, the polymorphic asio::executor), which
// Asio keeps unless told not to.
#if !defined(ASIO_NO_TS_EXECUTORS) && !defined(BOOST_ASIO_NO_TS_EXECUTORS) && \
    !defined(ASIO_NO_EXTENSIONS) && !defined(BOOST_ASIO_NO_EXTENSIONS)
#define ASIO_WHEEL_TEST_TS_EXECUTORS 1
#else
#define ASIO_WHEEL_TEST_TS_EXECUTORS 0
#endif

using asio_wheel::error_code;
using asio_wheel::system_error; // boost::system::system_error or std::system_error

#endif
