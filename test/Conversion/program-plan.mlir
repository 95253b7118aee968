// A function marked moe.program is one runtime entry (program.v1, contract
// §3.13): its ops' plans are its parts' steps, in order, on its arguments
// and results (named by moe.name) and on workspace slices for the values
// between ops. --moe-generate-backward marks @F_train and @F_backward.
// RUN: moe-opt %s --moe-generate-backward --moe-fuse-backward --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s
// RUN: moe-opt %s --moe-generate-backward --moe-gpu-pipeline=format=isa | FileCheck %s --check-prefix=ENTRIES
// RUN: moe-opt %s --moe-generate-backward --moe-gpu-pipeline="format=isa fuse-backward=false" | FileCheck %s --check-prefix=UNFUSED
// RUN: moe-opt %s --moe-generate-backward --moe-gpu-pipeline="format=isa cluster=2" | FileCheck %s --check-prefix=CLUSTER
// RUN: moe-opt %s --moe-generate-backward=recompute-rows=true --moe-fuse-backward --moe-select-kernels --convert-moe-to-nvgpu | FileCheck %s --check-prefix=RECOMPUTE

// The train forward: one size T (the tokens'); the saved values are
// outputs whose shapes follow from T (rows T*2 from the permute); an
// argument returned as itself (the weights) is no output; the activation,
// which nothing returns, is a workspace slice.
// CHECK-LABEL: func.func @mixtral_train(
// CHECK-SAME: moe.launch = {abi = "program.v1", max_rows = 2147483647 : i64, parts = 6 : i64, plan = {args = [
// CHECK-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "tokens", role = "in"}
// CHECK-SAME: {align = 4 : i64, dims = "T,8", dtype = "f32", name = "logits", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,512,256", dtype = "bf16", name = "gate_up_weights", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "8,256,256", dtype = "bf16", name = "down_weights", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "out", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "T,2", dtype = "i32", name = "ids", role = "out"}
// CHECK-SAME: {align = 16 : i64, dims = "T*2,256", dtype = "bf16", name = "rows", role = "out"}
// CHECK-SAME: {align = 16 : i64, dims = "T*2,512", dtype = "bf16", name = "gate_up", role = "out"}
// CHECK-SAME: {align = 16 : i64, dims = "T*2,256", dtype = "bf16", name = "expert_out", role = "out"}]
// CHECK-NOT: name = "gate_up_weights", role = "out"
// CHECK-SAME: sizes = [{max = "9223372036854775807", min = "0", name = "T"}]
// CHECK-SAME: params = "mem:logits[T,8];mem:ids[T,2];mem:weights[T,2]", part = "p0"
// CHECK-SAME: params = "mem:gate_up[T*2,512];mem:@v0[T*2,256]", part = "p3"
// CHECK-SAME: params = "mem:expert_out[T*2,256];mem:slots[T,2];mem:weights[T,2];mem:out[T,256]", part = "p5"
// CHECK-SAME: work = [{align = 256 : i64, bytes = "T*2*4", name = "p1_sources"}, {align = 256 : i64, bytes = "ceildiv(T*2,4096)*8*4", name = "p1_counts"}, {align = 256 : i64, bytes = "2*(T*2)*256", name = "v0"}]

// The backward: sizes T and M (the saved rows', gate-up output's and
// experts' output's, one class: every part that reads two of them names
// their rows by one size); the parts' repeated checks once. The values
// between ops reuse the saved values the train forward made (moe.donated)
// once those are dead, where they fit: gate_up and expert_out are
// `donated`, the caller's weights and tokens and the saved values no value
// reuses `in`.
// CHECK-LABEL: func.func @mixtral_backward(
// CHECK-SAME: moe.launch = {abi = "program.v1", max_rows = 2147483647 : i64, parts = 8 : i64
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "rows", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "M,512", dtype = "bf16", name = "gate_up", role = "donated"}
// CHECK-SAME: {align = 16 : i64, dims = "M,256", dtype = "bf16", name = "expert_out", role = "donated"}
// CHECK-SAME: {align = 16 : i64, dims = "8,512,256", dtype = "bf16", name = "gate_up_weights", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "grad_out", role = "in"}
// CHECK-SAME: {align = 16 : i64, dims = "T,256", dtype = "bf16", name = "grad_tokens", role = "out"}
// CHECK-SAME: {align = 4 : i64, dims = "T,8", dtype = "f32", name = "grad_logits", role = "out"}
// CHECK-SAME: {align = 16 : i64, dims = "8,512,256", dtype = "bf16", name = "grad_gate_up_weights", role = "out"}
// CHECK-SAME: {align = 16 : i64, dims = "8,256,256", dtype = "bf16", name = "grad_down_weights", role = "out"}]
// CHECK-SAME: checks = [{expr = "T<=2147483647", message = "p0 step: T must be at most 2147483647"}, {expr = "M<=2147483647", message = "p0 step: M must be at most 2147483647"}]
// CHECK-SAME: sizes = [{max = "9223372036854775807", min = "0", name = "T"}, {max = "9223372036854775807", min = "0", name = "M"}]
// The combine's adjoint writes dO over expert_out, which it reads (in
// place: its entry allows it); the activation H [M, 256] into a slice (no
// dead buffer yet); the down projection's weight gradient (H dies); the
// dgrad with the activation's gradient in its epilogue writes dGU over
// gate_up, which it reads; the gate-up dgrad writes dRows into expert_out
// again (dO is dead).
// CHECK-SAME: params = "mem:grad_out[T,256];mem:expert_out[M,256];mem:slots[T,2];mem:weights[T,2];mem:@p0_counts[M];mem:expert_out[M,256];mem:@v0[T,2]", part = "p0"
// CHECK-SAME: params = "mem:gate_up[M,512];mem:@v1[M,256]", part = "p1"
// CHECK-SAME: params = "tmap:expert_out:bf16:[256,M]:[512]:[64,64];tmap:@v1:bf16:[256,M]:[512]:[64,64];mem:offsets[9];mem:grad_down_weights[8,256,256];i32:M", part = "p2"
// CHECK-SAME: params = "tmap:expert_out:bf16:[256,M]:[512]:[64,128];tmap:down_weights:bf16:[256,256,8]:[512,131072]:[64,64,1];mem:offsets[9];mem:gate_up[M,512];i32:256;i32:65;i32:2147483647;mem:gate_up[M,512]", part = "p3"
// CHECK-SAME: params = "tmap:gate_up:bf16:[512,M]:[1024]:[64,128];tmap:gate_up_weights:bf16:[256,512,8]:[512,262144]:[64,64,1];mem:offsets[9];mem:expert_out[M,256];i32:512;i32:65;i32:2147483647", part = "p4"
// CHECK-SAME: params = "mem:expert_out[M,256];mem:slots[T,2];mem:grad_tokens[T,256]", part = "p6"
// CHECK-SAME: params = "mem:logits[T,8];mem:ids[T,2];mem:@v0[T,2];mem:grad_logits[T,8]", part = "p7"
// CHECK-SAME: work = [{align = 256 : i64, bytes = "M*4", name = "p0_counts"}, {align = 256 : i64, bytes = "4*T*2", name = "v0"}, {align = 256 : i64, bytes = "2*M*256", name = "v1"}]

