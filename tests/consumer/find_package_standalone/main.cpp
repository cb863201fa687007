// Checks that asio_wheel's standalone flavour can be found, compiled against and linked
// with standalone Asio and no Boost: one timer wait on a manual clock completes with
// success (a default std::error_code) once virtual time reaches it.
#include <asio_wheel.hpp>

#if !defined(ASIO_WHEEL_STANDALONE)
#error "asio_wheel::asio_wheel_standalone must define ASIO_WHEEL_STANDALONE"
#endif
// The consumer's CMakeLists.txt asks for C++17: asio_wheel's usage requirement (cxx_std_17)
// must not have raised it to C++20.
#if defined(ASIO_WHEEL_CONSUMER_EXPECT_CXX17) && __cplusplus != 201703L
#error "asio_wheel's usage requirements changed the consumer's C++17 (__cplusplus != 201703L)"
#endif

#include <asio/io_context.hpp>
#include <asio/version.hpp>

// Nothing of Boost: not Boost.Asio, not Boost.Config (which every Boost library includes).
#if defined(BOOST_ASIO_VERSION) || defined(BOOST_CONFIG_HPP) || defined(BOOST_VERSION)
#error "asio_wheel's standalone flavour included a Boost header"
#endif

#include <chrono>
#include <cstdio>
#include <system_error>

int main() {
  asio::io_context ctx;
  asio_wheel::wheel_options opts;
  opts.clock = asio_wheel::clock_mode::manual;
  asio_wheel::wheel_service& svc = asio_wheel::install(ctx, opts);

  asio_wheel::timer t(ctx, std::chrono::milliseconds(10));
  bool ran = false;
  std::error_code result = std::make_error_code(std::errc::invalid_argument);
  t.async_wait([&](std::error_code ec) {
    ran = true;
    result = ec;
  });

  svc.advance(std::chrono::milliseconds(10));
  ctx.poll();

  if (!ran || result) {
    std::fprintf(stderr, "standalone consumer: handler ran=%d, error=%s\n", ran ? 1 : 0,
                 result.message().c_str());
    return 1;
  }
  std::printf("standalone consumer: ok (Asio %d.%d.%d, C++ %ld)\n", ASIO_VERSION / 100000,
              ASIO_VERSION / 100 % 1000, ASIO_VERSION % 100, static_cast<long>(__cplusplus));
  return 0;
}
