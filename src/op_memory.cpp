// The cold paths of op_memory (detail/op_memory.hpp): the process-wide depot, a thread's
// first use of its cache and its exit.
#include <asio_wheel/detail/cold.hpp>
#include <asio_wheel/detail/op_memory.hpp>

#include <array>
#include <atomic>
#include <cassert>
#include <mutex>
#include <type_traits>

namespace asio_wheel::detail {

namespace {

using free_block = op_thread_cache::free_block;

// Full halves of threads' lists, for threads whose list of that class ran dry. A thread
// that runs completions started on other threads (an io_context run by several) frees
// more blocks than it allocates, and the threads that started them allocate more than
// they free: without this, one side's surplus went to operator delete while the other
// side went to operator new, each a trip through malloc's arenas and their locks.
// Chains of `batch` blocks (half a full list) move in one step. Never blocks: a thread
// that finds the depot's lock held, or its shelf full or empty, uses operator new or
// delete as before. Immortal, so that threads exiting after static destruction may
// still use it (and what it holds stays reachable for leak checkers).
constexpr std::size_t batch = op_memory_max_cached / 2;
constexpr std::size_t chains_per_class = op_memory_depot_chains;

class depot {
public:
  // Takes a chain of exactly `batch` blocks (null-terminated), or returns false.
  bool put(std::size_t c, free_block* chain) noexcept {
    std::unique_lock<std::mutex> guard(mutex_, std::try_to_lock);
    if (!guard) return false;
    shelf& s = shelves_[c];
    const std::size_t n = s.count.load(std::memory_order_relaxed);
    if (n == chains_per_class) return false;
    s.chains[n] = chain;
    s.count.store(n + 1, std::memory_order_relaxed);
    return true;
  }
  // Whether put would find the shelf full, or take find it empty: hints, read without
  // the lock, so that a thread past its list's ends (a burst of many thousand waits
  // cancelled, then their handlers run) pays neither a lock nor, for a spill, a walk of
  // half its list on each call while the depot cannot help it.
  bool full(std::size_t c) const noexcept {
    return shelves_[c].count.load(std::memory_order_relaxed) == chains_per_class;
  }
  bool empty(std::size_t c) const noexcept {
    return shelves_[c].count.load(std::memory_order_relaxed) == 0;
  }
  // A chain of `batch` blocks, or nullptr.
  free_block* take(std::size_t c) noexcept {
    std::unique_lock<std::mutex> guard(mutex_, std::try_to_lock);
    if (!guard) return nullptr;
    shelf& s = shelves_[c];
    const std::size_t n = s.count.load(std::memory_order_relaxed);
    if (n == 0) return nullptr;
    s.count.store(n - 1, std::memory_order_relaxed);
    return s.chains[n - 1];
  }
  std::size_t blocks(std::size_t c) const noexcept {
    return shelves_[c].count.load(std::memory_order_relaxed) * batch;
  }

private:
  struct shelf {
    std::array<free_block*, chains_per_class> chains{};
    std::atomic<std::size_t> count{0}; // written under the lock
  };
  std::mutex mutex_;
  std::array<shelf, op_memory_classes> shelves_{};
};

depot& the_depot() {
  static depot* const d = new depot;
  return *d;
}

// Frees this thread's cache when the thread exits.
struct thread_cache_reaper {
  ~thread_cache_reaper() { this_thread_op_cache.release(); }
};

} // namespace

bool op_thread_cache::make_alive() noexcept {
  if (state_ == lifetime::dead) return false;
  assert(state_ == lifetime::unborn && this == &this_thread_op_cache);
  // Registers the reaper's destructor for this thread's exit (the first use only).
  static thread_local thread_cache_reaper reaper;
  (void)reaper;
  state_ = lifetime::alive;
  return true;
}

void op_thread_cache::release() noexcept {
  state_ = lifetime::dead;
  for (auto& l : lists_)
    while (l.head) {
      free_block* b = l.head;
      l.head = b->next;
      ::operator delete(b);
    }
}

bool op_thread_cache::refill(std::size_t c) noexcept {
  list& l = lists_[c];
  assert(l.head == nullptr && l.count == 0);
  if (the_depot().empty(c)) return false;
  free_block* chain = the_depot().take(c);
  if (!chain) return false;
  l.head = chain;
  l.count = batch;
  return true;
}

bool op_thread_cache::spill(std::size_t c) noexcept {
  list& l = lists_[c];
  assert(l.count == op_memory_max_cached && batch < l.count);
  if (the_depot().full(c)) return false;
  free_block* last = l.head;
  for (std::size_t i = 1; i < batch; ++i) last = last->next;
  free_block* rest = last->next;
  last->next = nullptr;
  if (!the_depot().put(c, l.head)) {
    last->next = rest;
    return false;
  }
  l.head = rest;
  l.count -= batch;
  return true;
}

// The paths past a list's ends, out of line (a cold section) and tail-called from the
// inline hot paths, which thus keep nothing live across a call.
ASIO_WHEEL_COLD void* op_thread_cache::allocate_cold(std::size_t c) {
  op_thread_cache& cache = this_thread_op_cache;
  // Here the list is empty: the hot path found it so, or the cache was unborn.
  if ((cache.alive() || cache.make_alive()) && cache.refill(c)) return cache.take(c);
  return ::operator new((c + 1) * op_memory_class_bytes);
}

ASIO_WHEEL_COLD void op_thread_cache::deallocate_cold(void* p, std::size_t c) noexcept {
  op_thread_cache& cache = this_thread_op_cache;
  // Here the list is full (the hot path found it so), or empty if the cache was unborn.
  if (cache.alive() || cache.make_alive()) {
    if (cache.give(p, c)) return;
    if (cache.spill(c) && cache.give(p, c)) return;
  }
  ::operator delete(p);
}

std::size_t op_memory_depot_blocks(std::size_t size) noexcept {
  if (size == 0 || size > op_memory_max_block) return 0;
  return the_depot().blocks(op_memory_class_of(size));
}

} // namespace asio_wheel::detail
