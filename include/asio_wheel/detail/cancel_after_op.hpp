// What cancel_after wraps around an operation: the handler the operation sees (the
// user's, plus the deadline it ends) and the initiation that starts the deadline. The
// deadline itself is a deadline_state (deadline_state.hpp).
#ifndef ASIO_WHEEL_DETAIL_CANCEL_AFTER_OP_HPP
#define ASIO_WHEEL_DETAIL_CANCEL_AFTER_OP_HPP

#include <asio_wheel/detail/config.hpp>
#include <asio_wheel/detail/context_executor.hpp>
#include <asio_wheel/detail/deadline_state.hpp>
#include <asio_wheel/detail/handler_op.hpp>
#include <asio_wheel/detail/legacy_executor.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace asio_wheel {
namespace detail {

// The user's slot, when connected, forwards into the operation's, as a firing of the
// deadline's own (deadline_state::emit_forwarded): a completion meanwhile waits for it.
struct forward_cancellation {
  deadline_state* state;
  void operator()(net::cancellation_type t) const { state->emit_forwarded(t); }
};

// The handler the operation sees: the user's, plus the deadline it ends.
template <class Handler>
class cancel_after_handler {
public:
  using cancellation_slot_type = net::cancellation_slot;

  // `s` is fresh from the initiation, shared with no one yet (add_handler_ref).
  template <class H>
  cancel_after_handler(H&& h, deadline_state* s) : handler_(std::forward<H>(h)), state_(s) {
    state_->add_handler_ref();
  }

  cancel_after_handler(cancel_after_handler&& o) noexcept(
      std::is_nothrow_move_constructible_v<Handler>)
      : handler_(std::move(o.handler_)), state_(std::exchange(o.state_, nullptr)) {}
  cancel_after_handler& operator=(cancel_after_handler&&) = delete;

  // Destroyed without being invoked (shutdown, a failed initiation): the deadline ends.
  ~cancel_after_handler() {
    if (state_) end_unrun();
  }

  // The operation's slot: our signal's.
  cancellation_slot_type get_cancellation_slot() const noexcept {
    return state_ ? state_->signal.slot() : cancellation_slot_type();
  }

  // Forwards the user's slot (if connected) to the operation's.
  void forward_user_slot() {
    auto slot = net::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.template emplace<forward_cancellation>(forward_cancellation{state_});
  }

  // The deadline ends first; if the shard is left idle by it, the idle actions wait
  // until the user's handler has returned (or thrown): a request loop puts its next
  // deadline on the wheel there, and would otherwise pay a posted disarm and a drop
  // and retake of the context's work on every request.
  //
  // Completed while a firing of the deadline is under way (queued, running elsewhere, or
  // the one this completion happens inside): the handler runs when the firing ends (see
  // deadline_state.hpp).
  template <class... Args>
  void operator()(Args&&... args) {
    deadline_state* const s = state_;
    const deadline_state::finished f = end(true);
    if (f.wait) {
      defer(s, std::forward<Args>(args)...);
      return;
    }
    struct settle_after_handler {
      wheel_shard* shard;
      ~settle_after_handler() {
        if (shard) shard->settle_idle();
      }
    } settle{f.settle};
    std::move(handler_)(std::forward<Args>(args)...);
  }

  const Handler& get() const noexcept { return handler_; }

private:
  template <class... Args>
  struct deferred;

  // finish() left the handler's ref on `s` for a firing under way: moves this handler
  // (with `s` and that ref) and the arguments into a deferred completion, allocated with
  // the handler's allocator, that the last firing runs when it ends; if the firings ended
  // meanwhile, runs it now. Its run finishes the deadline again, this time for good.
  // If that allocation throws, the handler runs at once and the state is freed after it
  // (the one case where it outlives the upcall). If a move throws, the memory goes back
  // and the exception leaves the upcall, the handler never invoked, as when Asio's own
  // ops cannot move a handler; the deadline still ends (with this object, or with the
  // half-built one if the handler had moved).
  template <class... Args>
  void defer(deadline_state* s, Args&&... args) {
    using impl = deferred<std::decay_t<Args>...>;
    typename impl::alloc_type alloc(op_allocator(handler_));
    impl* p = nullptr;
    try {
      p = std::allocator_traits<typename impl::alloc_type>::allocate(alloc, 1);
    } catch (...) {
    }
    if (p == nullptr) {
      s->release();
      std::move(handler_)(std::forward<Args>(args)...);
      return;
    }
    state_ = s; // the ref goes with the handler
    try {
      ::new (static_cast<void*>(p)) impl(std::move(*this), std::forward<Args>(args)...);
    } catch (...) {
      std::allocator_traits<typename impl::alloc_type>::deallocate(alloc, p, 1);
      throw;
    }
    if (!s->defer_completion(*p)) p->run(p, true);
  }

