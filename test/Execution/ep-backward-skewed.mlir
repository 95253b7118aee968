// The backward of expert parallelism on a skewed routing: every token takes
// experts 0 and 1, which rank 0 owns, so every other rank sends all its row
// gradients to rank 0, receives none and gets zero expert gradients.
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
// RUN: %python %testlib/ep_case.py run skewed 4 --backward --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N4
// N4: PASS skewed N=4 backward:
