// quantize.v1 from the compiler to the runtime's reader: moe-opt compiles
// moe.quantize ops (MXFP8 of 3-D f32 experts, and the [1, 128] activation
// groups whose values and scales a block-FP8 grouped matmul reads: the
// dequantize between them has no kernel), moe-translate writes the bundle,
// and moe-bundle-info (no MLIR inside) reads the same entries back.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: moe-bundle-info %t.moebundle | FileCheck %s
// RUN: FileCheck %s --check-prefix=LINES --input-file %t.moebundle
// A bundle line of another block than the kernels implement is refused.
// RUN: sed -e 's/block_cols=32 rank=3/block_cols=48 rank=3/' %t.moebundle > %t.bad.moebundle
// RUN: not moe-bundle-info %t.bad.moebundle 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK: bundle version=7 chip=sm_90a images=1 entries=3
// CHECK-NEXT: entry experts op=moe.quantize abi=quantize.v1 max_rows=64 element=f8E5M2 scale=e8m0 input=f32 block_rows=1 block_cols=32 rank=3 batch=-1 rows=64 cols=256
// CHECK-NEXT: kernel moe_quantize_f32_e5m2_e8m0_1x32 threads=256 smem=0 image=moe_kernels
// CHECK-NEXT: entry gemm op=moe.quantize abi=quantize.v1 max_rows=2147483647 element=f8E4M3FN scale=f32 input=bf16 block_rows=1 block_cols=128 rank=2 batch=1 rows=-1 cols=512
// CHECK-NEXT: kernel moe_quantize_bf16_e4m3_f32_1x128 threads=256 smem=0 image=moe_kernels
// CHECK-NEXT: entry gemm_0 op=moe.grouped_matmul abi=grouped_matmul_fp8.v1 format=fp8_block epilogue=store experts=8 n=256 k=512

// The writer's key order.
// LINES: entry experts op=moe.quantize abi=quantize.v1 max_rows=64 element=f8E5M2 scale=e8m0 input=f32 block_rows=1 block_cols=32 rank=3 batch=-1 rows=64 cols=256
// LINES-NEXT: kernel experts moe_quantize_f32_e5m2_e8m0_1x32 image=moe_kernels threads=256 smem=0

// BAD: moe-bundle-info: error: {{.*}}entry 'experts': block [1, 48] has no kernel
func.func @experts(%x: tensor<?x64x256xf32>) -> (tensor<?x64x256xf8E5M2>, tensor<?x64x8xf8E8M0FNU>) {
  %q, %s = moe.quantize %x to <f8E5M2, [1, 32], f8E8M0FNU>
      : tensor<?x64x256xf32> -> tensor<?x64x256xf8E5M2>, tensor<?x64x8xf8E8M0FNU>
  return %q, %s : tensor<?x64x256xf8E5M2>, tensor<?x64x8xf8E8M0FNU>
}
func.func @gemm(%x: tensor<?x512xbf16>, %wq: tensor<8x256x512xf8E4M3FN>, %ws: tensor<8x2x4xf32>,
                %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %xq, %xs = moe.quantize %x to <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xbf16> -> tensor<?x512xf8E4M3FN>, tensor<?x4xf32>
  %xd = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [128, 128], f32>
      : tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %xd, %w, %off
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
