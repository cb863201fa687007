# Shared by scripts/test, scripts/demo and scripts/bench (sourced, not run).

# ensure_packages PKG...: installs the Debian packages that are missing. Only touches
# apt when something is missing, so a prepared machine needs no network.
ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
      || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  echo "installing missing packages: ${missing[*]}"
  local sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}
