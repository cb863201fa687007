// cancel_after / cancel_at: a per-operation deadline for any Asio asynchronous
// operation that supports per-operation cancellation, as one wheel entry.
//
//   co_await sock.async_read_some(buf, asio_wheel::cancel_after(5s, use_awaitable));
//   timer.async_wait(asio_wheel::cancel_at(t, [](error_code ec) { ... }));
//
// The adapter wraps the completion handler. On initiation it puts one entry on the
// wheel of the operation's I/O executor's context (the initiation's get_executor(),
// else the handler's associated executor) and gives the operation a cancellation slot
// of its own. If the operation has not completed by the deadline, that slot is emitted
// with the cancellation type (terminal by default) on the I/O executor; when the
// operation completes, the entry is removed in O(1) before the handler runs.
//
// The handler's associated executor and allocator are kept (the deadline's state is
// allocated from that allocator); its own cancellation slot, if connected, keeps
// working: an emission there is forwarded to the operation.
//
// Thread safety: the operation may complete on any thread, also while the deadline
// fires on another: the handler runs exactly once, an emission never starts once the
// operation has completed and never overlaps the handler (see detail/deadline_state).
// A deadline refused by max_pending counts as passed (the operation is cancelled at
// once); after the wheel's shutdown, operations run without a deadline.
//
// Unlike Boost 1.86's asio::cancel_after (a steady_timer per operation), this needs no
// timer object and works with Boost 1.81.
#ifndef ASIO_WHEEL_CANCEL_AFTER_HPP
#define ASIO_WHEEL_CANCEL_AFTER_HPP

#include <asio_wheel/detail/deadline_state.hpp>
#include <asio_wheel/detail/handler_op.hpp>
#include <asio_wheel/wheel_service.hpp>

#include <asio_wheel/detail/config.hpp>

#include <chrono>
#include <type_traits>
#include <utility>

namespace asio_wheel {

// The completion token made by cancel_after/cancel_at: `token` with a deadline.
template <class Token>
class cancel_after_t {
public:
  template <class T>
  cancel_after_t(T&& t, detail::deadline_spec when, net::cancellation_type what)
      : token(std::forward<T>(t)), spec(when), type(what) {}

  Token token;                         // the token the operation completes with
  detail::deadline_spec spec;          // when to cancel
  net::cancellation_type type; // what to emit
};

namespace detail {

// d as a steady_clock duration, rounded up (never early) and saturated (a huge d means
// never, not an overflow).
template <class Rep, class Period>
wheel_service::duration to_wheel_duration(const std::chrono::duration<Rep, Period>& d) {
  using target = wheel_service::duration;
  using wide = std::chrono::duration<long double, std::nano>;
  const wide w = d;
  if (w >= wide(target::max())) return target::max();
  if (w <= wide(target::min())) return target::min();
  return std::chrono::ceil<target>(d);
}

} // namespace detail

// Argument-dependent lookup: with Boost 1.86 and later, boost::asio::cancel_after and
// cancel_at exist and are found whenever a token from boost::asio is passed. So ours
// take exactly the parameters theirs do, and in C++20 carry a constraint, which makes
// them the more specialized candidates: `using asio_wheel::cancel_after;
// cancel_after(5s, use_awaitable)` selects asio_wheel's. Without concepts (C++17) the
// two are ambiguous and the call does not compile; it never picks Boost's in silence.
// Qualified calls (asio_wheel::cancel_after) always work. cancel_at takes steady_clock
// time points only, more specialized than Boost's any-clock version in both modes.
#if defined(__cpp_concepts)
#define ASIO_WHEEL_PREFERRED_OVERLOAD requires true
#else
#define ASIO_WHEEL_PREFERRED_OVERLOAD
#endif

// Cancels the operation (type `t`) if it has not completed `d` after its initiation.
template <class Rep, class Period, class Token>
ASIO_WHEEL_PREFERRED_OVERLOAD auto cancel_after(const std::chrono::duration<Rep, Period>& d,
                                                net::cancellation_type t, Token&& token) {
  return cancel_after_t<std::decay_t<Token>>(
      std::forward<Token>(token), detail::deadline_spec{true, detail::to_wheel_duration(d), {}},
      t);
}

template <class Rep, class Period, class Token>
ASIO_WHEEL_PREFERRED_OVERLOAD auto cancel_after(const std::chrono::duration<Rep, Period>& d,
                                                Token&& token) {
  return asio_wheel::cancel_after(d, net::cancellation_type::terminal, std::forward<Token>(token));
}

// The partial form, as Boost's: the operation completes with the default completion
// token of any_io_executor (`deferred` in newer Asio).
template <class Rep, class Period>
ASIO_WHEEL_PREFERRED_OVERLOAD auto cancel_after(
    const std::chrono::duration<Rep, Period>& d,
    net::cancellation_type t = net::cancellation_type::terminal) {
  return asio_wheel::cancel_after(d, t, net::default_completion_token_t<net::any_io_executor>());
}

// Cancels the operation (type `c`) if it has not completed at time `t`.
template <class Token, class Duration>
auto cancel_at(const std::chrono::time_point<std::chrono::steady_clock, Duration>& t,
               net::cancellation_type c, Token&& token) {
  const wheel_service::time_point at(detail::to_wheel_duration(t.time_since_epoch()));
  return cancel_after_t<std::decay_t<Token>>(std::forward<Token>(token),
                                             detail::deadline_spec{false, {}, at}, c);
}

template <class Token, class Duration>
auto cancel_at(const std::chrono::time_point<std::chrono::steady_clock, Duration>& t,
               Token&& token) {
  return asio_wheel::cancel_at(t, net::cancellation_type::terminal, std::forward<Token>(token));
}

namespace detail {

// The user's slot, when connected, forwards into the operation's.
struct forward_cancellation {
  deadline_state* state;
  void operator()(net::cancellation_type t) const { state->signal.emit(t); }
};

// The handler the operation sees: the user's, plus the deadline it ends.
template <class Handler>
class cancel_after_handler {
public:
  using cancellation_slot_type = net::cancellation_slot;

