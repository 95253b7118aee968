#!/usr/bin/env python3
"""moe-tblgen: TableGen backends of moe-mlir, over llvm-tblgen's JSON dump.

  pipeline-options --pass NAME --json RECORDS.json -o OUT.h.inc
      The options of pass NAME (declared once, in its Passes.td) as a
      PassPipelineOptions mixin, so a pipeline takes them as its own and hands
      them to the pass unchanged: `template <typename Derived> struct
      NAMEPipelineOptions` with one `Option<>` per pass option and
      `getNAMEOptions()` returning the pass's generated options struct.
"""
import argparse
import json
import sys


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
    parser.add_argument('backend', choices=['pipeline-options'])
    parser.add_argument('--json', required=True)
    parser.add_argument('--pass', dest='pass_name', required=True)
    parser.add_argument('--namespace', default='::mlir::moe')
    parser.add_argument('-o', dest='output', required=True)
    args = parser.parse_args()
    with open(args.json) as f:
        records = json.load(f)
    text = pipeline_options(records, args.pass_name, args.namespace)
    with open(args.output, 'w') as f:
        f.write(text)


if __name__ == '__main__':
    main()
