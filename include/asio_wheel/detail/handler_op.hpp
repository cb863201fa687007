// The operation that carries a user's completion handler, for signatures
// void(error_code, Values...): a timer's wait (no values), a periodic tick (the missed
// count), a delay-queue take (the element).
//
// `Base` says what the operation carries. It derives from wheel_op, is constructible
// from a wheel_op::func_type, and has `take_values()` returning a std::tuple of the
// values to pass after the error_code. The owner fills them in under the shard's lock
// before handing the operation over; take_values() is called once, on completion,
// outside the lock.
//
// Memory comes from the handler's associated allocator (op_memory.hpp's per-thread
// cache when it has none) and is given back before the upcall, so the handler can
// start the next operation with the same block. Delivery follows Asio's rules: a handler whose
// associated executor is the plain executor of the wheel's io_context is invoked
// directly by the shard's step, which already runs on that context; any other
// (a strand, another context) gets the handler through net::dispatch, with
// outstanding work tracked on it until then.
#ifndef ASIO_WHEEL_DETAIL_HANDLER_OP_HPP
#define ASIO_WHEEL_DETAIL_HANDLER_OP_HPP

#include <asio_wheel/detail/legacy_executor.hpp>
#include <asio_wheel/detail/op_memory.hpp>
#include <asio_wheel/detail/wheel_op.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <asio_wheel/detail/config.hpp>

#include <cassert>
#include <exception>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

// True when `ex` is the plain executor of the io_context that `shard` belongs to: then a
// handler may run inline in the shard's step, as Asio runs such handlers inline. (The
// context is queried: io_context's executor has no context() with TS executors off.)
template <class Executor>
bool runs_inline(const Executor& ex, const wheel_shard& shard) noexcept {
  using plain = net::io_context::executor_type;
  if constexpr (std::is_same_v<Executor, plain>) {
    return &net::query(ex, net::execution::context) == &shard.context();
  } else if constexpr (std::is_same_v<Executor, net::any_io_executor>) {
    const plain* p = target_of<plain>(ex);
    return p != nullptr && &net::query(*p, net::execution::context) == &shard.context();
  } else {
    return false;
  }
}

// The allocator an operation's memory comes from.
template <class Handler>
auto op_allocator(const Handler& h) {
  return net::get_associated_allocator(h, op_recycling_allocator<void>());
}

// A timer's wait: the handler gets the error_code alone.
class plain_wait_op : public wheel_op {
public:
  explicit plain_wait_op(func_type f) noexcept : wheel_op(f) {}
  std::tuple<> take_values() noexcept { return {}; }
};

// Whether a completion dispatched to another executor threw while the dispatch ran it
// inline. Asio's executors then capture the exception and rethrow it from run() once
// the scheduler operation that called dispatch (the shard's step) returns; a second
// capture in that operation would merge both into one multiple_exceptions, losing the
// second. So a step goes on through its batch after such dispatches, unless one of them
// saw a throw (wheel_shard::invoke).
class dispatch_watch {
public:
  dispatch_watch() noexcept : outer_(std::exchange(current_, &threw_)) {}
  ~dispatch_watch() { current_ = outer_; }
  dispatch_watch(const dispatch_watch&) = delete;
  dispatch_watch& operator=(const dispatch_watch&) = delete;
  bool handler_threw() const noexcept { return threw_; }

  // Put around what a dispatch runs (a completion, a cancellation's emission): if it
  // throws while a dispatch on this thread is under watch, that dispatch ran it inline
  // (or from a strand's queue it drained), and its executor captures the exception.
  class run_scope {
  public:
    run_scope() noexcept = default;
    run_scope(const run_scope&) = delete;
    run_scope& operator=(const run_scope&) = delete;
    ~run_scope() {
      if (current_ && std::uncaught_exceptions() > before_) *current_ = true;
    }

  private:
    int before_ = std::uncaught_exceptions();
  };

private:
  static inline thread_local bool* current_ = nullptr;
  bool threw_ = false;
  bool* outer_;
};

// A handler with its completion arguments, to hand to another executor: what
// net::append does, which Asio 1.22 lacks. It keeps the handler's allocator, which
// dispatch allocates from; its executor is the one it is dispatched to.
template <class Handler, class... Args>
struct bound_completion {
  using allocator_type = net::associated_allocator_t<Handler>;

  Handler handler;
  std::tuple<Args...> args;

  allocator_type get_allocator() const noexcept { return net::get_associated_allocator(handler); }
  void operator()() {
    const dispatch_watch::run_scope scope;
    std::apply(std::move(handler), std::move(args));
  }
};

