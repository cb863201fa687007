#!/bin/sh
# Fails if the standalone flavour of the library (libasio_wheel_standalone.a) refers to or
# defines anything of Boost: it must be built on standalone Asio and std::error_code only.
# Boost's headers are on every Debian compiler's default include path (/usr/include), so an
# #include <boost/...> left in src/ or include/ would otherwise compile unnoticed; every use
# of boost::asio or boost::system leaves boost:: in the library's symbols.
#
#   tests/standalone_no_boost.sh LIBRARY [NM]     (ctest: standalone_no_boost)
set -u
lib=${1:?usage: standalone_no_boost.sh LIBRARY [NM]}
nm=${2:-nm}
if [ ! -f "$lib" ]; then
  echo "standalone_no_boost: $lib does not exist" >&2
  exit 2
fi
symbols=$("$nm" -C "$lib" 2>&1) || { printf '%s\n' "$symbols" >&2; exit 2; }
hits=$(printf '%s\n' "$symbols" | grep -E 'boost::' | sort -u)
if [ -n "$hits" ]; then
  printf '%s\n' "$hits" | head -n 40
  echo "standalone_no_boost: FAILED: $(printf '%s\n' "$hits" | wc -l) Boost symbol(s) in $lib" \
       "(first 40 above): the standalone flavour must not use Boost"
  exit 1
fi
echo "standalone_no_boost: ok (no Boost symbol in $lib)"
