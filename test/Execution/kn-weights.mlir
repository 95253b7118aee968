// moe.grouped_matmul with kn_weights (the weights as GPT-OSS's experts lie,
// [E, K, N]) computes what the [E, N, K] form does: the layers of
// layer_case.py with every grouped matmul rewritten to read a transposed
// copy of its weights (test/lib/kn_weights.py) print exactly what they
// printed (f32: the same products in the same order) and match the numpy
// reference. GPT-OSS (expert biases, the clamped SwiGLU) and Mixtral.
// RUN: %python %testlib/layer_case.py gen gptoss > %t.gptoss.mlir
// RUN: %python %testlib/kn_weights.py %t.gptoss.mlir > %t.gptoss.kn.mlir
// RUN: FileCheck %s < %t.gptoss.kn.mlir
// RUN: moe-opt %t.gptoss.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.gptoss.out
// RUN: moe-opt %t.gptoss.kn.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.gptoss.kn.out
// RUN: %python %testlib/layer_case.py check gptoss %t.gptoss.kn.out | FileCheck %s --check-prefix=GPTOSS
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.gptoss.out > %t.gptoss.txt
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.gptoss.kn.out > %t.gptoss.kn.txt
// RUN: diff %t.gptoss.txt %t.gptoss.kn.txt
// RUN: %python %testlib/layer_case.py gen mixtral > %t.mixtral.mlir
// RUN: %python %testlib/kn_weights.py %t.mixtral.mlir > %t.mixtral.kn.mlir
// RUN: moe-opt %t.mixtral.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.mixtral.out
// RUN: moe-opt %t.mixtral.kn.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.mixtral.kn.out
// RUN: %python %testlib/layer_case.py check mixtral %t.mixtral.kn.out | FileCheck %s --check-prefix=MIXTRAL
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.mixtral.out > %t.mixtral.txt
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.mixtral.kn.out > %t.mixtral.kn.txt
// RUN: diff %t.mixtral.txt %t.mixtral.kn.txt

// CHECK: linalg.transpose ins(%w13 : tensor<8x16x12xf32>)
// CHECK: moe.grouped_matmul %rows, %kn_weights1, %offsets bias %b13 kn_weights : ({{.*}}, tensor<8x12x16xf32>,
// CHECK: moe.grouped_matmul %h, %kn_weights2, %offsets bias %b2 kn_weights : ({{.*}}, tensor<8x8x12xf32>,
// GPTOSS: PASS gptoss
// MIXTRAL: PASS mixtral
