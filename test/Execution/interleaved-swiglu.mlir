// moe.swiglu and moe.swiglu_grad with `interleaved` (gate column i at 2i,
// up at 2i + 1: GPT-OSS's gate-up output as transformers lays it out)
// compute what the halves form does: GPT-OSS's layer and its gradients
// (the clamp reached) and Mixtral's layer, with each activation rewritten to
// read an interleaved copy of its input (test/lib/interleave.py; a gradient
// put back into halves after it), print exactly what they printed and pass
// the numpy and finite-difference checks.
// RUN: %python %testlib/layer_case.py gen gptoss > %t.gptoss.mlir
// RUN: %python %testlib/interleave.py %t.gptoss.mlir > %t.gptoss.il.mlir
// RUN: FileCheck %s --check-prefix=FWD < %t.gptoss.il.mlir
// RUN: moe-opt %t.gptoss.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.gptoss.out
// RUN: moe-opt %t.gptoss.il.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.gptoss.il.out
// RUN: %python %testlib/layer_case.py check gptoss %t.gptoss.il.out | FileCheck %s --check-prefix=GPTOSS
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.gptoss.out > %t.gptoss.txt
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.gptoss.il.out > %t.gptoss.il.txt
// RUN: diff %t.gptoss.txt %t.gptoss.il.txt
// RUN: %python %testlib/layer_case.py gen mixtral > %t.mixtral.mlir
// RUN: %python %testlib/interleave.py %t.mixtral.mlir > %t.mixtral.il.mlir
// RUN: moe-opt %t.mixtral.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.mixtral.out
// RUN: moe-opt %t.mixtral.il.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.mixtral.il.out
// RUN: %python %testlib/layer_case.py check mixtral %t.mixtral.il.out | FileCheck %s --check-prefix=MIXTRAL
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.mixtral.out > %t.mixtral.txt
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.mixtral.il.out > %t.mixtral.il.txt
// RUN: diff %t.mixtral.txt %t.mixtral.il.txt
// The backward: --moe-generate-backward's activation and its gradient.
// RUN: %python %testlib/backward_case.py gen gptoss > %t.bwd.mlir
// RUN: moe-opt %t.bwd.mlir --moe-generate-backward -o %t.bwd.gen.mlir
// RUN: %python %testlib/interleave.py %t.bwd.gen.mlir > %t.bwd.il.mlir
// RUN: FileCheck %s --check-prefix=BWD < %t.bwd.il.mlir
// RUN: %python %testlib/backward_case.py main gptoss %t.bwd.gen.mlir > %t.run.mlir
// RUN: %python %testlib/backward_case.py main gptoss %t.bwd.il.mlir > %t.run.il.mlir
// RUN: moe-opt %t.run.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.bwd.out
// RUN: moe-opt %t.run.il.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.bwd.il.out
// RUN: %python %testlib/backward_case.py check gptoss %t.bwd.il.out | FileCheck %s --check-prefix=GRADS
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.bwd.out > %t.bwd.txt
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.bwd.il.out > %t.bwd.il.txt
// RUN: diff %t.bwd.txt %t.bwd.il.txt

// FWD: linalg.transpose ins(%il1_split : tensor<?x2x8xf32>) outs(%il1_init : tensor<?x8x2xf32>) permutation = [0, 2, 1]
// FWD: %h = moe.swiglu gptoss %il1 interleaved : (tensor<?x16xf32>) -> tensor<?x8xf32>
// BWD: moe.swiglu_grad gptoss %il{{[0-9]+}}, %{{.*}} interleaved : (tensor<?x16xf32>, tensor<?x8xf32>) -> tensor<?x16xf32>
// GPTOSS: PASS gptoss
// MIXTRAL: PASS mixtral
// GRADS: PASS gptoss
