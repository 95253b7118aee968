//===- AbiCheck.h - compile-time ABI comparisons ------------------*- C++
//-*-===//
//
// What DriverABICheck.cpp and NcclABICheck.cpp compare a declared entry
// point with the vendor header's by: the calling convention's view of each
// parameter, and the name a header binds a symbol to.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_TEST_ABICHECK_H
#define MOE_RUNTIME_TEST_ABICHECK_H

#include <type_traits>

namespace moe_abi {

template <typename T, typename = void> struct IsComplete : std::false_type {};
template <typename T>
struct IsComplete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

/// Whether the calling convention treats A and B alike: integers and enums
/// of one size; plain structs of one size and alignment; pointers to such
/// types, to void, to two complete types of one size (A at least as aligned as
/// B), or to two opaque structs.
template <typename A, typename B> constexpr bool sameAbi() {
  if constexpr (std::is_pointer_v<A> || std::is_pointer_v<B>) {
    if constexpr (!std::is_pointer_v<A> || !std::is_pointer_v<B>) {
      return false;
    } else {
      using PA = std::remove_pointer_t<A>;
      using PB = std::remove_pointer_t<B>;
      if constexpr (std::is_const_v<PA> != std::is_const_v<PB>)
        return false;
      else if constexpr (std::is_void_v<PA> || std::is_void_v<PB>)
        return std::is_void_v<PA> && std::is_void_v<PB>;
      else if constexpr (std::is_class_v<PA> && std::is_class_v<PB>) {
        if constexpr (IsComplete<PA>::value != IsComplete<PB>::value)
          return false;
        else if constexpr (IsComplete<PA>::value)
          return sizeof(PA) == sizeof(PB) && alignof(PA) >= alignof(PB);
        else
          return true;
      } else {
        return sameAbi<std::remove_const_t<PA>, std::remove_const_t<PB>>();
      }
    }
  } else if constexpr (std::is_class_v<A> || std::is_class_v<B>) {
    // A struct passed by value: one size and alignment, plain bytes.
    if constexpr (!std::is_class_v<A> || !std::is_class_v<B>)
      return false;
    else
      return sizeof(A) == sizeof(B) && alignof(A) == alignof(B) &&
             std::is_trivially_copyable_v<A> && std::is_trivially_copyable_v<B>;
  } else {
    return (std::is_integral_v<A> || std::is_enum_v<A>) &&
           (std::is_integral_v<B> || std::is_enum_v<B>) &&
           sizeof(A) == sizeof(B);
  }
}

template <typename R1, typename... A1, typename R2, typename... A2>
constexpr bool sameSignature(R1 (*)(A1...), R2 (*)(A2...)) {
  if constexpr (sizeof...(A1) != sizeof...(A2))
    return false;
  else
    return sameAbi<R1, R2>() && (sameAbi<A1, A2>() && ...);
}

constexpr bool sameString(const char *a, const char *b) {
  while (*a && *a == *b)
    ++a, ++b;
  return *a == *b;
}

} // namespace moe_abi

#define MOE_STRINGIFY_EXPANDED(x) #x
#define MOE_STRINGIFY(x) MOE_STRINGIFY_EXPANDED(x)

#endif // MOE_RUNTIME_TEST_ABICHECK_H
