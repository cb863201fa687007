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
// with the cancellation type (terminal by default) on the handler's associated executor
// (its strand, say), else on the I/O executor, as Boost's own cancel_after does; when the
// operation completes, the entry is removed in O(1) before the handler runs.
//
// The handler's associated executor and allocator are kept (the deadline's state is
// allocated from that allocator); its own cancellation slot, if connected, keeps
// working: an emission there is forwarded to the operation.
//
// Thread safety: the operation may complete on any thread, also while the deadline
// fires on another: the handler runs exactly once, an emission never starts once the
// operation has completed and never overlaps the handler, which runs after the
// deadline's state is freed (see detail/deadline_state).
// A deadline refused by max_pending counts as passed (the operation is cancelled at
// once); after the wheel's shutdown, operations run without a deadline.
//
// The duration may be of any type (float seconds, thirds of a second...): it is rounded
// up to nanoseconds, never early, and saturated, never an overflow: one too far ahead
// (or a NaN) means no deadline, one too far back a deadline already passed.
//
// Unlike Boost 1.86's asio::cancel_after (a steady_timer per operation), this needs no
// timer object and works with Boost 1.81.
#ifndef ASIO_WHEEL_CANCEL_AFTER_HPP
#define ASIO_WHEEL_CANCEL_AFTER_HPP

#include <asio_wheel/detail/cancel_after_op.hpp>
#include <asio_wheel/detail/deadline_state.hpp>
#include <asio_wheel/detail/wheel_clock.hpp>

#include <asio_wheel/detail/config.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <ratio>
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
// never, not an overflow), for any representation and period. std::chrono::ceil is not
// enough: it computes in d's own type, so count * 10^9 overflows for a period like
// ratio<1, 3> long before the result would, and a floating count just under the limit
// rounds up to 2^63, whose conversion is undefined.
template <class Rep, class Period>
steady_duration to_wheel_duration(const std::chrono::duration<Rep, Period>& d) {
  using target = steady_duration;
  using rep = target::rep;
  static_assert(std::is_same_v<target::period, std::nano> && sizeof(rep) == 8,
                "the wheel counts nanoseconds in 64 bits");
  if constexpr (std::is_floating_point_v<Rep>) {
    const long double ns = std::chrono::duration<long double, std::nano>(d).count();
    if (std::isnan(ns)) return target::max(); // no time at all: no deadline
    const long double up = std::ceil(ns);
    // +-2^63, exact in any floating type: the first values out of range.
    if (up >= 0x1p63L) return target::max();
    if (up <= -0x1p63L) return target::min();
    return target(static_cast<rep>(up));
  } else {
    static_assert(std::is_integral_v<Rep>, "a duration counts in an arithmetic type");
    // d = count * n / den nanoseconds, in integers: the magnitude as q whole units of
    // den (q * n ns) and a remainder r < den (r * n / den ns, rounded never early: up
    // for d > 0, toward zero for d < 0).
    using ns_per_count = std::ratio_divide<Period, std::nano>;
    constexpr std::uintmax_t n = ns_per_count::num, den = ns_per_count::den;
    const Rep count = d.count();
    const bool negative = count < Rep(0);
    const std::uintmax_t magnitude =
        negative ? std::uintmax_t(0) - static_cast<std::uintmax_t>(count)
                 : static_cast<std::uintmax_t>(count);
    const std::uintmax_t q = magnitude / den, r = magnitude % den;
    // The largest magnitude that fits: 2^63 - 1 ns ahead, 2^63 ns back.
    const std::uintmax_t limit =
        negative ? std::uintmax_t(1) << 63 : (std::uintmax_t(1) << 63) - 1;
    std::uintmax_t part = 0; // r * n / den, rounded as above; below n
    if constexpr (den > 1) {
      if constexpr (n <= UINTMAX_MAX / den) {
        part = negative ? r * n / den : (r * n + den - 1) / den;
      } else { // a period no clock uses: exact enough in long double, part < n
        const long double exact = static_cast<long double>(r) * n / den;
        part = static_cast<std::uintmax_t>(negative ? std::floor(exact) : std::ceil(exact));
      }
    }
    if (part > limit || q > (limit - part) / n) return negative ? target::min() : target::max();
    const std::uintmax_t ns = q * n + part; // <= limit
    if (!negative) return target(static_cast<rep>(ns));
    return ns == 0 ? target::zero() : target(-static_cast<rep>(ns - 1) - 1); // -2^63 included
  }
}

