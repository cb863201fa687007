// Which cancel_after an unqualified call finds. Asio 1.31 (Boost 1.86) added its own
// cancel_after and cancel_at, which argument-dependent lookup finds whenever a token
// from Asio's namespace is passed. After `using asio_wheel::cancel_after;` such a call
// must select asio_wheel's (C++20: ours are constrained, hence more specialized) or,
// without concepts, not compile (ambiguous): never Asio's in silence.
#define BOOST_TEST_MODULE cancel_after_lookup
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "manual_clock.hpp"

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/timer.hpp>

#include <chrono>
#include <type_traits>
#include <utility>

using namespace std::chrono_literals;

namespace lookup {

using asio_wheel::cancel_after;
using asio_wheel::cancel_at;

// The type of an unqualified cancel_after(args...) call, if it compiles.
template <class Void, class... Args>
struct cancel_after_call {
  static constexpr bool compiles = false;
};
template <class... Args>
struct cancel_after_call<std::void_t<decltype(cancel_after(std::declval<Args>()...))>, Args...> {
  static constexpr bool compiles = true;
  using type = decltype(cancel_after(std::declval<Args>()...));
};

template <class Void, class... Args>
struct cancel_at_call {
  static constexpr bool compiles = false;
};
template <class... Args>
struct cancel_at_call<std::void_t<decltype(cancel_at(std::declval<Args>()...))>, Args...> {
  static constexpr bool compiles = true;
  using type = decltype(cancel_at(std::declval<Args>()...));
};

} // namespace lookup

namespace {

using token = asio::deferred_t;
using ours = asio_wheel::cancel_after_t<token>;

#if defined(ASIO_WHEEL_STANDALONE) && __has_include(<asio/cancel_after.hpp>)
constexpr bool asio_has_cancel_after = true;
#elif !defined(ASIO_WHEEL_STANDALONE) && __has_include(<boost/asio/cancel_after.hpp>)
constexpr bool asio_has_cancel_after = true;
#else
constexpr bool asio_has_cancel_after = false;
#endif

// Ours, or no compile; never a type of Asio's.
template <class Call>
constexpr bool ours_or_nothing() {
  if constexpr (Call::compiles)
    return std::is_same_v<typename Call::type, ours>;
  else
    return asio_has_cancel_after; // only an ambiguity with Asio's may stop it compiling
}

} // namespace

BOOST_AUTO_TEST_CASE(an_unqualified_cancel_after_is_ours_or_does_not_compile) {
  using seconds = std::chrono::seconds;
  using lookup::cancel_after_call;
  using lookup::cancel_at_call;
  static_assert(ours_or_nothing<cancel_after_call<void, seconds, token>>());
  static_assert(ours_or_nothing<cancel_after_call<void, std::chrono::milliseconds, token>>());
  static_assert(
      ours_or_nothing<cancel_after_call<void, seconds, asio::cancellation_type, token>>());
  // cancel_at with a steady_clock time point is ours in every mode: more specialized.
  static_assert(std::is_same_v<
                typename cancel_at_call<void, std::chrono::steady_clock::time_point, token>::type,
                ours>);
#if defined(__cpp_concepts)
  // With concepts ours are the more specialized: they always win.
  static_assert(cancel_after_call<void, seconds, token>::compiles);
#endif
  BOOST_TEST(true);
}

// And the one picked does its work on the wheel: a deadline entry, cut at its time.
BOOST_AUTO_TEST_CASE(the_selected_overload_puts_its_deadline_on_the_wheel) {
  asio_wheel_test::manual_context f;
  asio_wheel::timer t(f.io, 1h);
  int calls = 0;
  error_code result;
  t.async_wait(asio_wheel::cancel_after(10ms, [&](error_code ec) {
    ++calls;
    result = ec;
  }));
  BOOST_TEST(f.svc.stats().pending == 2u); // the wait and its deadline
  f.advance(10ms);
  BOOST_TEST(calls == 1);
  BOOST_TEST((result == asio::error::operation_aborted));
#if defined(__cpp_concepts)
  {
    using asio_wheel::cancel_after;
    auto op = t.async_wait(cancel_after(5ms, asio::deferred)); // unqualified, Asio's token
    std::move(op)([&](error_code ec) {
      ++calls;
      result = ec;
    });
    BOOST_TEST(f.svc.stats().pending == 2u);
    f.advance(5ms);
    BOOST_TEST(calls == 2);
  }
#endif
}
