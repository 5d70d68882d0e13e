#!/bin/sh
# Chromium for tests/browser: Debian's package, never a browser build downloaded by
# Playwright. Installs it with apt-get when missing and we are root; otherwise says how.
# Exits non-zero only when it cannot provide Chromium and CI=true (the test would fail).

for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then
        exit 0
    fi
done

give_up() {
    echo "ensure-chromium: $1" >&2
    echo "ensure-chromium: install Debian's chromium (sudo apt-get install chromium);" \
         "without it the browser test is skipped (and fails when CI=true)." >&2
    [ "${CI:-}" = true ] && exit 1
    exit 0
}

if [ "$(id -u)" != 0 ]; then
    give_up "chromium not found, and not root to install it"
fi
if ! command -v apt-get >/dev/null 2>&1; then
    give_up "chromium not found, and no apt-get here"
fi

echo "ensure-chromium: installing Debian's chromium with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
if apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; then
    exit 0
fi
give_up "apt-get install chromium failed"