// The token of cancel_after's partial form: Asio's default for any_io_executor
// (deferred, from Asio 1.30 and Boost 1.86 on), or deferred itself where the default is
// none (void: Boost 1.81 to 1.85). Asio before 1.24 has no deferred: void there.
#if ASIO_WHEEL_ASIO_VERSION >= 102400
using partial_form_token =
    std::conditional_t<std::is_void_v<net::default_completion_token_t<net::any_io_executor>>,
                       net::deferred_t, net::default_completion_token_t<net::any_io_executor>>;
#else
using partial_form_token = net::default_completion_token_t<net::any_io_executor>;
#endif

// False, for a static_assert that fires only in an instantiation.
template <class...>
inline constexpr bool always_false = false;

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
// token of any_io_executor, or `deferred` where Asio has no default (Boost 1.81).
template <class Rep, class Period>
ASIO_WHEEL_PREFERRED_OVERLOAD auto cancel_after(
    const std::chrono::duration<Rep, Period>& d,
    net::cancellation_type t = net::cancellation_type::terminal) {
  static_assert(!std::is_void_v<detail::partial_form_token> || detail::always_false<Rep>,
                "asio_wheel::cancel_after(d) without a token needs asio::deferred (Asio 1.24, "
                "Boost 1.80): pass a completion token");
  if constexpr (!std::is_void_v<detail::partial_form_token>)
    return asio_wheel::cancel_after(d, t, detail::partial_form_token());
}

// Cancels the operation (type `c`) if it has not completed at time `t`.
template <class Token, class Duration>
auto cancel_at(const std::chrono::time_point<std::chrono::steady_clock, Duration>& t,
               net::cancellation_type c, Token&& token) {
  const detail::steady_time at(detail::to_wheel_duration(t.time_since_epoch()));
  return cancel_after_t<std::decay_t<Token>>(std::forward<Token>(token),
                                             detail::deadline_spec{false, {}, at}, c);
}

template <class Token, class Duration>
auto cancel_at(const std::chrono::time_point<std::chrono::steady_clock, Duration>& t,
               Token&& token) {
  return asio_wheel::cancel_at(t, net::cancellation_type::terminal, std::forward<Token>(token));
}

// Any other clock: an error, not a silent choice. Boost 1.86 and later have a cancel_at
// for any clock, which argument-dependent lookup finds for a token from boost::asio;
// after `using asio_wheel::cancel_at;` these make such a call ambiguous, and a
// qualified call fails with the message below: it never picks Boost's in silence.
template <class Clock, class Duration, class Token,
          class = std::enable_if_t<!std::is_same_v<Clock, std::chrono::steady_clock>>>
ASIO_WHEEL_PREFERRED_OVERLOAD auto cancel_at(const std::chrono::time_point<Clock, Duration>&,
                                             net::cancellation_type, Token&&) {
  static_assert(detail::always_false<Clock>,
                "asio_wheel::cancel_at takes std::chrono::steady_clock time points (the "
                "wheel's clock): convert the deadline, or use cancel_after");
}

template <class Clock, class Duration, class Token,
          class = std::enable_if_t<!std::is_same_v<Clock, std::chrono::steady_clock>>>
ASIO_WHEEL_PREFERRED_OVERLOAD auto cancel_at(const std::chrono::time_point<Clock, Duration>& t,
                                             Token&& token) {
  return asio_wheel::cancel_at(t, net::cancellation_type::terminal, std::forward<Token>(token));
}

} // namespace asio_wheel

ASIO_WHEEL_ASIO_NAMESPACE_BEGIN

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
