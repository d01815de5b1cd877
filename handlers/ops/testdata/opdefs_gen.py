"""Writes opdefs_tf.json: the signatures TensorFlow's op registry declares
for the ops this package registers, which signature_tf_test.go compares
with each op's Spec (its data input and output counts, its type
attributes and the types they allow).

For each op: inputs and outputs as a fixed number of single tensors plus
the arguments counted by an attribute (an int attribute such as N, or a
type list's length), and the op's type and list(type) attributes with
their allowed types (empty: any). The ops already in the file are kept;
name new ones on the command line. Run it with TensorFlow 2.x:

    /work/tfvenv/bin/python handlers/ops/testdata/opdefs_gen.py [OP...]
"""

import json
import os
import sys

from tensorflow.python.framework import op_def_registry

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "opdefs_tf.json")


def args(arg_defs):
    fixed, counted = 0, []
    for a in arg_defs:
        if a.number_attr:
            counted.append({"attr": a.number_attr, "list": False})
        elif a.type_list_attr:
            counted.append({"attr": a.type_list_attr, "list": True})
        else:
            fixed += 1
    return {"fixed": fixed, "counted": counted}


def signature(op):
    types = {}
    for a in op.attr:
        if a.type in ("type", "list(type)"):
            types[a.name] = {"list": a.type == "list(type)",
                             "allowed": sorted(a.allowed_values.list.type)}
    return {"inputs": args(op.input_arg), "outputs": args(op.output_arg), "types": types}


def main():
    names = set(sys.argv[1:])
    if os.path.exists(OUT):
        with open(OUT) as f:
            names |= set(json.load(f))
    out = {}
    for name in sorted(names):
        op = op_def_registry.get(name)
        if op is None:
            sys.exit(f"TensorFlow has no op {name}")
        out[name] = signature(op)
    # One op a line, so that a regenerated file's diff shows the ops that
    # changed.
    lines = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in out.items()]
    with open(OUT, "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")


if __name__ == "__main__":
    main()
