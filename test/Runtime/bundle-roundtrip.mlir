// What the compiler writes, the runtime reads (docs/runtime-contract.md):
// moe-opt compiles two grouped GEMMs and a GPT-OSS layer, moe-translate writes the bundle, and the
// runtime's reader (moe-bundle-info, no MLIR inside) lists the same
// entries, kernels, row ranges and launch facts.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline -o %t.mlir
// RUN: moe-translate --moe-to-bundle %t.mlir -o %t.moebundle
// RUN: moe-bundle-info %t.moebundle | FileCheck %s
// A bundle cut short, or with a byte changed in its text, is refused with a
// message, not a crash.
// RUN: head -c 300 %t.moebundle > %t.cut.moebundle
// RUN: not moe-bundle-info %t.cut.moebundle 2>&1 | FileCheck %s --check-prefix=CUT
// RUN: sed -e 's/^MOEBUNDLE 7$/MOEBUNDLE 8/' %t.moebundle > %t.v7.moebundle
// RUN: not moe-bundle-info %t.v7.moebundle 2>&1 | FileCheck %s --check-prefix=VERSION
// Version 7 entries carry their launch plans: one without is refused. A
// version-6 bundle (plans optional) still opens for listing.
// RUN: grep -av -e '^size prefill ' -e '^arg prefill ' -e '^launch prefill ' %t.moebundle > %t.noplan.moebundle
// RUN: not moe-bundle-info %t.noplan.moebundle 2>&1 | FileCheck %s --check-prefix=NO-PLAN
// RUN: sed -e 's/^MOEBUNDLE 7$/MOEBUNDLE 6/' -e 's/^\(image [^ ]* [0-9]*\) fnv1a64=[0-9a-f]*$/\1/' %t.noplan.moebundle > %t.v6.moebundle
// One flipped bit of the cubin, past its ELF header: the checksum moe-translate
// recorded refuses it.
// RUN: %python -c "import sys; d = bytearray(open(sys.argv[1], 'rb').read()); d[d.index(b'\x7fELF') + 4000] ^= 8; open(sys.argv[2], 'wb').write(d)" %t.moebundle %t.damaged.moebundle
// RUN: not moe-bundle-info %t.damaged.moebundle 2>&1 | FileCheck %s --check-prefix=DAMAGED
// RUN: moe-bundle-info %t.v6.moebundle | FileCheck %s --check-prefix=V6
// A kernel record with `cluster = 2` (a kernel compiled for 2-CTA clusters):
// the runtime reads the line moe-translate writes for it.
// RUN: sed -e 's/name = "grouped_matmul_bf16_64x256x64_s4_off32"/cluster = 2, &/' %t.mlir > %t.cluster.mlir
// RUN: moe-translate --moe-to-bundle %t.cluster.mlir -o %t.cluster.moebundle
// RUN: grep -ac " swap_ab=0 cluster=2$" %t.cluster.moebundle | FileCheck %s --check-prefix=ONE
// RUN: moe-bundle-info %t.cluster.moebundle | FileCheck %s

// CHECK: bundle version=7 chip=sm_90a images=1 entries=8
// CHECK-NEXT: entry prefill op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store experts=8 n=1024 k=512 max_rows=2147483647 offsets=i32 bias=none activation=none
// CHECK-NEXT: kernel grouped_matmul_bf16_16x64x64_s4_swapab_off32 rows=[1,16] tile=16x64x64 stages=4 threads=128 smem=40960 swap_ab=1 image=moe_kernels
// CHECK-NEXT: kernel grouped_matmul_bf16_64x256x64_s4_off32 rows=[17,64] tile=64x256x64 stages=4 threads=128 smem=172032 swap_ab=0 image=moe_kernels
// CHECK-NEXT: kernel grouped_matmul_bf16_128x256x64_s4_off32 rows=[65,2147483647] tile=128x256x64 stages=4 threads=256 smem=212992 swap_ab=0 image=moe_kernels
// CHECK-NEXT: entry decode op=moe.grouped_matmul abi=grouped_matmul.v3 epilogue=store experts=8 n=512 k=1024 max_rows=8 offsets=i64 bias=none activation=none
// CHECK-NEXT: kernel grouped_matmul_bf16_16x64x64_s4_swapab_off64 rows=[1,2147483647]
// The layer's parts, then the layer, whose chain the reader checks again.
// CHECK-NEXT: entry gptoss_route op=moe.route abi=route.v1
// CHECK: entry gptoss_gate_up op=moe.expert_mlp abi=grouped_matmul.v3 epilogue=swiglu {{.*}} bias=bf16 activation=gptoss
// CHECK: entry gptoss_down op=moe.expert_mlp abi=grouped_matmul.v3 epilogue=store {{.*}} bias=f32 activation=none
// CHECK: entry gptoss op=moe.layer abi=layer.v1 max_rows=2147483647 route=gptoss_route permute=gptoss_permute gate_up=gptoss_gate_up down=gptoss_down unpermute=gptoss_unpermute

// CUT: moe-bundle-info: error: {{.*}}bundle line 3: image 'moe_kernels': its {{[0-9]+}} bytes and '\n' do not fit
// VERSION: moe-bundle-info: error: {{.*}}bundle line 1: {{.*}}version 8
// ONE: {{^1$}}
func.func @prefill(%rows: tensor<?x512xbf16>, %w: tensor<8x1024x512xbf16>, %off: tensor<9xi32>) -> tensor<?x1024xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<?x512xbf16>, tensor<8x1024x512xbf16>, tensor<9xi32>) -> tensor<?x1024xbf16>
  return %y : tensor<?x1024xbf16>
}
func.func @decode(%rows: tensor<8x1024xbf16>, %w: tensor<8x512x1024xbf16>, %off: tensor<9xi64>) -> tensor<8x512xbf16> {
  %y = moe.grouped_matmul %rows, %w, %off
      : (tensor<8x1024xbf16>, tensor<8x512x1024xbf16>, tensor<9xi64>) -> tensor<8x512xbf16>
  return %y : tensor<8x512xbf16>
}
func.func @gptoss(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>,
    %w13: tensor<8x256x256xbf16>, %b13: tensor<8x256xbf16>,
    %w2: tensor<8x256x128xbf16>, %b2: tensor<8x256xf32>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route topk_softmax %logits top 2
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %h = moe.expert_mlp gptoss %rows, %offsets, %w13, %w2 gate_up_bias %b13 down_bias %b2
      : (tensor<?x256xbf16>, tensor<9xi64>, tensor<8x256x256xbf16>, tensor<8x256x128xbf16>, tensor<8x256xbf16>, tensor<8x256xf32>) -> tensor<?x256xbf16>
  %y = moe.unpermute %h, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}

// NO-PLAN: moe-bundle-info: error: {{.*}}entry 'prefill' has no launch plan
// V6: bundle version=6 chip=sm_90a images=1 entries=8
// DAMAGED: moe-bundle-info: error: {{.*}}bundle line 3: image 'moe_kernels': its bytes are damaged (checksum fnv1a64={{[0-9a-f]+}}, the bundle records {{[0-9a-f]+}})
