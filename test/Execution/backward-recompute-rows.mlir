// The gradients with recompute-rows=true: the backward permutes the tokens
// again instead of saving the permuted rows. Mixtral's layer (also with
// recompute-gate-up=true, which needs the rows first), the route-less one
// (its ids, with a repeat and dropped slots, an argument the backward now
// saves), the padded one (the permute's pad_to) and DeepSeek-V3 with its
// shared expert (the tokens saved once). f32 against the float64 backward
// and central differences.
// RUN: %python %testlib/backward_case.py gen rows-mixtral > %t.m.mlir
// RUN: moe-opt %t.m.mlir --moe-generate-backward=recompute-rows=true -o %t.m.bwd.mlir
// RUN: FileCheck %s --check-prefix=ROWS < %t.m.bwd.mlir
// RUN: %python %testlib/backward_case.py main rows-mixtral %t.m.bwd.mlir > %t.m.run.mlir
// RUN: moe-opt %t.m.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.m.out
// RUN: %python %testlib/backward_case.py check rows-mixtral %t.m.out | FileCheck %s --check-prefix=PASS-M
// RUN: moe-opt %t.m.mlir --moe-generate-backward="recompute-rows=true recompute-gate-up=true" -o %t.mg.bwd.mlir
// RUN: FileCheck %s --check-prefix=BOTH < %t.mg.bwd.mlir
// RUN: %python %testlib/backward_case.py main rows-mixtral %t.mg.bwd.mlir > %t.mg.run.mlir
// RUN: moe-opt %t.mg.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.mg.out
// RUN: %python %testlib/backward_case.py check rows-mixtral %t.mg.out | FileCheck %s --check-prefix=PASS-M
// RUN: %python %testlib/backward_case.py gen rows-routeless > %t.r.mlir
// RUN: moe-opt %t.r.mlir --moe-generate-backward=recompute-rows=true -o %t.r.bwd.mlir
// RUN: %python %testlib/backward_case.py main rows-routeless %t.r.bwd.mlir > %t.r.run.mlir
// RUN: moe-opt %t.r.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.r.out
// RUN: %python %testlib/backward_case.py check rows-routeless %t.r.out | FileCheck %s --check-prefix=PASS-R
// RUN: %python %testlib/backward_case.py gen rows-padded > %t.p.mlir
// RUN: moe-opt %t.p.mlir --moe-generate-backward=recompute-rows=true -o %t.p.bwd.mlir
// RUN: %python %testlib/backward_case.py main rows-padded %t.p.bwd.mlir > %t.p.run.mlir
// RUN: moe-opt %t.p.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.p.out
// RUN: %python %testlib/backward_case.py check rows-padded %t.p.out | FileCheck %s --check-prefix=PASS-P
// RUN: %python %testlib/backward_case.py gen rows-shared-deepseek > %t.s.mlir
// RUN: moe-opt %t.s.mlir --moe-generate-backward=recompute-rows=true -o %t.s.bwd.mlir
// RUN: %python %testlib/backward_case.py main rows-shared-deepseek %t.s.bwd.mlir > %t.s.run.mlir
// RUN: moe-opt %t.s.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.s.out
// RUN: %python %testlib/backward_case.py check rows-shared-deepseek %t.s.out | FileCheck %s --check-prefix=PASS-S

// The rows are not saved; the tokens are. The backward permutes them again
// after dX, right before the gate-up weights' gradient reads them.
// ROWS-LABEL: func.func @layer_backward(
// ROWS-SAME: moe.saved = ["logits", "ids", "weights", "offsets", "slots", "gate_up", "expert_out", "gate_up_weights", "down_weights", "tokens"]
// ROWS: moe.unpermute_grad
// ROWS: %[[DX:.*]] = moe.unpermute
// ROWS-NEXT: %[[PERMUTED:.*]], %{{.*}}, %{{.*}} = moe.permute
// ROWS-NEXT: moe.grouped_wgrad %{{.*}}, %[[PERMUTED]]
// With recompute-gate-up too, the rows come first: the gate-up output is
// recomputed from them.
// BOTH-LABEL: func.func @layer_backward(
// BOTH: %[[PERMUTED:.*]], %{{.*}}, %{{.*}} = moe.permute
// BOTH-NEXT: moe.grouped_matmul %[[PERMUTED]]
// BOTH-NOT: moe.permute
// PASS-M: PASS rows-mixtral
// PASS-R: PASS rows-routeless
// PASS-P: PASS rows-padded
// PASS-S: PASS rows-shared-deepseek
