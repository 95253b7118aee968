// A block-FP8 layer from the compiler to the runtime's reader: moe-opt
// quantizes a bf16 layer (weights and activations) and compiles it, and
// moe-bundle-info (no MLIR inside) reads back the layer_fp8.v1 entry. By
// default the permute's gather quantizes the rows (out=f8E4M3FN on the
// permute: no quantize part) and the gate-up writes bf16 that the
// intermediate part quantizes (six steps). With fp8-epilogue-quantize=1 the
// gate-up quantizes its output (out=f8E4M3FN on the gate_up: no
// intermediate part, five steps); with fp8-gather-quantize=0 a bf16 gather
// and a quantize part (seven steps). Docs: runtime-contract.md §3.4, §3.7
// and §3.10. The default permute also has a scatter kernel over the tokens
// (scatter_from=128: launched instead of the gather from T = 128 on; it
// takes the slots: 33 parameters, the last ordinal 32 at byte 0x100);
// scatter_from without out=f8E4M3FN is refused.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: moe-bundle-info %t.moebundle | FileCheck %s
// RUN: sed -e 's/ out=f8E4M3FN index_counts=1 scatter_from=128$/ index_counts=1 scatter_from=128/' %t.moebundle > %t.scatter-bf16.moebundle
// RUN: not moe-bundle-info %t.scatter-bf16.moebundle 2>&1 | FileCheck %s --check-prefix=SCATTER-NO-OUT
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="fp8-epilogue-quantize=1" -o %t.epilogue.mlir
// RUN: moe-translate --moe-to-bundle %t.epilogue.mlir -o %t.epilogue.moebundle
// RUN: moe-bundle-info %t.epilogue.moebundle | FileCheck %s --check-prefix=EPILOGUE
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="fp8-gather-quantize=0" -o %t.separate.mlir
// RUN: moe-translate --moe-to-bundle %t.separate.mlir -o %t.separate.moebundle
// RUN: moe-bundle-info %t.separate.moebundle | FileCheck %s --check-prefix=SEPARATE
// The kernels take the parameters the runtime passes (contract §3.4, §3.7):
// the quantizing gather 31 (the first parameter its .nv.info lists is the
// last, ordinal 30, at byte 0xf0), the bf16 gather of the separate form 24
// (ordinal 23 at 0xb8), each FP8-output gate-up form 40 (ordinal 39 at
// 0x250), each down form 33 (ordinal 32).
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.epilogue.mlir %t.cubin
// RUN: %cuobjdump -elf %t.cubin > %t.elf
// RUN: grep -A8 -e '^.nv.info.moe_permute_gather_off64_e4m3$' %t.elf | FileCheck %s --check-prefix=GATHER-PARAMS
// RUN: grep -A8 -e '^.nv.info.moe_permute_scatter_k2_off64_e4m3$' %t.elf | FileCheck %s --check-prefix=SCATTER-PARAMS
// RUN: grep -A8 -e '^.nv.info.grouped_matmul_fp8block_16x64x128_s8_swapab_swiglu_e4m3out_off64$' -e '^.nv.info.grouped_matmul_fp8block_64x128x128_s4_swiglu_e4m3out_off64$' -e '^.nv.info.grouped_matmul_fp8block_128x128x128_s4_swiglu_e4m3out_ws_off64$' %t.elf | FileCheck %s --check-prefix=GATE-UP-PARAMS
// RUN: grep -A8 -e '^.nv.info.grouped_matmul_fp8block_16x64x128_s4_swapab_off64$' -e '^.nv.info.grouped_matmul_fp8block_64x128x128_s4_off64$' -e '^.nv.info.grouped_matmul_fp8block_128x192x128_s4_ws_off64$' %t.elf | FileCheck %s --check-prefix=DOWN-PARAMS
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.separate.mlir %t.separate.cubin
// RUN: %cuobjdump -elf %t.separate.cubin > %t.separate.elf
// RUN: grep -A8 -e '^.nv.info.moe_permute_gather_off64$' %t.separate.elf | FileCheck %s --check-prefix=BF16-GATHER-PARAMS
// A permute that writes bf16 rows with no quantize part, or FP8 rows beside
// a quantize part, is refused, naming the layer and part; the same for the
// gate-up and the intermediate part.
// RUN: sed -e 's/ chunk=4096 out=f8E4M3FN index_counts=1 scatter_from=128$/ chunk=4096 index_counts=1/' -e '/^kernel layer_permute moe_permute_scatter/d' %t.moebundle > %t.bf16-rows.moebundle
// RUN: not moe-bundle-info %t.bf16-rows.moebundle 2>&1 | FileCheck %s --check-prefix=NO-PERMUTE-OUT
// RUN: sed -e 's/^\(entry layer_permute .* chunk=4096\) index_counts=1$/\1 out=f8E4M3FN index_counts=1/' %t.separate.moebundle > %t.both-rows.moebundle
// RUN: not moe-bundle-info %t.both-rows.moebundle 2>&1 | FileCheck %s --check-prefix=BOTH-ROWS
// RUN: sed -e 's/format=fp8_block out=f8E4M3FN/format=fp8_block/' %t.epilogue.moebundle > %t.bf16.moebundle
// RUN: not moe-bundle-info %t.bf16.moebundle 2>&1 | FileCheck %s --check-prefix=NO-OUT
// RUN: sed -e '/^entry layer_gate_up /s/ format=fp8_block$/ format=fp8_block out=f8E4M3FN/' %t.separate.moebundle > %t.both.moebundle
// RUN: not moe-bundle-info %t.both.moebundle 2>&1 | FileCheck %s --check-prefix=BOTH

