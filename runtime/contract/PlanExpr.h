//===- PlanExpr.h - launch plan expressions (compiler and runtime) -*- C++
//-*-===//
//
// The integer expressions of a launch plan (docs/launch-plans.md): grids,
// launch conditions, workspace sizes, argument dimensions and scalar
// parameters, written by the compiler over an entry's sizes and evaluated
// by the runtime per call. Header-only C++17 without MLIR, so that the
// compiler (which checks every expression it writes) and the runtime (which
// reads them from untrusted bundles) share one parser and one evaluator.
//
// Grammar (whitespace is not allowed inside a bundle record and not
// accepted here):
//   expr    := or
//   or      := and ("||" and)*
//   and     := compare ("&&" compare)*
//   compare := sum (("<" | "<=" | "==" | "!=" | ">=" | ">") sum)?
//   sum     := product (("+" | "-") product)*
//   product := unary ("*" unary)*
//   unary   := "-" unary | primary
//   primary := number | name | call | "(" expr ")"
//   call    := ("ceildiv" | "floordiv") "(" expr "," expr ")"
//            | ("min" | "max") "(" expr ("," expr)* ")"
//            | "null" "(" name ")"
//   name    := [A-Za-z_][A-Za-z0-9_]*  (not a function name)
// Values are int64; overflow, a division by zero or a negative divisor,
// and an unknown name are errors, never a wrapped or made-up value.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_CONTRACT_PLANEXPR_H
#define MOE_RUNTIME_CONTRACT_PLANEXPR_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moe::contract {

class PlanExpr {
public:
  /// Limits on what a bundle may hold: text bytes, nodes, nesting depth.
  static constexpr size_t kMaxTextBytes = 1024;
  static constexpr size_t kMaxNodes = 256;
  static constexpr int kMaxDepth = 32;

  enum class Op : uint8_t {
    Constant, // value
    Name,     // names[index]
    Null,     // null(names[index]): 1 when that optional argument is null
    Negate,
    Add,
    Sub,
    Mul,
    CeilDiv,
    FloorDiv,
    Min, // n-ary: operands are children
    Max,
    Lt,
    Le,
    Eq,
    Ne,
    Ge,
    Gt,
    And,
    Or,
  };

  struct Node {
    Op op = Op::Constant;
    int64_t value = 0;  // Constant; the name's index for Name and Null
    uint32_t first = 0; // children: operands[first, first + count)
    uint32_t count = 0;
  };

  /// Parses `text`; on failure returns false with `error` saying where and
  /// why.
  static bool parse(std::string_view text, PlanExpr &out, std::string &error) {
    Parser p{text, out, error};
    out = PlanExpr();
    if (text.size() > kMaxTextBytes)
      return p.fail("longer than " + std::to_string(kMaxTextBytes) + " bytes");
    uint32_t root = 0;
    if (!p.parseOr(0, root))
      return false;
    if (p.pos != text.size())
      return p.fail("unexpected '" + std::string(1, text[p.pos]) + "'");
    out.root = root;
    out.valid = true;
    return true;
  }

  /// The names it reads (sizes, runtime facts, and the arguments of null()),
  /// each once, in first-use order.
  const std::vector<std::string> &names() const { return nameTable; }
  /// Whether names()[i] is read as null(<argument>) rather than as a value.
  bool isNullTest(size_t i) const {
    for (const Node &node : nodes)
      if (node.op == Op::Null && size_t(node.value) == i)
        return true;
    return false;
  }
  bool isConstant() const { return valid && nodes[root].op == Op::Constant; }

  /// Evaluates with `lookup(name, isNullTest, value&) -> bool` giving each
  /// name's value (false: unknown). On failure returns false with `error`.
  template <typename Lookup>
  bool evaluate(Lookup &&lookup, int64_t &out, std::string &error) const {
    if (!valid) {
      error = "empty expression";
      return false;
    }
    std::vector<int64_t> values(nameTable.size());
    for (size_t i = 0; i < nameTable.size(); ++i)
      if (!lookup(nameTable[i], isNullTest(i), values[i])) {
        error = "unknown name '" + nameTable[i] + "'";
        return false;
      }
    return evaluateNode(root, values, out, error);
  }

