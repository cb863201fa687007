// The executor a wheel runs its own work on (the driver's steady_timer, posted steps):
// the plain executor of the execution context, derived from an I/O object's executor.
//
// Never the I/O object's executor itself. That may be a user's strand: every step, and
// every plain handler the step invokes inline, would then run inside one connection's
// strand. It may track work: run() would never return. And it may belong to a service
// that is destroyed before ours (a strand's), so holding it would outlive its owner.
// The executor returned here tracks no work, is not a strand, and refers only to the
// context, which outlives its services.
//
// How it is found, by the executor's static type (a Networking TS executor comes here
// wrapped in legacy_executor, whose context is its own context()):
//   - the context its executor reports (query(ex, execution::context)) has
//     get_executor() (io_context, thread_pool, any concrete context): that executor;
//   - a strand: the executor it wraps, recursively;
//   - any_io_executor (whose context is only known as execution_context&): its target,
//     after dropping tracked work and other preferences, when that is one of the
//     above over io_context or thread_pool: their executors, a strand of one, a strand
//     of such a strand, a strand of an any_io_executor (recursively), system_executor,
//     or a TS executor of Asio's (an io_context::strand, a polymorphic executor);
//   - Asio's polymorphic TS executor (net::executor), whose context is only known as
//     execution_context& too: its target, looked for in the same list (a tracking
//     executor included), else itself, with its own work untracked;
//   - otherwise (a user's executor type inside an any_io_executor, or one of Asio's
//     with an allocator of the user's): that executor with work untracked, the one
//     case where steps run on an executor of the user's. execution_context is not
//     polymorphic, so nothing else tells an io_context behind it; the README says to
//     build the first I/O object of such a context from the context or a plain strand.
#ifndef ASIO_WHEEL_DETAIL_CONTEXT_EXECUTOR_HPP
#define ASIO_WHEEL_DETAIL_CONTEXT_EXECUTOR_HPP

#include <asio_wheel/detail/config.hpp>
#include <asio_wheel/detail/legacy_executor.hpp>

#include <type_traits>
#include <typeinfo>
#include <utility>

