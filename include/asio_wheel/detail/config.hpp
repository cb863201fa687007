// Boost.Asio or standalone Asio: the one place that knows which.
//
// Without ASIO_WHEEL_STANDALONE the library uses Boost.Asio (boost::asio, Boost 1.81 and
// later) and boost::system::error_code. With it (the asio_wheel::asio_wheel_standalone
// CMake target defines it) it uses standalone Asio (::asio, 1.22 and later) and
// std::error_code, and includes no Boost header at all. Every other file names Asio
// as `net`, and the error types as below, inside namespace asio_wheel; public names
// are the same in both modes.
//
// The Asio headers the library needs are included here, once, so that the choice is
// made in one file.
#ifndef ASIO_WHEEL_DETAIL_CONFIG_HPP
#define ASIO_WHEEL_DETAIL_CONFIG_HPP

#ifdef ASIO_WHEEL_STANDALONE

#include <asio/any_io_executor.hpp>
#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/associator.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/execution.hpp>
#include <asio/execution_context.hpp>
#include <asio/executor.hpp>
#include <asio/io_context.hpp>
#include <asio/io_context_strand.hpp>
#include <asio/is_executor.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/query.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/system_executor.hpp>
#include <asio/thread_pool.hpp>
#include <asio/version.hpp>
#include <asio/wait_traits.hpp>
#if ASIO_VERSION >= 102400 // asio::deferred (Asio 1.24): cancel_after's partial form
#include <asio/deferred.hpp>
#endif

#include <system_error>

namespace asio_wheel {
namespace net = ::asio;
using error_code = std::error_code;
using error_category = std::error_category;
using system_error = std::system_error;
} // namespace asio_wheel

// Opens and closes the namespace of Asio, for the specializations Asio asks users to
// write there (async_result, associator).
#define ASIO_WHEEL_ASIO_NAMESPACE_BEGIN namespace asio {
#define ASIO_WHEEL_ASIO_NAMESPACE_END }
// Asio's own version number, 1.38.0 = 103800.
#define ASIO_WHEEL_ASIO_VERSION ASIO_VERSION

#else // Boost.Asio

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/io_context_strand.hpp>
#include <boost/asio/is_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/version.hpp>
#include <boost/asio/wait_traits.hpp>
#if BOOST_ASIO_VERSION >= 102400 // asio::deferred (Boost 1.80): cancel_after's partial form
#include <boost/asio/deferred.hpp>
#endif
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

namespace asio_wheel {
namespace net = ::boost::asio;
using error_code = boost::system::error_code;
using error_category = boost::system::error_category;
using system_error = boost::system::system_error;
} // namespace asio_wheel

#define ASIO_WHEEL_ASIO_NAMESPACE_BEGIN \
  namespace boost {                     \
  namespace asio {
#define ASIO_WHEEL_ASIO_NAMESPACE_END \
  }                                   \
  }
#define ASIO_WHEEL_ASIO_VERSION BOOST_ASIO_VERSION

#endif

#endif
