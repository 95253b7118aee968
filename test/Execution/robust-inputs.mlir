// Out-of-range expert ids and malformed offsets give the documented results
// (dropped ids, clamped non-overlapping ranges), never out-of-bounds
// accesses. Expected values are worked out by hand in the comments.
// RUN: moe-opt %s --moe-cpu-reference-pipeline | %mlir-runner | FileCheck %s

func.func private @printMemrefF32(tensor<*xf32> {bufferization.access = "read"})
func.func private @printMemrefI32(tensor<*xi32> {bufferization.access = "read"})

func.func @print_f32(%t: tensor<?x?xf32>) {
  %u = tensor.cast %t : tensor<?x?xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}

func.func @main() {
  // E = 4. Pairs in (token, slot) order: t0->e0, t0->-1 (dropped),
  // t1->7 (dropped), t1->e2, t2->e2, t2->e0. Expert 0 gets t0, t2 (rows 0,
  // 1), expert 2 gets t1, t2 (rows 2, 3); rows 4 and 5 stay zero.
  %x = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %ids = arith.constant dense<[[0, -1], [7, 2], [2, 0]]> : tensor<3x2xi32>
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<3x2xf32>, tensor<3x2xi32>) -> (tensor<6x2xf32>, tensor<5xi32>, tensor<3x2xi32>)
  %rows_d = tensor.cast %rows : tensor<6x2xf32> to tensor<?x?xf32>
  call @print_f32(%rows_d) : (tensor<?x?xf32>) -> ()
  // CHECK:      [1,   2],
  // CHECK-NEXT: [5,   6],
  // CHECK-NEXT: [3,   4],
  // CHECK-NEXT: [5,   6],
  // CHECK-NEXT: [0,   0],
  // CHECK-NEXT: [0,   0]]
  %off_u = tensor.cast %offsets : tensor<5xi32> to tensor<*xi32>
  call @printMemrefI32(%off_u) : (tensor<*xi32>) -> ()
  // CHECK: [0,  2,  2,  4,  4]
  %slots_u = tensor.cast %slots : tensor<3x2xi32> to tensor<*xi32>
  call @printMemrefI32(%slots_u) : (tensor<*xi32>) -> ()
  // CHECK:      [0,   -1],
  // CHECK-NEXT: [-1,   2],
  // CHECK-NEXT: [3,   1]]

  // Slots of -1 contribute nothing: y0 = 0.5*row0, y1 = 2*row2,
  // y2 = 1*row3 + 3*row1 = [20, 24].
  %w = arith.constant dense<[[0.5, 9.0], [9.0, 2.0], [1.0, 3.0]]> : tensor<3x2xf32>
  %y = moe.unpermute %rows, %slots weights %w
      : (tensor<6x2xf32>, tensor<3x2xi32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %y_d = tensor.cast %y : tensor<3x2xf32> to tensor<?x?xf32>
  call @print_f32(%y_d) : (tensor<?x?xf32>) -> ()
  // CHECK:      [0.5,   1],
  // CHECK-NEXT: [6,   8],
  // CHECK-NEXT: [20,   24]]

  // Experts 0, 1, 2 compute x0, x1 and x0 + x1 of each row.
  %a = arith.constant dense<[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]]> : tensor<4x2xf32>
  %wts = arith.constant dense<[[[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]]> : tensor<3x1x2xf32>
  // Offsets [0, 3, 1, 9]: e0 owns rows [0, 3); e1 would start at 3 and end
  // at 1, so it is empty; e2 starts no earlier than 3 and ends at M = 4.
  %bad = arith.constant dense<[0, 3, 1, 9]> : tensor<4xi64>
  %g = moe.grouped_matmul %a, %wts, %bad
      : (tensor<4x2xf32>, tensor<3x1x2xf32>, tensor<4xi64>) -> tensor<4x1xf32>
  %g_d = tensor.cast %g : tensor<4x1xf32> to tensor<?x?xf32>
  call @print_f32(%g_d) : (tensor<?x?xf32>) -> ()
  // CHECK:      [1],
  // CHECK-NEXT: [0],
  // CHECK-NEXT: [1],
  // CHECK-NEXT: [2]]
  // Offsets [-5, -2, 2, 2]: e0 is [0, 0), e1 owns [0, 2), e2 is [2, 2);
  // rows 2 and 3 belong to nobody and are zero.
  %neg = arith.constant dense<[-5, -2, 2, 2]> : tensor<4xi64>
  %h = moe.grouped_matmul %a, %wts, %neg
      : (tensor<4x2xf32>, tensor<3x1x2xf32>, tensor<4xi64>) -> tensor<4x1xf32>
  %h_d = tensor.cast %h : tensor<4x1xf32> to tensor<?x?xf32>
  call @print_f32(%h_d) : (tensor<?x?xf32>) -> ()
  // CHECK:      [0],
  // CHECK-NEXT: [1],
  // CHECK-NEXT: [0],
  // CHECK-NEXT: [0]]
  return
}