  template <class H>
  cancel_after_handler(H&& h, deadline_state* s) : handler_(std::forward<H>(h)), state_(s) {
    state_->add_ref();
  }

  cancel_after_handler(cancel_after_handler&& o) noexcept(
      std::is_nothrow_move_constructible_v<Handler>)
      : handler_(std::move(o.handler_)), state_(std::exchange(o.state_, nullptr)) {}
  cancel_after_handler& operator=(cancel_after_handler&&) = delete;

  // Destroyed without being invoked (shutdown, a failed initiation): the deadline ends.
  ~cancel_after_handler() {
    if (state_) end();
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

  template <class... Args>
  void operator()(Args&&... args) {
    end();
    std::move(handler_)(std::forward<Args>(args)...);
  }

  const Handler& get() const noexcept { return handler_; }

private:
  // Unhooks the user's slot, then the deadline (which may wait out an emission).
  void end() noexcept {
    auto slot = net::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
    std::exchange(state_, nullptr)->finish();
  }

  Handler handler_;
  deadline_state* state_;
};

// The executor whose context's wheel holds the deadline and on which it is emitted:
// the operation's I/O executor, else the one the handler names. With neither there is
// no context to put the deadline on, and no safe place to emit the cancellation (a
// default such as system_executor would emit on a thread of its own, racing the
// operation), so that does not compile.
template <class Initiation, class Handler>
net::any_io_executor deadline_executor(const Initiation& init, const Handler& h) {
  if constexpr (has_get_executor<const Initiation>::value) {
    return init.get_executor();
  } else {
    static_assert(!std::is_same_v<net::associated_executor_t<Handler, no_associated_executor>,
                                  no_associated_executor>,
                  "asio_wheel::cancel_after/cancel_at: the operation has no I/O executor "
                  "and the handler names none: bind one (bind_executor) to say "
                  "which context's wheel holds the deadline and where it is emitted");
    return net::get_associated_executor(h);
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
    wheel_service& svc = detail::use_wheel(ex);
    const auto deadline = spec_.resolve(svc);
    // The initiation's ref keeps the state alive until the entry is armed, whatever
    // the operation does meanwhile (it may even complete on another thread).
    deadline_state* s = deadline_state_impl<decltype(op_allocator(handler))>::create(
        op_allocator(handler), svc, ex, type_);
    struct release_on_exit {
      deadline_state* s;
      ~release_on_exit() { s->release(); }
    } initiation_ref{s};
    cancel_after_handler<std::decay_t<Handler>> wrapped(std::forward<Handler>(handler), s);
    wrapped.forward_user_slot();
    std::forward<Init>(init)(std::move(wrapped), std::forward<Args>(args)...);
    s->arm(deadline);
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

// cancel_after_t<Token> completes as Token does, with the deadline around the operation.
template <class Token, class... Signatures>
struct async_result<asio_wheel::cancel_after_t<Token>, Signatures...>
    : async_result<Token, Signatures...> {
  template <class RawToken>
  using inner_token = std::conditional_t<std::is_const_v<std::remove_reference_t<RawToken>>,
                                         const Token, Token>;

  // The return type is spelled out, not deduced: Asio's completion_token_for checks
  // call this with an archetype initiation, and deducing would instantiate the
  // initiation's body (and its static_asserts) for that archetype.
  template <class Initiation, class RawToken, class... Args>
  static auto initiate(Initiation&& initiation, RawToken&& token, Args&&... args)
      -> decltype(async_initiate<inner_token<RawToken>, Signatures...>(
          std::declval<asio_wheel::detail::initiate_cancel_after<std::decay_t<Initiation>>>(),
          std::declval<inner_token<RawToken>&>(), std::declval<Args>()...)) {
    return async_initiate<inner_token<RawToken>, Signatures...>(
        asio_wheel::detail::initiate_cancel_after<std::decay_t<Initiation>>(
            std::forward<Initiation>(initiation), token.spec, token.type),
        token.token, std::forward<Args>(args)...);
  }
};

ASIO_WHEEL_ASIO_NAMESPACE_END

#endif
