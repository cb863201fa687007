// timed_stream_state: what a basic_timed_stream shares with its operations in flight:
// the next layer, the expiry, the state of the read and the write direction, and the
// one asio_wheel timer whose single wait enforces their deadlines.
//
// The rule (Beast's basic_stream's): an operation takes the stream's expiry when it
// starts; a later expires_*() applies to operations started after it, never to one
// already in flight. When the deadline of an operation in flight passes, the stream
// times out: every operation in flight completes with error::timeout, the next layer is
// closed, and operations started afterwards fail with error::timeout until a new
// expiry is set. An operation started with its expiry already passed times the stream
// out at once.
//
// One wheel entry per stream: the timer has at most one wait of ours outstanding, due
// at the earliest deadline among the operations in flight that have not timed out.
// Starting or completing an operation moves it with reset_at (O(1), no allocation, no
// handler). The wait is started when the first operation with a deadline starts, and
// cancelled only once no operation with a deadline is in flight *after* the completion
// handler has returned: operations started from completion handlers (a composed
// async_read, a read followed by a write) keep the same wait for as long as they chain.
// An outstanding wait counts as work of the context, so it is never left behind when
// the stream goes quiet.
//
// Invariants (asserted where they are relied on):
// - at most one operation per direction is in flight (a second one fails with
//   already_started; a zero-byte one completes at once, Beast's rule for SSL);
// - wait_pending_ holds while an operation with a finite deadline that has not timed
//   out is in flight, and then the timer's expiry is the earliest such deadline; the
//   wait may have been handed to its handler already (reset_at no longer reaches it),
//   so the handler checks the deadlines against the clock before acting;
// - wait_gen_ names the wait we care about: a handler of an older (cancelled or
//   superseded) wait does nothing.
//
// Ownership: the stream and each operation in flight hold a shared_ptr to the state;
// the wait's handler holds a weak_ptr (the state never keeps itself alive through its
// own timer). A stream destroyed with operations in flight closes its next layer; the
// state lives until the last of them has completed.
//
// Thread safety: none of its own, like Beast's basic_stream. The state is touched by
// the initiating functions, by the operations' completions (on their handlers'
// associated executors, by default the stream's) and by the wait's handler (on the
// stream's executor). These must not run concurrently: one thread, or a strand as the
// stream's executor.
#ifndef ASIO_WHEEL_DETAIL_TIMED_STREAM_STATE_HPP
#define ASIO_WHEEL_DETAIL_TIMED_STREAM_STATE_HPP

#include <asio_wheel/error.hpp>
#include <asio_wheel/timer.hpp>
#include <asio_wheel/wheel_service.hpp>

#include <asio_wheel/detail/config.hpp>
#include <asio_wheel/detail/context_executor.hpp>
#include <asio_wheel/detail/legacy_executor.hpp>

// Only the stream needs Asio's socket and buffer headers; they are included here rather
// than in config.hpp so that the timers' translation units do not pay for them.
#ifdef ASIO_WHEEL_STANDALONE
#include <asio/basic_stream_socket.hpp>
#include <asio/buffer.hpp>
#include <asio/ip/tcp.hpp>
#else
#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#endif

#include <array>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

// ---- what the next layer offers -------------------------------------------------------

template <class T, class = void>
struct has_close_ec : std::false_type {};
template <class T>
struct has_close_ec<T, std::void_t<decltype(std::declval<T&>().close(std::declval<error_code&>()))>>
    : std::true_type {};

template <class T, class = void>
struct has_cancel_ec : std::false_type {};
template <class T>
struct has_cancel_ec<T,
                     std::void_t<decltype(std::declval<T&>().cancel(std::declval<error_code&>()))>>
    : std::true_type {};

template <class T, class = void>
struct has_close : std::false_type {};
template <class T>
struct has_close<T, std::void_t<decltype(std::declval<T&>().close())>> : std::true_type {};

template <class T, class = void>
struct has_cancel : std::false_type {};
template <class T>
struct has_cancel<T, std::void_t<decltype(std::declval<T&>().cancel())>> : std::true_type {};

// A lowest_layer() that can be called (Beast's test stream keeps its own private).
template <class T, class = void>
struct has_lowest_layer_fn : std::false_type {};
template <class T>
struct has_lowest_layer_fn<T, std::void_t<decltype(std::declval<T&>().lowest_layer())>>
    : std::true_type {};