// With recompute-rows the permuted rows are no output of the train forward
// but a slice, which H takes once they are dead; the backward permutes the
// tokens again after dX, into the experts' output (dRows is dead), and the
// gate-up wgrad reads them there.
// RECOMPUTE-LABEL: func.func @mixtral_train(
// RECOMPUTE-SAME: params = "mem:tokens[T,256];mem:@p1_sources[T*2];mem:offsets[9];mem:@v0[T*2,256]", part = "p1"
// RECOMPUTE-SAME: params = "mem:gate_up[T*2,512];mem:@v0[T*2,256]", part = "p3"
// RECOMPUTE-LABEL: func.func @mixtral_backward(
// RECOMPUTE-SAME: params = "mem:expert_out[M,256];mem:slots[T,2];mem:grad_tokens[T,256]", part = "p5"
// RECOMPUTE-SAME: params = "mem:tokens[T,256];mem:@p6_sources[T*2];mem:@v{{[0-9]+}}[9];mem:expert_out[T*2,256]", part = "p6"
// RECOMPUTE-SAME: tmap:expert_out:bf16:[256,M]:[512]:[64,64];mem:offsets[9];mem:grad_gate_up_weights[8,512,256];i32:M", part = "p7"

// The manifest: each op an entry <function>.<i>, then the program's.
// ENTRIES: name = "mixtral_train.0", op = "moe.route"
// ENTRIES-SAME: name = "mixtral_train", op = "func.func", p0 = "mixtral_train.0", p1 = "mixtral_train.1", p2 = "mixtral_train.2", p3 = "mixtral_train.3", p4 = "mixtral_train.4", p5 = "mixtral_train.5"
// ENTRIES-SAME: name = "mixtral_backward.0", op = "moe.unpermute_grad"
// ENTRIES-SAME: name = "mixtral_backward.3", offsets = i64, op = "moe.grouped_dgrad"
// ENTRIES-SAME: name = "mixtral_backward", op = "func.func", p0 = "mixtral_backward.0", {{.*}}, p7 = "mixtral_backward.7"
// With fuse-backward=false the activation's gradient is an entry of its own.
// UNFUSED: name = "mixtral_backward.3", offsets = i64, op = "moe.grouped_dgrad"
// UNFUSED-SAME: name = "mixtral_backward.4", op = "moe.swiglu_grad"
// UNFUSED-SAME: p8 = "mixtral_backward.8"
// With cluster=2 the fused dgrad stays one CTA (a planned.v1 entry's kernels
// are no clusters); the gate-up dgrad takes the clusters.
// CLUSTER: name = "grouped_matmul_bf16_128x128x64_s4_actgrad_wkn_off64"
// CLUSTER-SAME: name = "mixtral_backward.3", offsets = i64, op = "moe.grouped_dgrad"
// CLUSTER-SAME: cluster = 2 : i64, {{.*}} name = "grouped_matmul_bf16_128x256x64_s4_wkn_c2_off64"
// CLUSTER-SAME: name = "mixtral_backward.4"
func.func @mixtral(%x: tensor<?x256xbf16>, %logits: tensor<?x8xf32>,
                   %w13: tensor<8x512x256xbf16>, %w2: tensor<8x256x256xbf16>)
    -> tensor<?x256xbf16> {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x256xbf16>, tensor<?x2xi32>)
      -> (tensor<?x256xbf16>, tensor<9xi64>, tensor<?x2xi64>)
  %gu = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x256xbf16>, tensor<8x512x256xbf16>, tensor<9xi64>) -> tensor<?x512xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x512xbf16>) -> tensor<?x256xbf16>
  %o = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x256xbf16>, tensor<8x256x256xbf16>, tensor<9xi64>) -> tensor<?x256xbf16>
  %y = moe.unpermute %o, %slots weights %w
      : (tensor<?x256xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x256xbf16>
  return %y : tensor<?x256xbf16>
}
