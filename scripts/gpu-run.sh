#!/usr/bin/env bash
# On the GPU machine (after scripts/device-pack.sh here, carry .device): unpacks the packages, then runs the
# stages named as arguments: smoke (a few ops on CUDA), bench (bench/gpu.ts beside torch), test (the Tensor
# suite on DEV=CUDA), or any `tsx FILE ARGS...` command. Logs go to $OUT when it is set.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -d node_modules ] || tar xJf .device/node_modules.tar.xz
# tinygrad's source, for the peers' figures, where scripts/device-pack.sh packed it
if [ -f .device/tinygrad.tar.xz ] && [ ! -d /tmp/tinygrad ]; then mkdir -p /tmp/tinygrad && tar xJf .device/tinygrad.tar.xz -C /tmp/tinygrad; fi
[ -d /tmp/tinygrad ] && export TINYGRAD_PATH=/tmp/tinygrad
source .device/env.sh
export CACHEDIR=${CACHEDIR:-/tmp/tsgrad-cache}
log=${OUT:-/tmp}
tsx() { node node_modules/tsx/dist/cli.mjs "$@"; }
for stage in "$@"; do
  echo "=== $stage ($(date +%T))"
  case $stage in
    smoke) tsx -e "import {Tensor, Device} from './src/index.ts'; console.log(Device.default);
      const a = new Tensor([[1, 2], [3, 4]], {device: 'CUDA'});
      console.log(a.matmul(a).add(1).tolist(), a.sum().item(), a.half().mul(2).tolist(), a.max(1).tolist());" 2>&1 | tail -40 ;;
    bench) tsx bench/gpu.ts 2>&1 | tee "$log/bench.txt" | tail -25 ;;
    test) TEST_DEVICES=CUDA node node_modules/vitest/vitest.mjs run ${TEST_FILES:-test/tensor test/nn} >"$log/test.txt" 2>&1
      grep -E "✗|×|FAIL|Test Files|Tests " "$log/test.txt" | head -60 ;;
    *) eval "$stage" 2>&1 | tail -40 ;;
  esac
done