// Stands in for "no associated cancellation slot" when asking a handler for one.
struct no_cancellation_slot {};

// Whether Handler names a cancellation slot: only then can its op be cancelled on its
// own, and only then does the op keep a pointer to its cancellation handler.
template <class Handler>
inline constexpr bool has_cancellation_slot_v =
    !std::is_same_v<net::associated_cancellation_slot_t<Handler, no_cancellation_slot>,
                    no_cancellation_slot>;

// Where an op keeps its per-operation cancellation handler: nowhere (an empty base)
// when its handler has no slot, so that such an op pays no bytes for it.
template <bool HasSlot>
struct cancellation_holder {
  // In the user's signal; null if not connected, or once that handler is destroyed
  // (op_cancellation's destructor). Read and written under the shard's lock.
  op_cancellation* cancellation = nullptr;
};
template <>
struct cancellation_holder<false> {};

// The tracked executor a completion is dispatched to, or nothing: an empty base then,
// which costs no bytes in C++17 too (where [[no_unique_address]] is not available),
// so that a small handler's op still fits a timer's inline buffer.
template <class WorkExecutor>
struct work_holder {
  WorkExecutor work;
  WorkExecutor take_work() noexcept(std::is_nothrow_move_constructible_v<WorkExecutor>) {
    return std::move(work);
  }
};
template <>
struct work_holder<void> {
  struct none {};
  none take_work() noexcept { return {}; }
};

