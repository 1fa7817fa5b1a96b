#!/usr/bin/env bash
# Renders a report's index.html in headless Chromium and saves a PNG, so a
# person (or a review) can check that the page opens and its plots render:
#   bash scripts/report-screenshot.sh demo/report demo/report.png
# Installs Debian's chromium when it is missing (root, apt-get).
# The window is as wide as the report's page: its 960-px column
# (geoflash_bench::report::figure::PAGE_WIDTH, the body's max-width) and the
# body's 1em padding on each side, so figures show at the size they are
# drawn. HEIGHT (default 3000) is the height captured from the top.
set -euo pipefail
report=${1:-demo/report}
out=${2:-$report/screenshot.png}
width=$((960 + 2 * 16))
height=${HEIGHT:-3000}
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
page="file://$(cd "$report" && pwd)/index.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size="$width,$height" --screenshot="$out" "$page" 2>/dev/null
echo "wrote $out"
