// A bf16 MoE layer quantized by --moe-quantize compiles whole for sm_90a:
// weights+activations make it one layer_fp8.v1 entry (route, permute whose
// gather stores the rows as e4m3 and scales, the FP8 gate-up GEMM storing
// silu(gate) * up in bf16, the activation's quantize, the FP8 down GEMM,
// combine) beside the prepack's weight quantize entries;
// test/device/fp8_layer.py runs it on the H200. fp8-epilogue-quantize=1: the
// gate-up stores e4m3 and scales itself (no `intermediate` part);
// fp8-gather-quantize=0: a bf16 gather and a `quantize` part.
// The permute also has a scatter kernel over the tokens, which the runtime
// launches instead of the gather from T = scatter_from = 128 on
// (fp8-scatter-min-tokens); fp8-scatter-min-tokens=0: no scatter kernel.
// Without a quantizing gather (fp8-gather-quantize=0, MXFP8: SEPARATE and
// MX above) there is none either.
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="fp8-scatter-min-tokens=0" -o %t.noscatter.mlir
// RUN: moe-translate --moe-to-bundle %t.noscatter.mlir -o %t.noscatter.moebundle
// RUN: grep -aE "^(entry|kernel) " %t.noscatter.moebundle | FileCheck %s --check-prefix=NOSCATTER
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-fuse-experts --moe-fuse-layer --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s --check-prefix=SCATTER-IR
// Weights only (bf16 rows into FP8 weights) has no sm_90a kernel yet: the
// pipeline refuses it by name rather than compiling part of it.
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: grep -aE "^(entry|kernel) " %t.moebundle | FileCheck %s
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="fp8-epilogue-quantize=1" -o %t.epilogue.mlir
// RUN: moe-translate --moe-to-bundle %t.epilogue.mlir -o %t.epilogue.moebundle
// RUN: grep -aE "^(entry|kernel) " %t.epilogue.moebundle | FileCheck %s --check-prefix=EPILOGUE
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="fp8-gather-quantize=0" -o %t.separate.mlir
// RUN: moe-translate --moe-to-bundle %t.separate.mlir -o %t.separate.moebundle
// RUN: grep -aE "^(entry|kernel) " %t.separate.moebundle | FileCheck %s --check-prefix=SEPARATE
// MXFP8 (format=mxfp8): the same layer with `[1, 32]` quantize parts for
// the rows and the activation and `format=mxfp8` GEMMs (no quantizing
// gather or epilogue: they write block FP8's groups); mxfp8-widen=1 gives
// the normal forms that widen e4m3 to bf16 (2 stages at 128 x 128).
// RUN: moe-opt %s --moe-quantize="format=mxfp8 scope=weights+activations" --moe-gpu-pipeline -o %t.mx.mlir
// RUN: moe-translate --moe-to-bundle %t.mx.mlir -o %t.mx.moebundle
// RUN: grep -aE "^(entry|kernel) " %t.mx.moebundle | FileCheck %s --check-prefix=MX
// RUN: moe-opt %s --moe-quantize="format=mxfp8 scope=weights+activations" --moe-gpu-pipeline="mxfp8-widen=1" -o %t.mxwide.mlir
// RUN: moe-translate --moe-to-bundle %t.mxwide.mlir -o %t.mxwide.moebundle
// RUN: grep -aE "^(entry|kernel) " %t.mxwide.moebundle | FileCheck %s --check-prefix=MXWIDE
// MX: entry layer_permute op=moe.permute abi=permute.v2 max_rows=2147483647 experts=4 top_k=2 hidden=256 offsets=i64 chunk=4096 index_counts=1{{$}}
// MX: kernel layer_permute moe_permute_gather_off64 image
// MX: entry layer_quantize op=moe.quantize abi=quantize.v1 max_rows=2147483647 element=f8E4M3FN scale=e8m0 input=bf16 block_rows=1 block_cols=32 rank=2 batch=1 rows=-1 cols=256
// MX: entry layer_gate_up op=moe.expert_mlp abi=grouped_matmul_fp8.v1 experts=4 n=768 k=256 max_rows=2147483647 offsets=i64 epilogue=swiglu bias=none activation=silu format=mxfp8
// MX-NEXT: kernel layer_gate_up grouped_matmul_mxfp8_16x64x128_s4_swapab_swiglu_off64 {{.*}}rows_min=1 rows_max=16
// MX-NEXT: kernel layer_gate_up grouped_matmul_mxfp8_64x128x128_s4_swiglu_ws_off64 {{.*}}rows_min=17 rows_max=64
// MX-NEXT: kernel layer_gate_up grouped_matmul_mxfp8_128x128x128_s4_swiglu_ws_off64 {{.*}}rows_min=65
// MX: entry layer_intermediate op=moe.expert_mlp abi=quantize.v1 {{.*}}scale=e8m0 input=bf16 block_rows=1 block_cols=32 {{.*}}cols=384
// MX: entry layer_down op=moe.expert_mlp abi=grouped_matmul_fp8.v1 experts=4 n=256 k=384 max_rows=2147483647 offsets=i64 epilogue=store bias=none activation=none format=mxfp8
// MX: entry layer op=moe.layer abi=layer_fp8.v1 max_rows=2147483647 route=layer_route permute=layer_permute quantize=layer_quantize gate_up=layer_gate_up intermediate=layer_intermediate down=layer_down unpermute=layer_unpermute{{$}}
// MX: entry layer_prepack op=moe.quantize abi=quantize.v1 max_rows=768 element=f8E4M3FN scale=e8m0 {{.*}}block_cols=32 rank=3 batch=4 rows=768 cols=256
// MXWIDE: kernel layer_gate_up grouped_matmul_mxfp8_16x64x128_s4_swapab_swiglu_off64 {{.*}}rows_max=16
// MXWIDE-NEXT: kernel layer_gate_up grouped_matmul_mxfp8wide_64x128x128_s4_swiglu_off64 {{.*}}rows_max=64
// MXWIDE-NEXT: kernel layer_gate_up grouped_matmul_mxfp8wide_128x128x128_s2_swiglu_off64 {{.*}}stages=2
// RUN: not moe-opt %s --moe-quantize --moe-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=WEIGHTS
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-fuse-experts --moe-fuse-layer --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s --check-prefix=GATHER
// A configuration whose gather quantizes the rows while the rows quantize
// keeps a kernel of its own (hand-edited) is refused: rows quantized twice.
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-fuse-experts --moe-fuse-layer --moe-select-kernels \
// RUN:   | sed 's/fused = true/fused = false/' | not moe-opt --convert-moe-to-nvgpu 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: 'moe.permute' op has quantize_rows, so its layer's rows quantize must be #moe.kernel<..., fused = true>

