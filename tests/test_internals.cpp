// The process-wide pieces under the I/O objects: upper_clock (the clock reading behind
// every relative deadline), op_memory (the default home of operations), post_memory
// (where a shard's posted step lives) and the index of live shards (by which a timer
// names its shard).
#define BOOST_TEST_MODULE internals
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"

#include <asio_wheel/detail/intrusive.hpp>
#include <asio_wheel/detail/op_memory.hpp>
#include <asio_wheel/detail/post_memory.hpp>
#include <asio_wheel/detail/upper_clock.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>
#include <asio_wheel/timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

using asio_wheel::detail::upper_clock;
namespace net = asio_wheel::net;
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

// Readings on one thread never go back, across the refreshes (every millisecond of
// extrapolation) where a reading up to `margin` ahead is followed by the clock itself.
// Before, they did: a delay queue's pushes with delays d and d + 1 ns came out of
// order (asio_wheel_bench S2: about 2000 in 1M).
BOOST_AUTO_TEST_CASE(upper_clock_never_goes_back_on_a_thread) {
  warm_up_upper_clock();
  const auto start = steady::now();
  auto last = upper_clock::now();
  long back = 0;
  while (steady::now() - start < 50ms) { // some 50 refreshes
    const auto reading = upper_clock::now();
    back += reading < last;
    last = reading;
  }
  BOOST_TEST(back == 0);
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
  void* b = op_memory_allocate(48); // same 16-byte class, 33..48
  BOOST_TEST(a == b);
  op_memory_deallocate(b, 48);
  void* c = op_memory_allocate(49); // next class: not that block
  BOOST_TEST(c != a);
  op_memory_deallocate(c, 49);
}

