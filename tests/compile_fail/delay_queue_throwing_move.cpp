// expect: T's move constructor must not throw
// The other requirement, with its own message: elements are moved under the lock.
#include "asio_test.hpp"

#include <asio_wheel/delay_queue.hpp>

struct throws_on_move {
  throws_on_move() = default;
  throws_on_move(throws_on_move&&) noexcept(false) {}
};

static_assert(sizeof(asio_wheel::delay_queue<throws_on_move>) > 0);