  // Unhooks the user's slot, then the deadline (deadline_state::finish says what comes
  // back). Without a completion to put off (the handler destroyed unrun), a firing under
  // way gives the state back when it ends.
  deadline_state::finished end(bool may_settle_later = false) noexcept {
    auto slot = net::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
    return std::exchange(state_, nullptr)->finish(may_settle_later);
  }
  void end_unrun() noexcept {
    deadline_state* const s = state_;
    if (end().wait) s->release();
  }

  Handler handler_;
  deadline_state* state_;
};

// A completion put off until the deadline's firings have ended, with its arguments.
template <class Handler>
template <class... Args>
struct cancel_after_handler<Handler>::deferred final : deferred_completion {
  using alloc_type = typename std::allocator_traits<
      decltype(op_allocator(std::declval<const Handler&>()))>::template rebind_alloc<deferred>;

  template <class... A>
  deferred(cancel_after_handler&& h, A&&... a)
      : deferred_completion(&deferred::run_it),
        handler(std::move(h)),
        args(std::forward<A>(a)...) {}

  // Frees this object first (Asio's rule: the handler's memory before its upcall),
  // then invokes the handler the usual way, which ends the deadline first; or, with
  // invoke false, destroys it, which ends the deadline too.
  static void run_it(deferred_completion* base, bool invoke) {
    auto* self = static_cast<deferred*>(base);
    if constexpr (std::is_nothrow_move_constructible_v<cancel_after_handler> &&
                  std::is_nothrow_move_constructible_v<std::tuple<Args...>>) {
      cancel_after_handler h(std::move(self->handler));
      std::tuple<Args...> a(std::move(self->args));
      alloc_type alloc(op_allocator(h.get()));
      self->~deferred();
      std::allocator_traits<alloc_type>::deallocate(alloc, self, 1);
      if (invoke) invoke_on_its_executor(std::move(h), std::move(a));
    } else {
      // A move may throw: then this object is destroyed where it is (the deadline ends
      // with its handler) and freed, and the exception leaves, unless nothing was to be
      // invoked (the caller is then a destructor). The branch above is this one without
      // the optionals' flags, for the usual handler.
      std::optional<cancel_after_handler> h;
      std::optional<std::tuple<Args...>> a;
      try {
        h.emplace(std::move(self->handler));
        a.emplace(std::move(self->args));
      } catch (...) {
        destroy_and_free(self, self->handler);
        if (invoke) throw;
        return;
      }
      destroy_and_free(self, *h);
      if (invoke) invoke_on_its_executor(std::move(*h), std::move(*a));
    }
  }

  // Invokes `h` with `a` on the handler's associated executor: inline where the firing
  // that ran this completion ran (the handler's executor, or the I/O executor for a
  // handler that names none), else through dispatch: a handler bound to another
  // context, whose deadline is emitted on the operation's context.
  static void invoke_on_its_executor(cancel_after_handler&& h, std::tuple<Args...>&& a) {
    auto call = [](cancel_after_handler& target, std::tuple<Args...>& values) {
      std::apply([&target](auto&&... v) { std::move(target)(std::move(v)...); }, std::move(values));
    };
    if constexpr (!names_an_executor_v<Handler>) {
      call(h, a);
    } else {
      const auto ex = net::get_associated_executor(h.get());
      net::dispatch(ex, [call, h = std::move(h), a = std::move(a)]() mutable { call(h, a); });
    }
  }

  // Destroys `self` and frees its memory with `h`'s allocator (its own handler's, or
  // the one moved out of it).
  static void destroy_and_free(deferred* self, const cancel_after_handler& h) noexcept {
    alloc_type alloc(op_allocator(h.get()));
    self->~deferred();
    std::allocator_traits<alloc_type>::deallocate(alloc, self, 1);
  }

