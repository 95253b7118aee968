// The backward of expert parallelism on GPT-OSS (top-k then softmax, clamped
// SwiGLU with its clamps reached and changing the gradients): the expert
// biases' gradients db13 and db2 are sliced per rank like dw13 and dw2.
// --moe-expert-parallel=ranks=N --moe-generate-backward --moe-split-exchanges,
// run as N ranks simulated on the CPU (test/lib/ep_case.py run --backward:
// @layer_train_stage0.. then @layer_backward_stage0.. on every rank, the
// exchanges between stages done in numpy as the stages' attributes name them;
// unequal token counts, one rank with 1 token and from N = 4 one with none;
// a seeded dy), must give bit for bit (f32) what the one-rank layer's train
// and backward (--moe-generate-backward, itself within 1e-5 of
// test/lib/moe_grad_ref.py) give: y, dx and dlogits on each rank's tokens,
// and each rank's expert gradients equal to its slice [r*L, (r+1)*L) of the
// one-rank ones. The backward's dispatch must send the row gradients in the
// forward's layout and its undispatch return them to the ranks that sent the
// rows.
// RUN: %python %testlib/ep_case.py run gptoss 2 --backward --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N2
// RUN: %python %testlib/ep_case.py run gptoss 4 --backward --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N4
// N2: PASS gptoss N=2 backward:
// N4: PASS gptoss N=4 backward:
