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

# extract_debian_package PKG DEST: downloads PKG's .deb (apt-get download, into DEST's
# parent) and unpacks it into DEST with dpkg -x, without installing it: for a package whose
# installation would disturb the machine (libasio-dev would replace libboost1.81-dev with
# 1.74 on bookworm). Runs apt-get update once if the download fails.
extract_debian_package() {
  local pkg=$1 dest=$2 cache deb
  cache=$(dirname "$dest")
  mkdir -p "$cache"
  rm -f "$cache/${pkg}"_*.deb
  # apt-get download writes into the working directory; as root it warns that the
  # download is unsandboxed, which is harmless here.
  if ! (cd "$cache" && apt-get download "$pkg"); then
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update || return 1
    (cd "$cache" && apt-get download "$pkg") || return 1
  fi
  deb=$(ls -t "$cache/${pkg}"_*.deb 2>/dev/null | head -n 1)
  [[ -n $deb ]] || { echo "extract_debian_package: no ${pkg}_*.deb in $cache" >&2; return 1; }
  rm -rf "$dest"
  dpkg -x "$deb" "$dest" || return 1
  echo "extracted $(basename "$deb") into $dest"
}
