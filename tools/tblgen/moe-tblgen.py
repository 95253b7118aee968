#!/usr/bin/env python3
"""moe-tblgen: TableGen backends of moe-mlir, over llvm-tblgen's JSON dump.

  pipeline-options --pass NAME --json RECORDS.json -o OUT.h.inc
      The options of pass NAME (declared once, in its Passes.td) as a
      PassPipelineOptions mixin, so a pipeline takes them as its own and hands
      them to the pass unchanged: `template <typename Derived> struct
      NAMEPipelineOptions` with one `Option<>` per pass option and
      `getNAMEOptions()` returning the pass's generated options struct.
  contract-tables --json CONTRACT.json -o ContractTables.h
      The bundle records by ABI, the plan types and roles and the version of
      runtime/contract/Contract.td, for the writer and the reader.
  contract-check --json CONTRACT.json --tables ContractTables.h
                 --header moe_runtime.h --compiler-header Contract.h
                 --python python/moe_mlir/runtime.py
      Exits 1, listing each drift, unless the tables are current and the C
      header, the compiler's version and the ctypes mirror (the moe_mlir
      package's runtime module, loaded alone) declare what Contract.td
      declares.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contract  # noqa: E402


def cpp_string(text):
    return '"' + text.replace('\\', '\\\\').replace('"', '\\"') + '"'


def pipeline_options(records, name, namespace):
    record = records.get(name)
    if record is None or 'PassBase' not in record.get('!superclasses', []):
        sys.exit(f'moe-tblgen: no pass named {name}')
    options = [records[o['def']] for o in record['options']]
    for option in options:
        if 'ListOption' in option['!superclasses']:
            sys.exit(f'moe-tblgen: list options are not supported yet '
                     f'({option["argument"]})')
    lines = [
        f'// The options of --{record["argument"]}, generated from its .td '
        f'by moe-tblgen (tools/tblgen).',
        f'template <typename Derived>',
        f'struct {name}PipelineOptions',
        f'    : public ::mlir::PassPipelineOptions<Derived> {{',
    ]
    for o in options:
        args = [f'*this', cpp_string(o['argument']),
                f'::llvm::cl::desc({cpp_string(o["description"])})']
        if o['defaultValue']:
            args.append(f'::llvm::cl::init({o["defaultValue"]})')
        if o['additionalOptFlags']:
            args.append(o['additionalOptFlags'])
        lines.append(f'  ::mlir::detail::PassOptions::Option<{o["type"]}> '
                     f'{o["cppName"]}{{{", ".join(args)}}};')
    lines.append(f'  /// The values, as --{record["argument"]} takes them.')
    lines.append(f'  {namespace}::{name}Options get{name}Options() const {{')
    lines.append(f'    {namespace}::{name}Options options;')
    for o in options:
        lines.append(f'    options.{o["cppName"]} = {o["cppName"]};')
    lines.append('    return options;')
    lines.append('  }')
    lines.append('};')
    return '\n'.join(lines) + '\n'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('backend', choices=['pipeline-options',
                                            'contract-tables',
                                            'contract-check'])
    parser.add_argument('--json', required=True)
    parser.add_argument('--pass', dest='pass_name')
    parser.add_argument('--namespace', default='::mlir::moe')
    parser.add_argument('--tables')
    parser.add_argument('--header')
    parser.add_argument('--compiler-header')
    parser.add_argument('--python')
    parser.add_argument('-o', dest='output')
    args = parser.parse_args()
    with open(args.json) as f:
        records = json.load(f)
    if args.backend == 'contract-check':
        drifts = contract.contract_check(records, args.tables, args.header,
                                         args.compiler_header, args.python)
        for drift in drifts:
            print(f'moe-tblgen: contract drift: {drift}')
        if drifts:
            sys.exit(1)
        print('moe-tblgen: the contract agrees with Contract.td')
        return
    if not args.output:
        sys.exit('moe-tblgen: -o is required')
    if args.backend == 'contract-tables':
        text = contract.contract_tables(records)
    else:
        if not args.pass_name:
            sys.exit('moe-tblgen: --pass is required')
        text = pipeline_options(records, args.pass_name, args.namespace)
    with open(args.output, 'w') as f:
        f.write(text)


if __name__ == '__main__':
    main()
