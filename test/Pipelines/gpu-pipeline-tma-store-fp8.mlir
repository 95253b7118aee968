// --moe-gpu-pipeline="tma-store=1" on a layer quantized to block FP8: the
// gate-up's 128 x 192 tile stores 96 activation columns a row group, one
// whole 64-column chunk by TMA and the 32 after it by its threads (a TMA box
// would overwrite the next tile's columns); the down GEMM's 192 columns are
// three TMA stores.
// RUN: moe-opt %s --moe-quantize="scope=weights+activations" --moe-gpu-pipeline="tma-store=1 format=isa" -o %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: awk '/[.]entry /{f = /grouped_matmul_fp8block_128x192x128_s4_swiglu_ws_tmastore_off64[(]/} f' %t.ptx | FileCheck %s --check-prefix=GATEUP
// RUN: awk '/[.]entry /{f = /grouped_matmul_fp8block_128x192x128_s4_ws_tmastore_off64[(]/} f' %t.ptx | FileCheck %s --check-prefix=DOWN
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=C75

// GATEUP: .visible .entry grouped_matmul_fp8block_128x192x128_s4_swiglu_ws_tmastore_off64(
// GATEUP-COUNT-1: cp.async.bulk.tensor.2d.global.shared::cta
// GATEUP-NOT: cp.async.bulk.tensor.2d.global.shared::cta
// GATEUP: st.global.v4.b32
// GATEUP: ret;
// DOWN: .visible .entry grouped_matmul_fp8block_128x192x128_s4_ws_tmastore_off64(
// DOWN-COUNT-3: cp.async.bulk.tensor.2d.global.shared::cta
// DOWN-NOT: cp.async.bulk.tensor.2d.global.shared::cta
// DOWN: ret;
// PTXAS: Compiling entry function 'grouped_matmul_fp8block_128x192x128_s4_ws_tmastore_off64' for 'sm_90a'

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