template <class Base, class Handler, class WorkExecutor>
class handler_op final : public Base,
                         private cancellation_holder<has_cancellation_slot_v<Handler>>,
                         private work_holder<WorkExecutor> {
public:
  static constexpr bool has_slot = has_cancellation_slot_v<Handler>;

  // Whether an op of this type may live in an owner's inline buffer (inline_op_bytes):
  // it fits, its memory would come from the per-thread cache anyway (the handler names
  // no allocator of its own, whose use must stay as it is), and it relocates without
  // throwing. Only plain waits: the other ops carry values that would move with them.
  static constexpr bool may_live_inline =
      std::is_same_v<Base, plain_wait_op> && sizeof(handler_op) <= inline_op_bytes &&
      alignof(handler_op) <= alignof(wheel_op) &&
      std::is_same_v<net::associated_allocator_t<Handler, op_recycling_allocator<void>>,
                     op_recycling_allocator<void>> &&
      std::is_nothrow_move_constructible_v<Handler> &&
      std::is_nothrow_move_constructible_v<
          std::conditional_t<std::is_void_v<WorkExecutor>, int, WorkExecutor>>;

  // Constructs the op in `buffer`, an owner's free inline buffer (may_live_inline);
  // connects the cancellation slot to `owner`.
  template <class H, class... Work>
  static Base* create_inline(void* buffer, H&& h, wheel_shard& shard, wait_list& owner,
                             Work&&... work) {
    static_assert(may_live_inline);
    auto* p = ::new (buffer) handler_op(std::forward<H>(h), std::forward<Work>(work)...);
    p->set_inline(true);
    connect_or_destroy(p, shard, owner);
    return p;
  }

  // Allocates through the handler's allocator; connects the cancellation slot to
  // `owner`, the list the op will wait on.
  template <class H, class... Work>
  static Base* create(H&& h, wheel_shard& shard, wait_list& owner, Work&&... work) {
    auto alloc = rebind_alloc(op_allocator(h));
    handler_op* p = std::allocator_traits<decltype(alloc)>::allocate(alloc, 1);
    try {
      ::new (static_cast<void*>(p)) handler_op(std::forward<H>(h), std::forward<Work>(work)...);
    } catch (...) {
      std::allocator_traits<decltype(alloc)>::deallocate(alloc, p, 1);
      throw;
    }
    connect_or_destroy(p, shard, owner);
    return p;
  }

private:
  using work_base = work_holder<WorkExecutor>;
  using action = wheel_op::action;

  template <class H, class... Work>
  explicit handler_op(H&& h, Work&&... work)
      : Base(&handler_op::do_func),
        work_base{std::forward<Work>(work)...},
        handler_(std::forward<H>(h)) {}

  // Relocation: the same op at another address (its queue link is the caller's).
  handler_op(handler_op&& other) noexcept
      : Base(&handler_op::do_func),
        cancellation_holder<has_slot>(other),
        work_base(static_cast<work_base&&>(other)),
        handler_(std::move(other.handler_)) {
    this->set_result(other.result());
  }

  // action::relocate: an inline op moves to r.buffer, or to memory of its own.
  static void relocate(handler_op* self, wheel_op::relocation& r) {
    if constexpr (may_live_inline) {
      assert(self->is_inline());
      handler_op* to;
      if (r.buffer) {
        to = ::new (r.buffer) handler_op(std::move(*self));
        to->set_inline(true);
      } else {
        auto alloc = rebind_alloc(op_recycling_allocator<void>());
        to = ::new (static_cast<void*>(std::allocator_traits<decltype(alloc)>::allocate(alloc, 1)))
            handler_op(std::move(*self));
        // Out of the owner's buffer, leaving its list (wheel_op::relocate).
        if constexpr (has_slot)
          if (to->cancellation && r.leaving)
            to->cancellation->owner.store(nullptr, std::memory_order_release);
      }
      self->~handler_op();
      r.moved = to;
    } else {
      (void)self, (void)r;
      assert(!"only an inline op relocates");
    }
  }

  template <class Alloc>
  static auto rebind_alloc(const Alloc& a) {
    return typename std::allocator_traits<Alloc>::template rebind_alloc<handler_op>(a);
  }

  // Connects `p`'s cancellation slot to `owner`. If that throws (a slot's emplace
  // allocates), `p` is destroyed, and freed if it has memory of its own, before the
  // exception leaves: the initiating function throws, and nothing of the op is left.
  static void connect_or_destroy(handler_op* p, wheel_shard& shard, wait_list& owner) {
    if constexpr (has_slot) {
      try {
        auto slot = net::get_associated_cancellation_slot(p->handler_);
        if (slot.is_connected())
          p->cancellation =
              &slot.template emplace<op_cancellation>(shard, owner);
      } catch (...) {
        if (p->is_inline())
          p->~handler_op();
        else
          free_op(p, p->handler_);
        throw;
      }
    } else {
      (void)p, (void)shard, (void)owner;
    }
  }

  static bool do_func(wheel_op* base, action a, void* arg) {
    auto* self = static_cast<handler_op*>(base);
    if (a == action::relocate) {
      relocate(self, *static_cast<wheel_op::relocation*>(arg));
      return false;
    }
    if (a == action::is_cancelled_by || a == action::move_cancellation ||
        a == action::drop_cancellation) {
      if constexpr (has_slot) {
        if (a == action::is_cancelled_by) return self->cancellation == arg;
        if (a == action::drop_cancellation) {
          self->cancellation = nullptr;
        } else if (self->cancellation) {
          // Release: the destructor that sees a null owner may then free the memory.
          self->cancellation->owner.store(static_cast<wait_list*>(arg),
                                          std::memory_order_release);
        }
      } else {
        (void)arg;
      }
      return false;
    }
    if constexpr (!std::is_nothrow_move_constructible_v<Handler>) {
      // A destruction never throws (its callers destroy). If the handler's move throws,
      // take_handler destroys the op with the handler in it: all a destruction asks.
      if (a == action::destroy) {
        try {
          Handler handler(take_handler(self));
          [[maybe_unused]] auto work = self->take_work(); // released after the op
          free_op(self, handler);
        } catch (...) {
        }
        return false;
      }
    }
    // Move what the upcall needs out of the op and free its memory first.
    Handler handler(take_handler(self));
    auto work = self->take_work();
    const error_code ec = to_error_code(self->result());
    // free_op's body, spelled out: calling it here changed g++'s inlining in the
    // benchmark's timed loops (W1, W2), while this keeps their code as it was.
    auto release = [self, &handler] {
      auto alloc = rebind_alloc(op_allocator(handler));
      self->~handler_op();
      std::allocator_traits<decltype(alloc)>::deallocate(alloc, self, 1);
    };
    if (a != action::complete) {
      if (self->is_inline()) {
        // Destroyed without having been admitted (admit refused or undid it), still in
        // its owner's buffer, which is the owner's to reuse: nothing to free.
        self->~handler_op();
        return false;
      }
      release();
      return false;
    }
    // Completed only in memory of its own (see wheel_op::is_inline).
    assert(!self->is_inline());
    auto values = take_values_or_release(self, release);
    release();
    if constexpr (std::is_void_v<WorkExecutor>) {
      // A throw here leaves the step (wheel_shard::invoke requeues the rest).
      std::apply([&](auto&&... v) { std::move(handler)(ec, std::move(v)...); },
                 std::move(values));
      return false;
    } else {
      const dispatch_watch watch;
      std::apply(
          [&](auto&&... v) {
            net::dispatch(std::move(work),
                          bound_completion<Handler, error_code, std::decay_t<decltype(v)>...>{
                              std::move(handler), {ec, std::move(v)...}});
          },
          std::move(values));
      return watch.handler_threw();
    }
  }

  // The handler, moved out of the op (when that cannot throw, the handler itself as an
  // rvalue, for the caller to move). If the move throws, the op (the handler in it
  // included) is destroyed and its memory freed before the exception leaves: a step
  // then ends as if the handler had thrown, never invoked, as with Asio's own ops.
  static decltype(auto) take_handler(handler_op* self) {
    if constexpr (std::is_nothrow_move_constructible_v<Handler>) {
      return std::move(self->handler_);
    } else {
      try {
        return Handler(std::move(self->handler_));
      } catch (...) {
        free_op(self, self->handler_);
        throw;
      }
    }
  }

  // Destroys `self`, an op in memory of its own, and frees that memory through
  // `handler`'s allocator (the op's own handler, or the one moved out of it).
  static void free_op(handler_op* self, const Handler& handler) noexcept {
    assert(!self->is_inline());
    auto alloc = rebind_alloc(op_allocator(handler));
    self->~handler_op();
    std::allocator_traits<decltype(alloc)>::deallocate(alloc, self, 1);
  }

  // The op's values for the upcall. If making them throws (a delay_queue take that got
  // no element, whose T() throws), the op's memory goes back before the exception
  // leaves the step, and the handler, never invoked, is destroyed with it.
  template <class Release>
  static auto take_values_or_release(handler_op* self, Release& release) {
    if constexpr (noexcept(self->take_values())) {
      return self->take_values();
    } else {
      try {
        return self->take_values();
      } catch (...) {
        release();
        throw;
      }
    }
  }

  Handler handler_;
};

