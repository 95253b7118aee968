#!/usr/bin/env bash
# Builds here (this machine has MLIR; the GPU machine does not) what
# scripts/gpu-tests.sh and bench/ run on the H200: runtime bundles of
# grouped GEMMs compiled by moe-opt + moe-translate, and the moe_mlir
# Python package with the runtime library. Output: .gpu-artifacts/ (carry
# it with the device tool):
#   <variant>.moebundle  one entry per test shape (test/device/shapes.txt)
#   bench.moebundle      Mixtral and DeepSeek-V3 gate-up, default pipeline
#   quantize.moebundle   the moe.quantize kernels (test/device/quantize_shapes.mlir)
#   wheels/moe_mlir-*.whl  the moe_mlir package (`pip wheel ./python`: the
#                        runtime library, its ctypes layer, the PyTorch module)
#   site/moe_mlir/       that wheel installed (pip install --target), which
#                        the GPU tests and bench/ put on sys.path: the GPU
#                        machine needs no pip, compiler or network for it
#   readme/tiny.moebundle  the README's GPU example, made by its commands
# With MOE_KERNEL_SNAPSHOT=<dir> it writes instead, for every bundle, the
# device module moe-opt makes with format=isa (PTX and manifest as text) into
# <dir>, and builds no package: scripts/compare-kernels.sh diffs two of them.
# With MOE_ONLY=<extended regex> it builds only the bundles whose name
# matches it (and the package): a device run of a few bundles.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
moe_opt=$build/bin/moe-opt
moe_translate=$build/bin/moe-translate
export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
snapshot=${MOE_KERNEL_SNAPSHOT:-}
out=${snapshot:-$root/.gpu-artifacts}
rm -rf "$out" && mkdir -p "$out"

