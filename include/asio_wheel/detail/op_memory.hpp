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

#include <cstddef>
#include <new>

namespace asio_wheel::detail {

// Blocks of at most this size are cached (in classes of 16 bytes); larger ones and
// over-aligned ones go straight to operator new.
inline constexpr std::size_t op_memory_max_block = 512;
inline constexpr std::size_t op_memory_max_cached = 1024; // per size class and thread
inline constexpr std::size_t op_memory_depot_chains = 16;  // of max_cached / 2, per class

void* op_memory_allocate(std::size_t size);
void op_memory_deallocate(void* p, std::size_t size) noexcept;
// Blocks of `size`'s class in the depot now (for tests).
std::size_t op_memory_depot_blocks(std::size_t size) noexcept;

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
