// op_memory: where the memory of an operation comes from when its handler has no
// associated allocator.
//
// Asio's recycling_allocator caches blocks only inside run() on the thread, and only a
// couple of them; a server that starts its waits from outside a handler, or cancels a
// batch of them at once, goes to malloc for each. Here each thread keeps its own free
// lists, by size class, of up to op_memory_max_cached blocks each: a block freed on one
// thread is reused by the next operation started on it, whichever thread allocated it.
// No lock on that path. A full list hands half of itself to a process-wide depot, where
// a thread whose list ran dry takes it (one lock per half list): so threads that run
// other threads' completions do not feed malloc while those threads drain it. What a
// thread's lists hold is freed when it exits; the depot keeps at most
// op_memory_depot_chains half lists a class.
#ifndef ASIO_WHEEL_DETAIL_OP_MEMORY_HPP
#define ASIO_WHEEL_DETAIL_OP_MEMORY_HPP

#include <cassert>
#include <cstddef>
#include <new>
#include <type_traits>

namespace asio_wheel::detail {

// Blocks of at most this size are cached (in classes of 16 bytes); larger ones and
// over-aligned ones go straight to operator new.
inline constexpr std::size_t op_memory_max_block = 512;
inline constexpr std::size_t op_memory_max_cached = 1024; // per size class and thread
inline constexpr std::size_t op_memory_depot_chains = 16;  // of max_cached / 2, per class

// Fine classes: an operation's block is its size rounded up to 16 (malloc's own
// granule), so a 16-byte op with a 16-byte handler takes 32 bytes, not 64.
inline constexpr std::size_t op_memory_class_bytes = 16;
inline constexpr std::size_t op_memory_classes = op_memory_max_block / op_memory_class_bytes;

// Blocks of `size`'s class in the depot now (for tests).
std::size_t op_memory_depot_blocks(std::size_t size) noexcept;

// One thread's cache: a free list per size class. Blocks are operator new'd at their
// class size, so that any block can be cached in any thread's list of its class.
//
// A trivial type, zero-initialized (all lists empty, unborn): a thread_local of it needs
// no guard, no registration and no wrapper call, so that the hot paths below, inline in
// every caller, reach their list with one thread-pointer-relative address and one test
// of the state. What a thread caches is freed at its exit by a separate thread_local
// (src/op_memory.cpp), built on the thread's first use of its cache, in the cold paths.
class op_thread_cache {
public:
  // unborn: not yet used by this thread (the reaper not yet built); alive: in use;
  // dead: its reaper ran (an op freed by another thread_local's destructor at thread
  // exit), so blocks bypass it.
  enum class lifetime : unsigned char { unborn, alive, dead };
  // A cached block: its first word links it to the next one of its list.
  struct free_block {
    free_block* next;
  };

  bool alive() const noexcept { return state_ == lifetime::alive; }

  // The hot paths: a block from this thread's list of class c, or nullptr if it is
  // empty; a block onto it, or false if it is full.
  void* take(std::size_t c) noexcept {
    assert(c < op_memory_classes && alive());
    list& l = lists_[c];
    free_block* b = l.head;
    if (!b) return nullptr;
    assert(l.count > 0); // the chain from head has l.count blocks
    l.head = b->next;
    --l.count;
    return b;
  }
  bool give(void* p, std::size_t c) noexcept {
    assert(c < op_memory_classes && alive());
    list& l = lists_[c];
    if (l.count == op_memory_max_cached) return false;
    l.head = ::new (p) free_block{l.head};
    ++l.count;
    return true;
  }

  // The cold paths (src/op_memory.cpp), past a list's ends or on a thread's first use:
  // the depot, then operator new / delete. Out of line, so that the inline hot paths
  // stay a few instructions.
  static void* allocate_cold(std::size_t c);
  static void deallocate_cold(void* p, std::size_t c) noexcept;

  // Frees every cached block and marks the cache dead (the reaper, at thread exit).
  void release() noexcept;

private:
  // The cold paths' steps. Makes an unborn cache alive, building its reaper; false if
  // the cache is dead.
  bool make_alive() noexcept;
  // An empty list takes a chain from the depot; a full one gives half of itself to it.
  bool refill(std::size_t c) noexcept;
  bool spill(std::size_t c) noexcept;

  struct list {
    free_block* head;
    std::size_t count; // invariant: the length of the chain from head
  };
  list lists_[op_memory_classes];
  lifetime state_;
};
static_assert(std::is_trivially_destructible_v<op_thread_cache> &&
              std::is_trivially_default_constructible_v<op_thread_cache>);

// Zero-initialized before any code of the thread runs: empty lists, unborn.
inline thread_local op_thread_cache this_thread_op_cache;

constexpr std::size_t op_memory_class_of(std::size_t size) noexcept {
  return (size - 1) / op_memory_class_bytes;
}

// Inline, so that an op's size (a constant at every call) picks its class at compile
// time, and a cached block costs a handful of instructions, without a call.
inline void* op_memory_allocate(std::size_t size) {
  if (size == 0 || size > op_memory_max_block) return ::operator new(size);
  const std::size_t c = op_memory_class_of(size);
  op_thread_cache& cache = this_thread_op_cache;
  if (cache.alive())
    if (void* p = cache.take(c)) return p;
  return op_thread_cache::allocate_cold(c);
}

inline void op_memory_deallocate(void* p, std::size_t size) noexcept {
  if (size == 0 || size > op_memory_max_block) return ::operator delete(p);
  const std::size_t c = op_memory_class_of(size);
  op_thread_cache& cache = this_thread_op_cache;
  if (cache.alive() && cache.give(p, c)) return;
  op_thread_cache::deallocate_cold(p, c);
}

// The allocator for the above; all instances are interchangeable.
template <class T>
class op_recycling_allocator {
public:
  using value_type = T;

  op_recycling_allocator() noexcept = default;
  template <class U>
  op_recycling_allocator(const op_recycling_allocator<U>&) noexcept {}

  template <class U>
  struct rebind {
    using other = op_recycling_allocator<U>;
  };

  T* allocate(std::size_t n) {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
    } else {
      return static_cast<T*>(op_memory_allocate(n * sizeof(T)));
    }
  }

  void deallocate(T* p, std::size_t n) noexcept {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      ::operator delete(p, std::align_val_t(alignof(T)));
    } else {
      op_memory_deallocate(p, n * sizeof(T));
    }
  }

  friend bool operator==(const op_recycling_allocator&, const op_recycling_allocator&) noexcept {
    return true;
  }
};

} // namespace asio_wheel::detail

#endif