  /// The canonical text (what parse() of it gives back).
  std::string str() const { return valid ? print(root) : std::string(); }

private:
  std::vector<Node> nodes;
  std::vector<uint32_t> operands;
  std::vector<std::string> nameTable;
  uint32_t root = 0;
  bool valid = false;

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }
  static bool isNameStart(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }

  struct Parser {
    std::string_view text;
    PlanExpr &expr;
    std::string &error;
    size_t pos = 0;

    bool fail(const std::string &why) {
      error = "expression '" + std::string(text) + "': " + why + " at byte " +
              std::to_string(pos);
      return false;
    }
    bool accept(std::string_view token) {
      if (text.substr(pos, token.size()) != token)
        return false;
      pos += token.size();
      return true;
    }
    bool add(Node node, const std::vector<uint32_t> &children, uint32_t &out) {
      if (expr.nodes.size() >= kMaxNodes)
        return fail("more than " + std::to_string(kMaxNodes) + " terms");
      node.first = uint32_t(expr.operands.size());
      node.count = uint32_t(children.size());
      expr.operands.insert(expr.operands.end(), children.begin(),
                           children.end());
      out = uint32_t(expr.nodes.size());
      expr.nodes.push_back(node);
      return true;
    }
    bool binary(Op op, uint32_t a, uint32_t b, uint32_t &out) {
      Node node;
      node.op = op;
      return add(node, {a, b}, out);
    }
    bool nested(int depth) {
      if (depth <= kMaxDepth)
        return true;
      return fail("nested deeper than " + std::to_string(kMaxDepth));
    }

    bool parseOr(int depth, uint32_t &out) {
      if (!nested(depth) || !parseAnd(depth, out))
        return false;
      while (accept("||")) {
        uint32_t rhs = 0;
        if (!parseAnd(depth, rhs) || !binary(Op::Or, out, rhs, out))
          return false;
      }
      return true;
    }
    bool parseAnd(int depth, uint32_t &out) {
      if (!parseCompare(depth, out))
        return false;
      while (accept("&&")) {
        uint32_t rhs = 0;
        if (!parseCompare(depth, rhs) || !binary(Op::And, out, rhs, out))
          return false;
      }
      return true;
    }
    bool parseCompare(int depth, uint32_t &out) {
      if (!parseSum(depth, out))
        return false;
      // Two-byte operators first.
      static constexpr std::pair<std::string_view, Op> kCompares[] = {
          {"<=", Op::Le}, {">=", Op::Ge}, {"==", Op::Eq},
          {"!=", Op::Ne}, {"<", Op::Lt},  {">", Op::Gt}};
      for (const auto &[token, op] : kCompares)
        if (accept(token)) {
          uint32_t rhs = 0;
          return parseSum(depth, rhs) && binary(op, out, rhs, out);
        }
      return true;
    }
    bool parseSum(int depth, uint32_t &out) {
      if (!parseProduct(depth, out))
        return false;
      while (true) {
        Op op;
        if (accept("+"))
          op = Op::Add;
        else if (accept("-"))
          op = Op::Sub;
        else
          return true;
        uint32_t rhs = 0;
        if (!parseProduct(depth, rhs) || !binary(op, out, rhs, out))
          return false;
      }
    }
    bool parseProduct(int depth, uint32_t &out) {
      if (!parseUnary(depth, out))
        return false;
      while (accept("*")) {
        uint32_t rhs = 0;
        if (!parseUnary(depth, rhs) || !binary(Op::Mul, out, rhs, out))
          return false;
      }
      return true;
    }
    bool parseUnary(int depth, uint32_t &out) {
      if (accept("-")) {
        uint32_t operand = 0;
        Node node;
        node.op = Op::Negate;
        return nested(depth + 1) && parseUnary(depth + 1, operand) &&
               add(node, {operand}, out);
      }
      return parsePrimary(depth, out);
    }
    bool parseName(std::string &name) {
      size_t start = pos;
      if (pos >= text.size() || !isNameStart(text[pos]))
        return fail("expected a name");
      while (pos < text.size() &&
             (isNameStart(text[pos]) || isDigit(text[pos])))
        ++pos;
      name = std::string(text.substr(start, pos - start));
      return true;
    }
    uint32_t nameIndex(const std::string &name) {
      for (size_t i = 0; i < expr.nameTable.size(); ++i)
        if (expr.nameTable[i] == name)
          return uint32_t(i);
      expr.nameTable.push_back(name);
      return uint32_t(expr.nameTable.size() - 1);
    }
    bool parsePrimary(int depth, uint32_t &out) {
      if (pos >= text.size())
        return fail("expected a term");
      char c = text[pos];
      if (isDigit(c)) {
        int64_t value = 0;
        while (pos < text.size() && isDigit(text[pos])) {
          if (__builtin_mul_overflow(value, int64_t(10), &value) ||
              __builtin_add_overflow(value, int64_t(text[pos] - '0'), &value))
            return fail("number overflows int64");
          ++pos;
        }
        Node node;
        node.value = value;
        return add(node, {}, out);
      }
      if (accept("(")) {
        if (!nested(depth + 1) || !parseOr(depth + 1, out))
          return false;
        return accept(")") || fail("expected ')'");
      }
      if (!isNameStart(c))
        return fail("expected a term");
      std::string name;
      if (!parseName(name))
        return false;
      Op op = Op::Name;
      size_t minArgs = 0, maxArgs = 0;
      if (name == "ceildiv" || name == "floordiv") {
        op = name == "ceildiv" ? Op::CeilDiv : Op::FloorDiv;
        minArgs = maxArgs = 2;
      } else if (name == "min" || name == "max") {
        op = name == "min" ? Op::Min : Op::Max;
        minArgs = 1;
        maxArgs = kMaxNodes;
      } else if (name == "null") {
        if (!accept("(") || !parseName(name) || !accept(")"))
          return fail("null takes one argument name, as null(<name>)");
        Node node;
        node.op = Op::Null;
        node.value = nameIndex(name);
        return add(node, {}, out);
      }
      if (op == Op::Name) {
        if (pos < text.size() && text[pos] == '(')
          return fail("unknown function '" + name + "'");
        Node node;
        node.op = Op::Name;
        node.value = nameIndex(name);
        return add(node, {}, out);
      }
      if (!accept("("))
        return fail("expected '(' after " + name);
      std::vector<uint32_t> children;
      do {
        uint32_t child = 0;
        if (!nested(depth + 1) || !parseOr(depth + 1, child))
          return false;
        children.push_back(child);
      } while (accept(","));
      if (!accept(")"))
        return fail("expected ')' or ','");
      if (children.size() < minArgs || children.size() > maxArgs)
        return fail(name + " takes " +
                    (minArgs == maxArgs
                         ? std::to_string(minArgs)
                         : "at least " + std::to_string(minArgs)) +
                    " arguments");
      Node node;
      node.op = op;
      return add(node, children, out);
    }
  };

  bool evaluateNode(uint32_t index, const std::vector<int64_t> &names,
                    int64_t &out, std::string &error) const {
    const Node &node = nodes[index];
    auto overflow = [&](const char *what) {
      error = std::string(what) + " overflows int64 in '" + str() + "'";
      return false;
    };
    switch (node.op) {
    case Op::Constant:
      out = node.value;
      return true;
    case Op::Name:
    case Op::Null:
      out = names[size_t(node.value)];
      return true;
    default:
      break;
    }
    int64_t args[2] = {0, 0};
    if (node.op == Op::Min || node.op == Op::Max) {
      for (uint32_t i = 0; i < node.count; ++i) {
        int64_t v = 0;
        if (!evaluateNode(operands[node.first + i], names, v, error))
          return false;
        if (i == 0 || (node.op == Op::Min ? v < out : v > out))
          out = v;
      }
      return true;
    }
    for (uint32_t i = 0; i < node.count; ++i)
      if (!evaluateNode(operands[node.first + i], names, args[i], error))
        return false;
    int64_t a = args[0], b = args[1];
    switch (node.op) {
    case Op::Negate:
      if (a == INT64_MIN)
        return overflow("a negation");
      out = -a;
      return true;
    case Op::Add:
      return !__builtin_add_overflow(a, b, &out) || overflow("a sum");
    case Op::Sub:
      return !__builtin_sub_overflow(a, b, &out) || overflow("a difference");
    case Op::Mul:
      return !__builtin_mul_overflow(a, b, &out) || overflow("a product");
    case Op::CeilDiv:
    case Op::FloorDiv: {
      if (b <= 0) {
        error = "division by " + std::to_string(b) + " in '" + str() + "'";
        return false;
      }
      int64_t q = a / b, r = a % b; // b > 0: no overflow
      if (node.op == Op::CeilDiv && r > 0)
        ++q;
      if (node.op == Op::FloorDiv && r < 0)
        --q;
      out = q;
      return true;
    }
    case Op::Lt:
      out = a < b;
      return true;
    case Op::Le:
      out = a <= b;
      return true;
    case Op::Eq:
      out = a == b;
      return true;
    case Op::Ne:
      out = a != b;
      return true;
    case Op::Ge:
      out = a >= b;
      return true;
    case Op::Gt:
      out = a > b;
      return true;
    case Op::And:
      out = a && b;
      return true;
    case Op::Or:
      out = a || b;
      return true;
    default:
      error = "malformed expression";
      return false;
    }
  }

  /// Binding strength of an operation (higher binds tighter).
  static int precedence(Op op) {
    switch (op) {
    case Op::Or:
      return 1;
    case Op::And:
      return 2;
    case Op::Lt:
    case Op::Le:
    case Op::Eq:
    case Op::Ne:
    case Op::Ge:
    case Op::Gt:
      return 3;
    case Op::Add:
    case Op::Sub:
      return 4;
    case Op::Mul:
      return 5;
    case Op::Negate:
      return 6;
    default:
      return 7; // numbers, names and calls
    }
  }

  static const char *infixToken(Op op) {
    switch (op) {
    case Op::Or:
      return "||";
    case Op::And:
      return "&&";
    case Op::Lt:
      return "<";
    case Op::Le:
      return "<=";
    case Op::Eq:
      return "==";
    case Op::Ne:
      return "!=";
    case Op::Ge:
      return ">=";
    case Op::Gt:
      return ">";
    case Op::Add:
      return "+";
    case Op::Sub:
      return "-";
    default:
      return "*";
    }
  }

  /// Canonical text with parentheses only where the grammar needs them
  /// (never deeper than the text it was parsed from).
  std::string print(uint32_t index) const {
    const Node &node = nodes[index];
    auto child = [&](uint32_t i) { return print(operands[node.first + i]); };
    // Operand i of `node`, parenthesised when it binds looser than `node`
    // (a right operand, or either operand of a comparison, also when equal:
    // operations associate to the left and comparisons do not chain).
    auto operand = [&](uint32_t i) {
      int own = precedence(node.op);
      int theirs = precedence(nodes[operands[node.first + i]].op);
      bool strict = i == 1 || own == 3;
      bool wrap = theirs < own || (strict && theirs == own);
      return wrap ? "(" + child(i) + ")" : child(i);
    };
    switch (node.op) {
    case Op::Constant:
      return std::to_string(node.value);
    case Op::Name:
      return nameTable[size_t(node.value)];
    case Op::Null:
      return "null(" + nameTable[size_t(node.value)] + ")";
    case Op::Negate:
      return "-" + operand(0);
    case Op::CeilDiv:
    case Op::FloorDiv:
    case Op::Min:
    case Op::Max: {
      std::string s = node.op == Op::CeilDiv    ? "ceildiv("
                      : node.op == Op::FloorDiv ? "floordiv("
                      : node.op == Op::Min      ? "min("
                                                : "max(";
      for (uint32_t i = 0; i < node.count; ++i)
        s += (i ? "," : "") + child(i);
      return s + ")";
    }
    default:
      return operand(0) + infixToken(node.op) + operand(1);
    }
  }
};

} // namespace moe::contract

#endif // MOE_RUNTIME_CONTRACT_PLANEXPR_H
