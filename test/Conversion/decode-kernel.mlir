// The decode kernel of a bf16 layer (docs/decode-kernel.md): with
// --moe-select-kernels="decode-max-tokens=D", a layer's expert MLP whose
// swap-AB forms take experts of D rows in one tile gets `decode = D`;
// --convert-moe-to-nvgpu then builds the zero and decode kernels as the
// layer's `decode` part (a planned.v1 entry of its own, with its own plan),
// and the layer's plan runs that part's steps when T <= D and the gate-up,
// down and combine steps when T > D. The decode part's experts' output and
// counters are workspace slices of their own, empty past D.
// RUN: moe-opt %s --split-input-file --moe-fuse-experts --moe-fuse-layer --moe-select-kernels="decode-max-tokens=16" | FileCheck %s --check-prefix=SELECT
// RUN: moe-opt %s --split-input-file --moe-fuse-experts --moe-fuse-layer --moe-select-kernels="decode-max-tokens=16" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=PLAN
// RUN: moe-opt %s --split-input-file --moe-fuse-experts --moe-fuse-layer --moe-select-kernels="decode-max-tokens=16" --convert-moe-to-nvgpu | FileCheck %s --check-prefix=KERNEL
// The default selects none (the plan is the layer's of launch-plans-layer.mlir).
// RUN: moe-opt %s --split-input-file --moe-fuse-experts --moe-fuse-layer --moe-select-kernels | FileCheck %s --check-prefix=DEFAULT
// The whole pipeline, through ptxas.
// RUN: moe-opt %s --split-input-file --moe-gpu-pipeline="decode-max-tokens=16" | FileCheck %s --check-prefix=BINARY

// SELECT-LABEL: func.func @small(
// SELECT: #moe.expert_mlp_kernels<gate_up = {{.*}}, down = {{.*}}, decode = 16>
// DEFAULT-LABEL: func.func @small(
// DEFAULT-NOT: decode =
// BINARY-LABEL: gpu.binary @moe_kernels

// The layer's steps: route and permute always; the decode part's zero and
// decode kernels when T <= 16, the GEMMs and the combine past it.
// PLAN-LABEL: func.func @small(
// PLAN: moe.layer {moe.launch
// PLAN: steps = [
// PLAN-SAME: part = "route", when = "1"}
// PLAN-SAME: part = "permute", when = "1"}
// PLAN-SAME: {grid = "min(T*2,1)*min(ceildiv(ceildiv(T*2,16)+4+4,128),1024)", kernel = 0 : i64, params = "mem:@decode_counters[ceildiv(T*2,16)+4+4]", part = "decode", when = "T<=16"}
// PLAN-SAME: params = "tmap:@rows:bf16:[256,T*2]:[512]:[64,16];{{.*}};mem:@offsets[5];mem:@inter[T*2,384];mem:@decode_out[T*2,256];mem:@decode_counters[ceildiv(T*2,16)+4+4];mem:@slots[T,2];mem:@weights[T,2];mem:out[T,256];i32:256", part = "decode", when = "T<=16"}
// PLAN-SAME: part = "gate_up", when = "T>16&&(T*2>=1&&T>=1)"}
// PLAN-SAME: part = "down", when = "T>16&&(T*2>=65&&T>=65)"}
// PLAN-SAME: part = "unpermute", when = "T>16"}]
// PLAN-SAME: {align = 256 : i64, bytes = "T*2*384*2", name = "inter"}
// PLAN-SAME: {align = 256 : i64, bytes = "(T<=16)*(T*2)*256*2", name = "decode_out"}
// PLAN-SAME: {align = 256 : i64, bytes = "(T<=16)*(ceildiv(T*2,16)+4+4)*4", name = "decode_counters"}]
// PLAN: part = "decode", plan = {args = [
// PLAN-SAME: {align = 16 : i64, dims = "T*2,256", dtype = "bf16", name = "rows", role = "in"}
// PLAN-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "out", role = "out"}]
// PLAN-SAME: steps = [
// PLAN-SAME: {grid = "min(T*2,1)*min(ceildiv(ceildiv(T*2,16)+4+4,128),1024)", kernel = 0 : i64, params = "mem:@counters[ceildiv(T*2,16)+4+4]", when = "1"}
// PLAN-SAME: {grid = "min(min(ceildiv(T*2,16)+min(T*2,4),4*ceildiv(T*2,16))*16,resident)", kernel = 1 : i64, params = "tmap:rows:bf16:[256,T*2]:[512]:[64,16];tmap:gate_up_weights:bf16:[256,768,4]:[512,393216]:[64,32,1];tmap:@inter:bf16:[384,T*2]:[768]:[64,16];tmap:down_weights:bf16:[384,256,4]:[768,196608]:[64,64,1];mem:offsets[5];mem:@inter[T*2,384];mem:@experts_out[T*2,256];mem:@counters[ceildiv(T*2,16)+4+4];mem:slots[T,2];mem:weights[T,2];mem:out[T,256];i32:256", when = "1"}]
// PLAN-SAME: work = [
// PLAN-SAME: {align = 256 : i64, bytes = "T*2*384*2", name = "inter"}
// PLAN-SAME: {align = 256 : i64, bytes = "T*2*256*2", name = "experts_out"}
// PLAN-SAME: {align = 256 : i64, bytes = "(ceildiv(T*2,16)+4+4)*4", name = "counters"}]

