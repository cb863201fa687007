// ASIO_WHEEL_COLD marks a function that a hot inline path calls only in a rare case: out
// of line, so the hot path keeps nothing live across the call and saves no registers for
// it, and cold, so the compiler lays it away from the hot code. Compilers other than g++
// and clang get a plain function.
#ifndef ASIO_WHEEL_DETAIL_COLD_HPP
#define ASIO_WHEEL_DETAIL_COLD_HPP

#if defined(__GNUC__)
#define ASIO_WHEEL_COLD __attribute__((noinline, cold))
#else
#define ASIO_WHEEL_COLD
#endif

#endif
