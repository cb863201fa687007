// A pending operation (a timer wait, a delay-queue take...) and the wheel entry that
// owns a list of them.
//
// Operations are type-erased by one function pointer, as Asio's scheduler_operation:
// no virtual table, no std::function. The handler lives in the derived object,
// allocated through the handler's associated allocator (see handler_op.hpp).
#ifndef ASIO_WHEEL_DETAIL_WAIT_OP_HPP
#define ASIO_WHEEL_DETAIL_WAIT_OP_HPP

#include <asio_wheel/detail/wheel.hpp>

#include <asio_wheel/detail/config.hpp>
#include <asio_wheel/detail/intrusive.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace asio_wheel {
class wheel_service;
}

namespace asio_wheel::detail {

struct wait_entry;

// How an operation ended; kept in one byte and turned into an error_code on the way out.
enum class op_result : std::uint8_t { success, aborted, too_many };

error_code to_error_code(op_result r) noexcept;

class wait_op : public queue_hook {
public:
  enum class action : std::uint8_t {
    complete, // free the op, then deliver the handler with result()
    destroy   // free the op without invoking the handler (shutdown)
  };
  // Returns, for action::complete, whether the handler was dispatched to an executor
  // other than the wheel context's own (then the step ends there: see invoke()).
  using func_type = bool (*)(wait_op*, action);

  bool complete() { return func_(this, action::complete); }
  void destroy() { func_(this, action::destroy); }

  op_result result() const noexcept { return result_; }
  void set_result(op_result r) noexcept { result_ = r; }

  // The op's per-operation cancellation handler, which lives in the user's
  // cancellation signal (null when the handler has no slot). It also identifies the op
  // to that handler: not the op's own address, which the allocator may hand to a later
  // op while a stale handler is still installed in an old signal.
  struct op_cancellation* cancellation() const noexcept { return cancellation_; }
  void set_cancellation(struct op_cancellation* c) noexcept { cancellation_ = c; }

protected:
  explicit wait_op(func_type f) noexcept : func_(f) {}
  ~wait_op() = default;

private:
  func_type func_;
  struct op_cancellation* cancellation_ = nullptr;
  op_result result_ = op_result::success;
};

// FIFO of operations: O(1) push_back, pop_front and splice; unlinking one op in the
// middle walks the list, which holds the waits of one timer (almost always one).
using op_queue = intrusive_queue<wait_op>;

// The per-operation cancellation handler of a pending op, installed in the handler's
// cancellation slot. It reaches the op through the entry that owns it, looking it up by
// its own address (as Asio's timers do), so an emission after completion, or on a
// signal whose op's memory was reused, is a harmless no-op while the owner lives.
// `owner` is read and written only under the service's lock: when the owner moves
// (a timer move), the service re-points it there, and an emission racing the move on
// another thread finds the op in whichever entry holds it. The handler object itself
// is never replaced while the op is pending, so the emitting thread never sees it
// change under it.
struct op_cancellation {
  wheel_service* service;
  wait_entry* owner;
  void operator()(net::cancellation_type type); // src/wheel_service.cpp
};

// An entry on the wheel as the service sees it. `on_due` says what happens when its
// deadline comes: nullptr marks a wait_entry (a timer), whose waits complete with
// success; other owners (delay queue elements, deadlines) plug in their own step. It
// runs under the service's lock, appends the operations to complete to `out` and
// returns how much of the step's expiry_batch it used: the operations it appended, or
// 1 for an expiry that completes none itself (a delay-queue element), so that no kind
// of expiry escapes the batch. `budget` (>= 1) is what is left of the batch; a step
// with more to do than that puts its entry back on the wheel, due now, for the next
// step. Only wait_entry objects ever own operations.
struct service_entry : wheel_entry {
  using due_func = std::size_t (*)(service_entry&, op_queue& out, std::size_t budget);
  due_func on_due = nullptr;
};

// The state of one timer: its expiry and the waits pending on it. While `waits` is
// non-empty the entry is linked on the wheel (a slot, the due list or the never list),
// which is how shutdown finds every pending operation.
struct wait_entry : service_entry {
  std::chrono::steady_clock::time_point expiry{};
  op_queue waits;
};

} // namespace asio_wheel::detail

#endif
