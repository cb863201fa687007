// The headers nearly every suite includes, precompiled once per build tree and reused by
// each suite (tests/CMakeLists.txt, ASIO_WHEEL_TEST_PCH). Parsing Asio and asio_wheel
// took about 3 s of each suite's 8 to 15 s compile; scripts/test compiles the suites in
// eight configurations.
//
// Not Boost.Test: a suite defines BOOST_TEST_MODULE before it includes
// <boost/test/unit_test.hpp>, and that header then defines the module's init function, so
// it must be parsed after the suite's own definition. Every suite still includes what it
// uses; this header only makes that cheaper.
#ifndef ASIO_WHEEL_TESTS_SUITE_PCH_HPP
#define ASIO_WHEEL_TESTS_SUITE_PCH_HPP

#include "asio_test.hpp"

#include <asio_wheel.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#endif