// The layer's rows quantize has no kernel: the gather stores e4m3 codes
// (8-byte stores) and each 16-lane [1, 128] group's scale.
// GATHER: moe.quantize %{{.*}} to <f8E4M3FN, [1, 128], f32> {moe.fused_into_launch, moe.kernels = #moe.kernel<chip = "sm_90a", fused = true>}
// GATHER: gpu.func @moe_permute_gather_off64_e4m3(%{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi64>, %{{.*}}: memref<?x?xi8>, %{{.*}}: memref<?x?xf32>)
// GATHER-COUNT-4: gpu.shuffle  xor
// GATHER: nvvm.convert.f32x2.to.f8x2
// GATHER: vector.store {{.*}} : memref<?x?xi8>, vector<8xi8>
// GATHER: memref.store {{.*}} : memref<?x?xf32>

// The scatter takes the slots [T, k] for the sources, quantizes each
// token's chunk once and stores it to each valid slot (k = 2, unrolled),
// then zeroes its share of the rows past offsets[E] (codes 0, scale 1).
// SCATTER-IR: gpu.func @moe_permute_scatter_k2_off64_e4m3(%{{.*}}: memref<?x?xbf16>, %{{.*}}: memref<?x?xi64>, %{{.*}}: memref<?xi64>, %{{.*}}: memref<?x?xi8>, %{{.*}}: memref<?x?xf32>)
// SCATTER-IR-COUNT-8: memref.load {{.*}} : memref<?x?xi64>
// SCATTER-IR-COUNT-4: vector.load {{.*}} : memref<?x?xbf16>, vector<8xbf16>
// SCATTER-IR: nvvm.convert.f32x2.to.f8x2
// SCATTER-IR-COUNT-2: vector.store {{.*}} : memref<?x?xi8>, vector<8xi8>
// SCATTER-IR: arith.minsi
// SCATTER-IR: scf.for
// SCATTER-IR: vector.store %cst{{.*}} : memref<?x?xi8>, vector<8xi8>
// SCATTER-IR: memref.store %cst{{.*}} : memref<?x?xf32>

