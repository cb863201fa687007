#include <asio_wheel/detail/op_memory.hpp>

#include <array>
#include <atomic>
#include <cassert>
#include <mutex>
#include <type_traits>

namespace asio_wheel::detail {

namespace {

// Fine classes: an operation's block is its size rounded up to 16 (malloc's own
// granule), so a 16-byte op with a 16-byte handler takes 32 bytes, not 64.
constexpr std::size_t class_bytes = 16;
constexpr std::size_t classes = op_memory_max_block / class_bytes;

struct free_block {
  free_block* next;
};

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
  std::array<shelf, classes> shelves_{};
};

depot& the_depot() {
  static depot* const d = new depot;
  return *d;
}

// One thread's cache. Blocks are operator new'd at their class size, so that any block
// can be cached in any thread's list of its class.
//
// A trivial type, constant-initialized (all lists empty, `state_` unborn): a thread_local
// of it needs no guard and no registration, so that the hot paths reach their list
// with one thread-pointer-relative load and one test of `state_`. What a thread caches
// is freed at its exit by a separate thread_local, the reaper, built on the thread's
// first use of its cache (in the cold paths, where `state_` is unborn).
class thread_cache {
public:
  // unborn: not yet used by this thread (the reaper not yet built); alive: in use;
  // dead: its reaper ran (an op freed by another thread_local's destructor at thread
  // exit), so blocks bypass it.
  enum class lifetime : unsigned char { unborn, alive, dead };

  bool alive() const noexcept { return state_ == lifetime::alive; }

  // Makes an unborn cache alive, building its reaper; false if the cache is dead.
  bool make_alive() noexcept;

  // Frees every cached block and marks the cache dead (the reaper, at thread exit).
  void release() noexcept {
    state_ = lifetime::dead;
    for (auto& list : lists_)
      while (list.head) {
        free_block* b = list.head;
        list.head = b->next;
        ::operator delete(b);
      }
  }

  // The hot paths: a block from this thread's list, or nullptr if it is empty; a block
  // onto it, or false if it is full. The cold paths (op_memory_allocate_cold and
  // op_memory_deallocate_cold) go to the depot first.
  void* take(std::size_t c) noexcept {
    list& l = lists_[c];
    free_block* b = l.head;
    if (!b) return nullptr;
    l.head = b->next;
    --l.count;
    return b;
  }

  bool give(void* p, std::size_t c) noexcept {
    list& l = lists_[c];
    if (l.count == op_memory_max_cached) return false;
    l.head = ::new (p) free_block{l.head};
    ++l.count;
    return true;
  }

  // An empty list takes a chain from the depot.
  bool refill(std::size_t c) noexcept {
    list& l = lists_[c];
    assert(l.head == nullptr && l.count == 0);
    if (the_depot().empty(c)) return false;
    free_block* chain = the_depot().take(c);
    if (!chain) return false;
    l.head = chain;
    l.count = batch;
    return true;
  }

  // A full list gives its first `batch` blocks to the depot.
  bool spill(std::size_t c) noexcept {
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

private:
  struct list {
    free_block* head;
    std::size_t count; // invariant: the length of the chain from head
  };
  std::array<list, classes> lists_;
  lifetime state_;
};
static_assert(std::is_trivially_destructible_v<thread_cache>);

// Zero-initialized before any code of the thread runs: empty lists, unborn.
thread_local thread_cache this_thread_cache;

// Frees this thread's cache when the thread exits.
struct thread_cache_reaper {
  ~thread_cache_reaper() { this_thread_cache.release(); }
};

bool thread_cache::make_alive() noexcept {
  if (state_ == lifetime::dead) return false;
  assert(state_ == lifetime::unborn && this == &this_thread_cache);
  // Registers the reaper's destructor for this thread's exit (the first use only).
  static thread_local thread_cache_reaper reaper;
  (void)reaper;
  state_ = lifetime::alive;
  return true;
}

constexpr std::size_t class_of(std::size_t size) noexcept { return (size - 1) / class_bytes; }

// The paths past a list's ends, out of line and tail-called, so that the hot paths keep
// nothing live across a call (no registers to save, no thread pointer to reload).
#if defined(__GNUC__)
#define ASIO_WHEEL_OP_MEMORY_COLD __attribute__((noinline, cold))
#else
#define ASIO_WHEEL_OP_MEMORY_COLD
#endif

ASIO_WHEEL_OP_MEMORY_COLD void* op_memory_allocate_cold(std::size_t c) {
  thread_cache& cache = this_thread_cache;
  // Here the list is empty: the hot path found it so, or the cache was unborn.
  if ((cache.alive() || cache.make_alive()) && cache.refill(c)) return cache.take(c);
  return ::operator new((c + 1) * class_bytes);
}

ASIO_WHEEL_OP_MEMORY_COLD void op_memory_deallocate_cold(void* p, std::size_t c) noexcept {
  thread_cache& cache = this_thread_cache;
  // Here the list is full (the hot path found it so), or empty if the cache was unborn.
  if (cache.alive() || cache.make_alive()) {
    if (cache.give(p, c)) return;
    if (cache.spill(c) && cache.give(p, c)) return;
  }
  ::operator delete(p);
}

#undef ASIO_WHEEL_OP_MEMORY_COLD

} // namespace

void* op_memory_allocate(std::size_t size) {
  if (size == 0 || size > op_memory_max_block) return ::operator new(size);
  const std::size_t c = class_of(size);
  thread_cache& cache = this_thread_cache;
  if (cache.alive())
    if (void* p = cache.take(c)) return p;
  return op_memory_allocate_cold(c);
}

std::size_t op_memory_depot_blocks(std::size_t size) noexcept {
  if (size == 0 || size > op_memory_max_block) return 0;
  return the_depot().blocks(class_of(size));
}

void op_memory_deallocate(void* p, std::size_t size) noexcept {
  if (size == 0 || size > op_memory_max_block) return ::operator delete(p);
  const std::size_t c = class_of(size);
  thread_cache& cache = this_thread_cache;
  if (cache.alive() && cache.give(p, c)) return;
  op_memory_deallocate_cold(p, c);
}

} // namespace asio_wheel::detail
