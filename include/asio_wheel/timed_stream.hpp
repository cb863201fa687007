// basic_timed_stream: a stream with timeouts (Beast's basic_stream rule) on the wheel.
//
//   asio_wheel::timed_stream s(std::move(accepted_socket));
//   s.expires_after(30s);
//   boost::beast::http::async_read(s, buffer, request, handler);  // or net::async_read, ...
//
// An AsyncReadStream and AsyncWriteStream over any next layer that is one (a TCP or
// local socket, an ssl::stream, Beast's test stream) and that can be closed (close(ec)
// or close(), its own or its lowest or next layer's), usable under Beast's http and
// websocket, inside or around an ssl::stream, and with net::async_read/async_write. It
// needs no Beast header.
//
// Semantics, as Beast's basic_stream:
// - expires_after/expires_at/expires_never set the deadline of the reads and writes
//   started *after* the call; an operation in flight keeps the deadline it started
//   with.
// - When the deadline of an operation in flight passes, the stream times out: every
//   operation in flight (both directions) completes with asio_wheel::error::timeout
//   (whose condition is errc::timed_out), with the bytes it had transferred, and the next
//   layer is closed. Operations started afterwards complete with error::timeout, without
//   reaching the next layer, until a new expiry is set. An operation started after its
//   expiry has passed times the stream out the same way.
// - cancel(): operations in flight complete with operation_aborted (the next layer's
//   cancel). close(): the next layer is closed; operations in flight complete with
//   operation_aborted. Neither affects the expiry.
// - Per-operation cancellation: the handler's cancellation slot goes to the next
//   layer's operation, so emitting it cancels that one operation (terminal, partial or
//   total, as the next layer supports) and not the other direction.
// - One read and one write may be in flight at a time. A second one of the same
//   direction completes with net::error::already_started. A zero-byte operation never
//   reaches the next layer and takes no direction: it completes at once with success
//   (SSL streams issue those beside their real reads and writes), or with timeout once
//   the stream timed out. Both as if by post.
// - A deadline the wheel refuses (the service's max_pending reached) cannot be kept, so
//   it counts as passed: the operation times out, as a refused cancel_after deadline
//   cancels its operation.
// - Handlers are never invoked inside the initiating function; they run on their
//   associated executor (default: the stream's), and their associated allocator and
//   other characteristics go to the next layer's operation. Any completion token.
//
// Costs: one wheel entry (an asio_wheel::basic_timer) per stream. Starting or
// completing an operation with a deadline moves the entry with reset_at: O(1), no
// allocation, no handler. The entry's wait is started when an operation with a deadline
// starts and no wait is outstanding, and cancelled when none is in flight after a
// completion handler returns, so operations that chain from their handlers (a composed
// read, read then write) share one wait. expires_after reads the wheel's clock
// (steady_clock, or the manual clock's virtual time); so does starting an operation
// with a finite expiry.
//
// Differences from Beast's basic_stream: the deadline of each direction lives on one
// wheel entry, not on one steady_timer each; when the stream times out, the operation of
// the other direction completes with timeout too (Beast: whatever the closed socket
// reports); a second operation of one direction in flight is an error code, not an
// assertion; expiry() reports the expiry in force; no rate limiting and no
// async_connect (connect the socket() or next_layer() itself).
//
// websocket::stream<basic_timed_stream<...>> needs, as for any user-defined next layer,
// the two teardown overloads Beast looks up (see README, "asio_wheel::timed_stream");
// they forward to the next layer's.
//
// Thread safety: as Beast's basic_stream and Asio's sockets, one stream must not be used
// from two threads at once. The stream's timeout runs on the stream's executor and the
// completions on their handlers' executors: with several threads running the context,
// give the stream (its next layer) a strand and keep the handlers on it. The stream must
// be destroyed before its execution context.
#ifndef ASIO_WHEEL_TIMED_STREAM_HPP
#define ASIO_WHEEL_TIMED_STREAM_HPP

#include <asio_wheel/detail/timed_stream_op.hpp>
#include <asio_wheel/detail/timed_stream_state.hpp>

#include <asio_wheel/detail/config.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

