// Networking TS executors (io_context::strand, the polymorphic net::executor, a user's
// executor with dispatch/post/defer and on_work_started/finished): Asio still takes
// them wherever it takes an executor, as a handler's associated executor (through
// bind_executor) or as an I/O object's own, and so does steady_timer. The library
// works with standard executors (execute, query, prefer), so each place that receives
// an executor of unknown kind looks at it through standard_executor(), which gives a
// standard executor back as it is and wraps a TS one in legacy_executor.
//
// legacy_executor forwards each execution to the executor it wraps: dispatch while
// blocking.possibly (the default, as net::dispatch asks), post under blocking.never,
// and defer under relationship.continuation (post's meaning for a continuation). With
// outstanding_work.tracked, each copy counts as work on the wrapped executor
// (on_work_started in its constructor, on_work_finished in its destructor), as an
// executor_work_guard would. Its context is the wrapped executor's own context(), so
// that an io_context::strand still names its io_context.
#ifndef ASIO_WHEEL_DETAIL_LEGACY_EXECUTOR_HPP
#define ASIO_WHEEL_DETAIL_LEGACY_EXECUTOR_HPP

#include <asio_wheel/detail/config.hpp>

#include <memory>
#include <type_traits>
#include <utility>

// Whether Asio has its own TS executors, io_context::strand and the polymorphic
// net::executor (not with TS executors or extensions turned off).
#if defined(ASIO_WHEEL_STANDALONE)
#if !defined(ASIO_NO_TS_EXECUTORS) && !defined(ASIO_NO_EXTENSIONS)
#define ASIO_WHEEL_HAS_TS_EXECUTORS 1
#endif
#elif !defined(BOOST_ASIO_NO_TS_EXECUTORS) && !defined(BOOST_ASIO_NO_EXTENSIONS)
#define ASIO_WHEEL_HAS_TS_EXECUTORS 1
#endif
#ifndef ASIO_WHEEL_HAS_TS_EXECUTORS
#define ASIO_WHEEL_HAS_TS_EXECUTORS 0
#endif

namespace asio_wheel::detail {

namespace execution = net::execution;

// Whether Executor is a Networking TS executor and not a standard one. (Asio's own
// executors are both, and are used as standard ones.)
template <class Executor>
inline constexpr bool is_legacy_executor_v =
    net::is_executor<Executor>::value && !net::execution::is_executor<Executor>::value;

template <class Legacy>
class legacy_executor {
  static_assert(is_legacy_executor_v<Legacy>);

public:
  explicit legacy_executor(const Legacy& ex) noexcept : ex_(ex) {}

  // A move is a copy: both count as work until each is destroyed.
  legacy_executor(const legacy_executor& other) noexcept
      : ex_(other.ex_), blocking_never_(other.blocking_never_),
        continuation_(other.continuation_), tracked_(other.tracked_) {
    if (tracked_) ex_.on_work_started();
  }

  legacy_executor& operator=(const legacy_executor& other) noexcept {
    if (other.tracked_) other.ex_.on_work_started(); // first: `other` may be *this
    if (tracked_) ex_.on_work_finished();
    ex_ = other.ex_;
    blocking_never_ = other.blocking_never_;
    continuation_ = other.continuation_;
    tracked_ = other.tracked_;
    return *this;
  }

  ~legacy_executor() {
    if (tracked_) ex_.on_work_finished();
  }

  // The wrapped executor.
  const Legacy& legacy() const noexcept { return ex_; }

  auto query(execution::context_t) const noexcept
      -> decltype(std::declval<const Legacy&>().context()) {
    return ex_.context();
  }
  constexpr execution::blocking_t query(execution::blocking_t) const noexcept {
    return blocking_never_ ? execution::blocking_t(execution::blocking.never)
                           : execution::blocking_t(execution::blocking.possibly);
  }
  constexpr execution::relationship_t query(execution::relationship_t) const noexcept {
    return continuation_ ? execution::relationship_t(execution::relationship.continuation)
                         : execution::relationship_t(execution::relationship.fork);
  }
  constexpr execution::outstanding_work_t query(execution::outstanding_work_t) const noexcept {
    return tracked_ ? execution::outstanding_work_t(execution::outstanding_work.tracked)
                    : execution::outstanding_work_t(execution::outstanding_work.untracked);
  }

  legacy_executor require(execution::blocking_t::never_t) const noexcept {
    return with(&legacy_executor::blocking_never_, true);
  }
  legacy_executor require(execution::blocking_t::possibly_t) const noexcept {
    return with(&legacy_executor::blocking_never_, false);
  }
  legacy_executor prefer(execution::relationship_t::continuation_t) const noexcept {
    return with(&legacy_executor::continuation_, true);
  }
  legacy_executor prefer(execution::relationship_t::fork_t) const noexcept {
    return with(&legacy_executor::continuation_, false);
  }
  legacy_executor prefer(execution::outstanding_work_t::tracked_t) const noexcept {
    legacy_executor copy(*this);
    copy.track(true);
    return copy;
  }
  legacy_executor prefer(execution::outstanding_work_t::untracked_t) const noexcept {
    legacy_executor copy(*this);
    copy.track(false);
    return copy;
  }

  template <class Function>
  void execute(Function&& f) const {
    const std::allocator<void> alloc;
    if (blocking_never_) {
      if (continuation_)
        ex_.defer(std::forward<Function>(f), alloc);
      else
        ex_.post(std::forward<Function>(f), alloc);
    } else {
      ex_.dispatch(std::forward<Function>(f), alloc);
    }
  }

  friend bool operator==(const legacy_executor& a, const legacy_executor& b) noexcept {
    return a.ex_ == b.ex_ && a.blocking_never_ == b.blocking_never_ &&
           a.continuation_ == b.continuation_ && a.tracked_ == b.tracked_;
  }
  friend bool operator!=(const legacy_executor& a, const legacy_executor& b) noexcept {
    return !(a == b);
  }

private:
  // A copy with one of the flags that count no work changed.
  legacy_executor with(bool legacy_executor::*flag, bool value) const noexcept {
    legacy_executor copy(*this);
    copy.*flag = value;
    return copy;
  }

  // Starts or finishes this copy's count of work, if that changes.
  void track(bool on) noexcept {
    if (on == tracked_) return;
    if (on)
      ex_.on_work_started();
    else
      ex_.on_work_finished();
    tracked_ = on;
  }

  Legacy ex_;
  bool blocking_never_ = false;
  bool continuation_ = false;
  bool tracked_ = false;
};

// `ex` as a standard executor: itself, or a TS executor wrapped in legacy_executor.
template <class Executor>
decltype(auto) standard_executor(const Executor& ex) noexcept {
  if constexpr (is_legacy_executor_v<Executor>)
    return legacy_executor<Executor>(ex);
  else
    return (ex);
}

template <class Executor>
using standard_executor_t =
    std::decay_t<decltype(standard_executor(std::declval<const Executor&>()))>;

} // namespace asio_wheel::detail

#endif
