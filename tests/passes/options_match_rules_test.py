#!/usr/bin/env python3
"""A pass's options are declared once, in the pass table: the optimization rules'
attributes match it.

    options_match_rules_test.py PASS_TABLE_JSON_BINARY STARLARK_EVAL_PY RULES_BZL

The pass table (optimizations/passes.cc, dumped as JSON by :pass_table_json) is where
an option's name, kind, default, range, allowed items and doc are stated. The rules
(rules/optimizations.bzl, evaluated in Python by tools/ci/starlark_eval.py: the rule()
calls and their attr.*() declarations) must carry, for every pass, one rule named
after it whose attributes besides the common ones (_COMMON_ATTRS) are exactly the
pass's options (less the two pairs in NOT_ATTRIBUTES / NOT_OPTIONS below), and for
each option:
  - the type: int -> attr.int, string -> attr.string, string list -> attr.string_list;
  - the default: unset (attr.int's _UNSET_INT, "", []: the rule passes nothing and the
    table's default applies) or the table's default itself;
  - the doc: the table's doc, followed by " Unset: the pass table's default." when the
    attribute's default is unset;
and in the table itself: an int option with a range names it in its doc as
"min..max" and names no other range; every allowed item of a list of at most 10 is
named in the doc.
"""
import json
import os
import re
import subprocess
import sys

# Options no attribute carries: (pass, option): why.
NOT_ATTRIBUTES = {
    ("quantize_weights", "stored"): "elf_opt fills it from the GGUF the rule's `weights` names",
}
# Attributes that are no option: (rule, attribute): why.
NOT_OPTIONS = {
    ("quantize_weights", "weights"): "the GGUF file whose header gives option stored",
}
UNSET_NOTE = " Unset: the pass table's default."
ATTR_TYPE = {"int": "int", "string": "string", "string_list": "string_list"}


def main():
    table_bin, starlark_eval_py, rules_bzl = sys.argv[1:4]
    table = json.loads(subprocess.run([table_bin], check=True, capture_output=True, text=True).stdout)
    sys.path.insert(0, os.path.dirname(os.path.abspath(starlark_eval_py)))
    import starlark_eval  # pylint: disable=import-outside-toplevel

    ev = starlark_eval.Evaluator(os.getcwd())
    module = ev.load_bzl(os.path.relpath(rules_bzl))
    common = set(module["_COMMON_ATTRS"])
    unset_int = module["_UNSET_INT"]
    rules = {name: v for name, v in module.items() if isinstance(v, starlark_eval.Rule)}

    problems = []
    passes = {p["name"]: p for p in table}
    for name in sorted(set(rules) - set(passes)):
        problems.append(f"rule {name}: no pass of that name in the pass table")
    for p in table:
        rule = rules.get(p["name"])
        if rule is None:
            problems.append(f"pass {p['name']}: no rule of that name in {rules_bzl}")
            continue
        options = {o["name"]: o for o in p["options"] if (p["name"], o["name"]) not in NOT_ATTRIBUTES}
        attrs = {a: v for a, v in rule.attrs.items() if a not in common and (p["name"], a) not in NOT_OPTIONS}
        for a in sorted(set(attrs) - set(options)):
            problems.append(f"{p['name']}: attribute {a} is no option of the pass table")
        for o in sorted(set(options) - set(attrs)):
            problems.append(f"{p['name']}: option {o} has no attribute in the rule")
        for oname in sorted(set(options) & set(attrs)):
            o, a = options[oname], attrs[oname]
            where = f"{p['name']}.{oname}"
            if a.type != ATTR_TYPE[o["kind"]]:
                problems.append(f"{where}: the table's kind is {o['kind']}, the attribute is attr.{a.type}")
                continue
            default = a.kwargs.get("default")
            unset = default in (None, "", []) or (a.type == "int" and default == unset_int)
            if not unset:
                as_text = ",".join(default) if isinstance(default, list) else str(default)
                if as_text != o["default"]:
                    problems.append(f"{where}: the attribute's default {default!r} is not the table's "
                                    f"{o['default']!r}")
            want_doc = o["doc"] + (UNSET_NOTE if unset else "")
            if a.kwargs.get("doc") != want_doc:
                problems.append(f"{where}: the attribute's doc\n      {a.kwargs.get('doc')!r}\n    "
                                f"is not the table's\n      {want_doc!r}")
    for p in table:
        for o in p["options"]:
            where = f"{p['name']}.{o['name']}"
            ranges = re.findall(r"\b(-?\d+)\.\.(-?\d+)\b", o["doc"])
            if "min" in o and "max" in o:
                if (str(o["min"]), str(o["max"])) not in ranges:
                    problems.append(f"{where}: the doc does not name its range {o['min']}..{o['max']}: {o['doc']!r}")
                ranges = [r for r in ranges if r != (str(o["min"]), str(o["max"]))]
            for lo, hi in ranges:
                problems.append(f"{where}: the doc names a range {lo}..{hi} the table does not declare")
            if len(o["choices"]) <= 10:
                for c in o["choices"]:
                    if not re.search(r"(?<![\w])" + re.escape(c) + r"(?![\w])", o["doc"]):
                        problems.append(f"{where}: the doc does not name the allowed item {c}")
    checked = sum(len(p["options"]) for p in table)
    print(f"{len(table)} passes, {len(rules)} rules, {checked} options compared")
    for problem in problems:
        print(f"MISMATCH {problem}")
    if problems:
        print(f"FAIL: {len(problems)} mismatches between the pass table (optimizations/passes.cc) and "
              f"{rules_bzl}", file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