BOOST_AUTO_TEST_CASE(op_memory_blocks_are_usable_to_their_full_size) {
  // Under ASan this catches a class too small for the request.
  for (std::size_t size : {1u, 15u, 16u, 17u, 63u, 64u, 65u, 200u, 512u, 513u, 4096u}) {
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

// A thread that frees more than its list holds (it runs completions that other threads
// started) passes half lists to the depot, and a thread whose list is empty takes them
// there instead of calling operator new. Sizes used by no other case: the depot is
// process-wide.
BOOST_AUTO_TEST_CASE(op_memory_passes_one_threads_surplus_to_a_thread_that_ran_dry) {
  constexpr std::size_t size = 300;
  constexpr std::size_t max = asio_wheel::detail::op_memory_max_cached;
  BOOST_TEST_REQUIRE(asio_wheel::detail::op_memory_depot_blocks(size) == 0u);
  std::vector<void*> started; // by this thread, whose list of the class is empty
  for (std::size_t i = 0; i < 3 * max; ++i) started.push_back(op_memory_allocate(size));
  std::thread([&] {
    for (void* p : started) op_memory_deallocate(p, size);
  }).join(); // its list kept max blocks (freed as it exited), the depot the rest
  BOOST_TEST(asio_wheel::detail::op_memory_depot_blocks(size) == 2 * max);

  const std::set<void*> freed(started.begin(), started.end());
  std::vector<void*> again;
  for (std::size_t i = 0; i < 2 * max; ++i) again.push_back(op_memory_allocate(size));
  BOOST_TEST(asio_wheel::detail::op_memory_depot_blocks(size) == 0u);
  // Each a block the other thread gave up, none handed out twice.
  BOOST_TEST(std::set<void*>(again.begin(), again.end()).size() == again.size());
  std::size_t from_the_depot = 0;
  for (void* p : again) from_the_depot += freed.count(p);
  BOOST_TEST(from_the_depot == again.size());
  for (void* p : again) op_memory_deallocate(p, size);
}

BOOST_AUTO_TEST_CASE(op_memory_depot_keeps_a_bounded_number_and_frees_the_rest) {
  constexpr std::size_t size = 400;
  constexpr std::size_t max = asio_wheel::detail::op_memory_max_cached;
  constexpr std::size_t kept = asio_wheel::detail::op_memory_depot_chains * max / 2;
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < max + kept + 3 * max; ++i) blocks.push_back(op_memory_allocate(size));
  std::thread([&] {
    for (void* p : blocks) op_memory_deallocate(p, size);
  }).join();
  // The rest went to operator delete (LSan would report a block that went nowhere).
  BOOST_TEST(asio_wheel::detail::op_memory_depot_blocks(size) == kept);
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

// The op queue is a ring held by its tail; every container operation is checked against
// std::deque over random sequences, including splices at both ends and removals of
// the only, first, middle and last node.
struct queue_node : asio_wheel::detail::queue_hook {
  int id = 0;
};

// A shard posts its step with a post_memory as the handler's allocator, one step at a
// time, so that the post cannot fail to allocate. That rests on Asio: an io_context's
// executor allocates a posted handler's operation with the handler's allocator, the
// operation fits the buffer, and the memory is freed before the handler runs (so that
// the handler may post the next one). Checked here with the Asio the suite is built
// against; a larger operation would go to the heap, counted, and fail this test.
BOOST_AUTO_TEST_CASE(post_memory_serves_an_io_context_post_posted_from_its_own_handler) {
  using asio_wheel::detail::post_memory;
  using asio_wheel::detail::posted_in;
  net::io_context io(1);
  post_memory memory;
  int runs = 0;
  struct again {
    net::io_context& io;
    post_memory& memory;
    int& runs;
    void operator()() const {
      // The buffer is free again: this handler's own operation was given back first.
      if (++runs < 1000) net::post(io.get_executor(), posted_in<again>{&memory, *this});
    }
  };
  net::post(io.get_executor(), posted_in<again>{&memory, again{io, memory, runs}});
  io.run();
  BOOST_TEST(runs == 1000);
  BOOST_TEST(memory.allocations() == 1000u); // Asio asked it for every post
  BOOST_TEST(memory.heap_allocations() == 0u);

  // Two at once: the second is the heap's, and both are given back (post_memory's
  // destructor asserts that its buffer is free; LeakSanitizer sees the heap's).
  int done = 0;
  auto count = [&done] { ++done; };
  net::post(io.get_executor(), posted_in<decltype(count)>{&memory, count});
  net::post(io.get_executor(), posted_in<decltype(count)>{&memory, count});
  BOOST_TEST(memory.allocations() == 1002u);
  BOOST_TEST(memory.heap_allocations() == 1u);
  io.restart();
  io.run();
  BOOST_TEST(done == 2);

  // Destroyed unrun (a context destroyed with them queued): given back all the same.
  {
    net::io_context doomed(1);
    net::post(doomed.get_executor(), posted_in<decltype(count)>{&memory, count});
    net::post(doomed.get_executor(), posted_in<decltype(count)>{&memory, count});
  }
  BOOST_TEST(done == 2);
  BOOST_TEST(memory.heap_allocations() == 2u);
}

// The shard's driver, a steady_timer on the context's any_io_executor, takes its wait's
// operation from a post_memory too (wheel_shard::arm_locked): re-armed from its own
// handler, every wait is the buffer's; re-armed while armed, the cancelled wait still
// holds the buffer until its handler has run, and the new one is the heap's.
BOOST_AUTO_TEST_CASE(post_memory_serves_a_steady_timer_wait_armed_from_its_own_handler) {
  using asio_wheel::detail::post_memory;
  using asio_wheel::detail::posted_in;
  net::io_context io(1);
  post_memory memory;
  net::steady_timer timer(net::any_io_executor(io.get_executor()));
  int fired = 0;
  // One pointer, as the driver's handler is (the shard's `this`).
  struct again {
    struct loop {
      net::steady_timer& timer;
      post_memory& memory;
      int fired;
    }* on;
    void operator()(const asio_wheel::error_code& ec) const {
      if (ec || ++on->fired == 100) return;
      on->timer.expires_after(0ms);
      on->timer.async_wait(posted_in<again>{&on->memory, *this});
    }
  };
  again::loop l{timer, memory, 0};
  timer.expires_after(0ms);
  timer.async_wait(posted_in<again>{&memory, again{&l}});
  io.run();
  fired = l.fired;
  BOOST_TEST(fired == 100);
  BOOST_TEST(memory.allocations() == 100u);
  BOOST_TEST(memory.heap_allocations() == 0u);

  int counts[2] = {0, 0}; // aborted, done
  auto count = [c = counts](const asio_wheel::error_code& ec) {
    c[ec == net::error::operation_aborted ? 0 : 1]++;
  };
  int& aborted = counts[0];
  int& done = counts[1];
  timer.expires_after(1h);
  timer.async_wait(posted_in<decltype(count)>{&memory, count});
  timer.expires_after(0ms);
  timer.async_wait(posted_in<decltype(count)>{&memory, count});
  BOOST_TEST(memory.heap_allocations() == 1u);
  io.restart();
  io.run();
  BOOST_TEST(aborted == 1);
  BOOST_TEST(done == 1);
}

BOOST_AUTO_TEST_CASE(op_queue_behaves_as_a_fifo_under_every_operation) {
  using queue = asio_wheel::detail::intrusive_queue<queue_node>;
  std::vector<queue_node> nodes(64);
  for (int i = 0; i < 64; ++i) nodes[i].id = i;
  std::mt19937 rng(7);
  queue q[2];
  std::deque<int> model[2];
  std::vector<int> free_ids;
  for (int i = 63; i >= 0; --i) free_ids.push_back(i);
  auto same = [&](int k) {
    std::vector<int> got;
    for (queue_node& n : q[k]) got.push_back(n.id);
    return got == std::vector<int>(model[k].begin(), model[k].end()) &&
           q[k].count() == model[k].size() && q[k].empty() == model[k].empty();
  };
  for (int step = 0; step < 20000; ++step) {
    const int k = static_cast<int>(rng() % 2);
    switch (rng() % 5) {
    case 0:
    case 1: // push_back
      if (free_ids.empty()) break;
      q[k].push_back(nodes[free_ids.back()]);
      model[k].push_back(free_ids.back());
      free_ids.pop_back();
      break;
    case 2: // pop_front
      if (model[k].empty()) break;
      BOOST_TEST_REQUIRE(q[k].front().id == model[k].front());
      q[k].pop_front();
      free_ids.push_back(model[k].front());
      model[k].pop_front();
      break;
    case 3: { // remove any one
      if (model[k].empty()) break;
      const std::size_t at = rng() % model[k].size();
      q[k].remove(nodes[model[k][at]]);
      free_ids.push_back(model[k][at]);
      model[k].erase(model[k].begin() + static_cast<std::ptrdiff_t>(at));
      break;
    }
    case 4: // splice the other queue in, at the back or the front
      if (rng() % 2) {
        q[k].append(q[1 - k]);
        model[k].insert(model[k].end(), model[1 - k].begin(), model[1 - k].end());
      } else {
        q[k].prepend(q[1 - k]);
        model[k].insert(model[k].begin(), model[1 - k].begin(), model[1 - k].end());
      }
      model[1 - k].clear();
      break;
    }
    BOOST_TEST_REQUIRE(same(0));
    BOOST_TEST_REQUIRE(same(1));
  }
}

BOOST_AUTO_TEST_CASE(shard_indexes_name_live_shards_and_are_reused_after_them) {
  using asio_wheel::detail::wheel_shard;
  // One shard each: a's index is the one freed.
  asio_wheel::wheel_options one_shard;
  one_shard.shards = 1;
  std::optional<net::io_context> a(std::in_place);
  net::io_context b;
  asio_wheel::install(*a, one_shard);
  asio_wheel::install(b, one_shard);
  wheel_shard& sa = asio_wheel::detail::shard_for(a->get_executor());
  wheel_shard& sb = asio_wheel::detail::shard_for(b.get_executor());
  BOOST_TEST(sa.index() != sb.index());
  BOOST_TEST(&wheel_shard::at(sa.index()) == &sa);
  BOOST_TEST(&wheel_shard::at(sb.index()) == &sb);

  // a's index goes to the next shard built: a timer there must reach that shard, and
  // b's timers still b's.
  const std::uint16_t freed = sa.index();
  a.reset();
  net::io_context c;
  asio_wheel::install(c, one_shard);
  wheel_shard& sc = asio_wheel::detail::shard_for(c.get_executor());
  BOOST_TEST(sc.index() == freed);
  BOOST_TEST(&wheel_shard::at(freed) == &sc);

  asio_wheel::timer on_b(b), on_c(c);
  int b_done = 0, c_done = 0;
  on_b.expires_after(0ms);
  on_c.expires_after(0ms);
  on_b.async_wait([&](asio_wheel::error_code ec) { b_done += !ec; });
  on_c.async_wait([&](asio_wheel::error_code ec) { c_done += !ec; });
  c.run();
  BOOST_TEST(c_done == 1);
  BOOST_TEST(b_done == 0);
  b.run();
  BOOST_TEST(b_done == 1);
}
