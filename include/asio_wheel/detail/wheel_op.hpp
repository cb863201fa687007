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

#include <cstddef>
#include <cstdint>

namespace asio_wheel::detail {

struct op_cancellation;
struct wait_list;

// How an operation ended; kept in one byte and turned into an error_code on the way out.
enum class op_result : std::uint8_t { success, aborted, too_many };

error_code too_many_timers_code() noexcept; // src/error.cpp

// The error_code a handler gets for `r`: inline, on every completion's path (success and
// operation_aborted are built in place; only the library's own category is out of line).
inline error_code to_error_code(op_result r) noexcept {
  if (r == op_result::success) return {};
  if (r == op_result::aborted) return net::error::operation_aborted;
  return too_many_timers_code();
}

// 16 bytes: the queue link (whose tag holds the result and where the op lives) and
// the function. What only some operations
// need (a per-operation cancellation handler) lives in the derived object, reached
// through the function.
class wheel_op : public queue_hook {
public:
  enum class action : std::uint8_t {
    complete,          // free the op, then deliver the handler with result()
    destroy,           // free the op without invoking the handler (shutdown, or
                       // admission refused or undone: then perhaps an inline op)
    is_cancelled_by,   // arg: an op_cancellation; whether it is this op's
    move_cancellation, // arg: a wait_list, or null; this op's cancellation handler
                       // reaches it there, or nothing
    drop_cancellation, // the op's cancellation handler is being destroyed: forget it
    relocate           // arg: a relocation; the op moves there (only an inline op)
  };
  // Where action::relocate moves an op: into `buffer` (another owner's inline buffer),
  // or, when null, into memory of its own from the per-thread cache. `moved` is the op
  // at its new place; the old one is destroyed.
  struct relocation {
    void* buffer = nullptr;
    bool leaving = true; // with no buffer: whether the op leaves its list (see relocate)
    wheel_op* moved = nullptr;
  };
  // Returns, for action::complete, whether the step must end there: the handler was
  // dispatched to another executor, ran inline and threw, and that executor captured
  // the exception (see dispatch_watch in handler_op.hpp and wheel_shard::invoke); for
  // is_cancelled_by, the answer; otherwise false.
  using func_type = bool (*)(wheel_op*, action, void* arg);

  bool complete() { return func_(this, action::complete, nullptr); }
  void destroy() { func_(this, action::destroy, nullptr); }

  op_result result() const noexcept { return static_cast<op_result>(tag() & result_bits); }
  void set_result(op_result r) noexcept {
    set_tag((tag() & ~result_bits) | static_cast<unsigned>(r));
  }

  // Whether the op lives in its owner's inline buffer rather than memory of its own.
  // Such an op stays there only while it waits on its owner's wait_list: every path
  // that takes it off relocates it first (wheel_shard::own_locked), so the owner may
  // be destroyed or moved while the op is in a step's batch or in the ready queue.
  bool is_inline() const noexcept { return tag() & inline_bit; }

  // Moves the op (is_inline()) to `buffer`, or to memory of its own if null; returns
  // the op at its new place. Handlers that may live inline move without throwing; the
  // memory of its own may throw bad_alloc. Memory of its own is where an op goes as it
  // leaves its list (`leaving`; not when a batch ends before it): its cancellation
  // handler forgets the owner then (forget_owner), in the call that moves it, so that
  // the storm's and the churn's inline ops pay no second call.
  wheel_op& relocate(void* buffer, bool leaving = true) {
    relocation r{buffer, leaving, nullptr};
    func_(this, action::relocate, &r);
    return *r.moved;
  }

  // Whether `c` is the op's per-operation cancellation handler, which lives in the
  // user's cancellation signal (an op whose handler has no slot has none). That handler,
  // not the op's address, identifies the op: the allocator may hand the address to a
  // later op while a stale handler is still installed in an old signal.
  bool cancelled_by(const op_cancellation& c) {
    return func_(this, action::is_cancelled_by, const_cast<op_cancellation*>(&c));
  }
  // The op moved to `owner` (a timer move): its cancellation handler, if any, follows.
  void move_cancellation(wait_list& owner) { func_(this, action::move_cancellation, &owner); }
  // The op left its owner's list (completed, aborted or destroyed; lock held): its
  // cancellation handler, if any, reaches nothing from now on. That handler stays in the
  // user's slot at least until the op's handler runs, and the owner may move away or be
  // destroyed before then (a timer in a std::vector that grows): an emission in between
  // must not read the list (wheel_shard::cancel_op).
  void forget_owner() { func_(this, action::move_cancellation, nullptr); }
  // The op's cancellation handler is being destroyed (the user's slot took another, or
  // went; lock held): the op no longer writes to it.
  void drop_cancellation() { func_(this, action::drop_cancellation, nullptr); }

protected:
  explicit wheel_op(func_type f) noexcept : func_(f) {}
  ~wheel_op() = default;
  void set_inline(bool on) noexcept { set_tag(on ? tag() | inline_bit : tag() & ~inline_bit); }

private:
  // The queue link's tag (queue_hook): the result in two bits, where the op lives in
  // the third.
  static constexpr unsigned result_bits = 3;
  static constexpr unsigned inline_bit = 4;

  func_type func_;
};
static_assert(sizeof(wheel_op) == 2 * sizeof(void*), "an op is its link and its function");

// The size of an owner's inline buffer for one operation (a timer's, see
// timer_state): the 16-byte op and a handler of up to 16 bytes (a lambda capturing
// `this` and a word, or a shared_ptr to its connection) run inline on the context.
inline constexpr std::size_t inline_op_bytes = 32;

// FIFO of operations: O(1) push_back, pop_front and splice; unlinking one op in the
// middle walks the list, which holds the waits of one timer (almost always one).
using op_queue = intrusive_queue<wheel_op>;

} // namespace asio_wheel::detail

#endif
