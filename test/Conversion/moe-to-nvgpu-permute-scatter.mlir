// A block-FP8 layer's quantizing permute gets a fourth kernel, the scatter
// over the tokens (each quantized once and stored to the rows its k slots
// name), which the runtime launches instead of the gather from T =
// scatter_from on (fp8-scatter-min-tokens, default 128; 0: none). The loop
// over a token's slots is unrolled, so layers of different k get different
// scatter kernels (k is in the name: one shared kernel would store k = 2
// slots for a k = 4 layer's tokens) beside their one gather. k = 2 and
// k = 4: the 4 tokens * k slots are read up front; k = 20 (80 slots, too
// many registers): each slot where it is stored, inside its token's
// branch. The whole pipeline assembles them.
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-fuse-experts --moe-fuse-layer --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-fuse-experts --moe-fuse-layer --moe-select-kernels="fp8-scatter-min-tokens=1" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=ALWAYS
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-fuse-experts --moe-fuse-layer --moe-select-kernels="fp8-scatter-min-tokens=0" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=NONE
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: grep -aE "^kernel [a-z0-9]+_permute moe_permute_scatter" %t.moebundle | FileCheck %s --check-prefix=BUNDLE

// CHECK: moe.permute {{.*}}moe.launch = {{.*}}{kernel = @moe_kernels::@moe_permute_gather_off64_e4m3}, {kernel = @moe_kernels::@moe_permute_scatter_k2_off64_e4m3}], {{.*}}out = "f8E4M3FN", plan = {{.*}}, scatter_from = 128 : i64, top_k = 2
// CHECK: moe.permute {{.*}}moe.launch = {{.*}}{kernel = @moe_kernels::@moe_permute_gather_off64_e4m3}, {kernel = @moe_kernels::@moe_permute_scatter_k4_off64_e4m3}], {{.*}}out = "f8E4M3FN", plan = {{.*}}, scatter_from = 128 : i64, top_k = 4
// CHECK: moe.permute {{.*}}moe.launch = {{.*}}{kernel = @moe_kernels::@moe_permute_gather_off64_e4m3}, {kernel = @moe_kernels::@moe_permute_scatter_k20_off64_e4m3}], {{.*}}scatter_from = 128 : i64, top_k = 20
// ALWAYS-COUNT-3: moe.permute {{.*}}scatter_from = 1 : i64
// NONE-NOT: scatter
// NONE: moe.permute {{.*}}@moe_permute_gather_off64_e4m3}], {{.*}}out = "f8E4M3FN", plan = {{.*}}, top_k = 2
// NONE-NOT: scatter
// CHECK-LABEL: gpu.func @moe_permute_scatter_k2_off64_e4m3(
// CHECK-COUNT-8: memref.load {{.*}} : memref<?x?xi64>
// CHECK-NOT: memref.load {{.*}} : memref<?x?xi64>
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @moe_permute_scatter_k4_off64_e4m3(
// CHECK-COUNT-16: memref.load {{.*}} : memref<?x?xi64>
// CHECK-NOT: memref.load {{.*}} : memref<?x?xi64>
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @moe_permute_scatter_k20_off64_e4m3(
// CHECK-NOT: memref.load {{.*}} : memref<?x?xi64>
// CHECK: nvvm.convert.f32x2.to.f8x2
// CHECK: scf.if
// CHECK-COUNT-20: memref.load {{.*}} : memref<?x?xi64>
// CHECK: gpu.return

// BUNDLE: kernel k2_permute moe_permute_scatter_k2_off64_e4m3
// BUNDLE: kernel k4_permute moe_permute_scatter_k4_off64_e4m3
// BUNDLE: kernel k20_permute moe_permute_scatter_k20_off64_e4m3

func.func @k2(%x: tensor<?x256xbf16>, %logits: tensor<?x4xf32>,
              %w13: tensor<4x768x256xbf16>, %w2: tensor<4x256x384xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x256xbf16>, tensor<4x768x256xbf16>, tensor<5xi64>) -> tensor<?x768xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x768xbf16>) -> tensor<?x384xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x384xbf16>, tensor<4x256x384xbf16>, tensor<5xi64>) -> tensor<?x256xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x256xbf16>
  return %out : tensor<?x256xbf16>
}

func.func @k4(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>,
              %w13: tensor<8x768x256xbf16>, %w2: tensor<8x256x384xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 4 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x4xi32>, tensor<?x4xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x4xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x4xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x256xbf16>, tensor<8x768x256xbf16>, tensor<9xi64>) -> tensor<?x768xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x768xbf16>) -> tensor<?x384xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x384xbf16>, tensor<8x256x384xbf16>, tensor<9xi64>) -> tensor<?x256xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x256xbf16>
  return %out : tensor<?x256xbf16>
}

func.func @k20(%x: tensor<?x256xbf16>, %logits: tensor<?x32xf32>,
               %w13: tensor<32x256x256xbf16>, %w2: tensor<32x256x128xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 20 renormalize
      : (tensor<?x32xf32>) -> (tensor<?x20xi32>, tensor<?x20xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x20xi32>) -> (tensor<?x256xbf16>, tensor<33xi64>, tensor<?x20xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x256xbf16>, tensor<32x256x256xbf16>, tensor<33xi64>) -> tensor<?x256xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x128xbf16>, tensor<32x256x128xbf16>, tensor<33xi64>) -> tensor<?x256xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x20xi64>, tensor<?x20xf32>) -> tensor<?x256xbf16>
  return %out : tensor<?x256xbf16>
}
