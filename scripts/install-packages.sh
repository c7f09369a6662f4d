#!/usr/bin/env bash
# Installs the Debian packages attn builds with, plus any named on the
# command line, skipping those already installed (through sudo when not
# root). The one list of build packages: setup.sh and check-sanitizers.sh
# both call this.
#
#   scripts/install-packages.sh [extra package...]
set -euo pipefail

packages=(cmake ninja-build llvm-19-dev libmlir-19-dev mlir-19-tools
          llvm-19-tools libfmt-dev libgtest-dev zlib1g-dev python3 python3-venv
          python3-pytest python3-hypothesis clang-format-19 "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
((${#missing[@]})) || exit 0

printf '\033[1m==> %s\033[0m\n' "installing ${missing[*]}"
sudo=""
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || {
    echo "error: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
  "${missing[@]}"
