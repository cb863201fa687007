// Checks that an installed asio_wheel can be found, compiled against and linked: one
// timer wait on a manual clock completes with success once virtual time reaches it.
#include <asio_wheel.hpp>

// The consumer's CMakeLists.txt asks for C++17: asio_wheel's usage requirement (cxx_std_17)
// must not have raised it to C++20.
#if defined(ASIO_WHEEL_CONSUMER_EXPECT_CXX17) && __cplusplus != 201703L
#error "asio_wheel's usage requirements changed the consumer's C++17 (__cplusplus != 201703L)"
#endif
#if defined(ASIO_WHEEL_STANDALONE)
#error "asio_wheel::asio_wheel must not define ASIO_WHEEL_STANDALONE"
#endif

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>

int main() {
  boost::asio::io_context ctx;
  asio_wheel::wheel_options opts;
  opts.clock = asio_wheel::clock_mode::manual;
  asio_wheel::wheel_service& svc = asio_wheel::install(ctx, opts);

  asio_wheel::timer t(ctx, std::chrono::milliseconds(10));
  bool ran = false;
  boost::system::error_code result;
  t.async_wait([&](boost::system::error_code ec) {
    ran = true;
    result = ec;
  });

  svc.advance(std::chrono::milliseconds(10));
  ctx.poll();

  if (!ran || result) {
    std::fprintf(stderr, "consumer: handler ran=%d, error=%s\n", ran ? 1 : 0,
                 result.message().c_str());
    return 1;
  }
  std::puts("consumer: ok");
  return 0;
}
