// expect: T's destructor must not throw
// A delay_queue element whose destructor may throw: rejected with a message about the
// destructor (it used to say "move constructor must not throw", which was not the cause).
#include "asio_test.hpp"

#include <asio_wheel/delay_queue.hpp>

struct throws_on_destruction {
  throws_on_destruction() = default;
  throws_on_destruction(throws_on_destruction&&) noexcept = default;
  ~throws_on_destruction() noexcept(false) {}
};

static_assert(sizeof(asio_wheel::delay_queue<throws_on_destruction>) > 0);
