// A block-FP8 layer from the compiler to the runtime's reader: moe-opt
// quantizes a bf16 layer (weights and activations) and compiles it, and
// moe-bundle-info (no MLIR inside) reads back the layer_fp8.v1 entry. By
// default its gate-up GEMM quantizes its output itself (out=f8E4M3FN) and
// the layer has no intermediate part (six steps); with
// fp8-intermediate=kernel the gate-up writes bf16 and a quantize entry is
// the layer's intermediate part (seven steps). Docs: runtime-contract.md
// §3.7 and §3.10.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: moe-bundle-info %t.moebundle | FileCheck %s
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="fp8-intermediate=kernel" -o %t.kernel.mlir
// RUN: moe-translate --moe-to-bundle %t.kernel.mlir -o %t.kernel.moebundle
// RUN: moe-bundle-info %t.kernel.moebundle | FileCheck %s --check-prefix=KERNEL
// The kernels take the parameters the runtime passes (contract §3.7): each
// FP8-output gate-up form 40 (the first parameter its .nv.info lists is the
// last, ordinal 39, at byte 0x250), each down form 33 (ordinal 32).
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.mlir %t.cubin
// RUN: %cuobjdump -elf %t.cubin > %t.elf
// RUN: grep -A8 -e '^.nv.info.grouped_matmul_fp8block_16x64x128_s4_swapab_swiglu_e4m3out_off64$' -e '^.nv.info.grouped_matmul_fp8block_64x128x128_s4_swiglu_e4m3out_off64$' -e '^.nv.info.grouped_matmul_fp8block_128x128x128_s4_swiglu_e4m3out_off64$' %t.elf | FileCheck %s --check-prefix=GATE-UP-PARAMS
// RUN: grep -A8 -e '^.nv.info.grouped_matmul_fp8block_16x64x128_s4_swapab_off64$' -e '^.nv.info.grouped_matmul_fp8block_64x128x128_s4_off64$' -e '^.nv.info.grouped_matmul_fp8block_128x128x128_s4_off64$' %t.elf | FileCheck %s --check-prefix=DOWN-PARAMS
// A gate-up that writes bf16 with no intermediate part, or one that writes
// FP8 beside an intermediate part, is refused, naming the layer and part.
// RUN: sed -e 's/ out=f8E4M3FN//' %t.moebundle > %t.bf16.moebundle
// RUN: not moe-bundle-info %t.bf16.moebundle 2>&1 | FileCheck %s --check-prefix=NO-OUT
// RUN: sed -e 's/format=fp8_block epilogue=swiglu/format=fp8_block out=f8E4M3FN epilogue=swiglu/' %t.kernel.moebundle > %t.both.moebundle
// RUN: not moe-bundle-info %t.both.moebundle 2>&1 | FileCheck %s --check-prefix=BOTH

// CHECK: entry layer_quantize op=moe.quantize abi=quantize.v1
// CHECK-NEXT: kernel moe_quantize_bf16_e4m3_f32_1x128
// CHECK-NEXT: entry layer_gate_up op=moe.expert_mlp abi=grouped_matmul_fp8.v1 format=fp8_block out=f8E4M3FN epilogue=swiglu experts=4 n=768 k=256 max_rows=2147483647 offsets=i64 bias=none activation=silu
// CHECK-NEXT: kernel grouped_matmul_fp8block_16x64x128_s4_swapab_swiglu_e4m3out_off64 rows=[1,16]
// CHECK-NOT: entry layer_intermediate
// CHECK: entry layer_down op=moe.expert_mlp abi=grouped_matmul_fp8.v1 format=fp8_block epilogue=store experts=4 n=256 k=384
// CHECK: entry layer op=moe.layer abi=layer_fp8.v1 max_rows=2147483647 route=layer_route permute=layer_permute quantize=layer_quantize gate_up=layer_gate_up down=layer_down unpermute=layer_unpermute{{$}}

// KERNEL: entry layer_gate_up op=moe.expert_mlp abi=grouped_matmul_fp8.v1 format=fp8_block epilogue=swiglu experts=4 n=768 k=256
// KERNEL-NEXT: kernel grouped_matmul_fp8block_16x64x128_s4_swapab_swiglu_off64 rows=[1,16]
// KERNEL: entry layer_intermediate op=moe.expert_mlp abi=quantize.v1 {{.*}}cols=384
// KERNEL: entry layer op=moe.layer abi=layer_fp8.v1 max_rows=2147483647 route=layer_route permute=layer_permute quantize=layer_quantize gate_up=layer_gate_up intermediate=layer_intermediate down=layer_down unpermute=layer_unpermute{{$}}

// GATE-UP-PARAMS-COUNT-3: EIATTR_KPARAM_INFO{{[[:space:]]+}}Format: EIFMT_SVAL{{[[:space:]]+}}Value: Index : 0x0 Ordinal : 0x27 Offset : 0x250 Size : 0x8
// DOWN-PARAMS-COUNT-3: EIATTR_KPARAM_INFO{{[[:space:]]+}}Format: EIFMT_SVAL{{[[:space:]]+}}Value: Index : 0x0 Ordinal : 0x20 Offset : 0x218 Size : 0x8

// NO-OUT: moe-bundle-info: error: {{.*}}entry 'layer': gate_up=layer_gate_up writes bf16 (no out key), but the layer has no intermediate part to quantize it
// BOTH: moe-bundle-info: error: {{.*}}entry 'layer': gate_up=layer_gate_up has out=f8E4M3FN, but intermediate=layer_intermediate quantizes a bf16 gate_up output
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
