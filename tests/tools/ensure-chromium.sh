#!/usr/bin/env bash
# Make sure a headless Chromium is available for the HTML report test and print its path.
# Installs Debian's `chromium` package when missing (as root, or through passwordless sudo);
# fails with the reason otherwise: the report test is never skipped.
set -euo pipefail
for name in chromium chromium-browser google-chrome; do
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; exit 0; fi
done
if [[ $(id -u) -eq 0 ]]; then as_root=(); elif sudo -n true 2>/dev/null; then as_root=(sudo -n); else
  echo "ensure-chromium: chromium is missing and this user cannot install packages" \
       "(install Debian's chromium package, or run as root)" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: chromium is missing and there is no apt-get to install it" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "ensure-chromium: installing Debian's chromium package" >&2
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium >&2; then
  "${as_root[@]}" apt-get update -q >&2
  "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium >&2
fi
command -v chromium
