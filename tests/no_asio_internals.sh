#!/bin/sh
# Fails if the library uses Asio internals, which change between Asio releases (1.87 removed
# some): anything in namespace asio::detail (boost::asio::detail, ::asio::detail) or an
# #include of <boost/asio/detail/...> or <asio/detail/...>. Only documented Asio API may be
# used. asio_wheel::detail is ours and fine. Comments are ignored (// to the end of the line,
# and lines inside /* */ blocks that start with * or /*).
#
#   tests/no_asio_internals.sh [SOURCE_ROOT]     (default: the repo this script is in)
#
# Checks SOURCE_ROOT/include and SOURCE_ROOT/src; ctest runs it as no_asio_internals.
set -u

root=${1:-$(dirname "$0")/..}
dirs=""
for d in include src; do
  [ -d "$root/$d" ] && dirs="$dirs $root/$d"
done
if [ -z "$dirs" ]; then
  echo "no_asio_internals.sh: neither $root/include nor $root/src exists" >&2
  exit 2
fi

# A word boundary before "asio" keeps e.g. my_asio::detail out; asio_wheel::detail never
# matches (it is "wheel::detail").
namespace_re='(^|[^A-Za-z0-9_])asio[[:space:]]*::[[:space:]]*detail([^A-Za-z0-9_]|$)'
include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](boost/)?asio/detail/'

# file:line:text of every offending line, comments stripped first.
hits=$(find $dirs -type f \( -name '*.hpp' -o -name '*.h' -o -name '*.ipp' -o -name '*.cpp' \
         -o -name '*.cc' -o -name '*.inl' \) | sort | while IFS= read -r file; do
  awk -v file="$file" -v ns="$namespace_re" -v inc="$include_re" '
    {
      line = $0
      if (line ~ inc) { print file ":" FNR ": " $0; next }
      if (line ~ /^[[:space:]]*(\/\*|\*)/) next   # inside a block comment
      sub(/\/\/.*$/, "", line)                    # a line comment
      if (line ~ ns) print file ":" FNR ": " $0
    }' "$file"
done)

if [ -n "$hits" ]; then
  printf '%s\n' "$hits"
  count=$(printf '%s\n' "$hits" | wc -l)
  echo "no_asio_internals: FAILED: $count use(s) of Asio internals (asio::detail or" \
       "<.../asio/detail/...>) in include/ or src/; use only documented Asio API"
  exit 1
fi
echo "no_asio_internals: ok (no asio::detail, no <asio/detail/...> in$dirs)"
