// moe.grouped_wgrad with kn_weights: the weight gradient lies [E, K, N] as
// the weights of a kn_weights matmul do, the same f32 sums as the [E, N, K]
// form's transposed (an empty expert gets zeros), and the same bias
// gradient: both print exactly the same.
// RUN: moe-opt %s --moe-cpu-reference-pipeline | %mlir-runner > %t.kn.out
// RUN: sed -e 's/call @wgrad_kn(/call @wgrad_ref(/' %s > %t.ref.mlir
// RUN: moe-opt %t.ref.mlir --moe-cpu-reference-pipeline | %mlir-runner > %t.ref.out
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.kn.out > %t.kn.txt
// RUN: sed -e 's/base@ = 0x[0-9a-f]*//' %t.ref.out > %t.ref.txt
// RUN: diff %t.kn.txt %t.ref.txt
// RUN: FileCheck %s < %t.kn.txt
// CHECK: rank = 3 offset = 0 sizes = [3, 2, 3]
// CHECK: rank = 2 offset = 0 sizes = [3, 3]

func.func private @printMemrefF32(tensor<*xf32>)

func.func @wgrad_kn(%g: tensor<?x3xf32>, %r: tensor<?x2xf32>, %off: tensor<4xi64>) -> (tensor<3x2x3xf32>, tensor<3x3xf32>) {
  %dw, %db = moe.grouped_wgrad %g, %r, %off kn_weights
      : (tensor<?x3xf32>, tensor<?x2xf32>, tensor<4xi64>) -> (tensor<3x2x3xf32>, tensor<3x3xf32>)
  return %dw, %db : tensor<3x2x3xf32>, tensor<3x3xf32>
}

// The reference: the [E, N, K] form, transposed.
func.func @wgrad_ref(%g: tensor<?x3xf32>, %r: tensor<?x2xf32>, %off: tensor<4xi64>) -> (tensor<3x2x3xf32>, tensor<3x3xf32>) {
  %dw, %db = moe.grouped_wgrad %g, %r, %off
      : (tensor<?x3xf32>, tensor<?x2xf32>, tensor<4xi64>) -> (tensor<3x3x2xf32>, tensor<3x3xf32>)
  %init = tensor.empty() : tensor<3x2x3xf32>
  %t = linalg.transpose ins(%dw : tensor<3x3x2xf32>) outs(%init : tensor<3x2x3xf32>) permutation = [0, 2, 1]
  return %t, %db : tensor<3x2x3xf32>, tensor<3x3xf32>
}

func.func @main() {
  %g0 = arith.constant dense<[[0.5, -1.25, 2.0], [1.5, 0.75, -0.3], [-2.1, 0.4, 1.1],
                              [0.9, -0.6, 0.2], [1.3, 2.2, -1.7]]> : tensor<5x3xf32>
  %r0 = arith.constant dense<[[1.1, -0.7], [0.3, 2.4], [-1.6, 0.8], [2.5, -0.1], [0.6, 1.9]]> : tensor<5x2xf32>
  // Expert 1 has no rows.
  %off = arith.constant dense<[0, 2, 2, 5]> : tensor<4xi64>
  %g = tensor.cast %g0 : tensor<5x3xf32> to tensor<?x3xf32>
  %r = tensor.cast %r0 : tensor<5x2xf32> to tensor<?x2xf32>
  %dw, %db = call @wgrad_kn(%g, %r, %off) : (tensor<?x3xf32>, tensor<?x2xf32>, tensor<4xi64>) -> (tensor<3x2x3xf32>, tensor<3x3xf32>)
  %dwp = tensor.cast %dw : tensor<3x2x3xf32> to tensor<*xf32>
  %dbp = tensor.cast %db : tensor<3x3xf32> to tensor<*xf32>
  call @printMemrefF32(%dwp) : (tensor<*xf32>) -> ()
  call @printMemrefF32(%dbp) : (tensor<*xf32>) -> ()
  return
}
