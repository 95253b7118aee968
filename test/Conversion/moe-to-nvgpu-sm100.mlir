// RUN: moe-opt %s --moe-select-kernels="swap-ab-max-rows=0 chip=sm_100a" --convert-moe-to-nvgpu --split-input-file --mlir-print-op-on-diagnostic=false -verify-diagnostics | FileCheck %s

// chip=sm_100a: an MXFP8 grouped_matmul (e4m3 rows and weights, one
// f8E8M0FNU scale per 32 K) becomes one tcgen05 kernel of a
// grouped_matmul_fp8.v1 entry with format mxfp8; both dequantizes become
// part of the launch. The scales are bytes in the kernel's arguments.
// CHECK-LABEL: func @mxfp8
// CHECK: moe.dequantize {{.*}} {moe.fused_into_launch}
// CHECK: moe.dequantize {{.*}} {moe.fused_into_launch}
// CHECK: moe.grouped_matmul {{.*}} moe.launch = {abi = "grouped_matmul_fp8.v1", activation = "none", bias = "none", epilogue = "store", experts = 8 : i64, format = "mxfp8", k = 512 : i64,
// CHECK-SAME: kernels = [{kernel = @moe_kernels::@grouped_matmul_mxfp8_tcgen05_128x128x128_s4_off32, rows_max = 2147483647 : i64, rows_min = 1 : i64}]
// CHECK-SAME: n = 256 : i64
// CHECK: gpu.func @grouped_matmul_mxfp8_tcgen05_128x128x128_s4_off32(%{{.*}}: !llvm.ptr {llvm.align = 64 : i64}, %{{.*}}: !llvm.ptr {llvm.align = 64 : i64}, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x?xbf16>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: memref<?x?xi8>, %{{.*}}: memref<?x?x?xi8>)
// CHECK: nvvm.tcgen05.alloc
// CHECK: nvvm.tcgen05.relinquish_alloc_permit
// CHECK: nvgpu.tma.async.load
// CHECK: nvgpu.tma.async.load
// CHECK: nvvm.tcgen05.cp
// CHECK: nvvm.tcgen05.cp
// The descriptor words: A and B K-major 128B-swizzled (0x4000404000010000),
// the idesc of MMA k (M 128, N 128, E4M3 x E4M3, UE8M0, scale byte k).
// CHECK: arith.constant 4611756662049538048 : i64
// CHECK: arith.constant 144703488 : i32
// CHECK: nvvm.tcgen05.mma.block_scale {{.*}} {blockScale = #nvvm.tcgen05_mma_block_scale<block32>, ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.block_scale_kind<mxf8f6f4>}
// CHECK: arith.constant 681574416 : i32
// CHECK: nvvm.tcgen05.mma.block_scale
// CHECK: arith.constant 1218445344 : i32
// CHECK: nvvm.tcgen05.mma.block_scale
// CHECK: arith.constant 1755316272 : i32
// CHECK: nvvm.tcgen05.mma.block_scale
// CHECK: nvvm.tcgen05.commit
// CHECK: nvvm.tcgen05.ld {{.*}} {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<16xi32>
// CHECK: nvvm.tcgen05.wait <load>
// CHECK: nvvm.tcgen05.dealloc
func.func @mxfp8(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x16xf8E8M0FNU>,
                 %wq: tensor<8x256x512xf8E4M3FN>, %ws: tensor<8x256x16xf8E8M0FNU>,
                 %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x512xf8E4M3FN>, tensor<?x16xf8E8M0FNU> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
      : tensor<8x256x512xf8E4M3FN>, tensor<8x256x16xf8E8M0FNU> -> tensor<8x256x512xbf16>
  %y = moe.grouped_matmul %x, %w, %off
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// bf16 operands have no sm_100a kernel yet.
func.func @bf16(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  // expected-error @+1 {{cannot be lowered to sm_100a yet: only MXFP8 operands are implemented}}
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}

// -----

// Neither has Hopper's block FP8 (f32 scales, [1, 128] and [128, 128]).
func.func @block_fp8(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x4xf32>,
                     %wq: tensor<8x256x512xf8E4M3FN>, %ws: tensor<8x2x4xf32>,
                     %off: tensor<9xi32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 128], f32>
      : tensor<?x512xf8E4M3FN>, tensor<?x4xf32> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [128, 128], f32>
      : tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32> -> tensor<8x256x512xbf16>
  // expected-error @+1 {{cannot be lowered to sm_100a yet: only MXFP8 operands are implemented}}
  %y = moe.grouped_matmul %x, %w, %off
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// The epilogues other than the plain store are not implemented on sm_100a.
func.func @mxfp8_row_scale(%xq: tensor<?x512xf8E4M3FN>, %xs: tensor<?x16xf8E8M0FNU>,
                           %wq: tensor<8x256x512xf8E4M3FN>, %ws: tensor<8x256x16xf8E8M0FNU>,
                           %off: tensor<9xi32>, %weight: tensor<?xf32>) -> tensor<?x256xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x512xf8E4M3FN>, tensor<?x16xf8E8M0FNU> -> tensor<?x512xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
      : tensor<8x256x512xf8E4M3FN>, tensor<8x256x16xf8E8M0FNU> -> tensor<8x256x512xbf16>
  // expected-error @+1 {{cannot be lowered to sm_100a yet: bias and row_scale epilogues are not implemented}}
  %y = moe.grouped_matmul %x, %w, %off scale %weight
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>, tensor<?xf32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// Nor the routing ops.
func.func @route(%logits: tensor<?x256xf32>, %b: tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>) {
  // expected-error @+1 {{cannot be lowered to sm_100a yet: only moe.grouped_matmul of MXFP8 operands has an sm_100a kernel}}
  %ids, %w = moe.route sigmoid_topk %logits bias %b top 8 groups 8 select 4 renormalize scale 2.5
      : (tensor<?x256xf32>, tensor<256xf32>) -> (tensor<?x8xi32>, tensor<?x8xf32>)
  return %ids, %w : tensor<?x8xi32>, tensor<?x8xf32>
}
