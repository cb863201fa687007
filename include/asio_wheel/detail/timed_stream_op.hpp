// What a basic_timed_stream read or write hands to its next layer: the user's handler
// wrapped so that the stream's state learns of the completion (and turns it into
// error::timeout when the stream timed out meanwhile), and the completion of an
// operation that never reaches the next layer. Both keep every associated
// characteristic of the user's handler (executor, allocator, cancellation slot, and
// whatever else the Asio in use associates); the executor defaults to the stream's.
#ifndef ASIO_WHEEL_DETAIL_TIMED_STREAM_OP_HPP
#define ASIO_WHEEL_DETAIL_TIMED_STREAM_OP_HPP

#include <asio_wheel/detail/config.hpp>
#include <asio_wheel/detail/timed_stream_state.hpp>

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

// The handler the next layer completes: the user's, plus the stream's bookkeeping.
// Invoked by the next layer on the handler's associated executor, never inside the
// initiating function, so it calls the user's handler directly.
template <class Handler, class State>
class timed_stream_handler {
public:
  template <class H>
  timed_stream_handler(H&& h, std::shared_ptr<State> state, stream_direction d)
      : handler_(std::forward<H>(h)), state_(std::move(state)), direction_(d) {}

  timed_stream_handler(timed_stream_handler&&) = default; // the moved-from has no state
  timed_stream_handler& operator=(timed_stream_handler&&) = delete;
  // Destroyed without being invoked (its executor dropped it: a thread pool stopped and
  // destroyed with the completion queued, say): the direction is freed and the wait
  // released all the same, as after a completion, on the thread that destroys it, as
  // Beast's stream does. Otherwise every later operation of the direction failed with
  // already_started, and the wait held the context's work until its deadline closed a
  // stream with nothing in flight. A handler that ran, or was moved from, has no state.
  ~timed_stream_handler() {
    if (!state_) return;
    error_code unused;
    state_->end(direction_, unused);
    state_->after_upcall();
  }

  void operator()(error_code ec, std::size_t bytes_transferred) {
    // Taken out of state_, so that the destructor knows the handler ran; held here, it
    // keeps the state alive across the upcall, which may destroy the stream.
    const std::shared_ptr<State> held = std::move(state_);
    State& state = *held;
    state.end(direction_, ec);
    // Whatever the handler does (returns or throws), the wait is released if nothing
    // started from it needs it.
    struct after_upcall {
      State& state;
      ~after_upcall() { state.after_upcall(); }
    } guard{state};
    std::move(handler_)(ec, bytes_transferred);
  }

  const Handler& get() const noexcept { return handler_; }
  const typename State::executor_type& stream_executor() const noexcept {
    return state_->get_executor();
  }

private:
  Handler handler_;
  std::shared_ptr<State> state_;
  stream_direction direction_;
};

// An operation completed without reaching the next layer (timeout, already_started, a
// zero-byte operation): posted, so never inside the initiating function.
template <class Handler>
class immediate_completion {
public:
  template <class H>
  immediate_completion(H&& h, error_code ec) : handler_(std::forward<H>(h)), ec_(ec) {}

  void operator()() { std::move(handler_)(ec_, std::size_t(0)); }

  const Handler& get() const noexcept { return handler_; }

private:
  Handler handler_;
  error_code ec_;
};

// Starts a read or write on `sp`'s stream.
template <stream_direction Direction, class State, class Handler, class Buffers>
void start_stream_op(const std::shared_ptr<State>& sp, Handler&& handler, const Buffers& buffers) {
  State& state = *sp;
  auto complete_now = [&](error_code ec) {
    net::post(state.get_executor(),
              immediate_completion<std::decay_t<Handler>>(std::forward<Handler>(handler), ec));
  };
  // A zero-byte operation completes at once, with success (or timeout, once the stream
  // timed out), and takes no direction: an SSL stream issues one (an empty write) and
  // then the read or write it is there for, which must find its direction free. A
  // socket completes them at once too.
  if (net::buffer_size(buffers) == 0) {
    complete_now(state.times_out_now() ? error_code(error::timeout) : error_code());
    return;
  }
  switch (state.begin(Direction)) {
  case begin_result::go:
    break;
  case begin_result::timed_out:
    complete_now(error::timeout);
    return;
  case begin_result::busy:
    complete_now(net::error::already_started); // the caller's error
    return;
  }
  // Once built, the wrapped handler holds the direction: invoked, or destroyed unrun (by
  // a next layer that throws before taking it, say), it frees it. Only its construction
  // (the user's handler's move) is undone here. Undone again after the next layer threw,
  // the direction would be freed twice, or freed under a handler the layer kept.
  timed_stream_handler<std::decay_t<Handler>, State> wrapped = [&] {
    try {
      return timed_stream_handler<std::decay_t<Handler>, State>(std::forward<Handler>(handler),
                                                                sp, Direction);
    } catch (...) {
      state.abandon(Direction);
      throw;
    }
  }();
  if constexpr (Direction == stream_direction::read) {
    state.next_layer().async_read_some(buffers, std::move(wrapped));
  } else {
    state.next_layer().async_write_some(buffers, std::move(wrapped));
  }
}

} // namespace asio_wheel::detail

ASIO_WHEEL_ASIO_NAMESPACE_BEGIN

// Every associated characteristic is the user's handler's...
template <template <class, class> class Associator, class Handler, class State,
          class DefaultCandidate>
struct associator<Associator, asio_wheel::detail::timed_stream_handler<Handler, State>,
                  DefaultCandidate> : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(
      const asio_wheel::detail::timed_stream_handler<Handler, State>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.get());
  }

  static auto get(const asio_wheel::detail::timed_stream_handler<Handler, State>& h,
                  const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.get(), c)) {
    return Associator<Handler, DefaultCandidate>::get(h.get(), c);
  }
};

// ... and the executor defaults to the stream's, not the next layer's (they may differ
// in type: basic_timed_stream<tcp::socket, strand<...>>).
template <class Handler, class State, class DefaultCandidate>
struct associator<associated_executor, asio_wheel::detail::timed_stream_handler<Handler, State>,
                  DefaultCandidate> {
  using type = associated_executor_t<Handler, typename State::executor_type>;

  static type get(const asio_wheel::detail::timed_stream_handler<Handler, State>& h) noexcept {
    return get_associated_executor(h.get(), h.stream_executor());
  }

  static type get(const asio_wheel::detail::timed_stream_handler<Handler, State>& h,
                  const DefaultCandidate&) noexcept {
    return get_associated_executor(h.get(), h.stream_executor());
  }
};

template <template <class, class> class Associator, class Handler, class DefaultCandidate>
struct associator<Associator, asio_wheel::detail::immediate_completion<Handler>, DefaultCandidate>
    : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(
      const asio_wheel::detail::immediate_completion<Handler>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.get());
  }

  static auto get(const asio_wheel::detail::immediate_completion<Handler>& h,
                  const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.get(), c)) {
    return Associator<Handler, DefaultCandidate>::get(h.get(), c);
  }
};

ASIO_WHEEL_ASIO_NAMESPACE_END

#endif
