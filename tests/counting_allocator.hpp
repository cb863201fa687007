// An allocator that counts the blocks it has live: for the suites that check that an
// operation's memory comes from the handler's associated allocator, and when it is
// given back.
#ifndef ASIO_WHEEL_TESTS_COUNTING_ALLOCATOR_HPP
#define ASIO_WHEEL_TESTS_COUNTING_ALLOCATOR_HPP

#include <cstddef>
#include <memory>

namespace asio_wheel_test {

template <class T>
struct counting_allocator {
  using value_type = T;
  int* live; // blocks allocated and not yet freed

  explicit counting_allocator(int* c) : live(c) {}
  template <class U>
  counting_allocator(const counting_allocator<U>& o) : live(o.live) {}

  T* allocate(std::size_t n) {
    T* p = std::allocator<T>().allocate(n);
    ++*live;
    return p;
  }
  void deallocate(T* p, std::size_t n) {
    --*live;
    std::allocator<T>().deallocate(p, n);
  }

  template <class U>
  bool operator==(const counting_allocator<U>& o) const { return live == o.live; }
  template <class U>
  bool operator!=(const counting_allocator<U>& o) const { return live != o.live; }
};

} // namespace asio_wheel_test

#endif