// A lowest_layer() of another type than T's own (a layer may name itself its lowest
// layer, as a timed stream over a layer that has none does: asking it again would never
// end).
template <class T, class = void>
struct has_lowest_layer : std::false_type {};
template <class T>
struct has_lowest_layer<T, std::enable_if_t<has_lowest_layer_fn<T>::value>>
    : std::bool_constant<!std::is_same_v<
          std::remove_cv_t<std::remove_reference_t<decltype(std::declval<T&>().lowest_layer())>>,
          T>> {};

template <class T, class = void>
struct has_next_layer : std::false_type {};
template <class T>
struct has_next_layer<T, std::void_t<decltype(std::declval<T&>().next_layer())>>
    : std::true_type {};

template <class T>
struct is_basic_stream_socket : std::false_type {};
template <class Protocol, class Executor>
struct is_basic_stream_socket<net::basic_stream_socket<Protocol, Executor>> : std::true_type {};

template <class>
inline constexpr bool dependent_false = false;

// Closes the layer that owns the connection: the layer's own close(ec) (a socket) or
// close() (Beast's test stream), else its lowest layer's (ssl::stream), else its next
// layer's, recursively. Errors are ignored, thrown ones too: the point is to make
// pending operations complete.
template <class Layer>
void close_layer(Layer& layer) noexcept {
  error_code ignored;
  if constexpr (has_close_ec<Layer>::value) {
    layer.close(ignored);
  } else if constexpr (has_close<Layer>::value) {
    try {
      layer.close();
    } catch (...) {
    }
  } else if constexpr (has_lowest_layer<Layer>::value) {
    close_layer(layer.lowest_layer());
  } else if constexpr (has_next_layer<Layer>::value) {
    close_layer(layer.next_layer());
  } else {
    static_assert(dependent_false<Layer>,
                  "asio_wheel::basic_timed_stream: the next layer has neither close(error_code&) "
                  "nor close(), nor a lowest_layer()/next_layer() that has one");
  }
}

// The same for cancel(ec) or cancel(): pending operations complete with
// operation_aborted.
template <class Layer>
void cancel_layer(Layer& layer) noexcept {
  error_code ignored;
  if constexpr (has_cancel_ec<Layer>::value) {
    layer.cancel(ignored);
  } else if constexpr (has_cancel<Layer>::value) {
    try {
      layer.cancel();
    } catch (...) {
    }
  } else if constexpr (has_lowest_layer<Layer>::value) {
    cancel_layer(layer.lowest_layer());
  } else if constexpr (has_next_layer<Layer>::value) {
    cancel_layer(layer.next_layer());
  } else {
    static_assert(dependent_false<Layer>,
                  "asio_wheel::basic_timed_stream: the next layer has neither cancel(error_code&) "
                  "nor cancel(), nor a lowest_layer()/next_layer() that has one");
  }
}

// lowest_layer_type, which ssl::stream<basic_timed_stream<...>> names: what the next
// layer's lowest_layer() returns, else the timed stream itself, which is then its own
// lowest layer (over Beast's test stream, which keeps its own private). A base class,
// since a member type cannot be declared conditionally.
template <class TimedStream, class NextLayer, class = void>
struct timed_stream_lowest_layer {
  using lowest_layer_type = TimedStream;
};
template <class TimedStream, class NextLayer>
struct timed_stream_lowest_layer<TimedStream, NextLayer,
                                 std::enable_if_t<has_lowest_layer_fn<NextLayer>::value>> {
  using lowest_layer_type =
      std::remove_reference_t<decltype(std::declval<NextLayer&>().lowest_layer())>;
};

// ---- the state ------------------------------------------------------------------------

enum class stream_direction : unsigned char { read = 0, write = 1 };

// What begin() decided about an operation.
enum class begin_result : unsigned char {
  go,        // in flight: hand it to the next layer
  timed_out, // complete it at once with error::timeout
  busy       // another operation of this direction is in flight
};

// Selects timed_stream_state's constructor that takes the executor to keep.
struct keep_executor_t {};
inline constexpr keep_executor_t keep_executor{};

