// The two process-wide pieces under the I/O objects: upper_clock (the clock reading
// behind every relative deadline) and op_memory (the default home of operations).
#define BOOST_TEST_MODULE internals
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"

#include <asio_wheel/detail/op_memory.hpp>
#include <asio_wheel/detail/upper_clock.hpp>

#include <chrono>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

using asio_wheel::detail::upper_clock;
using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

// Calls upper_clock::now() until it has calibrated (at least 10 ms of baseline) or the
// platform turns out not to extrapolate. Not a timing assertion: only a way to reach
// the extrapolating state before checking the invariant.
void warm_up_upper_clock() {
  const auto start = steady::now();
  while (!upper_clock::extrapolating() && steady::now() - start < 200ms) (void)upper_clock::now();
}

// Checks, `rounds` times, that a reading lies between steady_clock before it and
// steady_clock after it plus a tick's worth of slack: never behind is the guarantee
// deadlines rest on; the upper side only catches a wildly wrong extrapolation.
int count_out_of_bounds(int rounds) {
  int bad = 0;
  for (int i = 0; i < rounds; ++i) {
    const auto before = steady::now();
    const auto reading = upper_clock::now();
    const auto after = steady::now();
    if (reading < before || reading > after + 1ms) ++bad;
  }
  return bad;
}

} // namespace

BOOST_AUTO_TEST_CASE(upper_clock_is_never_behind_steady_clock) {
  warm_up_upper_clock();
  BOOST_TEST_MESSAGE("upper_clock extrapolating: " << upper_clock::extrapolating());
  BOOST_TEST(count_out_of_bounds(200000) == 0);
}

BOOST_AUTO_TEST_CASE(upper_clock_is_never_behind_steady_clock_on_any_thread) {
  warm_up_upper_clock();
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&bad, k] {
      warm_up_upper_clock();
      bad[k] = count_out_of_bounds(50000);
    });
  for (auto& t : threads) t.join();
  for (int b : bad) BOOST_TEST(b == 0);
}

BOOST_AUTO_TEST_CASE(upper_clock_survives_idle_threads) {
  // An anchor older than max_extrapolation is refreshed, not extrapolated from.
  warm_up_upper_clock();
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(3ms);
    const auto before = steady::now();
    BOOST_TEST((upper_clock::now() >= before));
  }
}

using asio_wheel::detail::op_memory_allocate;
using asio_wheel::detail::op_memory_deallocate;

BOOST_AUTO_TEST_CASE(op_memory_reuses_a_freed_block_of_the_same_size_class) {
  void* a = op_memory_allocate(40);
  op_memory_deallocate(a, 40);
  void* b = op_memory_allocate(64); // same 64-byte class
  BOOST_TEST(a == b);
  op_memory_deallocate(b, 64);
  void* c = op_memory_allocate(65); // next class: not that block
  BOOST_TEST(c != a);
  op_memory_deallocate(c, 65);
}

BOOST_AUTO_TEST_CASE(op_memory_blocks_are_usable_to_their_full_size) {
  // Under ASan this catches a class too small for the request.
  for (std::size_t size : {1u, 63u, 64u, 65u, 200u, 512u, 513u, 4096u}) {
    auto* p = static_cast<unsigned char*>(op_memory_allocate(size));
    BOOST_TEST_REQUIRE(p != nullptr);
    for (std::size_t i = 0; i < size; ++i) p[i] = static_cast<unsigned char>(i);
    op_memory_deallocate(p, size);
  }
}

BOOST_AUTO_TEST_CASE(op_memory_caches_a_bounded_number_and_frees_the_rest) {
  // More blocks than the cache keeps: the surplus goes back to operator delete (LSan
  // would report a block that went nowhere).
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < 3 * asio_wheel::detail::op_memory_max_cached; ++i)
    blocks.push_back(op_memory_allocate(48));
  BOOST_TEST(std::set<void*>(blocks.begin(), blocks.end()).size() == blocks.size());
  for (void* p : blocks) op_memory_deallocate(p, 48);
}

BOOST_AUTO_TEST_CASE(op_memory_blocks_may_be_freed_on_another_thread_that_then_exits) {
  std::vector<void*> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(op_memory_allocate(100));
  std::thread([&blocks] {
    for (void* p : blocks) op_memory_deallocate(p, 100);
    // This thread's cache now holds them; its exit must free them.
  }).join();
  // And the other way: a block cached by this thread, then taken again.
  void* p = op_memory_allocate(100);
  BOOST_TEST(p != nullptr);
  op_memory_deallocate(p, 100);
}