# One function per (name E N K offsets) line: a grouped_matmul with dynamic M.
module_of() {
  while read -r name e n k off; do
    [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
    cat <<MLIR
func.func @$name(%rows: tensor<?x${k}xbf16>, %w: tensor<${e}x${n}x${k}xbf16>, %off: tensor<$((e + 1))x${off}>) -> tensor<?x${n}xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x${k}xbf16>, tensor<${e}x${n}x${k}xbf16>, tensor<$((e + 1))x${off}>) -> tensor<?x${n}xbf16>
  return %y : tensor<?x${n}xbf16>
}
MLIR
  done < "$1"
}
module_of "$root/test/device/shapes.txt" > "$out/shapes.mlir"
# The same shapes as moe.grouped_dgrad (test/device/grouped_dgrad.py): the
# gradient [M, N] times the forward's weights [E, N, K] untransposed, for
# the shapes whose N is a multiple of 8 (the gradient's TMA row pitch).
dgrad_module_of() {
  while read -r name e n k off; do
    [ -z "$name" ] || [ "${name:0:1}" = "#" ] || [ $((n % 8)) -ne 0 ] && continue
    cat <<MLIR
func.func @$name(%g: tensor<?x${n}xbf16>, %w: tensor<${e}x${n}x${k}xbf16>, %off: tensor<$((e + 1))x${off}>) -> tensor<?x${k}xbf16> {
  %dx = moe.grouped_dgrad %g, %w, %off
      : (tensor<?x${n}xbf16>, tensor<${e}x${n}x${k}xbf16>, tensor<$((e + 1))x${off}>) -> tensor<?x${k}xbf16>
  return %dx : tensor<?x${k}xbf16>
}
MLIR
  done < "$1"
}
dgrad_module_of "$root/test/device/shapes.txt" > "$out/dgrad.mlir"
# The same shapes as moe.grouped_wgrad (test/device/grouped_wgrad.py): the
# gradient [M, N] and the rows [M, K] to each expert's [N, K], for the shapes
# whose N and K are multiples of 8.
wgrad_module_of() {
  while read -r name e n k off; do
    [ -z "$name" ] || [ "${name:0:1}" = "#" ] || [ $((n % 8)) -ne 0 ] || [ $((k % 8)) -ne 0 ] && continue
    cat <<MLIR
func.func @$name(%g: tensor<?x${n}xbf16>, %x: tensor<?x${k}xbf16>, %off: tensor<$((e + 1))x${off}>) -> tensor<${e}x${n}x${k}xbf16> {
  %dw = moe.grouped_wgrad %g, %x, %off
      : (tensor<?x${n}xbf16>, tensor<?x${k}xbf16>, tensor<$((e + 1))x${off}>) -> tensor<${e}x${n}x${k}xbf16>
  return %dw : tensor<${e}x${n}x${k}xbf16>
}
MLIR
  done < "$1"
}
wgrad_module_of "$root/test/device/shapes.txt" > "$out/wgrad.mlir"
# test/device/grouped_wgrad.py: kn_weights weight gradients ([E, K, N], the
# operands swapped in the kernel), with an f32, a bf16 or no bias gradient:
# GPT-OSS-20B's gate-up ([E, H, 2I]) and two small shapes with tails.
cat > "$out/wgradkn.mlir" <<'MLIR'
func.func @kn_e8_n256_k512(%g: tensor<?x256xbf16>, %x: tensor<?x512xbf16>, %off: tensor<9xi32>) -> (tensor<8x512x256xbf16>, tensor<8x256xf32>) {
  %dw, %db = moe.grouped_wgrad %g, %x, %off kn_weights : (tensor<?x256xbf16>, tensor<?x512xbf16>, tensor<9xi32>) -> (tensor<8x512x256xbf16>, tensor<8x256xf32>)
  return %dw, %db : tensor<8x512x256xbf16>, tensor<8x256xf32>
}
func.func @kn_e16_n192_k200_i64(%g: tensor<?x192xbf16>, %x: tensor<?x200xbf16>, %off: tensor<17xi64>) -> tensor<16x200x192xbf16> {
  %dw = moe.grouped_wgrad %g, %x, %off kn_weights : (tensor<?x192xbf16>, tensor<?x200xbf16>, tensor<17xi64>) -> tensor<16x200x192xbf16>
  return %dw : tensor<16x200x192xbf16>
}
func.func @kn_gptoss_gate_up_e32(%g: tensor<?x5760xbf16>, %x: tensor<?x2880xbf16>, %off: tensor<33xi32>) -> (tensor<32x2880x5760xbf16>, tensor<32x5760xbf16>) {
  %dw, %db = moe.grouped_wgrad %g, %x, %off kn_weights : (tensor<?x5760xbf16>, tensor<?x2880xbf16>, tensor<33xi32>) -> (tensor<32x2880x5760xbf16>, tensor<32x5760xbf16>)
  return %dw, %db : tensor<32x2880x5760xbf16>, tensor<32x5760xbf16>
}
MLIR
# test/device/backward_ops.py: the backward's SIMT kernels (planned.v1).
cat > "$out/backward-ops.mlir" <<'MLIR'
func.func @swiglu_grad_silu_i256(%gu: tensor<?x512xbf16>, %dh: tensor<?x256xbf16>) -> tensor<?x512xbf16> {
  %d = moe.swiglu_grad silu %gu, %dh : (tensor<?x512xbf16>, tensor<?x256xbf16>) -> tensor<?x512xbf16>
  return %d : tensor<?x512xbf16>
}
func.func @swiglu_grad_silu(%gu: tensor<?x?xbf16>, %dh: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %d = moe.swiglu_grad silu %gu, %dh : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %d : tensor<?x?xbf16>
}
func.func @swiglu_grad_gptoss(%gu: tensor<?x?xbf16>, %dh: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %d = moe.swiglu_grad gptoss %gu, %dh alpha 1.702 limit 7.0 : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %d : tensor<?x?xbf16>
}
func.func @swiglu_silu(%gu: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %h = moe.swiglu silu %gu : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %h : tensor<?x?xbf16>
}
func.func @swiglu_grad_silu_il(%gu: tensor<?x?xbf16>, %dh: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %d = moe.swiglu_grad silu %gu, %dh interleaved : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %d : tensor<?x?xbf16>
}
func.func @swiglu_grad_gptoss_il(%gu: tensor<?x?xbf16>, %dh: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %d = moe.swiglu_grad gptoss %gu, %dh interleaved alpha 1.702 limit 7.0 : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %d : tensor<?x?xbf16>
}
func.func @swiglu_silu_il(%gu: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %h = moe.swiglu silu %gu interleaved : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %h : tensor<?x?xbf16>
}
func.func @swiglu_gptoss_il(%gu: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %h = moe.swiglu gptoss %gu interleaved alpha 1.702 limit 7.0 : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %h : tensor<?x?xbf16>
}
func.func @swiglu_gptoss(%gu: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %h = moe.swiglu gptoss %gu alpha 1.702 limit 7.0 : (tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %h : tensor<?x?xbf16>
}
func.func @unpermute_grad_mixtral(%dy: tensor<?x4096xbf16>, %o: tensor<?x4096xbf16>, %s: tensor<?x2xi64>, %w: tensor<?x2xf32>) -> (tensor<?x4096xbf16>, tensor<?x2xf32>) {
  %d, %dw = moe.unpermute_grad %dy, %o, %s weights %w : (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> (tensor<?x4096xbf16>, tensor<?x2xf32>)
  return %d, %dw : tensor<?x4096xbf16>, tensor<?x2xf32>
}
func.func @unpermute_grad_k8(%dy: tensor<?x?xbf16>, %o: tensor<?x?xbf16>, %s: tensor<?x8xi32>) -> tensor<?x?xbf16> {
  %d = moe.unpermute_grad %dy, %o, %s : (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x8xi32>) -> tensor<?x?xbf16>
  return %d : tensor<?x?xbf16>
}
func.func @route_grad_mixtral(%l: tensor<?x8xf32>, %ids: tensor<?x2xi32>, %dw: tensor<?x2xf32>) -> tensor<?x8xf32> {
  %d = moe.route_grad softmax_topk %l, %ids, %dw renormalize : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>) -> tensor<?x8xf32>
  return %d : tensor<?x8xf32>
}
func.func @route_grad_olmoe(%l: tensor<?x64xbf16>, %ids: tensor<?x8xi32>, %dw: tensor<?x8xf32>) -> tensor<?x64xbf16> {
  %d = moe.route_grad softmax_topk %l, %ids, %dw : (tensor<?x64xbf16>, tensor<?x8xi32>, tensor<?x8xf32>) -> tensor<?x64xbf16>
  return %d : tensor<?x64xbf16>
}
func.func @route_grad_deepseek(%l: tensor<?x256xf32>, %ids: tensor<?x8xi32>, %dw: tensor<?x8xf32>) -> tensor<?x256xf32> {
  %d = moe.route_grad sigmoid_topk %l, %ids, %dw renormalize scale 2.5 : (tensor<?x256xf32>, tensor<?x8xi32>, tensor<?x8xf32>) -> tensor<?x256xf32>
  return %d : tensor<?x256xf32>
}
func.func @route_grad_gptoss(%l: tensor<?x128xf32>, %ids: tensor<?x4xi32>, %dw: tensor<?x4xf32>) -> tensor<?x128xf32> {
  %d = moe.route_grad topk_softmax %l, %ids, %dw : (tensor<?x128xf32>, tensor<?x4xi32>, tensor<?x4xf32>) -> tensor<?x128xf32>
  return %d : tensor<?x128xf32>
}
MLIR
# test/device/grouped_dgrad.py: the down projection's dgrad with the
# activation's gradient in its epilogue (act_grad, --moe-fuse-backward's):
# the gradient [M, H] times the forward's [E, H, I] weights, then the gate
# and up gradients of the saved gate-up output [M, 2I].
act_dgrad_module_of() {
  while read -r name act e h i off; do
    local attrs=""
    [ "$act" = gptoss ] && attrs=" alpha 1.702 limit 7.0"
    cat <<MLIR
func.func @$name(%g: tensor<?x${h}xbf16>, %w: tensor<${e}x${h}x${i}xbf16>, %off: tensor<$((e + 1))x${off}>, %gu: tensor<?x$((2 * i))xbf16>) -> tensor<?x$((2 * i))xbf16> {
  %d = moe.grouped_dgrad %g, %w, %off act_grad $act %gu$attrs
      : (tensor<?x${h}xbf16>, tensor<${e}x${h}x${i}xbf16>, tensor<$((e + 1))x${off}>, tensor<?x$((2 * i))xbf16>) -> tensor<?x$((2 * i))xbf16>
  return %d : tensor<?x$((2 * i))xbf16>
}
MLIR
  done
}
act_dgrad_module_of > "$out/dgradact.mlir" <<'SHAPES'
silu_e8_h256_i512 silu 8 256 512 i32
silu_e16_h192_i200 silu 16 192 200 i32
silu_e128_h2048_i768 silu 128 2048 768 i32
silu_e8_h256_i256_i64 silu 8 256 256 i64
gptoss_e4_h512_i2880 gptoss 4 512 2880 i32
SHAPES
# test/device/grouped_dgrad.py: moe.grouped_matmul with kn_weights (weights
# [E, K, N] as GPT-OSS's experts lie) and a bias of the bias type given
# ("none": without one): GPT-OSS-20B's gate-up (bf16 bias) and down (f32).
kn_module_of() {
  while read -r name e k n bias off; do
    local args="" operands="" types=""
    if [ "$bias" != none ]; then
      args=", %b: tensor<${e}x${n}x${bias}>"
      operands=" bias %b"
      types=", tensor<${e}x${n}x${bias}>"
    fi
    cat <<MLIR
func.func @$name(%x: tensor<?x${k}xbf16>, %w: tensor<${e}x${k}x${n}xbf16>, %off: tensor<$((e + 1))x${off}>$args) -> tensor<?x${n}xbf16> {
  %y = moe.grouped_matmul %x, %w, %off$operands kn_weights
      : (tensor<?x${k}xbf16>, tensor<${e}x${k}x${n}xbf16>, tensor<$((e + 1))x${off}>$types) -> tensor<?x${n}xbf16>
  return %y : tensor<?x${n}xbf16>
}
MLIR
  done
}
kn_module_of > "$out/knfwd.mlir" <<'SHAPES'
kn_e8_k256_n512 8 256 512 f32 i32
kn_e16_k200_n192_i64 16 200 192 f32 i64
kn_e4_k512_n256_plain 4 512 256 none i32
gptoss_gate_up_e32_k2880_n5760 32 2880 5760 bf16 i32
gptoss_down_e32_k2880_n2880 32 2880 2880 f32 i32
SHAPES
# bench/backward_gemms.py: the input gradients of Mixtral-8x7B's and
# Qwen3-30B-A3B's down (dO . W2) and gate-up (dGU . W13) projections, and
# their weight gradients (the same [E, N, K]).
printf 'mixtral_down 8 4096 14336 i32\nmixtral_gate_up 8 28672 4096 i32\nqwen3_down 128 2048 768 i32\nqwen3_gate_up 128 1536 2048 i32\n' > "$out/dgradbench.txt"
dgrad_module_of "$out/dgradbench.txt" > "$out/dgradbench.mlir"
wgrad_module_of "$out/dgradbench.txt" > "$out/wgradbench.mlir"
printf 'mixtral_gate_up 8 28672 4096 i32\ndeepseek_gate_up 256 4096 7168 i32\n' > "$out/bench.txt"
module_of "$out/bench.txt" > "$out/bench.mlir"

bundle() { # <name> <input> <moe-opt arguments...>
  local name=$1 input=$2; shift 2
  [ -z "${MOE_ONLY:-}" ] || [[ $name =~ $MOE_ONLY ]] || return 0
  if [ -n "$snapshot" ]; then
    local args=() a
    for a in "$@"; do
      case $a in
        --moe-gpu-pipeline | --moe-gpu-device-pipeline) a="$a=format=isa" ;;
        --moe-gpu-pipeline=* | --moe-gpu-device-pipeline=*) a="$a format=isa" ;;
      esac
      args+=("$a")
    done
    "$moe_opt" "$input" "${args[@]}" -o "$out/$name.ptx.mlir"
    # The one property that differs from run to run: the time PTX took.
    sed -i -E 's/LLVMIRToISATimeInMs = [0-9]+ : i64, //' "$out/$name.ptx.mlir"
    echo "$name.ptx.mlir"
    return
  fi
  "$moe_opt" "$input" "$@" -o "$out/$name.mlir"
  "$moe_translate" --moe-to-bundle "$out/$name.mlir" -o "$out/$name.moebundle"
  rm "$out/$name.mlir"
  echo "$name.moebundle"
}
# The default pipeline: swap-AB (16 rows) for experts of <= 16 rows, a
# 64x256 tile up to 64 rows, 128x256 above.
bundle default "$out/shapes.mlir" --moe-gpu-pipeline
# moe.grouped_dgrad: the default forms (64x256 up to 64 rows, 128x256), a
# 64x128 two-stage one, warp-specialized and clustered ones.
bundle dgrad-default "$out/dgrad.mlir" --moe-gpu-pipeline
bundle dgrad-64x128-s2 "$out/dgrad.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 tile-m=64 tile-n=128 stages=2"
bundle dgrad-ws "$out/dgrad.mlir" --moe-gpu-pipeline="warp-specialize=all"
bundle dgrad-pingpong "$out/dgrad.mlir" --moe-gpu-pipeline="pingpong=1"
bundle dgrad-pingpong128 "$out/dgrad.mlir" --moe-gpu-pipeline="pingpong=1 tile-n=128 stages=5"
bundle dgrad-cluster2 "$out/dgrad.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 cluster=2"
bundle dgrad-tmastore "$out/dgrad.mlir" --moe-gpu-pipeline="tma-store=1"
bundle dgradbench "$out/dgradbench.mlir" --moe-gpu-pipeline
# The activation's gradient in the dgrad epilogue: the default forms, the
# warp-specialized ones and a 64x128 two-stage one.
bundle knfwd "$out/knfwd.mlir" --moe-gpu-pipeline
bundle dgradact-default "$out/dgradact.mlir" --moe-gpu-pipeline
bundle dgradact-ws "$out/dgradact.mlir" --moe-gpu-pipeline="warp-specialize=all"
bundle dgradact-pingpong "$out/dgradact.mlir" --moe-gpu-pipeline="pingpong=1"
bundle dgradact-64x128-s2 "$out/dgradact.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 tile-m=64 tile-n=128 stages=2"
# moe.grouped_wgrad: its one kernel.
bundle wgrad-default "$out/wgrad.mlir" --moe-gpu-pipeline
bundle wgradkn "$out/wgradkn.mlir" --moe-gpu-pipeline
bundle wgradbench "$out/wgradbench.mlir" --moe-gpu-pipeline
bundle backward-ops "$out/backward-ops.mlir" --moe-gpu-pipeline
bundle swap8-split "$out/shapes.mlir" --moe-gpu-pipeline="swap-ab-max-rows=8"
bundle split-128x128-s4 "$out/shapes.mlir" --moe-gpu-pipeline="tile-n=128"
bundle normal-64x128-s2 "$out/shapes.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 tile-m=64 tile-n=128 stages=2"
bundle normal-64x256-s4 "$out/shapes.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 tile-m=64"
bundle normal-64-128-split "$out/shapes.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0"
# The normal forms as 2-CTA clusters sharing each row tile (TMA multicast).
bundle cluster2 "$out/shapes.mlir" --moe-gpu-pipeline="cluster=2"
bundle normal-64-128-cluster2 "$out/shapes.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 cluster=2"
# The 128-row bf16 forms with a producer warpgroup too (warp-specialized).
bundle ws "$out/shapes.mlir" --moe-gpu-pipeline="warp-specialize=all"
# Ping-pong consumers (64-row items, two warpgroups), with 4 and 5 stages;
# 128 x 128 items (two accumulators a warpgroup), with 5.
bundle pingpong "$out/shapes.mlir" --moe-gpu-pipeline="pingpong=1"
bundle pingpong-s5 "$out/shapes.mlir" --moe-gpu-pipeline="pingpong=1 stages=5"
bundle pingpong128 "$out/shapes.mlir" --moe-gpu-pipeline="pingpong=1 tile-n=128 stages=5"
# TMA stores of the staged tiles whose rows are all their expert's: the
# default tiles, 64 x 128 ones (one chunk a row group), 2-CTA clusters and
# 128 x 128 ping-pong items (two row groups a warpgroup).
bundle tmastore "$out/shapes.mlir" --moe-gpu-pipeline="tma-store=1"
bundle tmastore-64x128-s2 "$out/shapes.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 tile-m=64 tile-n=128 stages=2 tma-store=1"
bundle tmastore-cluster2 "$out/shapes.mlir" --moe-gpu-pipeline="cluster=2 tma-store=1"
bundle tmastore-pingpong128 "$out/shapes.mlir" --moe-gpu-pipeline="pingpong=1 tile-n=128 stages=5 tma-store=1"
# The swap-AB forms with two warpgroups splitting K (the default for
# K >= 8192 only).
bundle swap-split2 "$out/shapes.mlir" --moe-gpu-pipeline="swap-ab-split-k=2"
bundle swap-only-64-split2 "$out/shapes.mlir" \
  --moe-select-kernels="swap-ab=1 tile-m=64 tile-n=64 stages=4 swap-ab-split-k=2" --convert-moe-to-nvgpu \
  --moe-extract-device-code --moe-gpu-device-pipeline