template <class NextLayer, class Executor>
class timed_stream_state
    : public std::enable_shared_from_this<timed_stream_state<NextLayer, Executor>> {
public:
  using next_layer_type = NextLayer;
  using executor_type = Executor;
  using clock_type = std::chrono::steady_clock;
  using duration = clock_type::duration;
  using time_point = clock_type::time_point;

  static constexpr time_point never() noexcept { return time_point::max(); }

  template <class... Args>
  explicit timed_stream_state(Args&&... next_layer_args)
      : next_(std::forward<Args>(next_layer_args)...),
        timer_(executor_type(next_.get_executor())),
        service_(&net::use_service<wheel_service>(
            net::query(standard_executor(timer_.get_executor()), net::execution::context))),
        plain_(context_executor(standard_executor(timer_.get_executor()))) {}

  // The same on `ex`: a moved stream keeps its executor (a strand stays that strand,
  // which the handlers already started on it share with the stream's timeouts).
  // (More specialized than the constructor above, so chosen for a keep_executor_t.)
  template <class Ex, class... Args>
  timed_stream_state(keep_executor_t, Ex&& ex, Args&&... next_layer_args)
      : next_(std::forward<Args>(next_layer_args)...),
        timer_(executor_type(std::forward<Ex>(ex))),
        service_(&net::use_service<wheel_service>(
            net::query(standard_executor(timer_.get_executor()), net::execution::context))),
        plain_(context_executor(standard_executor(timer_.get_executor()))) {}

  timed_stream_state(const timed_stream_state&) = delete;
  timed_stream_state& operator=(const timed_stream_state&) = delete;

  next_layer_type& next_layer() noexcept { return next_; }
  const next_layer_type& next_layer() const noexcept { return next_; }
  const executor_type& get_executor() noexcept { return timer_.get_executor(); }

  // ---- expiry ----

  time_point expiry() const noexcept { return expiry_; }

  // now + d by the wheel's clock (virtual time in manual mode), saturated: a d too
  // large for the clock means never, a d too negative the earliest time point.
  time_point deadline_after(duration d) const {
    const duration now = service_->now().time_since_epoch();
    if (d > duration::zero() && now > duration::max() - d) return never();
    if (d < duration::zero() && now < duration::min() - d) return time_point::min();
    return time_point(now + d);
  }

  // For the operations started from now on; clears a timeout.
  void set_expiry(time_point t) noexcept {
    expiry_ = t;
    timed_out_ = false;
  }

  // Whether operations fail with timeout until a new expiry is set.
  bool timed_out() const noexcept { return timed_out_; }

  // A move: the expiry of `other`, and its timeout, which only a new expiry clears.
  template <class OtherState>
  void take_expiry_of(const OtherState& other) noexcept {
    expiry_ = other.expiry();
    timed_out_ = other.timed_out();
  }

  // ---- operations ----

  // Starts an operation of direction `d` (see begin_result). On `go` the operation is
  // in flight with the stream's expiry as its deadline, and the wait covers it.
  begin_result begin(stream_direction d) {
    direction& dir = dirs_[index(d)];
    if (dir.pending) return begin_result::busy;
    if (times_out_now()) return begin_result::timed_out;
    dir.pending = true;
    dir.timed_out = false;
    dir.deadline = expiry_;
    if (expiry_ != never()) {
      try {
        update_wait();
      } catch (...) {
        dir.pending = false;
        throw;
      }
    }
    return begin_result::go;
  }

  // Whether an operation started now fails with timeout: the stream timed out, or its
  // expiry has passed, which times it out now (as an operation in flight would be).
  bool times_out_now() {
    if (timed_out_) return true;
    if (expiry_ == never() || expiry_ > service_->now()) return false;
    time_out();
    return true;
  }

  // A move took the next layer away: the operations still in flight on it go on
  // without a deadline, since a timeout here would close only what is left in this
  // state, not what they run on, and they would report a timeout that never cut them
  // short. One already timed out before the move still reports it (the layer it ran
  // on was closed).
  void forget_deadlines() noexcept {
    for (direction& dir : dirs_) dir.deadline = never();
    if (wait_pending_) cancel_wait();
  }

  // An operation begin() let through could not be given to the next layer: its handler
  // could not be wrapped (its move threw). Once wrapped, the handler frees the direction.
  void abandon(stream_direction d) noexcept {
    dirs_[index(d)].pending = false;
    after_upcall();
  }

  // The operation of direction `d` completed with `ec` (replaced by error::timeout if
  // the stream timed out while it was in flight). Before its handler runs, which must
  // run whatever happens here: hence noexcept.
  void end(stream_direction d, error_code& ec) noexcept {
    direction& dir = dirs_[index(d)];
    assert(dir.pending);
    dir.pending = false;
    if (dir.timed_out) {
      dir.timed_out = false;
      ec = error::timeout;
    }
    // The wait may now be due later (the other direction's deadline): O(1).
    update_wait_or_time_out();
  }

  // After a completion handler has returned: if it started no operation with a
  // deadline, nothing needs the wait any more.
  void after_upcall() noexcept {
    if (wait_pending_ && earliest() == never()) cancel_wait();
  }

  // ---- the next layer ----

  void close_next_layer() noexcept { close_layer(next_); }
  void cancel_next_layer() noexcept { cancel_layer(next_); }

private:
  struct direction {
    time_point deadline = never(); // taken from the expiry when the operation started
    bool pending = false;          // an operation of this direction is in flight
    bool timed_out = false;        // ... and the stream timed out meanwhile
  };

  // The handler of our wait. Its executor is the context's plain one, so that the wheel
  // completes it inline in its step: the wait is cancelled once per quiet moment of
  // every stream, and an aborted completion sent through a strand (the stream's
  // executor, often) would cost a dispatch and the strand's queue for nothing. It may
  // run on any thread the context runs: an aborted wait (we cancelled it) touches
  // nothing; any other completion is taken to the stream's executor (immutable after
  // construction, so it may be read here), where the state is safe to use.
  struct wait_handler {
    std::weak_ptr<timed_stream_state> state;
    unsigned generation;
    net::any_io_executor plain;

    using executor_type = net::any_io_executor;
    executor_type get_executor() const noexcept { return plain; }

    void operator()(error_code ec) {
      if (ec == net::error::operation_aborted) return;
      auto s = state.lock();
      if (!s) return;
      net::dispatch(s->get_executor(), [w = std::move(state), g = generation, ec] {
        if (auto t = w.lock()) t->on_wait(g, ec);
      });
    }
  };

  static constexpr std::size_t index(stream_direction d) noexcept {
    return static_cast<std::size_t>(d);
  }

  // The earliest deadline among the operations in flight that have not timed out.
  time_point earliest() const noexcept {
    time_point t = never();
    for (const direction& dir : dirs_) {
      if (dir.pending && !dir.timed_out && dir.deadline < t) t = dir.deadline;
    }
    return t;
  }

  // Makes the wait due at earliest(): starts it if none is outstanding, else moves it
  // (reset_at: O(1), keeps the wait). Never cancels it: see after_upcall().
  void update_wait() {
    const time_point t = earliest();
    if (t == never()) return;
    if (!wait_pending_) {
      timer_.reset_at(t); // no wait of ours is outstanding: this only sets the expiry
      timer_.async_wait(wait_handler{this->weak_from_this(), ++wait_gen_, plain_});
      wait_pending_ = true;
    } else if (timer_.expiry() != t) {
      timer_.reset_at(t);
    }
  }

  // update_wait() where nothing may throw: a wait that cannot be started (no memory
  // for it) leaves the deadline unenforceable, which counts as passed.
  void update_wait_or_time_out() noexcept {
    try {
      update_wait();
    } catch (...) {
      time_out();
    }
  }

  void cancel_wait() noexcept {
    try {
      timer_.cancel();
    } catch (...) {
      return; // the wait stays: it completes at its expiry and finds nothing to do
    }
    wait_pending_ = false;
    ++wait_gen_;
  }

  // The wait completed (success: its expiry passed, by the wheel's clock).
  void on_wait(unsigned generation, error_code ec) noexcept {
    if (generation != wait_gen_ || !wait_pending_) return; // cancelled or superseded
    wait_pending_ = false;
    if (ec == net::error::operation_aborted) return;
    if (ec) {
      // too_many_timers: the deadline cannot be kept, so it counts as passed (as
      // cancel_after counts a refused deadline).
      time_out();
      return;
    }
    // The wait may have been handed over before the operation it was for completed and
    // a later one started: act only on a deadline that has really passed.
    const time_point now = service_->now();
    for (const direction& dir : dirs_) {
      if (dir.pending && !dir.timed_out && dir.deadline <= now) {
        time_out();
        return;
      }
    }
    update_wait_or_time_out();
  }

  // Every operation in flight completes with timeout; so do later ones until a new
  // expiry is set. Closing the next layer makes the ones in flight complete.
  void time_out() noexcept {
    timed_out_ = true;
    for (direction& dir : dirs_) {
      if (dir.pending) dir.timed_out = true;
    }
    close_layer(next_);
  }

  next_layer_type next_;
  basic_timer<executor_type> timer_; // our one wheel entry; its executor is the stream's
  wheel_service* service_;           // the timer's context's service: its clock
  net::any_io_executor plain_;       // the context's plain executor, for wait_handler
  time_point expiry_ = never();      // for the operations started from now on
  std::array<direction, 2> dirs_{};  // read, write
  unsigned wait_gen_ = 0;            // names the wait we care about
  bool wait_pending_ = false;        // our wait is outstanding and not cancelled
  bool timed_out_ = false;           // operations fail with timeout until set_expiry()
};

} // namespace asio_wheel::detail

#endif