namespace asio_wheel::detail {

// ex.target<T>(), but only when the target is a T. Asio checks the type itself from
// 1.26 (Boost 1.81) on; 1.22 returns any target as a T. There the type is compared
// here where RTTI allows, and without RTTI the target cannot be inspected: nullptr,
// "not a T", which costs a dispatch instead of an inline call, never correctness.
template <class T>
const T* target_of(const net::any_io_executor& ex) noexcept {
#if ASIO_WHEEL_ASIO_VERSION >= 102600
  return ex.template target<T>();
#elif defined(__GXX_RTTI) || defined(__cpp_rtti)
  return ex.target_type() == typeid(T) ? ex.template target<T>() : nullptr;
#else
  (void)ex;
  return nullptr;
#endif
}

template <class Context, class = void>
struct has_get_executor : std::false_type {};

template <class Context>
struct has_get_executor<Context, std::void_t<decltype(std::declval<Context&>().get_executor())>>
    : std::true_type {};

template <class Executor>
struct is_strand : std::false_type {};

template <class Inner>
struct is_strand<net::strand<Inner>> : std::true_type {};

// A strand of a TS executor (strand<executor>) is a TS executor itself, so it comes
// wrapped.
template <class Inner>
struct is_strand<legacy_executor<net::strand<Inner>>> : std::true_type {};

template <class Inner>
const net::strand<Inner>& strand_of(const net::strand<Inner>& s) noexcept {
  return s;
}
template <class Inner>
const net::strand<Inner>& strand_of(const legacy_executor<net::strand<Inner>>& s) noexcept {
  return s.legacy();
}

template <class Executor>
net::any_io_executor context_executor(const Executor& ex);

// Whether Executor is Asio's polymorphic TS executor, wrapped: its context is only an
// execution_context&, so its target is looked at.
template <class Executor>
inline constexpr bool is_polymorphic_ts_v = false;
#if ASIO_WHEEL_HAS_TS_EXECUTORS
template <>
inline constexpr bool is_polymorphic_ts_v<legacy_executor<net::executor>> = true;
#endif

#if ASIO_WHEEL_HAS_TS_EXECUTORS
// The same for the polymorphic TS executor, which has always compared the type.
template <class T>
const T* target_of(const net::executor& ex) noexcept {
  return ex.template target<T>();
}
#endif

// An erased executor (any_io_executor, or the polymorphic TS executor): true, with
// `out` set, if its target is a `Candidate`.
template <class Candidate, class Erased>
bool context_executor_of_target(const Erased& ex, net::any_io_executor& out) {
  const Candidate* target = target_of<Candidate>(ex);
  if (target) out = context_executor(standard_executor(*target));
  return target != nullptr;
}

// An erased executor whose target is one of the executors seen through: their
// executors, tracking work or not (the polymorphic executor cannot be asked to stop
// tracking, so its target is what is looked at), a strand of one, a strand of such a
// strand or of an any_io_executor, system_executor, an any_io_executor, and Asio's TS
// executors (wrapped, as an any_io_executor holds them, or not, as the polymorphic
// executor does). A candidate that one kind cannot hold simply never matches it.
template <class Erased>
bool context_executor_of_known_target(const Erased& ex, net::any_io_executor& out) {
  using io_executor = net::io_context::executor_type;
  using pool_executor = net::thread_pool::executor_type;
  using tracked_io_executor = decltype(net::prefer(
      std::declval<const io_executor&>(), net::execution::outstanding_work.tracked));
  using tracked_pool_executor = decltype(net::prefer(
      std::declval<const pool_executor&>(), net::execution::outstanding_work.tracked));
  if (context_executor_of_target<io_executor>(ex, out) ||
      context_executor_of_target<tracked_io_executor>(ex, out) ||
      context_executor_of_target<pool_executor>(ex, out) ||
      context_executor_of_target<tracked_pool_executor>(ex, out) ||
      context_executor_of_target<net::strand<io_executor>>(ex, out) ||
      context_executor_of_target<net::strand<pool_executor>>(ex, out) ||
      context_executor_of_target<net::strand<net::strand<io_executor>>>(ex, out) ||
      context_executor_of_target<net::strand<net::strand<pool_executor>>>(ex, out) ||
      context_executor_of_target<net::strand<net::any_io_executor>>(ex, out) ||
      context_executor_of_target<net::system_executor>(ex, out) ||
      context_executor_of_target<net::any_io_executor>(ex, out))
    return true;
#if ASIO_WHEEL_HAS_TS_EXECUTORS
  return context_executor_of_target<net::io_context::strand>(ex, out) ||
         context_executor_of_target<legacy_executor<net::io_context::strand>>(ex, out) ||
         context_executor_of_target<legacy_executor<net::executor>>(ex, out) ||
         context_executor_of_target<legacy_executor<net::strand<net::executor>>>(ex, out);
#else
  return false;
#endif
}

// An any_io_executor: its target, else the executor itself with work untracked.
inline net::any_io_executor context_executor_of_erased(const net::any_io_executor& ex) {
  namespace execution = net::execution;
  // With every preference at its default the target is the executor type itself, not a
  // variant with tracked work, continuation or blocking.never bits.
  const net::any_io_executor plain =
      net::prefer(ex, execution::outstanding_work.untracked, execution::blocking.possibly,
                  execution::relationship.fork);
  net::any_io_executor out;
  if (context_executor_of_known_target(plain, out)) return out;
  return plain;
}

#if ASIO_WHEEL_HAS_TS_EXECUTORS
// The polymorphic TS executor, whose context is only an execution_context&: its target,
// else the executor itself, as for a user's type in an any_io_executor (never through
// the erased path, which would come back here).
inline net::any_io_executor context_executor_of_polymorphic(
    const legacy_executor<net::executor>& ex) {
  net::any_io_executor out;
  if (context_executor_of_known_target(ex.legacy(), out)) return out;
  return net::prefer(ex, net::execution::outstanding_work.untracked);
}
#endif

template <class Executor>
net::any_io_executor context_executor(const Executor& ex) {
  auto& context = net::query(ex, net::execution::context);
  using context_type = std::remove_reference_t<decltype(context)>;
  if constexpr (is_polymorphic_ts_v<Executor>)
    return context_executor_of_polymorphic(ex);
  else if constexpr (has_get_executor<context_type>::value)
    return context.get_executor();
  else if constexpr (is_strand<Executor>::value)
    return context_executor(standard_executor(strand_of(ex).get_inner_executor()));
  else if constexpr (std::is_convertible_v<Executor, net::any_io_executor>)
    return context_executor_of_erased(net::any_io_executor(ex));
  else
    static_assert(sizeof(Executor) == 0, "asio_wheel: an I/O object's executor must be an Asio "
                                         "I/O executor (convertible to any_io_executor)");
}

} // namespace asio_wheel::detail

#endif
