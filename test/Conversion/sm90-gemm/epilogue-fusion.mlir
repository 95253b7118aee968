// The sm_90a grouped GEMM's per-value epilogue fusion
// (Sm90Gemm/EpilogueFusion.cpp), on the fused expert MLP's two GEMMs:
// + bias, the gated activation of a gate value and its up partner, * the
// row's routing weight, before the value is rounded to bf16.
// RUN: moe-opt %s --convert-moe-to-nvgpu --split-input-file | FileCheck %s

// SiLU: the gate-up kernel (no bias argument) computes, per output value,
// gate * 1 / (1 + 2^(-gate x log2 e)) * up, its up partner 128 / 4 = 32
// registers on: 64 output columns, 32 values, 32 ex2 per thread. The down
// kernel takes the routing weights and multiplies each value by its row's
// (two fragment rows, two weights); no activation there.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x128x64_s2_swiglu_off32(
// CHECK-SAME: %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32) workgroup(
// CHECK: %[[UP:.*]] = llvm.extractvalue %[[REGS:[0-9]+]][0, 32] :
// CHECK-NEXT: %[[GATE:.*]] = llvm.extractvalue %[[REGS]][0, 0] :
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[NEG:.*]] = arith.negf %[[GATE]] : f32
// CHECK-NEXT: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK-NEXT: %[[X:.*]] = arith.mulf %[[NEG]], %[[LOG2E]] : f32
// CHECK-NEXT: %[[EXP:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[X]]) : (f32) -> f32
// CHECK-NEXT: %[[DEN:.*]] = arith.addf %[[ONE]], %[[EXP]] : f32
// CHECK-NEXT: %[[SIG:.*]] = arith.divf %[[ONE]], %[[DEN]] : f32
// CHECK-NEXT: %[[SILU:.*]] = arith.mulf %[[GATE]], %[[SIG]] : f32
// CHECK-NEXT: %[[H:.*]] = arith.mulf %[[SILU]], %[[UP]] : f32
// CHECK-NEXT: arith.truncf %[[H]] : f32 to bf16
// CHECK-COUNT-31: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK-NOT: llvm.call_intrinsic
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x128x64_s2_rowscale_off32(
// CHECK-SAME: %{{.*}}: i32, %[[SCALE:[a-z0-9_]+]]: memref<?xf32>) workgroup(
// CHECK: %[[W0:.*]] = memref.load %[[SCALE]][%{{.*}}] : memref<?xf32>
// CHECK: %[[W1:.*]] = memref.load %[[SCALE]][%{{.*}}] : memref<?xf32>
// CHECK: %[[V:.*]] = llvm.extractvalue %{{.*}}[0, 0] :
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[V]], %[[W0]] : f32
// CHECK-NEXT: arith.truncf %[[P]] : f32 to bf16
// CHECK: llvm.extractvalue %{{.*}}[0, 2] :
// CHECK-NEXT: arith.mulf %{{.*}}, %[[W1]] : f32
// CHECK-NOT: llvm.call_intrinsic
// CHECK: gpu.return
#gemm = #moe.gemm_kernels<chip = "sm_90a", forms = [
    #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 2>]>