// NOSCATTER: entry layer_permute op=moe.permute abi=permute.v2 {{.*}}hidden=256 offsets=i64 chunk=4096 out=f8E4M3FN index_counts=1{{$}}
// NOSCATTER-NEXT: kernel layer_permute moe_permute_count_e4_k2
// NOSCATTER-NEXT: kernel layer_permute moe_permute_index_e4_k2_off64
// NOSCATTER-NEXT: kernel layer_permute moe_permute_gather_off64_e4m3
// NOSCATTER-NEXT: entry

// CHECK: entry layer_route op=moe.route abi=route.v1
// CHECK: entry layer_permute op=moe.permute abi=permute.v2 {{.*}}hidden=256 offsets=i64 chunk=4096 out=f8E4M3FN index_counts=1 scatter_from=128{{$}}
// CHECK-NEXT: kernel layer_permute moe_permute_count_e4_k2
// CHECK-NEXT: kernel layer_permute moe_permute_index_e4_k2_off64
// CHECK-NEXT: kernel layer_permute moe_permute_gather_off64_e4m3
// CHECK-NEXT: kernel layer_permute moe_permute_scatter_k2_off64_e4m3
// CHECK-NOT: entry layer_quantize
// CHECK: entry layer_gate_up op=moe.expert_mlp abi=grouped_matmul_fp8.v1 experts=4 n=768 k=256 max_rows=2147483647 offsets=i64 epilogue=swiglu bias=none activation=silu format=fp8_block
// CHECK: entry layer_intermediate op=moe.expert_mlp abi=quantize.v1 max_rows=2147483647 element=f8E4M3FN scale=f32 input=bf16 block_rows=1 block_cols=128 rank=2 batch=1 rows=-1 cols=384
// CHECK-NEXT: kernel layer_intermediate moe_quantize_bf16_e4m3_f32_1x128
// CHECK: entry layer_down op=moe.expert_mlp abi=grouped_matmul_fp8.v1 experts=4 n=256 k=384 max_rows=2147483647 offsets=i64 epilogue=store bias=none activation=none format=fp8_block
// CHECK: entry layer_unpermute op=moe.unpermute abi=unpermute.v2 {{.*}}weighted=1
// CHECK: entry layer op=moe.layer abi=layer_fp8.v1 max_rows=2147483647 route=layer_route permute=layer_permute gate_up=layer_gate_up intermediate=layer_intermediate down=layer_down unpermute=layer_unpermute{{$}}
// CHECK: entry layer_prepack op=moe.quantize abi=quantize.v1 max_rows=768 {{.*}}block_rows=128 block_cols=128 rank=3 batch=4 rows=768 cols=256
// CHECK-NEXT: kernel layer_prepack moe_quantize_bf16_e4m3_f32_128x128
// CHECK: entry layer_prepack_0 op=moe.quantize abi=quantize.v1 max_rows=256 {{.*}}block_rows=128 block_cols=128 rank=3 batch=4 rows=256 cols=384

// EPILOGUE: entry layer_permute op=moe.permute abi=permute.v2 {{.*}}out=f8E4M3FN
// EPILOGUE: entry layer_gate_up op=moe.expert_mlp abi=grouped_matmul_fp8.v1 experts=4 n=768 k=256 max_rows=2147483647 offsets=i64 epilogue=swiglu bias=none activation=silu format=fp8_block out=f8E4M3FN
// EPILOGUE-NEXT: kernel layer_gate_up grouped_matmul_fp8block_16x64x128_s8_swapab_swiglu_e4m3out_off64
// EPILOGUE-NOT: entry layer_intermediate
// EPILOGUE: entry layer op=moe.layer abi=layer_fp8.v1 max_rows=2147483647 route=layer_route permute=layer_permute gate_up=layer_gate_up down=layer_down unpermute=layer_unpermute{{$}}

// SEPARATE: entry layer_permute op=moe.permute abi=permute.v2 {{.*}}chunk=4096 index_counts=1{{$}}
// SEPARATE: entry layer_quantize op=moe.quantize abi=quantize.v1 max_rows=2147483647 element=f8E4M3FN scale=f32 input=bf16 block_rows=1 block_cols=128 rank=2 batch=1 rows=-1 cols=256
// SEPARATE: entry layer op=moe.layer abi=layer_fp8.v1 max_rows=2147483647 route=layer_route permute=layer_permute quantize=layer_quantize gate_up=layer_gate_up intermediate=layer_intermediate down=layer_down unpermute=layer_unpermute

// WEIGHTS: error: 'moe.expert_mlp' op cannot be lowered to sm_90a yet: quantized operands of a fused expert MLP are implemented as block FP8 or MXFP8
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
