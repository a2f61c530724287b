"""Writes small TFLite models with control flow, and checks each runs in the LiteRT interpreter.

The main subgraph runs `WHILE` over a counter and a vector: the cond subgraph is
`counter < 3` (`LESS`), the body adds one to the counter and doubles the vector (`ADD`): one
loop, as TFLite lowers `tf.while_loop`. Built with the `tflite`
package's FlatBuffers bindings (PyPI `tflite` 2.18.0), run with `ai-edge-litert` 2.3.0:

    python3 scripts/gen-tflite-control-flow.py tests/data/tflite/while_loop.tflite
    python3 scripts/gen-tflite-control-flow.py --if tests/data/tflite/if_branches.tflite

With `--if`, the main subgraph runs `IF` on a flag: the then branch doubles the vector, the
else branch adds one to it (`ADD`).
"""
import sys

import flatbuffers
import numpy as np
import tflite

N = 64
ADD, LESS, IF, WHILE = 0, 58, 118, 119
FLOAT32, INT32, BOOL = 0, 2, 6


def ints(b, start, values):
    start(b, len(values))
    for v in reversed(values):
        b.PrependInt32(v)
    return b.EndVector()


def offsets(b, start, values):
    start(b, len(values))
    for v in reversed(values):
        b.PrependUOffsetTRelative(v)
    return b.EndVector()