// CHECK: entry layer_permute op=moe.permute abi=permute.v2 max_rows=2147483647 experts=4 top_k=2 hidden=256 offsets=i64 chunk=4096 out=f8E4M3FN{{$}}
// CHECK-NEXT: kernel moe_permute_count_e4_k2
// CHECK-NEXT: kernel moe_permute_index_e4_k2_off64
// CHECK-NEXT: kernel moe_permute_gather_off64_e4m3 threads=
// CHECK-NEXT: kernel moe_permute_scatter_k2_off64_e4m3 threads=256
// CHECK-NOT: entry layer_quantize
// CHECK: entry layer_gate_up op=moe.expert_mlp abi=grouped_matmul_fp8.v1 format=fp8_block epilogue=swiglu experts=4 n=768 k=256
// CHECK-NEXT: kernel grouped_matmul_fp8block_16x64x128_s4_swapab_swiglu_off64 rows=[1,16]
// CHECK: entry layer_intermediate op=moe.expert_mlp abi=quantize.v1 {{.*}}cols=384
// CHECK: entry layer_down op=moe.expert_mlp abi=grouped_matmul_fp8.v1 format=fp8_block epilogue=store experts=4 n=256 k=384
// CHECK: entry layer op=moe.layer abi=layer_fp8.v1 max_rows=2147483647 route=layer_route permute=layer_permute gate_up=layer_gate_up intermediate=layer_intermediate down=layer_down unpermute=layer_unpermute{{$}}

// EPILOGUE: entry layer_permute op=moe.permute abi=permute.v2 max_rows=2147483647 experts=4 top_k=2 hidden=256 offsets=i64 chunk=4096 out=f8E4M3FN{{$}}
// EPILOGUE-NOT: entry layer_quantize
// EPILOGUE: entry layer_gate_up op=moe.expert_mlp abi=grouped_matmul_fp8.v1 format=fp8_block out=f8E4M3FN epilogue=swiglu experts=4 n=768 k=256 max_rows=2147483647 offsets=i64 bias=none activation=silu
// EPILOGUE-NEXT: kernel grouped_matmul_fp8block_16x64x128_s8_swapab_swiglu_e4m3out_off64 rows=[1,16]
// EPILOGUE-NOT: entry layer_intermediate
// EPILOGUE: entry layer_down op=moe.expert_mlp abi=grouped_matmul_fp8.v1 format=fp8_block epilogue=store experts=4 n=256 k=384
// EPILOGUE: entry layer op=moe.layer abi=layer_fp8.v1 max_rows=2147483647 route=layer_route permute=layer_permute gate_up=layer_gate_up down=layer_down unpermute=layer_unpermute{{$}}