// Carries an op type into make_handler_op's generic lambda.
template <class T>
struct op_type {
  using type = T;
};

// Stands in for "no associated executor" when asking a handler for one.
struct no_associated_executor {};

// Whether a handler names an executor of its own, rather than taking the one it is given.
template <class Handler>
inline constexpr bool names_an_executor_v =
    !std::is_same_v<net::associated_executor_t<Handler, no_associated_executor>,
                    no_associated_executor>;

// Whether a handler names an executor that any_io_executor can hold (a TS executor
// wrapped by standard_executor), which is what the library keeps where it must store
// one (a cancel_after deadline's emission). Asio
// 1.22's use_future names a promise_executor, which has no context property: such a
// handler is treated there as naming none (the operation's I/O executor stands in).
template <class Handler>
inline constexpr bool names_an_io_executor_v =
    names_an_executor_v<Handler> &&
    std::is_convertible_v<
        standard_executor_t<net::associated_executor_t<Handler, no_associated_executor>>,
        net::any_io_executor>;

// Creates the operation for `handler`, to wait on `owner`, choosing inline delivery or
// dispatch by the handler's associated executor (defaulting to `io_ex`; a TS executor
// is wrapped by standard_executor, and tracks its work as on_work_started). The op goes
// into `inline_buffer` (the owner's, inline_op_bytes long, or null if none is free)
// when its type may live there.
template <class Base, class Handler, class IoExecutor>
Base* make_handler_op(Handler&& handler, wheel_shard& shard, wait_list& owner,
                      const IoExecutor& io_ex, void* inline_buffer = nullptr) {
  using handler_t = std::decay_t<Handler>;
  auto make = [&](auto type_of_op, auto&&... work) -> Base* {
    using op_t = typename decltype(type_of_op)::type;
    if constexpr (op_t::may_live_inline)
      if (inline_buffer)
        return op_t::create_inline(inline_buffer, std::forward<Handler>(handler), shard, owner,
                                   std::move(work)...);
    return op_t::create(std::forward<Handler>(handler), shard, owner, std::move(work)...);
  };
  auto create = [&](const auto& ex) -> Base* {
    if (runs_inline(ex, shard)) return make(op_type<handler_op<Base, handler_t, void>>{});
    auto work = net::prefer(ex, net::execution::outstanding_work.tracked);
    return make(op_type<handler_op<Base, handler_t, decltype(work)>>{}, std::move(work));
  };
  // Most handlers name no executor: then decide on io_ex itself, without the copy of
  // it (an any_io_executor) that get_associated_executor would return.
  if constexpr (!names_an_executor_v<handler_t>)
    return create(standard_executor(io_ex));
  else
    return create(standard_executor(net::get_associated_executor(handler, io_ex)));
}

} // namespace asio_wheel::detail

#endif
