// Memory for a shard's own posted handlers (its step, its disarm), one at a time each,
// handed to Asio as the handler's associated allocator, so that posting them on an
// io_context needs no allocation that can fail.
//
// Asio completes every operation it started without allocating: a timer's wait op is
// allocated when the wait starts, and a cancel only moves it to the completion queue.
// A shard completes its waits from a posted step, and a post allocates the handler's
// operation. Were that allocation to fail, the call that asked for the step (a cancel,
// a timer's destructor, an advance) would throw where Asio's would not. A shard keeps
// at most one step posted (step_posted_) and one disarm (disarm_posted_), and Asio frees
// a handler's memory before it invokes the handler (its documented allocation rule), so
// one buffer each serves every post: the flag is cleared only by the posted handler
// itself, after Asio gave the buffer back.
//
// A shard uses it on an io_context, the usual context, whose executor takes a posted
// handler's operation from the handler's allocator. On another context (a thread_pool,
// a user's executor behind any_io_executor) the shard posts through any_io_executor,
// which allocates its own way, and a post may throw: the shard then leaves its flags
// as if nothing was posted, so that the next call posts (wheel_shard::post_in_locked).
//
// The shard's driver (a steady_timer) takes its wait's operation from one too, on any
// context: an arm then allocates only when the wait it replaced still holds the buffer
// (cancelled, its handler not yet run). Should that allocation fail, the shard posts a
// step instead, which arms again (wheel_shard::arm_locked).
#ifndef ASIO_WHEEL_DETAIL_POST_MEMORY_HPP
#define ASIO_WHEEL_DETAIL_POST_MEMORY_HPP

#include <atomic>
#include <cassert>
#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace asio_wheel::detail {

class post_memory {
public:
  // An io_context's posted operation is a queue link, a function pointer and the
  // handler (here two pointers) with its allocator: about 50 bytes in Asio 1.22 to 1.38.
  // The driver's wait operation, with the timer's any_io_executor for its work, is the
  // largest: 120 bytes in Asio 1.22 and 1.38, 128 in Boost 1.81 and 1.90 (test_internals
  // checks it). A larger request (a future Asio) is served by operator new, as before.
  static constexpr std::size_t buffer_size = 128;

  post_memory() = default;
  post_memory(const post_memory&) = delete;
  post_memory& operator=(const post_memory&) = delete;
  ~post_memory() { assert(!in_use_.load(std::memory_order_relaxed)); }

  void* allocate(std::size_t bytes, std::size_t align) {
    ++allocations_;
    // Only one allocation at a time can want the buffer (the owner posts under its lock,
    // one handler at a time); acquire pairs with the release of the deallocation that
    // freed it, which another thread may have made.
    if (bytes <= buffer_size && align <= alignof(std::max_align_t) &&
        !in_use_.load(std::memory_order_acquire)) {
      in_use_.store(true, std::memory_order_relaxed);
      return buffer_;
    }
    ++heap_allocations_;
    return ::operator new(bytes);
  }
  void deallocate(void* p) noexcept {
    if (p == buffer_)
      in_use_.store(false, std::memory_order_release);
    else
      ::operator delete(p);
  }

  // How many allocations it made, and how many of them the buffer could not serve (for
  // the tests: Asio asks it for an io_context's posts, and the buffer serves them).
  std::size_t allocations() const noexcept { return allocations_; }
  std::size_t heap_allocations() const noexcept { return heap_allocations_; }

private:
  alignas(std::max_align_t) unsigned char buffer_[buffer_size];
  std::atomic<bool> in_use_{false};
  std::size_t allocations_ = 0;      // under the owner's lock, as allocate is
  std::size_t heap_allocations_ = 0; // the same
};

// The allocator that hands out a post_memory.
template <class T>
class post_allocator {
public:
  using value_type = T;

  explicit post_allocator(post_memory& memory) noexcept : memory_(&memory) {}
  template <class U>
  post_allocator(const post_allocator<U>& other) noexcept : memory_(other.memory_) {}

  T* allocate(std::size_t n) {
    // Over-aligned types and sizes that would overflow go to std::allocator.
    if constexpr (alignof(T) > alignof(std::max_align_t)) {
      return std::allocator<T>().allocate(n);
    } else {
      if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
      return static_cast<T*>(memory_->allocate(n * sizeof(T), alignof(T)));
    }
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if constexpr (alignof(T) > alignof(std::max_align_t))
      std::allocator<T>().deallocate(p, n);
    else
      memory_->deallocate(p);
  }

  friend bool operator==(const post_allocator& a, const post_allocator& b) noexcept {
    return a.memory_ == b.memory_;
  }
  friend bool operator!=(const post_allocator& a, const post_allocator& b) noexcept {
    return a.memory_ != b.memory_;
  }

private:
  template <class>
  friend class post_allocator;
  post_memory* memory_;
};

// A handler with its memory: `f`, run by a post (or a wait) whose operation lives in
// `memory`.
template <class F>
struct posted_in {
  using allocator_type = post_allocator<void>;
  allocator_type get_allocator() const noexcept { return allocator_type(*memory); }
  template <class... Args>
  void operator()(Args&&... args) {
    f(std::forward<Args>(args)...);
  }

  post_memory* memory;
  F f;
};

} // namespace asio_wheel::detail

#endif
