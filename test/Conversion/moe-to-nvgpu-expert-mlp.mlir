// RUN: moe-opt %s --moe-select-kernels="swap-ab-max-rows=0" --convert-moe-to-nvgpu | FileCheck %s
// RUN: moe-opt %s --moe-select-kernels="swap-ab-max-rows=0" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=GPTOSS-IR
// RUN: moe-opt %s --moe-gpu-pipeline="format=isa" -o %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin
// RUN: awk '/[.]entry /{f = /grouped_matmul_bf16_128x256x64_s4_swiglu_off64[(]/} f' %t.ptx > %t.swiglu.ptx
// RUN: grep -cF 'cp.async.bulk.tensor' %t.swiglu.ptx | FileCheck %s --check-prefix=SWIGLU-TMA
// RUN: FileCheck %s --check-prefix=SWIGLU --input-file %t.swiglu.ptx
// RUN: awk '/[.]entry /{f = /grouped_matmul_bf16_128x256x64_s4_rowscale_off64[(]/} f' %t.ptx | FileCheck %s --check-prefix=ROWSCALE

// The fused expert MLP becomes two grouped GEMMs with their own epilogues.
// The gate-up kernel loads, per stage, a 128-row box of gate rows at the
// tile's column and the same box of up rows N / 2 = I further, into one
// 256-row weights tile, so a thread holds gate column c and its up partner
// c + 128 in its own accumulator registers: silu(gate) * up is computed
// there and the [M, 2I] intermediate is never stored.
// CHECK: moe.expert_mlp silu {{.*}}moe.launch = [{abi = "grouped_matmul.v3", activation = "silu", bias = "none", epilogue = "swiglu", {{.*}}part = "gate_up", plan = {{.*}}}, {abi = "grouped_matmul.v3", activation = "none", bias = "none", epilogue = "row_scale", {{.*}}part = "down", plan = {{.*}}}]
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_128x256x64_s4_swiglu_off64(
// CHECK-SAME: %{{.*}}: memref<?x?xbf16>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32)
// CHECK: %[[COLS:.*]] = memref.dim %{{.*}}, %c1{{.*}} : memref<?x?xbf16>
// CHECK: nvgpu.tma.async.load %{{.*}}[%{{.*}}, %[[COL:.*]], %{{.*}}], {{.*}} : <tensor = memref<1x128x64xbf16
// CHECK: %[[UP:.*]] = arith.addi %[[COL]], %[[COLS]] : index
// CHECK: nvgpu.tma.async.load %{{.*}}[%{{.*}}, %[[UP]], %{{.*}}], {{.*}} : <tensor = memref<1x128x64xbf16
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// The down kernel takes the routing weights as one more argument and
// scales each fragment row by its weight.
// CHECK-LABEL: gpu.func @grouped_matmul_bf16_128x256x64_s4_rowscale_off64(
// CHECK-SAME: %{{.*}}: i32, %[[SCALE:.*]]: memref<?xf32>)
// CHECK-COUNT-2: memref.load %[[SCALE]]
// CHECK-NOT: llvm.call_intrinsic
// CHECK: gpu.func @{{.*}}_gptoss_

// 9 load sites (2 prologues of 4 stages, 1 refill) of 3 TMA loads each:
// rows, gate half, up half.
// SWIGLU-TMA: {{^}}27{{$}}
// SWIGLU: ex2.approx.ftz.f32
// SWIGLU: st.global.v4.b32
// ROWSCALE: .param .align 64 .b8 grouped_matmul_bf16_128x256x64_s4_rowscale_off64_param_0[128],
// ROWSCALE-COUNT-12: .param .u64
// ROWSCALE-COUNT-3: .param .u32
// ROWSCALE-COUNT-5: .param .u64
// ROWSCALE-NOT: ex2.approx
func.func @mlp(%rows: tensor<?x256xbf16>, %off: tensor<9xi64>, %w13: tensor<8x1024x256xbf16>,
               %w2: tensor<8x256x512xbf16>, %s: tensor<?xf32>) -> tensor<?x256xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2 scale %s
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>, tensor<?xf32>)
      -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// GPT-OSS: the clamped activation with its constants in the kernel name
// (by their bits), and per-expert biases of either element type added to
// the accumulator in both epilogues. A bias is one more memref [E, N]
// argument, after the row scale if any.
// GPTOSS-IR: moe.expert_mlp gptoss {{.*}}moe.launch = [{abi = "grouped_matmul.v3", activation = "gptoss", bias = "bf16", epilogue = "swiglu", {{.*}}part = "gate_up", plan = {{.*}}}, {abi = "grouped_matmul.v3", activation = "none", bias = "f32", epilogue = "store", {{.*}}part = "down", plan = {{.*}}}]
// GPTOSS-IR-LABEL: gpu.func @grouped_matmul_bf16_128x256x64_s4_swiglu_gptoss_a3fd9db23_l40e00000_biasbf16_off64(
// GPTOSS-IR-SAME: %{{.*}}: i32, %[[BIAS:.*]]: memref<?x?xbf16>)
// GPTOSS-IR: memref.load %[[BIAS]]
// GPTOSS-IR: arith.extf
// GPTOSS-IR: arith.minimumf
// GPTOSS-IR: arith.maximumf
// GPTOSS-IR-LABEL: gpu.func @grouped_matmul_bf16_128x256x64_s4_biasf32_off64(
// GPTOSS-IR-SAME: %{{.*}}: i32, %[[DBIAS:.*]]: memref<?x?xf32>)
// GPTOSS-IR: memref.load %[[DBIAS]]
// RUN: awk '/[.]entry /{f = /grouped_matmul_bf16_128x256x64_s4_swiglu_gptoss_a3fd9db23_l40e00000_biasbf16_off64[(]/} f' %t.ptx | FileCheck %s --check-prefix=GPTOSS
// GPTOSS-COUNT-12: .param .u64
// GPTOSS-COUNT-3: .param .u32
// GPTOSS-COUNT-7: .param .u64
// GPTOSS: min.NaN.f32
// GPTOSS: max.NaN.f32
// GPTOSS: ex2.approx.ftz.f32
func.func @gptoss_mlp(%rows: tensor<?x256xbf16>, %off: tensor<9xi64>, %w13: tensor<8x1024x256xbf16>,
                      %w2: tensor<8x256x512xbf16>, %b13: tensor<8x1024xbf16>, %b2: tensor<8x256xf32>)
    -> tensor<?x256xbf16> {
  %y = moe.expert_mlp gptoss %rows, %off, %w13, %w2 gate_up_bias %b13 down_bias %b2
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>, tensor<8x1024xbf16>, tensor<8x256xf32>)
      -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
