# Sourced by the install scripts: apt_install installs Debian packages,
# as root or through sudo, after finishing any installation a killed
# apt or dpkg left half done (apt refuses every install with "dpkg was
# interrupted" until `dpkg --configure -a` has run; with nothing left
# half done it does nothing).
#
#   apt_install "<what needs them, for the messages>" package...
#
# Recommended packages are left out unless APT_RECOMMENDS=1.

apt_install() {
  local what=$1
  shift
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "$* missing and this is not a Debian-like system: install $* ($what)." >&2
    return 1
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "$* missing; run as root: apt-get install -y $* ($what)." >&2
      return 1
    fi
  fi
  local recommends=--no-install-recommends
  if [ "${APT_RECOMMENDS:-0}" = 1 ]; then recommends=--install-recommends; fi
  echo "Installing Debian's $* ($what)..." >&2
  DEBIAN_FRONTEND=noninteractive $sudo dpkg --configure -a
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$recommends" "$@" >/dev/null
  echo "$* installed." >&2
}
