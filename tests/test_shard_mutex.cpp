// The shard's lock (detail/shard_mutex.hpp). Its own process, because the first case
// needs a process that has only one thread: on Linux the lock skips atomic
// instructions while the C library says the process is single-threaded, and a lock
// taken that way must still hand over to, and wake, a thread created while it is held.
#define BOOST_TEST_MODULE shard_mutex
#include <boost/test/unit_test.hpp>

#include <asio_wheel/detail/shard_mutex.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#ifdef ASIO_WHEEL_FUTEX_SHARD_MUTEX
#include <sys/single_threaded.h>
#endif

using asio_wheel::detail::shard_mutex;
using namespace std::chrono_literals;

namespace {

// The calling thread's kernel id, where there is one.
long this_thread_tid() {
#if defined(__linux__)
  return static_cast<long>(::syscall(SYS_gettid));
#else
  return 0;
#endif
}

// Waits until thread `tid` of this process is asleep in the kernel (state S in
// /proc/self/task/<tid>/stat), so that an unlock after this must wake it. Elsewhere
// only yields: the case then checks the hand-over without the sleep.
void wait_until_asleep([[maybe_unused]] long tid) {
#if defined(__linux__)
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/stat";
  for (;;) {
    std::ifstream stat(path);
    std::string line;
    std::getline(stat, line);
    // "<tid> (<comm>) <state> ...": the state follows the last ')'.
    const auto close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'S') return;
    std::this_thread::yield();
  }
#else
  std::this_thread::yield();
#endif
}

} // namespace

// First in the file: nothing has created a thread yet.
BOOST_AUTO_TEST_CASE(a_lock_taken_single_threaded_wakes_a_thread_created_while_it_is_held) {
#ifdef ASIO_WHEEL_FUTEX_SHARD_MUTEX
  BOOST_TEST_MESSAGE("single-threaded at the start: " << int(__libc_single_threaded));
  const bool was_single = __libc_single_threaded != 0;
#endif
  shard_mutex m;
  m.lock(); // without an atomic instruction while the process has one thread
  BOOST_TEST(!m.try_lock());

  std::atomic<long> waiter_tid{0};
  std::promise<void> got_it;
  auto got = got_it.get_future();
  std::thread waiter([&] {
    waiter_tid.store(this_thread_tid());
    m.lock(); // sleeps until the main thread unlocks
    m.unlock();
    got_it.set_value();
  });
#ifdef ASIO_WHEEL_FUTEX_SHARD_MUTEX
  BOOST_TEST(__libc_single_threaded == 0);
#endif
  while (waiter_tid.load() == 0) std::this_thread::yield();
  wait_until_asleep(waiter_tid.load());
  m.unlock(); // must wake the waiter, though the lock was taken the single-threaded way

  // A hang guard only: a lost wake-up never completes at all.
  const bool woken = got.wait_for(60s) == std::future_status::ready;
  BOOST_TEST(woken, "the waiter was never woken: the unlock lost its wake-up");
  if (woken) waiter.join(); else waiter.detach();
#ifdef ASIO_WHEEL_FUTEX_SHARD_MUTEX
  BOOST_WARN_MESSAGE(was_single, "the process had a thread before this case: the lock's "
                                 "single-threaded path was not exercised");
#endif
}

BOOST_AUTO_TEST_CASE(try_lock_fails_while_held_and_succeeds_after) {
  shard_mutex m;
  BOOST_TEST(m.try_lock());
  BOOST_TEST(!m.try_lock());
  m.unlock();
  m.lock();
  BOOST_TEST(!m.try_lock());
  m.unlock();
  BOOST_TEST(m.try_lock());
  m.unlock();
}

// More threads than this machine's cores, so that lockers find the lock held, sleep
// and are woken: a lost wake-up hangs, a broken exclusion loses increments (and TSan
// reports the plain counter's race).
BOOST_AUTO_TEST_CASE(lockers_on_many_threads_exclude_each_other_and_all_get_through) {
  shard_mutex m;
  std::uint64_t counter = 0; // plain: only the lock protects it
  constexpr int threads = 6;
  constexpr int rounds = 50000;
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      for (int i = 0; i < rounds; ++i) {
        if ((i + t) % 7 == 0) {
          while (!m.try_lock()) std::this_thread::yield();
        } else {
          m.lock();
        }
        const std::uint64_t seen = counter;
        if (i % 64 == 0) std::this_thread::yield(); // hold it across a reschedule now and then
        counter = seen + 1;
        m.unlock();
      }
    });
  for (auto& th : pool) th.join();
  BOOST_TEST(counter == std::uint64_t{threads} * rounds);
}
