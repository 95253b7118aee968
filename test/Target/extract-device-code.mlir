// RUN: moe-opt %s --split-input-file --moe-select-kernels --convert-moe-to-nvgpu --moe-extract-device-code 2>/dev/null | FileCheck %s

// Host code goes; the gpu.module stays; the manifest (version 6 of
// docs/runtime-contract.md) has one entry per compiled op, named after its
// function (`<func>_<i>` for the ops after the first), with the kernels
// that compute it and the row counts each takes: swap-AB up to 16 rows, a
// 64-row tile up to 64, the 128-row tile above.
// CHECK: module attributes {gpu.container_module, moe.manifest = {entries = [
// CHECK-SAME: {abi = "grouped_matmul.v3", activation = "none", bias = "none", epilogue = "store", experts = 8 : i64, k = 256 : i64, kernels = [
// CHECK-SAME: {dynamic_shared_bytes = 40960 : i64, module = "moe_kernels", name = "grouped_matmul_bf16_16x64x64_s4_swapab_off32", rows_max = 16 : i64, rows_min = 1 : i64, swap_ab = true, tensor_map_args = array<i64: 0, 1>, threads = 128 : i64, tile = array<i64: 16, 64, 64, 4>},
// CHECK-SAME: {dynamic_shared_bytes = 172032 : i64, module = "moe_kernels", name = "grouped_matmul_bf16_64x256x64_s4_off32", rows_max = 64 : i64, rows_min = 17 : i64, swap_ab = false, tensor_map_args = array<i64: 0, 1>, threads = 128 : i64, tile = array<i64: 64, 256, 64, 4>},
// CHECK-SAME: {dynamic_shared_bytes = 212992 : i64, module = "moe_kernels", name = "grouped_matmul_bf16_128x256x64_s4_off32", rows_max = 2147483647 : i64, rows_min = 65 : i64, swap_ab = false, tensor_map_args = array<i64: 0, 1>, threads = 256 : i64, tile = array<i64: 128, 256, 64, 4>}],
// CHECK-SAME: max_rows = 2147483647 : i64, n = 512 : i64, name = "gate_up", offsets = i32, op = "moe.grouped_matmul", plan = {{\{([^}]|}[^}])*}}}},
// CHECK-SAME: {abi = "grouped_matmul.v3", activation = "none", bias = "none", epilogue = "store", experts = 8 : i64, k = 512 : i64, {{.*}} max_rows = 2147483647 : i64, n = 256 : i64, name = "down", offsets = i32, op = "moe.grouped_matmul", plan = {{\{([^}]|}[^}])*}}}},
// CHECK-SAME: {abi = "grouped_matmul.v3", activation = "none", bias = "none", epilogue = "store", experts = 8 : i64, k = 512 : i64, kernels = [{{{[^]]*}}name = "grouped_matmul_bf16_16x64x64_s4_swapab_off32", {{[^]]*}}rows_max = 2147483647 : i64, rows_min = 1 : i64{{[^]]*}}], max_rows = 12 : i64, n = 256 : i64, name = "down_0", offsets = i32, op = "moe.grouped_matmul", plan = {{\{([^}]|}[^}])*}}}}
// CHECK-SAME: ], version = 7 : i64}}
// CHECK-NOT: func.func
// CHECK: gpu.module @moe_kernels
// CHECK-NOT: func.func
func.func @gate_up(%rows: tensor<?x256xbf16>, %w: tensor<8x512x256xbf16>, %off: tensor<9xi32>) -> tensor<?x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi32>) -> tensor<?x512xbf16>
  return %y : tensor<?x512xbf16>
}
func.func @down(%rows: tensor<?x512xbf16>, %w: tensor<8x256x512xbf16>, %off: tensor<9xi32>,
                %few: tensor<12x512xbf16>) -> (tensor<?x256xbf16>, tensor<12x256xbf16>) {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<?x256xbf16>
  %z = moe.grouped_matmul %few, %w, %off
      : (tensor<12x512xbf16>, tensor<8x256x512xbf16>, tensor<9xi32>) -> tensor<12x256xbf16>
  return %y, %z : tensor<?x256xbf16>, tensor<12x256xbf16>
}

// -----

// A fused expert MLP launches in two parts, each an entry: `<func>_gate_up`
// (weights [E, 2I, H], the SwiGLU epilogue) and `<func>_down` (weights
// [E, H, I], the routing weight applied in the epilogue).
// CHECK: moe.manifest = {entries = [{abi = "grouped_matmul.v3", activation = "silu", bias = "none", epilogue = "swiglu", experts = 8 : i64, k = 256 : i64, kernels = [
// CHECK-SAME: name = "grouped_matmul_bf16_16x64x64_s4_swapab_swiglu_off64"
// CHECK-SAME: name = "grouped_matmul_bf16_64x256x64_s4_swiglu_off64"
// CHECK-SAME: name = "grouped_matmul_bf16_128x256x64_s4_swiglu_off64"
// CHECK-SAME: n = 1024 : i64, name = "mlp_gate_up", offsets = i64, op = "moe.expert_mlp", plan = {{\{([^}]|}[^}])*}}}},
// CHECK-SAME: {abi = "grouped_matmul.v3", activation = "none", bias = "none", epilogue = "row_scale", experts = 8 : i64, k = 512 : i64, kernels = [
// CHECK-SAME: name = "grouped_matmul_bf16_16x64x64_s4_swapab_rowscale_off64"
// CHECK-SAME: n = 256 : i64, name = "mlp_down", offsets = i64, op = "moe.expert_mlp", plan = {{\{([^}]|}[^}])*}}}}
// CHECK-SAME: {abi = "grouped_matmul.v3", activation = "none", bias = "none", epilogue = "store", {{.*}} name = "unscaled_down"
func.func @mlp(%rows: tensor<?x256xbf16>, %off: tensor<9xi64>, %w13: tensor<8x1024x256xbf16>,
               %w2: tensor<8x256x512xbf16>, %s: tensor<?xf32>) -> tensor<?x256xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2 scale %s
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>, tensor<?xf32>)
      -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
func.func @unscaled(%rows: tensor<?x256xbf16>, %off: tensor<9xi64>, %w13: tensor<8x1024x256xbf16>,
                    %w2: tensor<8x256x512xbf16>) -> tensor<?x256xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x1024x256xbf16>, tensor<8x256x512xbf16>)
      -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