// SEPARATE: entry layer_permute op=moe.permute abi=permute.v2 max_rows=2147483647 experts=4 top_k=2 hidden=256 offsets=i64 chunk=4096{{$}}
// SEPARATE: kernel moe_permute_gather_off64 threads=
// SEPARATE: entry layer_quantize op=moe.quantize abi=quantize.v1 {{.*}}cols=256
// SEPARATE-NEXT: kernel moe_quantize_bf16_e4m3_f32_1x128
// SEPARATE: entry layer_gate_up op=moe.expert_mlp abi=grouped_matmul_fp8.v1 format=fp8_block epilogue=swiglu experts=4 n=768 k=256
// SEPARATE-NEXT: kernel grouped_matmul_fp8block_16x64x128_s4_swapab_swiglu_off64 rows=[1,16]
// SEPARATE: entry layer_intermediate op=moe.expert_mlp abi=quantize.v1 {{.*}}cols=384
// SEPARATE: entry layer op=moe.layer abi=layer_fp8.v1 max_rows=2147483647 route=layer_route permute=layer_permute quantize=layer_quantize gate_up=layer_gate_up intermediate=layer_intermediate down=layer_down unpermute=layer_unpermute{{$}}

// GATHER-PARAMS: EIATTR_KPARAM_INFO{{[[:space:]]+}}Format: EIFMT_SVAL{{[[:space:]]+}}Value: Index : 0x0 Ordinal : 0x1e Offset : 0xf0 Size : 0x8
// BF16-GATHER-PARAMS: EIATTR_KPARAM_INFO{{[[:space:]]+}}Format: EIFMT_SVAL{{[[:space:]]+}}Value: Index : 0x0 Ordinal : 0x17 Offset : 0xb8 Size : 0x8
// GATE-UP-PARAMS-COUNT-3: EIATTR_KPARAM_INFO{{[[:space:]]+}}Format: EIFMT_SVAL{{[[:space:]]+}}Value: Index : 0x0 Ordinal : 0x27 Offset : 0x250 Size : 0x8
// DOWN-PARAMS-COUNT-3: EIATTR_KPARAM_INFO{{[[:space:]]+}}Format: EIFMT_SVAL{{[[:space:]]+}}Value: Index : 0x0 Ordinal : 0x20 Offset : 0x218 Size : 0x8

// SCATTER-PARAMS: EIATTR_KPARAM_INFO{{[[:space:]]+}}Format: EIFMT_SVAL{{[[:space:]]+}}Value: Index : 0x0 Ordinal : 0x20 Offset : 0x100 Size : 0x8
// SCATTER-NO-OUT: moe-bundle-info: error: {{.*}}entry 'layer_permute': scatter_from=128 without out=f8E4M3FN (only a quantizing permute has a scatter kernel)
// NO-PERMUTE-OUT: moe-bundle-info: error: {{.*}}entry 'layer': permute=layer_permute writes bf16 (no out key), but the layer has no quantize part to quantize it
// BOTH-ROWS: moe-bundle-info: error: {{.*}}entry 'layer': permute=layer_permute has out=f8E4M3FN, but quantize=layer_quantize quantizes its bf16 output
// NO-OUT: moe-bundle-info: error: {{.*}}entry 'layer': gate_up=layer_gate_up writes bf16 (no out key), but the layer has no intermediate part to quantize it
// BOTH: moe-bundle-info: error: {{.*}}entry 'layer': gate_up=layer_gate_up has out=f8E4M3FN, but intermediate=layer_intermediate quantizes its bf16 output
func.func @layer(%x: tensor<?x256xbf16>, %logits: tensor<?x4xf32>,
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
