// Bit scans on 64-bit words, as C++20's <bit> has them, for C++17 too. g++ and clang
// (the compilers we support) lower the builtins to single instructions.
#ifndef ASIO_WHEEL_DETAIL_BITS_HPP
#define ASIO_WHEEL_DETAIL_BITS_HPP

#include <cstdint>

namespace asio_wheel::detail {

// Trailing zero bits of x != 0.
inline unsigned countr_zero(std::uint64_t x) noexcept {
  return static_cast<unsigned>(__builtin_ctzll(x));
}

// Leading zero bits of x != 0.
inline unsigned countl_zero(std::uint64_t x) noexcept {
  return static_cast<unsigned>(__builtin_clzll(x));
}

constexpr bool has_single_bit(std::uint64_t x) noexcept { return x != 0 && (x & (x - 1)) == 0; }

} // namespace asio_wheel::detail

#endif