// The kernel: gate-up items (swap-AB, SwiGLU) then down items in one work
// loop; a down item waits for its token tile's counter; the CTA completing
// a column tile's counter combines it.
// KERNEL: gpu.func @moe_decode_zero(
// KERNEL: gpu.func @moe_decode_experts_bf16_16x64x64_s4_k2_off64_slots64(
// KERNEL-SAME: workgroup(%{{.*}} : memref<1024xi32, #gpu.address_space<workgroup>>, %{{.*}} : memref<1024xi32, #gpu.address_space<workgroup>>, %{{.*}} : memref<1xi32, #gpu.address_space<workgroup>>)
// KERNEL-SAME: moe.tensor_map_args = array<i64: 0, 1, 2, 3>
// KERNEL: nvvm.griddepcontrol wait
// KERNEL: scf.while
// KERNEL: nvvm.memory.barrier <gpu>
// KERNEL: memref.atomic_rmw addi %c1_i32
// KERNEL: scf.while : () -> ()
// KERNEL: memref.atomic_rmw addi %c0_i32
// KERNEL: nvvm.nanosleep
// KERNEL: nvvm.memory.barrier <gpu>
// KERNEL-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.global>}
// KERNEL: nvvm.memory.barrier <gpu>
// KERNEL: memref.atomic_rmw addi %c1_i32
// KERNEL: vector.load
// KERNEL: vector.store
func.func @small(%x: tensor<?x256xbf16>, %logits: tensor<?x4xf32>,
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

// -----

// No decode part: a K of 8192 or more splits the down form's K between two
// warpgroups, which the decode kernel does not.
// SELECT-LABEL: func.func @long_k(
// SELECT: #moe.expert_mlp_kernels<
// SELECT-NOT: decode =
// SELECT: return
// PLAN-LABEL: func.func @long_k(
// PLAN-NOT: "decode"
// PLAN: return
func.func @long_k(%x: tensor<?x256xbf16>, %logits: tensor<?x4xf32>,
    %w13: tensor<4x16384x256xbf16>, %w2: tensor<4x256x8192xbf16>) -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>) -> (tensor<?x256xbf16>, tensor<5xi64>, tensor<?x2xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x256xbf16>, tensor<4x16384x256xbf16>, tensor<5xi64>) -> tensor<?x16384xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x16384xbf16>) -> tensor<?x8192xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x8192xbf16>, tensor<4x256x8192xbf16>, tensor<5xi64>) -> tensor<?x256xbf16>
  %out = moe.unpermute %y, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x256xbf16>
  return %out : tensor<?x256xbf16>
}

// -----

// No decode part outside a layer: the combine is the layer's.
// SELECT-LABEL: func.func @mlp_alone(
// SELECT-NOT: decode =
// SELECT: return
func.func @mlp_alone(%rows: tensor<?x256xbf16>, %off: tensor<5xi64>, %w13: tensor<4x768x256xbf16>, %w2: tensor<4x256x384xbf16>) -> tensor<?x256xbf16> {
  %y = moe.expert_mlp silu %rows, %off, %w13, %w2 : (tensor<?x256xbf16>, tensor<5xi64>, tensor<4x768x256xbf16>, tensor<4x256x384xbf16>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
