// wheel_op: an operation that a shard completes (a timer's wait, a periodic tick, a
// delay-queue take, a cancel_after deadline's emission), and op_queue, their FIFO.
//
// Operations are type-erased by one function pointer, as Asio's scheduler_operation:
// no virtual table, no std::function. The handler lives in the derived object,
// allocated through the handler's associated allocator (see handler_op.hpp).
#ifndef ASIO_WHEEL_DETAIL_WHEEL_OP_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_OP_HPP

#include <asio_wheel/detail/config.hpp>
#include <asio_wheel/detail/intrusive.hpp>

#include <cstdint>

namespace asio_wheel::detail {

struct op_cancellation;

// How an operation ended; kept in one byte and turned into an error_code on the way out.
enum class op_result : std::uint8_t { success, aborted, too_many };

error_code to_error_code(op_result r) noexcept; // src/error.cpp

class wheel_op : public queue_hook {
public:
  enum class action : std::uint8_t {
    complete, // free the op, then deliver the handler with result()
    destroy   // free the op without invoking the handler (shutdown)
  };
  // Returns, for action::complete, whether the handler was dispatched to an executor
  // other than the wheel context's own (then the step ends there: see
  // wheel_shard::invoke).
  using func_type = bool (*)(wheel_op*, action);

  bool complete() { return func_(this, action::complete); }
  void destroy() { func_(this, action::destroy); }

  op_result result() const noexcept { return result_; }
  void set_result(op_result r) noexcept { result_ = r; }

  // The op's per-operation cancellation handler, which lives in the user's
  // cancellation signal (null when the handler has no slot). It also identifies the op
  // to that handler: not the op's own address, which the allocator may hand to a later
  // op while a stale handler is still installed in an old signal.
  op_cancellation* cancellation() const noexcept { return cancellation_; }
  void set_cancellation(op_cancellation* c) noexcept { cancellation_ = c; }

protected:
  explicit wheel_op(func_type f) noexcept : func_(f) {}
  ~wheel_op() = default;

private:
  func_type func_;
  op_cancellation* cancellation_ = nullptr;
  op_result result_ = op_result::success;
};

// FIFO of operations: O(1) push_back, pop_front and splice; unlinking one op in the
// middle walks the list, which holds the waits of one timer (almost always one).
using op_queue = intrusive_queue<wheel_op>;

} // namespace asio_wheel::detail

#endif