def build(branches):
    b = flatbuffers.Builder(1024)
    # Buffers: 0 the empty sentinel, 1 the limit (3), 2 the step (1); with branches, 3 a float 1.
    def buffer(data):
        vec = b.CreateByteVector(data) if data else None
        tflite.BufferStart(b)
        if vec is not None:
            tflite.BufferAddData(b, vec)
        return tflite.BufferEnd(b)

    buffers = [buffer(b""), buffer(np.int32(3).tobytes()), buffer(np.int32(1).tobytes())]
    if branches:
        buffers.append(buffer(np.float32(1).tobytes()))

    def tensor(name, shape, kind, buf=0):
        n = b.CreateString(name)
        s = ints(b, tflite.TensorStartShapeVector, shape)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, s)
        tflite.TensorAddType(b, kind)
        tflite.TensorAddBuffer(b, buf)
        tflite.TensorAddName(b, n)
        return tflite.TensorEnd(b)

    def operator(code, inputs, outputs, options=None, options_type=0):
        i = ints(b, tflite.OperatorStartInputsVector, inputs)
        o = ints(b, tflite.OperatorStartOutputsVector, outputs)
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, code)
        tflite.OperatorAddInputs(b, i)
        tflite.OperatorAddOutputs(b, o)
        if options is not None:
            tflite.OperatorAddBuiltinOptionsType(b, options_type)
            tflite.OperatorAddBuiltinOptions(b, options)
        return tflite.OperatorEnd(b)

    def subgraph(name, tensors, inputs, outputs, ops):
        t = offsets(b, tflite.SubGraphStartTensorsVector, tensors)
        i = ints(b, tflite.SubGraphStartInputsVector, inputs)
        o = ints(b, tflite.SubGraphStartOutputsVector, outputs)
        p = offsets(b, tflite.SubGraphStartOperatorsVector, ops)
        n = b.CreateString(name)
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, t)
        tflite.SubGraphAddInputs(b, i)
        tflite.SubGraphAddOutputs(b, o)
        tflite.SubGraphAddOperators(b, p)
        tflite.SubGraphAddName(b, n)
        return tflite.SubGraphEnd(b)

    if branches:
        tflite.IfOptionsStart(b)
        tflite.IfOptionsAddThenSubgraphIndex(b, 1)
        tflite.IfOptionsAddElseSubgraphIndex(b, 2)
        options = tflite.IfOptionsEnd(b)
        options_type = tflite.BuiltinOptions.IfOptions
    else:
        tflite.WhileOptionsStart(b)
        tflite.WhileOptionsAddCondSubgraphIndex(b, 1)
        tflite.WhileOptionsAddBodySubgraphIndex(b, 2)
        options = tflite.WhileOptionsEnd(b)
        options_type = tflite.BuiltinOptions.WhileOptions
    # Operator codes: 0 ADD, 1 LESS, 2 WHILE or IF.
    codes = []
    for code in (ADD, LESS, IF if branches else WHILE):
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, code)
        tflite.OperatorCodeAddBuiltinCode(b, code)
        tflite.OperatorCodeAddVersion(b, 1)
        codes.append(tflite.OperatorCodeEnd(b))
    if branches:
        main = subgraph(
            "main",
            [tensor("flag", [], BOOL), tensor("x", [N], FLOAT32), tensor("y", [N], FLOAT32)],
            [0, 1], [2],
            [operator(2, [0, 1], [2], options, options_type)],
        )
        then = subgraph(
            "then",
            [tensor("t_x", [N], FLOAT32), tensor("t_y", [N], FLOAT32)],
            [0], [1],
            [operator(0, [0, 0], [1])],
        )
        otherwise = subgraph(
            "else",
            [tensor("e_x", [N], FLOAT32), tensor("one", [], FLOAT32, 3), tensor("e_y", [N], FLOAT32)],
            [0], [2],
            [operator(0, [0, 1], [2])],
        )
        graphs = [main, then, otherwise]
        description = "an IF: x doubled, or one added"
    else:
        graphs = loop_graphs(tensor, operator, subgraph, options, options_type)
        description = "a WHILE loop: counter < 3, x doubled each turn"
    codes_vec = offsets(b, tflite.ModelStartOperatorCodesVector, codes)
    subgraphs = offsets(b, tflite.ModelStartSubgraphsVector, graphs)
    buffers_vec = offsets(b, tflite.ModelStartBuffersVector, buffers)
    description = b.CreateString(description)
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes_vec)
    tflite.ModelAddSubgraphs(b, subgraphs)
    tflite.ModelAddDescription(b, description)
    tflite.ModelAddBuffers(b, buffers_vec)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def loop_graphs(tensor, operator, subgraph, options, options_type):
    main = subgraph(
        "main",
        [tensor("counter", [], INT32), tensor("x", [N], FLOAT32),
         tensor("counter_out", [], INT32), tensor("y", [N], FLOAT32)],
        [0, 1], [3],
        [operator(2, [0, 1], [2, 3], options, options_type)],
    )
    cond = subgraph(
        "cond",
        [tensor("c_counter", [], INT32), tensor("c_x", [N], FLOAT32),
         tensor("limit", [], INT32, 1), tensor("again", [], BOOL)],
        [0, 1], [3],
        [operator(1, [0, 2], [3])],
    )
    body = subgraph(
        "body",
        [tensor("b_counter", [], INT32), tensor("b_x", [N], FLOAT32),
         tensor("one", [], INT32, 2), tensor("b_counter_next", [], INT32),
         tensor("b_x_next", [N], FLOAT32)],
        [0, 1], [3, 4],
        [operator(0, [0, 2], [3]), operator(0, [1, 1], [4])],
    )
    return [main, cond, body]


def run(path, first):
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=path)
    interpreter.allocate_tensors()
    inputs = interpreter.get_input_details()
    interpreter.set_tensor(inputs[0]["index"], np.array(first, dtype=inputs[0]["dtype"]))
    interpreter.set_tensor(inputs[1]["index"], np.ones(N, dtype=np.float32))
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


if __name__ == "__main__":
    branches = sys.argv[1] == "--if"
    out = sys.argv[-1]
    open(out, "wb").write(build(branches))
    if branches:
        assert np.all(run(out, True) == 2.0) and np.all(run(out, False) == 2.0)
        print(f"{out}: runs in LiteRT, either branch")
    else:
        assert np.all(run(out, 0) == 8.0)
        print(f"{out}: runs in LiteRT, x doubled three times")