# Every expert through one swap-AB kernel, whatever its rows.
for tm in 8 16 32 64; do
  bundle "swap-only-$tm" "$out/shapes.mlir" \
    --moe-select-kernels="swap-ab=1 tile-m=$tm tile-n=64 stages=4" --convert-moe-to-nvgpu \
    --moe-extract-device-code --moe-gpu-device-pipeline
done
# The fused expert MLP (test/device/mlp_shapes.txt): written as
# moe.expert_mlp, and written unfused (grouped_matmul -> swiglu ->
# grouped_matmul), which --moe-gpu-pipeline fuses with --moe-fuse-experts.
mlp_module_of() { # <shapes> <fused|unfused>
  while read -r name e h i off scale; do
    [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
    local sarg="" stype="" sop="" sdown=""
    if [ "$scale" = scale ]; then
      sarg=", %s: tensor<?xf32>"; stype=", tensor<?xf32>"; sop=" scale %s"
    fi
    echo "func.func @$name(%rows: tensor<?x${h}xbf16>, %off: tensor<$((e + 1))x${off}>, %w13: tensor<${e}x$((2 * i))x${h}xbf16>, %w2: tensor<${e}x${h}x${i}xbf16>$sarg) -> tensor<?x${h}xbf16> {"
    if [ "$2" = fused ]; then
      echo "  %y = moe.expert_mlp silu %rows, %off, %w13, %w2$sop : (tensor<?x${h}xbf16>, tensor<$((e + 1))x${off}>, tensor<${e}x$((2 * i))x${h}xbf16>, tensor<${e}x${h}x${i}xbf16>$stype) -> tensor<?x${h}xbf16>"
    else
      echo "  %gu = moe.grouped_matmul %rows, %w13, %off : (tensor<?x${h}xbf16>, tensor<${e}x$((2 * i))x${h}xbf16>, tensor<$((e + 1))x${off}>) -> tensor<?x$((2 * i))xbf16>"
      echo "  %hh = moe.swiglu silu %gu : (tensor<?x$((2 * i))xbf16>) -> tensor<?x${i}xbf16>"
      echo "  %y = moe.grouped_matmul %hh, %w2, %off$sop : (tensor<?x${i}xbf16>, tensor<${e}x${h}x${i}xbf16>, tensor<$((e + 1))x${off}>$stype) -> tensor<?x${h}xbf16>"
    fi
    echo "  return %y : tensor<?x${h}xbf16>"
    echo "}"
  done < "$1"
}
mlp_module_of "$root/test/device/mlp_shapes.txt" fused > "$out/mlp.mlir"
mlp_module_of "$root/test/device/mlp_shapes.txt" unfused > "$out/mlp-chain.mlir"
bundle mlp-default "$out/mlp.mlir" --moe-gpu-pipeline
bundle mlp-unfused "$out/mlp-chain.mlir" --moe-gpu-pipeline
bundle mlp-swap8-split "$out/mlp.mlir" --moe-gpu-pipeline="swap-ab-max-rows=8"
bundle mlp-128x128 "$out/mlp.mlir" --moe-gpu-pipeline="tile-n=128"
bundle mlp-swap-only "$out/mlp.mlir" \
  --moe-select-kernels="swap-ab=1 tile-m=16 tile-n=64 stages=4" --convert-moe-to-nvgpu \
  --moe-extract-device-code --moe-gpu-device-pipeline
bundle mlp-normal-64x256 "$out/mlp.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 tile-m=64"
bundle mlp-cluster2 "$out/mlp.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 cluster=2"
bundle mlp-ws "$out/mlp.mlir" --moe-gpu-pipeline="warp-specialize=all"
bundle mlp-pingpong "$out/mlp.mlir" --moe-gpu-pipeline="pingpong=1"
bundle mlp-pingpong128 "$out/mlp.mlir" --moe-gpu-pipeline="pingpong=1 tile-n=128 stages=5"
bundle mlp-tmastore "$out/mlp.mlir" --moe-gpu-pipeline="tma-store=1"

printf 'mixtral_mlp 8 4096 14336 i32 scale\nqwen3_mlp 128 2048 768 i32 scale\ndeepseek_mlp 256 7168 2048 i32 scale\n' > "$out/bench-mlp.txt"
mlp_module_of "$out/bench-mlp.txt" fused > "$out/bench-mlp.mlir"
bundle mlpbench-default "$out/bench-mlp.mlir" --moe-gpu-pipeline
bundle mlpbench-swap8 "$out/bench-mlp.mlir" --moe-gpu-pipeline="swap-ab-stages=8"
bundle mlpbench-swap12 "$out/bench-mlp.mlir" --moe-gpu-pipeline="swap-ab-stages=12"

# Block FP8 (test/device/fp8_shapes.txt): grouped_matmuls of dequantized
# e4m3 rows ([1, 128] f32 scales) and weights ([128, 128] f32 scales).
fp8_module_of() { # <shapes>
  while read -r name e n k off epilogue; do
    [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
    local kb=$((k / 128)) nb=$((n / 128)) sarg="" stype="" sop=""
    if [ "$epilogue" = row_scale ]; then
      sarg=", %s: tensor<?xf32>"; stype=", tensor<?xf32>"; sop=" scale %s"
    fi
    cat <<MLIR
func.func @$name(%xq: tensor<?x${k}xf8E4M3FN>, %xs: tensor<?x${kb}xf32>, %wq: tensor<${e}x${n}x${k}xf8E4M3FN>, %ws: tensor<${e}x${nb}x${kb}xf32>, %off: tensor<$((e + 1))x${off}>$sarg) -> tensor<?x${n}xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32> : tensor<?x${k}xf8E4M3FN>, tensor<?x${kb}xf32> -> tensor<?x${k}xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [128, 128], f32> : tensor<${e}x${n}x${k}xf8E4M3FN>, tensor<${e}x${nb}x${kb}xf32> -> tensor<${e}x${n}x${k}xbf16>
  %y = moe.grouped_matmul %x, %w, %off$sop : (tensor<?x${k}xbf16>, tensor<${e}x${n}x${k}xbf16>, tensor<$((e + 1))x${off}>$stype) -> tensor<?x${n}xbf16>
  return %y : tensor<?x${n}xbf16>
}
MLIR
  done < "$1"
}
fp8_module_of "$root/test/device/fp8_shapes.txt" > "$out/fp8.mlir"
bundle fp8-default "$out/fp8.mlir" --moe-gpu-pipeline
bundle fp8-swap8-split "$out/fp8.mlir" --moe-gpu-pipeline="swap-ab-max-rows=8"
bundle fp8-normal-64-128-split "$out/fp8.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0"
bundle fp8-normal-64 "$out/fp8.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 tile-m=64"
bundle fp8-cluster2 "$out/fp8.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 cluster=2"
# The 128-row forms without their producer warpgroup (the default has one).
bundle fp8-single "$out/fp8.mlir" --moe-gpu-pipeline="warp-specialize=none"
# The 128-row forms 128 columns wide (the default: 192).
bundle fp8-n128 "$out/fp8.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 fp8-tile-n=128"
bundle fp8-s5 "$out/fp8.mlir" --moe-gpu-pipeline="fp8-stages=5"
bundle fp8-tmastore "$out/fp8.mlir" --moe-gpu-pipeline="tma-store=1"
bundle fp8-swap-split2 "$out/fp8.mlir" --moe-gpu-pipeline="swap-ab-split-k=2"
bundle fp8-swap-only-16-split2 "$out/fp8.mlir" \
  --moe-select-kernels="swap-ab=1 tile-m=16 tile-n=64 stages=4 swap-ab-split-k=2" --convert-moe-to-nvgpu \
  --moe-extract-device-code --moe-gpu-device-pipeline
for tm in 8 64; do
  bundle "fp8-swap-only-$tm" "$out/fp8.mlir" \
    --moe-select-kernels="swap-ab=1 tile-m=$tm tile-n=64 stages=4" --convert-moe-to-nvgpu \
    --moe-extract-device-code --moe-gpu-device-pipeline
done
# MXFP8 (OCP MX): the same shapes and a K of 2880 (no multiple of 128), e4m3
# rows and weights with one E8M0 scale per 32 K.
mx_module_of() { # <shapes>
  while read -r name e n k off epilogue; do
    [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
    local kb=$((k / 32)) sarg="" stype="" sop=""
    if [ "$epilogue" = row_scale ]; then
      sarg=", %s: tensor<?xf32>"; stype=", tensor<?xf32>"; sop=" scale %s"
    fi
    cat <<MLIR
func.func @$name(%xq: tensor<?x${k}xf8E4M3FN>, %xs: tensor<?x${kb}xf8E8M0FNU>, %wq: tensor<${e}x${n}x${k}xf8E4M3FN>, %ws: tensor<${e}x${n}x${kb}xf8E8M0FNU>, %off: tensor<$((e + 1))x${off}>$sarg) -> tensor<?x${n}xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x${k}xf8E4M3FN>, tensor<?x${kb}xf8E8M0FNU> -> tensor<?x${k}xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<${e}x${n}x${k}xf8E4M3FN>, tensor<${e}x${n}x${kb}xf8E8M0FNU> -> tensor<${e}x${n}x${k}xbf16>
  %y = moe.grouped_matmul %x, %w, %off$sop : (tensor<?x${k}xbf16>, tensor<${e}x${n}x${k}xbf16>, tensor<$((e + 1))x${off}>$stype) -> tensor<?x${n}xbf16>
  return %y : tensor<?x${n}xbf16>
}
MLIR
  done < "$1"
}
{ cat "$root/test/device/fp8_shapes.txt"; echo "mx_e4_n320_k2880 4 320 2880 i32 row_scale"; } > "$out/mx_shapes.txt"
mx_module_of "$out/mx_shapes.txt" > "$out/mx.mlir"
bundle mx-default "$out/mx.mlir" --moe-gpu-pipeline
bundle mx-swap8-split "$out/mx.mlir" --moe-gpu-pipeline="swap-ab-max-rows=8"
bundle mx-normal-64-128-split "$out/mx.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0"
bundle mx-normal-64 "$out/mx.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 tile-m=64"
bundle mx-cluster2 "$out/mx.mlir" --moe-gpu-pipeline="swap-ab-max-rows=0 cluster=2"
# The 128-row forms without the producer warpgroup (consumers stage the scales).
bundle mx-unspecialized "$out/mx.mlir" --moe-gpu-pipeline="warp-specialize=none"
# The normal forms widening e4m3 to bf16 in shared memory instead.
bundle mx-widen "$out/mx.mlir" --moe-gpu-pipeline="mxfp8-widen=1"
for tm in 8 64; do
  bundle "mx-swap-only-$tm" "$out/mx.mlir" \
    --moe-select-kernels="swap-ab=1 tile-m=$tm tile-n=64 stages=4" --convert-moe-to-nvgpu \
    --moe-extract-device-code --moe-gpu-device-pipeline
done
bundle mxchain "$root/test/device/fp8_chain.mlir" \
  --moe-quantize="format=mxfp8 scope=weights+activations" --moe-gpu-pipeline
# A bf16 GEMM and a GPT-OSS-style expert MLP quantized by the compiler:
# prepack, row quantize, FP8 GEMMs (the MLP's bf16 gate-up and the
# activation's quantize kernel; in fp8chain-epilogue the gate-up quantizes
# it in its epilogue).
bundle fp8chain "$root/test/device/fp8_chain.mlir" \
  --moe-quantize="scope=weights+activations" --moe-gpu-pipeline
bundle fp8chain-epilogue "$root/test/device/fp8_chain.mlir" \
  --moe-quantize="scope=weights+activations" \
  --moe-gpu-pipeline="fp8-epilogue-quantize=1"
# DeepSeek-V3's expert GEMMs in block FP8 for bench/fp8_grouped_matmul.py.
printf 'deepseek_gate_up 256 4096 7168 i32 store\ndeepseek_down 256 7168 2048 i32 row_scale\n' > "$out/fp8bench.txt"
fp8_module_of "$out/fp8bench.txt" > "$out/fp8bench.mlir"
bundle fp8bench-default "$out/fp8bench.mlir" --moe-gpu-pipeline

# Routing, permutation and combine kernels (test/device/routing.py), and
# whole layers of four models (test/device/layer.py).
bundle routing "$root/test/device/routing_shapes.mlir" --moe-gpu-pipeline
bundle layer "$root/test/device/layer_models.mlir" --moe-gpu-pipeline
# Layers with a shared expert run as routed experts (test/device/shared_layer.py),
# in bf16 and, quantized after the rewrite, in block FP8.
bundle layer-shared "$root/test/device/layer_shared_models.mlir" --moe-gpu-pipeline
bundle layer-shared-fp8 "$root/test/device/layer_shared_models.mlir" --moe-fuse-experts \
  --moe-route-shared-experts=pack-function=false \
  --moe-quantize="format=fp8-block scope=weights+activations" --moe-gpu-pipeline
# The same with the prefill GEMM forms as 2-CTA clusters (bench/ab_layer.py).
bundle layer-cluster2 "$root/test/device/layer_models.mlir" --moe-gpu-pipeline="cluster=2"
bundle layer-ws "$root/test/device/layer_models.mlir" --moe-gpu-pipeline="warp-specialize=all"
bundle layer-pingpong "$root/test/device/layer_models.mlir" --moe-gpu-pipeline="pingpong=1"
bundle layer-pingpong-s5 "$root/test/device/layer_models.mlir" --moe-gpu-pipeline="pingpong=1 stages=5"
bundle layer-pingpong128 "$root/test/device/layer_models.mlir" --moe-gpu-pipeline="pingpong=1 tile-n=128 stages=5"
bundle layer-128x128 "$root/test/device/layer_models.mlir" --moe-gpu-pipeline="tile-n=128"
bundle layer-tmastore "$root/test/device/layer_models.mlir" --moe-gpu-pipeline="tma-store=1"
# Without the split-K swap-AB forms (bench/ab_layer.py).
bundle layer-nosplit "$root/test/device/layer_models.mlir" --moe-gpu-pipeline="swap-ab-split-k=1"
# test/device/decode_layer.py: the layers with their decode kernel
# (docs/decode-kernel.md), against layer.moebundle.
bundle layer-decode "$root/test/device/layer_models.mlir" --moe-gpu-pipeline="decode-max-tokens=16"
# The same layers in block FP8 (test/device/fp8_layer.py), but GPT-OSS
# (H = 2880: no whole [1, 128] groups): prepack entries and layer_fp8.v1.
awk '/^func.func @gpt_oss_120b/ { skip = 1 } !skip { print } skip && /^}/ { skip = 0 }' \
  "$root/test/device/layer_models.mlir" > "$out/fp8_layer_models.mlir"
bundle fp8layer "$out/fp8_layer_models.mlir" \
  --moe-quantize="scope=weights+activations" --moe-gpu-pipeline
# The gate-up quantizing the activation in its epilogue, and the reference
# form: a bf16 gather and gate-up, each followed by a quantize kernel.
bundle fp8layer-epilogue "$out/fp8_layer_models.mlir" \
  --moe-quantize="scope=weights+activations" \
  --moe-gpu-pipeline="fp8-epilogue-quantize=1"
bundle fp8layer-separate "$out/fp8_layer_models.mlir" \
  --moe-quantize="scope=weights+activations" \
  --moe-gpu-pipeline="fp8-gather-quantize=0"
# The permute's scatter over the tokens (each quantized once) at every T,
# and at none (the default: from T = 128 on; bench/ab_layer.py).
bundle fp8layer-scatter "$out/fp8_layer_models.mlir" \
  --moe-quantize="scope=weights+activations" \
  --moe-gpu-pipeline="fp8-scatter-min-tokens=1"
bundle fp8layer-gather "$out/fp8_layer_models.mlir" \
  --moe-quantize="scope=weights+activations" \
  --moe-gpu-pipeline="fp8-scatter-min-tokens=0"
# A k = 20 layer's scatter (slots read where stored) and its reference.
bundle fp8permute-scatter "$root/test/device/fp8_permutes.mlir" \
  --moe-quantize="scope=weights+activations" \
  --moe-gpu-pipeline="fp8-scatter-min-tokens=1"
bundle fp8permute-separate "$root/test/device/fp8_permutes.mlir" \
  --moe-quantize="scope=weights+activations" \
  --moe-gpu-pipeline="fp8-gather-quantize=0"
bundle fp8layer-cluster2 "$out/fp8_layer_models.mlir" \
  --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="cluster=2"
bundle fp8layer-single "$out/fp8_layer_models.mlir" \
  --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="warp-specialize=none"
bundle fp8layer-nosplit "$out/fp8_layer_models.mlir" \
  --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="swap-ab-split-k=1"
# Five stages in the FP8 prefill forms (bench/ab_layer.py).
bundle fp8layer-s5 "$out/fp8_layer_models.mlir" \
  --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="fp8-stages=5"
# TMA stores of the down GEMM's output (bench/ab_layer.py).
bundle fp8layer-tmastore "$out/fp8_layer_models.mlir" \
  --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="tma-store=1"
# The 128-row forms 128 columns wide (bench/ab_layer.py baseline).
bundle fp8layer-n128 "$out/fp8_layer_models.mlir" \
  --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="fp8-tile-n=128"
# All five layers in MXFP8 (test/device/mxfp8_layer.py; GPT-OSS's 2880 is
# a multiple of 32): layer_fp8.v1 with quantize and intermediate parts.
bundle mxlayer "$root/test/device/layer_models.mlir" \
  --moe-quantize="format=mxfp8 scope=weights+activations" --moe-gpu-pipeline
# The same with unspecialized prefill forms (consumers stage the scales
# behind a CTA barrier per K step; bench/ab_layer.py baseline).
bundle mxlayer-unspecialized "$root/test/device/layer_models.mlir" \
  --moe-quantize="format=mxfp8 scope=weights+activations" \
  --moe-gpu-pipeline="warp-specialize=none"
# The same with the prefill forms widening to bf16 (mxfp8_layer.py --bench).
bundle mxlayer-widen "$root/test/device/layer_models.mlir" \
  --moe-quantize="format=mxfp8 scope=weights+activations" \
  --moe-gpu-pipeline="mxfp8-widen=1"
# The same as bf16 GEMMs on the exact dequantized values (gemm=dequantized:
# layer.v1 with the rows' and the activation's round trips; prepack entries
# returning the dequantized weights).
bundle mxlayer-bf16 "$root/test/device/layer_models.mlir" \
  --moe-quantize="format=mxfp8 scope=weights+activations gemm=dequantized" \
  --moe-gpu-pipeline
# The same with the activation's round trip a kernel of its own after the
# gate-up GEMM (mxfp8_layer.py --bench: the epilogue's A/B).
bundle mxlayer-bf16-separate "$root/test/device/layer_models.mlir" \
  --moe-quantize="format=mxfp8 scope=weights+activations gemm=dequantized" \
  --moe-gpu-pipeline="fuse-round-trips=0"
# The same with TMA stores of the down GEMM's output (bench/ab_layer.py).
bundle mxlayer-bf16-tmastore "$root/test/device/layer_models.mlir" \
  --moe-quantize="format=mxfp8 scope=weights+activations gemm=dequantized" \
  --moe-gpu-pipeline="tma-store=1"
# The quantize kernel (test/device/quantize.py): every encoding it
# implements, bf16 and f32 inputs.
bundle quantize "$root/test/device/quantize_shapes.mlir" --moe-gpu-pipeline

bundle bench-64x256 "$out/bench.mlir" --moe-gpu-pipeline="tile-m=64"
bundle bench-default "$out/bench.mlir" --moe-gpu-pipeline
bundle bench-swap8 "$out/bench.mlir" --moe-gpu-pipeline="swap-ab-stages=8"

[ -n "$snapshot" ] && exit 0
# The README's GPU example, by its own commands (test/device/readme.py).
mkdir -p "$out/readme"
(cd "$out/readme" &&
  "$moe_opt" "$root/examples/consumer/tiny_layer.mlir" --moe-gpu-pipeline -o tiny.gpu.mlir &&
  "$moe_translate" --moe-to-bundle tiny.gpu.mlir -o tiny.moebundle && rm tiny.gpu.mlir)
echo readme/tiny.moebundle
# The wheel is py3-none-<platform> (the library is loaded with ctypes), so
# installed here it serves whatever Python 3 the GPU machine has.
python=$root/.venv/bin/python
[ -x "$python" ] || python=python3
llvm=/usr/lib/llvm-22
if [ -x $llvm/bin/clang ]; then
  export CC=${CC:-$llvm/bin/clang} CXX=${CXX:-$llvm/bin/clang++}
fi
"$python" -m pip wheel --quiet --no-deps -w "$out/wheels" "$root/python"
"$python" -m pip install --quiet --no-deps --no-index --no-compile \
  --target "$out/site" "$out"/wheels/moe_mlir-*.whl
ls -l "$out" "$out/wheels" "$out/site/moe_mlir"
