#include <asio_wheel/detail/op_memory.hpp>

#include <array>

namespace asio_wheel::detail {

namespace {

// Fine classes: an operation's block is its size rounded up to 16 (malloc's own
// granule), so a 16-byte op with a 16-byte handler takes 32 bytes, not 64.
constexpr std::size_t class_bytes = 16;
constexpr std::size_t classes = op_memory_max_block / class_bytes;

struct free_block {
  free_block* next;
};

// One thread's cache. Blocks are operator new'd at their class size, so that any block
// can be cached in any thread's list of its class.
class thread_cache {
public:
  thread_cache() noexcept { state = lifetime::alive; }
  ~thread_cache() {
    state = lifetime::dead;
    for (auto& list : lists_)
      while (list.head) {
        free_block* b = list.head;
        list.head = b->next;
        ::operator delete(b);
      }
  }

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

  // After destruction of this thread's cache (an op freed by another thread_local's
  // destructor at thread exit), blocks bypass it. A trivial type: no guard to read.
  enum class lifetime : unsigned char { unborn, alive, dead };
  static thread_local lifetime state;

private:
  struct list {
    free_block* head = nullptr;
    std::size_t count = 0;
  };
  std::array<list, classes> lists_{};
};

thread_local thread_cache::lifetime thread_cache::state = thread_cache::lifetime::unborn;

// This thread's cache, or nullptr once it is gone.
thread_cache* this_thread_cache() {
  if (thread_cache::state == thread_cache::lifetime::dead) return nullptr;
  static thread_local thread_cache cache;
  return &cache;
}

constexpr std::size_t class_of(std::size_t size) noexcept { return (size - 1) / class_bytes; }

} // namespace

void* op_memory_allocate(std::size_t size) {
  if (size == 0 || size > op_memory_max_block) return ::operator new(size);
  const std::size_t c = class_of(size);
  if (thread_cache* cache = this_thread_cache())
    if (void* p = cache->take(c)) return p;
  return ::operator new((c + 1) * class_bytes);
}

void op_memory_deallocate(void* p, std::size_t size) noexcept {
  if (size != 0 && size <= op_memory_max_block)
    if (thread_cache* cache = this_thread_cache(); cache && cache->give(p, class_of(size)))
      return;
  ::operator delete(p);
}

} // namespace asio_wheel::detail
