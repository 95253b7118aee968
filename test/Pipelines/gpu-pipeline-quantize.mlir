// The quantize kernel through the whole GPU pipeline: a manifest entry of
// ABI quantize.v1 per moe.quantize, PTX whose float arithmetic is IEEE
// (div.rn.f32, no flush to zero, no approximation: the codes and scales are
// the CPU lowering's bit for bit), 16-byte loads, 8-byte code stores, warp
// shuffles of the block maximum, and a cubin without spills.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline -o %t.mlir
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file %t.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.mlir %t.cubin
// RUN: %cuobjdump -sass -fun moe_quantize_bf16_e4m3_e8m0_1x32 %t.cubin | FileCheck %s --check-prefix=MX-SASS
// RUN: %cuobjdump -sass -fun moe_quantize_bf16_e4m3_f32_128x128 %t.cubin | FileCheck %s --check-prefix=TILE-SASS
// RUN: %cuobjdump --dump-resource-usage %t.cubin | FileCheck %s --check-prefix=REGS
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline="format=isa" -o %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file %t.ptx
// RUN: not grep -E "\.ftz|\.approx|div\.full" %t.ptx

// MANIFEST: moe.manifest = {entries = [
// MANIFEST-SAME: {abi = "quantize.v1", batch = 1 : i64, block_cols = 32 : i64, block_rows = 1 : i64, cols = 4096 : i64, element = "f8E4M3FN", input = bf16, kernels = [{dynamic_shared_bytes = 0 : i64, module = "moe_kernels", name = "moe_quantize_bf16_e4m3_e8m0_1x32", threads = 256 : i64}], max_rows = 2147483647 : i64, name = "mx", op = "moe.quantize", plan = {{.*}}, rank = 2 : i64, rows = -1 : i64, scale = "e8m0"}
// MANIFEST-SAME: {abi = "quantize.v1", batch = 1 : i64, block_cols = 128 : i64, block_rows = 1 : i64, cols = 512 : i64, element = "f8E5M2", input = f32, kernels = [{dynamic_shared_bytes = 0 : i64, module = "moe_kernels", name = "moe_quantize_f32_e5m2_f32_1x128", threads = 256 : i64}], max_rows = 2147483647 : i64, name = "act", op = "moe.quantize", plan = {{.*}}, rank = 2 : i64, rows = -1 : i64, scale = "f32"}
// MANIFEST-SAME: {abi = "quantize.v1", batch = 8 : i64, block_cols = 128 : i64, block_rows = 128 : i64, cols = 512 : i64, element = "f8E4M3FN", input = bf16, kernels = [{dynamic_shared_bytes = 0 : i64, module = "moe_kernels", name = "moe_quantize_bf16_e4m3_f32_128x128", threads = 256 : i64}], max_rows = 256 : i64, name = "weights", op = "moe.quantize", plan = {{.*}}, rank = 3 : i64, rows = 256 : i64, scale = "f32"}
// MANIFEST: gpu.binary @moe_kernels
// MANIFEST-NOT: moe.quantize

// [1, 32], bf16: 4 chunks of 8 per thread; each chunk: 8 IEEE divisions
// (MUFU.RCP + FFMA, FCHK for the cases that take the exact slow path).
// MX-SASS: Function : moe_quantize_bf16_e4m3_e8m0_1x32
// MX-SASS-COUNT-4: LDG.E.128
// MX-SASS: SHFL.BFLY
// MX-SASS: FCHK
// MX-SASS: STG.E.64
// [128, 128]: 8 chunks per thread, the warps' maxima through shared memory.
// TILE-SASS: Function : moe_quantize_bf16_e4m3_f32_128x128
// TILE-SASS-COUNT-8: LDG.E.128
// TILE-SASS: SHFL.BFLY
// TILE-SASS: BAR.SYNC
// TILE-SASS: LDS.128
// TILE-SASS: BAR.SYNC
// TILE-SASS: FCHK
// TILE-SASS-COUNT-8: STG.E.64

// REGS-NOT: LOCAL:{{[1-9]}}
// REGS-NOT: STACK:{{[1-9]}}

// PTX-LABEL: .entry moe_quantize_bf16_e4m3_e8m0_1x32(
// PTX: griddepcontrol.wait;
// PTX: griddepcontrol.launch_dependents;
// PTX-COUNT-4: ld.global.v4.b32
// PTX-COUNT-2: shfl.sync.bfly.b32
// PTX: div.rn.f32
// PTX: cvt.rn.satfinite.e4m3x2.f32
// PTX: st.global.v2.b32
// PTX: st.global.b8
// PTX-LABEL: .entry moe_quantize_f32_e5m2_f32_1x128(
// Two 16-byte loads per chunk of 8 f32; 16 lanes per block.
// PTX-COUNT-8: ld.global.v4.b32
// PTX-COUNT-4: shfl.sync.bfly.b32
// The scale, amax / 57344, is a division too.
// PTX: div.rn.f32
// PTX: cvt.rni.f32.f32
// PTX: st.global.v2.b32
// PTX: st.global.b32
// PTX-LABEL: .entry moe_quantize_bf16_e4m3_f32_128x128(
// PTX-COUNT-8: ld.global.v4.b32
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX: bar.sync
// PTX: bar.sync
// PTX: div.rn.f32
// PTX-COUNT-8: st.global.v2.b32
func.func @mx(%x: tensor<?x4096xbf16>) -> (tensor<?x4096xf8E4M3FN>, tensor<?x128xf8E8M0FNU>) {
  %q, %s = moe.quantize %x to <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x128xf8E8M0FNU>
  return %q, %s : tensor<?x4096xf8E4M3FN>, tensor<?x128xf8E8M0FNU>
}
func.func @act(%x: tensor<?x512xf32>) -> (tensor<?x512xf8E5M2>, tensor<?x4xf32>) {
  %q, %s = moe.quantize %x to <f8E5M2, [1, 128], f32>
      : tensor<?x512xf32> -> tensor<?x512xf8E5M2>, tensor<?x4xf32>
  return %q, %s : tensor<?x512xf8E5M2>, tensor<?x4xf32>
}
func.func @weights(%w: tensor<8x256x512xbf16>) -> (tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32>) {
  %q, %s = moe.quantize %w to <f8E4M3FN, [128, 128], f32>
      : tensor<8x256x512xbf16> -> tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32>
  return %q, %s : tensor<8x256x512xf8E4M3FN>, tensor<8x2x4xf32>
}