namespace asio_wheel {

template <class NextLayer, class Executor = typename NextLayer::executor_type>
class basic_timed_stream
    : public detail::timed_stream_lowest_layer<basic_timed_stream<NextLayer, Executor>, NextLayer> {
  using state_type = detail::timed_stream_state<NextLayer, Executor>;

public:
  using next_layer_type = NextLayer;
  using executor_type = Executor;
  using clock_type = std::chrono::steady_clock;
  using duration = clock_type::duration;
  using time_point = clock_type::time_point;

  static_assert(std::is_constructible_v<executor_type, typename NextLayer::executor_type>,
                "asio_wheel::basic_timed_stream: Executor must be constructible from the next "
                "layer's executor");

  // Constructs the next layer from the arguments, e.g. (io_context&), (executor),
  // (ssl::stream's (socket&&, ssl::context&)). No expiry: operations never time out.
  template <class... Args,
            std::enable_if_t<std::is_constructible_v<NextLayer, Args&&...> &&
                                 !(sizeof...(Args) == 1 &&
                                   (std::is_same_v<std::decay_t<Args>, basic_timed_stream> && ...)),
                             int> = 0>
  explicit basic_timed_stream(Args&&... next_layer_args)
      : state_(std::make_shared<state_type>(std::forward<Args>(next_layer_args)...)) {}

  // Takes over a next layer, e.g. an accepted tcp::socket.
  explicit basic_timed_stream(NextLayer&& next)
      : state_(std::make_shared<state_type>(std::move(next))) {}

  // The same stream on another executor type (net::use_awaitable_t<>::as_default_on
  // and the like rebind it), as Beast's basic_stream and Asio's I/O objects offer.
  template <class OtherExecutor>
  struct rebind_executor {
    using other = basic_timed_stream<NextLayer, OtherExecutor>;
  };

  // The next layer, the executor (a strand stays the same strand) and the expiry move
  // over, a timeout too (operations fail with timeout until a new expiry is set);
  // `other` is left with a next layer in its moved-from state (a socket: closed) and no
  // expiry. Operations in flight on `other` should have completed first (as with
  // Beast's basic_stream): they go on with the next layer, which no deadline closes any
  // more, since `other`'s would close only what is left in `other`.
  basic_timed_stream(basic_timed_stream&& other) : basic_timed_stream(take_from, other) {}

  // The same from a stream on another executor type that ours is constructible from
  // (the new stream's executor is made from the other's).
  template <class OtherExecutor,
            std::enable_if_t<!std::is_same_v<OtherExecutor, Executor> &&
                                 std::is_constructible_v<Executor, const OtherExecutor&>,
                             int> = 0>
  basic_timed_stream(basic_timed_stream<NextLayer, OtherExecutor>&& other)
      : basic_timed_stream(take_from, other) {}

  basic_timed_stream(const basic_timed_stream&) = delete;
  basic_timed_stream& operator=(const basic_timed_stream&) = delete;
  basic_timed_stream& operator=(basic_timed_stream&&) = delete;

  // Closes the next layer, so that operations in flight complete (operation_aborted)
  // promptly; the shared state lives until the last has.
  ~basic_timed_stream() { state_->close_next_layer(); }

  executor_type get_executor() noexcept { return state_->get_executor(); }

  next_layer_type& next_layer() noexcept { return state_->next_layer(); }
  const next_layer_type& next_layer() const noexcept { return state_->next_layer(); }

  // The socket, when the next layer is a net::basic_stream_socket (tcp, local).
  template <class T = NextLayer,
            std::enable_if_t<detail::is_basic_stream_socket<T>::value, int> = 0>
  T& socket() noexcept {
    return state_->next_layer();
  }

  // The next layer's lowest layer, where it has one (ssl::stream looks for it); else
  // this stream.
  template <class T = NextLayer>
  auto lowest_layer() noexcept -> decltype(std::declval<T&>().lowest_layer()) {
    return state_->next_layer().lowest_layer();
  }
  template <class T = NextLayer>
  auto lowest_layer() const noexcept -> decltype(std::declval<const T&>().lowest_layer()) {
    return state_->next_layer().lowest_layer();
  }
  template <class T = NextLayer,
            std::enable_if_t<!detail::has_lowest_layer_fn<T>::value, int> = 0>
  basic_timed_stream& lowest_layer() noexcept {
    return *this;
  }
  template <class T = NextLayer,
            std::enable_if_t<!detail::has_lowest_layer_fn<T>::value, int> = 0>
  const basic_timed_stream& lowest_layer() const noexcept {
    return *this;
  }

  // The deadline of the operations started from now on: now + d by the wheel's clock,
  // saturated (duration::max() means never, a negative d already passed). Operations
  // in flight keep theirs. Clears a timeout.
  void expires_after(duration d) { state_->set_expiry(state_->deadline_after(d)); }

  // The same with an absolute time; time_point::max() means never.
  void expires_at(time_point t) { state_->set_expiry(t); }

  // Operations started from now on have no deadline. Clears a timeout.
  void expires_never() { state_->set_expiry(state_type::never()); }

  // The deadline operations started now would get (time_point::max(): none).
  time_point expiry() const noexcept { return state_->expiry(); }

  // Operations in flight complete with operation_aborted (the next layer's cancel).
  void cancel() { state_->cancel_next_layer(); }

  // Closes the next layer (its lowest layer for an ssl::stream); operations in flight
  // complete with operation_aborted. Errors are ignored, as Beast's close does.
  void close() { state_->close_next_layer(); }

  // Reads some data into `buffers`. Completion signature
  // void(error_code, std::size_t bytes_transferred).
  template <class MutableBufferSequence,
            class ReadToken = net::default_completion_token_t<executor_type>>
  auto async_read_some(const MutableBufferSequence& buffers,
                       ReadToken&& token = net::default_completion_token_t<executor_type>()) {
    static_assert(net::is_mutable_buffer_sequence<MutableBufferSequence>::value,
                  "asio_wheel::basic_timed_stream::async_read_some needs a MutableBufferSequence");
    return net::async_initiate<ReadToken, void(error_code, std::size_t)>(
        initiate<detail::stream_direction::read>(this), token, buffers);
  }

  // Writes some data from `buffers`. Completion signature
  // void(error_code, std::size_t bytes_transferred).
  template <class ConstBufferSequence,
            class WriteToken = net::default_completion_token_t<executor_type>>
  auto async_write_some(const ConstBufferSequence& buffers,
                        WriteToken&& token = net::default_completion_token_t<executor_type>()) {
    static_assert(net::is_const_buffer_sequence<ConstBufferSequence>::value,
                  "asio_wheel::basic_timed_stream::async_write_some needs a ConstBufferSequence");
    return net::async_initiate<WriteToken, void(error_code, std::size_t)>(
        initiate<detail::stream_direction::write>(this), token, buffers);
  }

private:
  template <class, class>
  friend class basic_timed_stream;

  // The moves: a new state around other's next layer, on other's executor (as Asio's
  // I/O objects' moves keep theirs), with other's expiry and timeout.
  struct take_from_t {};
  static constexpr take_from_t take_from{};
  template <class Other>
  basic_timed_stream(take_from_t, Other& other)
      : state_(std::make_shared<state_type>(detail::keep_executor,
                                            Executor(other.state_->get_executor()),
                                            std::move(other.state_->next_layer()))) {
    state_->take_expiry_of(*other.state_);
    other.state_->set_expiry(other.state_->never());
    other.state_->forget_deadlines();
  }

  // The initiation object, with the I/O executor that adapters (cancel_after,
  // as_default_on...) look for.
  template <detail::stream_direction Direction>
  class initiate {
  public:
    using executor_type = Executor;

    explicit initiate(basic_timed_stream* self) noexcept : self_(self) {}

    executor_type get_executor() const noexcept { return self_->get_executor(); }

    template <class Handler, class Buffers>
    void operator()(Handler&& handler, const Buffers& buffers) const {
      static_assert(std::is_invocable_v<std::decay_t<Handler>&&, error_code, std::size_t>,
                    "asio_wheel::basic_timed_stream: the handler must be callable as "
                    "void(error_code, std::size_t)");
      detail::start_stream_op<Direction>(self_->state_, std::forward<Handler>(handler), buffers);
    }

  private:
    basic_timed_stream* self_;
  };

  std::shared_ptr<state_type> state_; // never null
};

// The timed stream over a TCP socket, on the default executor.
using timed_stream = basic_timed_stream<net::ip::tcp::socket>;

} // namespace asio_wheel

#endif