func.func @silu(%rows: tensor<?x256xbf16>, %off: tensor<9xi32>, %w13: tensor<8x1024x256xbf16>,
                %w2: tensor<8x256x512xbf16>, %s: tensor<?xf32>) -> tensor<?x256xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2 scale %s {moe.kernels = #moe.expert_mlp_kernels<gate_up = #gemm, down = #gemm>}
      : (tensor<?x256xbf16>, tensor<9xi32>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>, tensor<?xf32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// -----

// GPT-OSS with a bf16 gate-up bias and an f32 down bias: the gate's bias
// (column c) and the up partner's (column c + N / 2, N / 2 = out's N) are
// widened to f32 and added first; then g = min(gate, 7), u = clamp(up, -7,
// 7) (NaN-propagating min/max), (u + 1) * g * sigmoid(1.702 g). The down
// kernel adds its f32 bias as loaded.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x128x64_s2_swiglu_gptoss_a3fd9db23_l40e00000_biasbf16_off32(
// CHECK-SAME: %{{.*}}: i32, %[[BIAS:[a-z0-9_]+]]: memref<?x?xbf16>) workgroup(
// CHECK: %[[N:.*]] = memref.dim %{{.*}}, %c1{{.*}} : memref<?x?xbf16>
// CHECK: %[[B:.*]] = memref.load %[[BIAS]][%[[E:[a-z0-9_]+]], %{{.*}}] : memref<?x?xbf16>
// CHECK-NEXT: %[[BF:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: arith.addi %{{.*}}, %[[N]] : index
// CHECK: %[[UB:.*]] = memref.load %[[BIAS]][%[[E]], %{{.*}}] : memref<?x?xbf16>
// CHECK-NEXT: %[[UBF:.*]] = arith.extf %[[UB]] : bf16 to f32
// CHECK: %[[UP:.*]] = llvm.extractvalue %[[REGS:[0-9]+]][0, 32] :
// CHECK-NEXT: %[[GATE:.*]] = llvm.extractvalue %[[REGS]][0, 0] :
// CHECK-NEXT: %[[G:.*]] = arith.addf %[[GATE]], %[[BF]] : f32
// CHECK-NEXT: %[[U:.*]] = arith.addf %[[UP]], %[[UBF]] : f32
// CHECK-NEXT: %[[LIMIT:.*]] = arith.constant 7.000000e+00 : f32
// CHECK-NEXT: %[[GC:.*]] = arith.minimumf %[[G]], %[[LIMIT]] : f32
// CHECK-NEXT: arith.constant 7.000000e+00 : f32
// CHECK-NEXT: %[[UC:.*]] = arith.minimumf %[[U]], %{{.*}} : f32
// CHECK-NEXT: arith.constant -7.000000e+00 : f32
// CHECK-NEXT: %[[UCC:.*]] = arith.maximumf %[[UC]], %{{.*}} : f32
// CHECK-NEXT: %[[ALPHA:.*]] = arith.constant 1.702000e+00 : f32
// CHECK-NEXT: arith.mulf %[[GC]], %[[ALPHA]] : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK: %[[GLU:.*]] = arith.mulf %[[GC]], %{{.*}} : f32
// CHECK-NEXT: arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[U1:.*]] = arith.addf %[[UCC]], %{{.*}} : f32
// CHECK-NEXT: %[[OUT:.*]] = arith.mulf %[[U1]], %[[GLU]] : f32
// CHECK-NEXT: arith.truncf %[[OUT]] : f32 to bf16
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_64x128x64_s2_biasf32_off32(
// CHECK-SAME: %{{.*}}: i32, %[[DBIAS:[a-z0-9_]+]]: memref<?x?xf32>) workgroup(
// CHECK: %[[B0:.*]] = memref.load %[[DBIAS]][%{{.*}}, %{{.*}}] : memref<?x?xf32>
// CHECK-NOT: arith.extf
// CHECK: %[[V:.*]] = llvm.extractvalue %{{.*}}[0, 0] :
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[V]], %[[B0]] : f32
// CHECK-NEXT: arith.truncf %[[SUM]] : f32 to bf16
#gemm = #moe.gemm_kernels<chip = "sm_90a", forms = [
    #moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 2>]>
func.func @gptoss(%rows: tensor<?x256xbf16>, %off: tensor<9xi32>, %w13: tensor<8x1024x256xbf16>,
                  %w2: tensor<8x256x512xbf16>, %b13: tensor<8x1024xbf16>, %b2: tensor<8x256xf32>) -> tensor<?x256xbf16> {
  %y = moe.expert_mlp gptoss %rows, %off, %w13, %w2 gate_up_bias %b13 down_bias %b2
      {moe.kernels = #moe.expert_mlp_kernels<gate_up = #gemm, down = #gemm>}
      : (tensor<?x256xbf16>, tensor<9xi32>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>, tensor<8x1024xbf16>, tensor<8x256xf32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