  cancel_after_handler handler;
  std::tuple<Args...> args;
};

// The executor whose context's wheel holds the deadline: the operation's I/O executor,
// else the one the handler names. With neither there is no context to put the deadline
// on, and no safe place to emit the cancellation (a default such as system_executor
// would emit on a thread of its own, racing the operation), so that does not compile.
template <class Initiation, class Handler>
net::any_io_executor deadline_executor(const Initiation& init, const Handler& h) {
  if constexpr (has_get_executor<const Initiation>::value) {
    return standard_executor(init.get_executor());
  } else {
    static_assert(names_an_io_executor_v<Handler>,
                  "asio_wheel::cancel_after/cancel_at: the operation has no I/O executor "
                  "and the handler names none that any_io_executor can hold (Asio "
                  "1.22's use_future names one it cannot): bind one (bind_executor) to say "
                  "which context's wheel holds the deadline and where it is emitted. "
                  "(Older Asio's adapters, such as bind_executor, redirect_error or "
                  "as_tuple, hide the operation's executor when they wrap cancel_after: "
                  "put them inside it, cancel_after(d, bind_executor(ex, handler)).)");
    return standard_executor(net::get_associated_executor(h));
  }
}

// Where the deadline is emitted: on the handler's associated executor (its strand,
// say), so that the emission never overlaps the operation's own steps on it, as with
// Boost.Asio's cancel_after; with none, on the operation's I/O executor `io_ex`, whose
// context holds the deadline. Also when the handler's executor belongs to another
// context: a queued emission holds the deadline's shard, which goes with its own
// context, and another context could keep the emission queued beyond that. And for a
// handler whose executor any_io_executor cannot hold (names_an_io_executor_v).
template <class Handler>
net::any_io_executor emission_executor(const Handler& h, net::any_io_executor&& io_ex) {
  if constexpr (!names_an_io_executor_v<Handler>) {
    return std::move(io_ex);
  } else {
    net::any_io_executor bound = standard_executor(net::get_associated_executor(h, io_ex));
    if (&net::query(bound, net::execution::context) != &net::query(io_ex, net::execution::context))
      return std::move(io_ex);
    return bound;
  }
}

// Wraps the operation's initiation: starts the deadline around it.
template <class Initiation>
class initiate_cancel_after {
public:
  template <class I>
  initiate_cancel_after(I&& init, deadline_spec spec, net::cancellation_type type)
      : initiation_(std::forward<I>(init)), spec_(spec), type_(type) {}

  // For adapters further out that look for the I/O executor.
  template <class I = Initiation>
  auto get_executor() const noexcept -> decltype(std::declval<const I&>().get_executor()) {
    return initiation_.get_executor();
  }

  template <class Handler, class... Args>
  void operator()(Handler&& handler, Args&&... args) && {
    launch(std::move(initiation_), std::forward<Handler>(handler), std::forward<Args>(args)...);
  }

  template <class Handler, class... Args>
  void operator()(Handler&& handler, Args&&... args) const& {
    launch(initiation_, std::forward<Handler>(handler), std::forward<Args>(args)...);
  }

private:
  template <class Init, class Handler, class... Args>
  void launch(Init&& init, Handler&& handler, Args&&... args) const {
    net::any_io_executor ex = deadline_executor(init, handler);
    wheel_shard& shard = shard_for(ex);
    const auto deadline = spec_.resolve(shard);
    // The initiation's ref keeps the state alive until the entry is armed, whatever
    // the operation does meanwhile (it may even complete on another thread).
    deadline_state* s = deadline_state_impl<decltype(op_allocator(handler))>::create(
        op_allocator(handler), shard, emission_executor(handler, std::move(ex)), type_);
    struct release_if_thrown {
      deadline_state* s;
      ~release_if_thrown() {
        if (s) s->release();
      }
    } initiation_ref{s};
    cancel_after_handler<std::decay_t<Handler>> wrapped(std::forward<Handler>(handler), s);
    wrapped.forward_user_slot();
    std::forward<Init>(init)(std::move(wrapped), std::forward<Args>(args)...);
    // The operation has started: from here nothing throws.
    initiation_ref.s = nullptr;
    s->arm_and_release(deadline); // gives the initiation's ref back
  }

  Initiation initiation_;
  deadline_spec spec_;
  net::cancellation_type type_;
};

} // namespace detail
} // namespace asio_wheel

ASIO_WHEEL_ASIO_NAMESPACE_BEGIN

// Every associated characteristic but the cancellation slot (which the handler has
// as a member) is the user's handler's.
template <template <class, class> class Associator, class Handler, class DefaultCandidate>
struct associator<Associator, asio_wheel::detail::cancel_after_handler<Handler>, DefaultCandidate>
    : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(
      const asio_wheel::detail::cancel_after_handler<Handler>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.get());
  }

  static auto get(const asio_wheel::detail::cancel_after_handler<Handler>& h,
                  const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.get(), c)) {
    return Associator<Handler, DefaultCandidate>::get(h.get(), c);
  }
};

ASIO_WHEEL_ASIO_NAMESPACE_END

#endif
