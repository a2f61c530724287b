#!/usr/bin/env python3
"""Writes the bundled example dumps in static/examples/ (memplan JSON, version 1).

Each example is a real schedule at real shapes: sizes come from shape x dtype (the planner
computes them), costs are flops. Run it again after changing it; the output is deterministic.
"""
import json
import pathlib

OUT = pathlib.Path(__file__).resolve().parent.parent / "static" / "examples"


def write(name, dump):
    # Step costs are flops: the page and the CLI show recompute costs in FLOPs.
    dump = {"name": dump["name"], "cost_unit": "FLOPs", **dump}
    text = json.dumps(dump, indent=1) + "\n"
    (OUT / f"{name}.json").write_text(text)


def mlp_training():
    """One training step of a 784-1024-1024-10 MLP (MNIST-sized) with Adam, f32, batch B."""
    B, D0, D1, D2, D3 = "B", 784, 1024, 1024, 10
    tensors, steps = [], []

    def t(id, shape, kind="intermediate", dtype="f32", **extra):
        tensors.append(dict(id=id, shape=shape, dtype=dtype, **({} if kind == "intermediate" else {"kind": kind}), **extra))

    def s(id, op, reads, writes, cost):
        steps.append(dict(id=id, op=op, reads=reads, writes=writes, cost=cost))

    b = 64
    t("x", [B, D0], "input")
    t("labels", [B], "input", dtype="i64")
    dims = [(D0, D1), (D1, D2), (D2, D3)]
    for i, (n_in, n_out) in enumerate(dims, 1):
        t(f"W{i}", [n_in, n_out], "param")
        t(f"b{i}", [n_out], "param")
    for i, (n_in, n_out) in enumerate(dims, 1):
        for moment in ("m", "v"):
            t(f"{moment}_W{i}", [n_in, n_out], "optimizer_state", name=f"Adam {moment} of W{i}")
            t(f"{moment}_b{i}", [n_out], "optimizer_state", name=f"Adam {moment} of b{i}")
    # Forward: activations kept for backward.
    act = "x"
    for i, (n_in, n_out) in enumerate(dims, 1):
        t(f"h{i}", [B, n_out])
        s(f"fc{i}", "matmul_bias", [act, f"W{i}", f"b{i}"], [f"h{i}"], 2 * b * n_in * n_out)
        if i < len(dims):
            t(f"a{i}", [B, n_out])
            s(f"relu{i}", "relu", [f"h{i}"], [f"a{i}"], b * n_out)
            act = f"a{i}"
    t("probs", [B, D3])
    t("loss", [1], "output")
    s("softmax_ce", "softmax_cross_entropy", ["h3", "labels"], ["probs", "loss"], 5 * b * D3)
    # Backward.
    t("dh3", [B, D3])
    s("ce_grad", "softmax_cross_entropy_grad", ["probs", "labels"], ["dh3"], 2 * b * D3)
    grad = "dh3"
    for i in range(len(dims), 0, -1):
        n_in, n_out = dims[i - 1]
        prev = "x" if i == 1 else f"a{i - 1}"
        t(f"dW{i}", [n_in, n_out])
        t(f"db{i}", [n_out])
        s(f"fc{i}_grad_W", "matmul_tn", [prev, grad], [f"dW{i}"], 2 * b * n_in * n_out)
        s(f"fc{i}_grad_b", "reduce_sum", [grad], [f"db{i}"], b * n_out)
        if i > 1:
            t(f"da{i - 1}", [B, n_in])
            t(f"dh{i - 1}", [B, n_in])
            s(f"fc{i}_grad_x", "matmul_nt", [grad, f"W{i}"], [f"da{i - 1}"], 2 * b * n_in * n_out)
            s(f"relu{i - 1}_grad", "relu_grad", [f"da{i - 1}", f"h{i - 1}"], [f"dh{i - 1}"], b * n_in)
            grad = f"dh{i - 1}"
    # Optimizer: Adam, in place on params and moments.
    for i in range(1, len(dims) + 1):
        for p in (f"W{i}", f"b{i}"):
            n = dims[i - 1][0] * dims[i - 1][1] if p[0] == "W" else dims[i - 1][1]
            s(f"adam_{p}", "adam", [p, f"d{p}", f"m_{p}", f"v_{p}"], [p, f"m_{p}", f"v_{p}"], 12 * n)
    write("mlp-training", {
        "memplan": 1,
        "name": "MLP training step (784-1024-1024-10, Adam, f32)",
        "alignment": 256,
        "params": {"B": b},
        "devices": [{"id": "gpu0", "hardware_class": "a100-40gb"}],
        "tensors": tensors,
        "steps": steps,
        "remat_candidates": [
            {"tensor": "a1", "recompute_cost": b * D1},
            {"tensor": "a2", "recompute_cost": b * D2},
        ],
    })


def transformer_decode():
    """One decode step of a 24-layer, d=2048 decoder (f16), batch B, KV cache of S positions."""
    L, d, H, hd, ff, V = 24, 2048, 16, 128, 8192, 32000
    b, seq = 8, 2048
    tensors, steps = [], []

    def t(id, shape=None, kind="intermediate", dtype="f16", **extra):
        entry = dict(id=id)
        if shape is not None:
            entry.update(shape=shape, dtype=dtype)
        if kind != "intermediate":
            entry["kind"] = kind
        entry.update(extra)
        tensors.append(entry)

    def s(id, op, reads, writes, cost, loop=None, kind=None):
        step = dict(id=id, op=op, reads=reads, writes=writes, cost=cost)
        if loop:
            step["loop"] = loop
        if kind:
            step["kind"] = kind
        steps.append(step)

    elt = 2  # f16 bytes
    t("tokens", ["B"], "input", dtype="i32")
    t("position", [1], "input", dtype="i32")
    t("embed", [V, d], "param", name="token embedding (tied with the LM head)")
    t("kv_cache", [L, 2, "B", H, "S", hd], "input", held=True, name="KV cache")
    for w, shape in (("w_qkv", [L, d, 3 * d]), ("w_o", [L, d, d]), ("w_up", [L, d, ff]),
                     ("w_down", [L, ff, d]), ("ln1", [L, d]), ("ln2", [L, d])):
        t(w, shape, "param")
    t("ln_f", [d], "param")
    t("hidden", ["B", 1, d], name="residual stream")
    s("embed_lookup", "gather", ["tokens", "embed"], ["hidden"], b * d)
    # The layer loop: one position for liveness. Per-layer weights and cache are views (layer 0's
    # offsets: the loop body is the same code for every layer).
    layer_views = {
        "w_qkv_l": ("w_qkv", [d, 3 * d]), "w_o_l": ("w_o", [d, d]), "w_up_l": ("w_up", [d, ff]),
        "w_down_l": ("w_down", [ff, d]), "ln1_l": ("ln1", [d]), "ln2_l": ("ln2", [d]),
    }
    for view, (base, shape) in layer_views.items():
        t(view, shape, view_of=base, view_offset=0)
    kv_plane = f"B*{H}*S*{hd}"
    t("k_cache_l", ["B", H, "S", hd], view_of="kv_cache", view_offset=0, name=f"layer K cache ({kv_plane})")
    t("v_cache_l", ["B", H, "S", hd], view_of="kv_cache", view_offset=b * H * seq * hd * elt,
      name=f"layer V cache ({kv_plane})")
    t("h_norm", ["B", 1, d])
    t("qkv", ["B", 1, 3 * d])
    t("q", ["B", 1, d], view_of="qkv", view_offset=0)
    t("k_new", ["B", 1, d], view_of="qkv", view_offset=b * d * elt)
    t("v_new", ["B", 1, d], view_of="qkv", view_offset=2 * b * d * elt)
    t("scores", ["B", H, 1, "S"], "scratch", dtype="f32")
    t("attn", ["B", 1, d])
    t("attn_proj", ["B", 1, d])
    t("h2_norm", ["B", 1, d])
    t("up", ["B", 1, ff])
    t("act", ["B", 1, ff])
    t("down", ["B", 1, d])
    loop = "layers"
    s("ln_attn", "rms_norm", ["hidden", "ln1_l"], ["h_norm"], 4 * b * d, loop)
    s("qkv_proj", "matmul", ["h_norm", "w_qkv_l"], ["qkv"], 2 * b * d * 3 * d, loop)
    s("kv_append", "kv_append", ["k_new", "v_new", "position"], ["k_cache_l", "v_cache_l"], 2 * b * d, loop, "copy")
    s("attention", "flash_decode", ["q", "k_cache_l", "v_cache_l", "position"], ["attn", "scores"],
      4 * b * H * seq * hd, loop)
    s("o_proj", "matmul", ["attn", "w_o_l"], ["attn_proj"], 2 * b * d * d, loop)
    s("residual_attn", "add", ["hidden", "attn_proj"], ["hidden"], b * d, loop)
    s("ln_mlp", "rms_norm", ["hidden", "ln2_l"], ["h2_norm"], 4 * b * d, loop)
    s("mlp_up", "matmul", ["h2_norm", "w_up_l"], ["up"], 2 * b * d * ff, loop)
    s("gelu", "gelu", ["up"], ["act"], 8 * b * ff, loop)
    s("mlp_down", "matmul", ["act", "w_down_l"], ["down"], 2 * b * ff * d, loop)
    s("residual_mlp", "add", ["hidden", "down"], ["hidden"], b * d, loop)
    t("final_norm", ["B", 1, d])
    t("logits", ["B", V], dtype="f32")
    t("next_tokens", ["B"], "output", dtype="i32")
    s("ln_final", "rms_norm", ["hidden", "ln_f"], ["final_norm"], 4 * b * d)
    s("lm_head", "matmul", ["final_norm", "embed"], ["logits"], 2 * b * d * V)
    s("sample", "argmax", ["logits"], ["next_tokens"], b * V)
    write("transformer-decode", {
        "memplan": 1,
        "name": "Decoder decode step (24 layers, d=2048, f16, KV cache)",
        "alignment": 256,
        "params": {"B": b, "S": seq},
        "devices": [{"id": "gpu0", "hardware_class": "a100-40gb"}],
        "tensors": tensors,
        "steps": steps,
        "loops": [{"id": loop, "trip_count": L, "back_edge_reads": ["hidden"]}],
        "remat_candidates": [
            {"tensor": "act", "recompute_cost": 8 * b * ff},
            {"tensor": "h_norm", "recompute_cost": 4 * b * d},
            {"tensor": "h2_norm", "recompute_cost": 4 * b * d},
        ],
    })


def decoder_serving():
    """One decode step of a served 28-layer, d=3072 decoder with grouped-query attention (bf16),
    batch B, KV cache of S positions: every size follows B and S (no byte-offset views), so the
    dump can be planned at any binding, e.g. `memplan fits --param B=1..256 --set S=4096`.
    Shapes are those of a 3B-parameter Llama-3.2-class model."""
    L, d, H, KV, hd, ff, V = 28, 3072, 24, 8, 128, 8192, 128256
    b, seq = 16, 4096
    tensors, steps = [], []

    def t(id, shape, kind="intermediate", dtype="bf16", **extra):
        entry = dict(id=id, shape=shape, dtype=dtype)
        if kind != "intermediate":
            entry["kind"] = kind
        entry.update(extra)
        tensors.append(entry)

    def s(id, op, reads, writes, cost, loop=None):
        step = dict(id=id, op=op, reads=reads, writes=writes, cost=cost)
        if loop:
            step["loop"] = loop
        steps.append(step)

    t("tokens", ["B"], "input", dtype="i32")
    t("positions", ["B"], "input", dtype="i32")
    t("embed", [V, d], "param", name="token embedding (tied with the LM head)")
    t("k_cache", [L, "B", "S", KV, hd], "input", held=True, name="K cache (all layers)")
    t("v_cache", [L, "B", "S", KV, hd], "input", held=True, name="V cache (all layers)")
    for w, shape in (("w_q", [L, d, H * hd]), ("w_k", [L, d, KV * hd]), ("w_v", [L, d, KV * hd]),
                     ("w_o", [L, H * hd, d]), ("w_gate", [L, d, ff]), ("w_up", [L, d, ff]),
                     ("w_down", [L, ff, d]), ("ln1", [L, d]), ("ln2", [L, d])):
        t(w, shape, "param")
    t("ln_f", [d], "param")
    t("hidden", ["B", 1, d], name="residual stream")
    s("embed_lookup", "gather", ["tokens", "embed"], ["hidden"], b * d)
    t("h_norm", ["B", 1, d])
    t("q", ["B", 1, H * hd])
    t("k_new", ["B", 1, KV * hd])
    t("v_new", ["B", 1, KV * hd])
    t("scores", ["B", H, 1, "S"], "scratch", dtype="f32")
    t("attn", ["B", 1, H * hd])
    t("attn_proj", ["B", 1, d])
    t("h2_norm", ["B", 1, d])
    t("gate", ["B", 1, ff])
    t("up", ["B", 1, ff])
    t("act", ["B", 1, ff])
    t("down", ["B", 1, d])
    loop = "layers"
    s("ln_attn", "rms_norm", ["hidden", "ln1"], ["h_norm"], 4 * b * d, loop)
    s("q_proj", "matmul", ["h_norm", "w_q"], ["q"], 2 * b * d * H * hd, loop)
    s("k_proj", "matmul", ["h_norm", "w_k"], ["k_new"], 2 * b * d * KV * hd, loop)
    s("v_proj", "matmul", ["h_norm", "w_v"], ["v_new"], 2 * b * d * KV * hd, loop)
    s("kv_append", "kv_append", ["k_new", "v_new", "positions"], ["k_cache", "v_cache"], 2 * b * KV * hd, loop)
    s("attention", "flash_decode", ["q", "k_cache", "v_cache", "positions"], ["attn", "scores"],
      4 * b * H * seq * hd, loop)
    s("o_proj", "matmul", ["attn", "w_o"], ["attn_proj"], 2 * b * H * hd * d, loop)
    s("residual_attn", "add", ["hidden", "attn_proj"], ["hidden"], b * d, loop)
    s("ln_mlp", "rms_norm", ["hidden", "ln2"], ["h2_norm"], 4 * b * d, loop)
    s("mlp_gate", "matmul", ["h2_norm", "w_gate"], ["gate"], 2 * b * d * ff, loop)
    s("mlp_up", "matmul", ["h2_norm", "w_up"], ["up"], 2 * b * d * ff, loop)
    s("swiglu", "swiglu", ["gate", "up"], ["act"], 8 * b * ff, loop)
    s("mlp_down", "matmul", ["act", "w_down"], ["down"], 2 * b * ff * d, loop)
    s("residual_mlp", "add", ["hidden", "down"], ["hidden"], b * d, loop)
    t("final_norm", ["B", 1, d])
    t("logits", ["B", V], dtype="f32")
    t("next_tokens", ["B"], "output", dtype="i32")
    s("ln_final", "rms_norm", ["hidden", "ln_f"], ["final_norm"], 4 * b * d)
    s("lm_head", "matmul", ["final_norm", "embed"], ["logits"], 2 * b * d * V)
    s("sample", "argmax", ["logits"], ["next_tokens"], b * V)
    write("decoder-serving", {
        "memplan": 1,
        "name": "Decoder serving step (28 layers, d=3072, GQA 24/8, bf16, KV cache of B x S)",
        "alignment": 256,
        "params": {"B": b, "S": seq},
        "devices": [{"id": "gpu0", "hardware_class": "l4-24gb"}],
        "tensors": tensors,
        "steps": steps,
        "loops": [{"id": loop, "trip_count": L, "back_edge_reads": ["hidden"]}],
    })


class Builder:
    """Tensors and steps of a training step, with the forward activations kept for backward."""

    def __init__(self, dtype):
        self.tensors, self.steps, self.dtype = [], [], dtype

    def t(self, id, shape, kind="intermediate", dtype=None, **extra):
        entry = dict(id=id, shape=shape, dtype=dtype or self.dtype)
        if kind != "intermediate":
            entry["kind"] = kind
        entry.update(extra)
        self.tensors.append(entry)
        return id

    def s(self, id, op, reads, writes, cost):
        self.steps.append(dict(id=id, op=op, reads=reads, writes=writes, cost=cost))

    def candidates(self, ids):
        """Remat candidates: recomputing one costs its step's cost at each step that reads it."""
        out = []
        for id in ids:
            producer = next(s for s in self.steps if id in s["writes"])
            readers = sum(1 for s in self.steps if id in s["reads"])
            out.append(dict(tensor=id, recompute_cost=producer["cost"] * readers))
        return out


def transformer_training():
    """One training step of a stack of L transformer blocks (bf16 activations), every forward
    activation kept for the backward pass: the arena, not the weights, holds the peak, and the
    attention probabilities (B x H x S x S) dominate it. About 2,000 tensors. The remat
    candidates are the forward activations activation checkpointing would recompute: each
    block's norms, attention probabilities and MLP activation."""
    L, B, S, d, H, ff = 72, 4, 1024, 1024, 16, 4096
    bt = B * S
    g = Builder("bf16")
    g.t("tokens", [B, S], "input", dtype="i32")
    g.t("embed", [32000, d], "param")
    g.s("embed_lookup", "gather", ["tokens", "embed"], [g.t("x0", [B, S, d])], bt * d)
    x = "x0"
    saved = []
    for l in range(L):
        w = {n: g.t(f"{n}{l}", shape, "param") for n, shape in
             (("w_qkv", [d, 3 * d]), ("w_o", [d, d]), ("w_up", [d, ff]), ("w_down", [ff, d]))}
        n1 = g.t(f"n1_{l}", [B, S, d])
        g.s(f"ln1_{l}", "layer_norm", [x], [n1], 8 * bt * d)
        qkv = g.t(f"qkv_{l}", [B, S, 3 * d])
        g.s(f"qkv_proj_{l}", "matmul", [n1, w["w_qkv"]], [qkv], 2 * bt * d * 3 * d)
        probs = g.t(f"probs_{l}", [B, H, S, S], dtype="f32")
        g.s(f"attn_probs_{l}", "softmax_qk", [qkv], [probs], 2 * B * H * S * S * (d // H) + 5 * B * H * S * S)
        ctx = g.t(f"ctx_{l}", [B, S, d])
        g.s(f"attn_ctx_{l}", "matmul_pv", [probs, qkv], [ctx], 2 * B * H * S * S * (d // H))
        proj = g.t(f"proj_{l}", [B, S, d])
        g.s(f"o_proj_{l}", "matmul", [ctx, w["w_o"]], [proj], 2 * bt * d * d)
        x1 = g.t(f"x1_{l}", [B, S, d])
        g.s(f"residual1_{l}", "add", [x, proj], [x1], bt * d)
        n2 = g.t(f"n2_{l}", [B, S, d])
        g.s(f"ln2_{l}", "layer_norm", [x1], [n2], 8 * bt * d)
        up = g.t(f"up_{l}", [B, S, ff])
        g.s(f"mlp_up_{l}", "matmul", [n2, w["w_up"]], [up], 2 * bt * d * ff)
        act = g.t(f"act_{l}", [B, S, ff])
        g.s(f"gelu_{l}", "gelu", [up], [act], 8 * bt * ff)
        down = g.t(f"down_{l}", [B, S, d])
        g.s(f"mlp_down_{l}", "matmul", [act, w["w_down"]], [down], 2 * bt * ff * d)
        x2 = g.t(f"x2_{l}", [B, S, d])
        g.s(f"residual2_{l}", "add", [x1, down], [x2], bt * d)
        saved.append((l, x, n1, qkv, probs, ctx, x1, n2, up, act, w))
        x = x2
    loss = g.t("loss", [1], "output", dtype="f32")
    g.t("labels", [B, S], "input", dtype="i32")
    g.s("loss_fn", "cross_entropy", [x, "embed", "labels"], [loss], 2 * bt * d * 32000)
    dx = g.t("d_out", [B, S, d])
    g.s("loss_grad", "cross_entropy_grad", [x, "embed", "labels"], [dx], 2 * bt * d * 32000)
    for l, x_in, n1, qkv, probs, ctx, x1, n2, up, act, w in reversed(saved):
        def grad(name, shape, op, reads, cost, dtype=None):
            out = g.t(f"{name}_{l}", shape, dtype=dtype)
            g.s(f"{op}_{name}_{l}", op, reads, [out], cost)
            return out
        dw_down = grad("dw_down", [ff, d], "matmul_tn", [act, dx], 2 * bt * ff * d)
        d_act = grad("d_act", [B, S, ff], "matmul_nt", [dx, w["w_down"]], 2 * bt * ff * d)
        d_up = grad("d_up", [B, S, ff], "gelu_grad", [d_act, up], 8 * bt * ff)
        dw_up = grad("dw_up", [d, ff], "matmul_tn", [n2, d_up], 2 * bt * d * ff)
        d_n2 = grad("d_n2", [B, S, d], "matmul_nt", [d_up, w["w_up"]], 2 * bt * d * ff)
        d_x1 = grad("d_x1", [B, S, d], "layer_norm_grad", [d_n2, x1, dx], 8 * bt * d)
        dw_o = grad("dw_o", [d, d], "matmul_tn", [ctx, d_x1], 2 * bt * d * d)
        d_ctx = grad("d_ctx", [B, S, d], "matmul_nt", [d_x1, w["w_o"]], 2 * bt * d * d)
        d_probs = grad("d_probs", [B, H, S, S], "matmul_pv_grad", [d_ctx, qkv], 2 * B * H * S * S * (d // H), dtype="f32")
        d_qkv = grad("d_qkv", [B, S, 3 * d], "softmax_qk_grad", [d_probs, probs, qkv, d_ctx], 4 * B * H * S * S * (d // H))
        dw_qkv = grad("dw_qkv", [d, 3 * d], "matmul_tn", [n1, d_qkv], 2 * bt * d * 3 * d)
        d_n1 = grad("d_n1", [B, S, d], "matmul_nt", [d_qkv, w["w_qkv"]], 2 * bt * d * 3 * d)
        d_x = grad("d_x", [B, S, d], "layer_norm_grad", [d_n1, x_in, d_x1], 8 * bt * d)
        for name, dw in (("w_down", dw_down), ("w_up", dw_up), ("w_o", dw_o), ("w_qkv", dw_qkv)):
            g.s(f"sgd_{name}{l}", "sgd", [w[name], dw], [w[name]], 2 * d * d)
        dx = d_x
    g.s("embed_grad", "scatter_add", [dx, "tokens", "embed"], ["embed"], bt * d)
    write("transformer-training", {
        "memplan": 1,
        "name": f"Transformer training step ({L} blocks, d={d}, S={S}, activations kept)",
        "alignment": 256,
        "tensors": g.tensors,
        "steps": g.steps,
        "remat_candidates": g.candidates(
            [f"{n}_{l}" for l in range(L) for n in ("n1", "probs", "n2", "act")]),
    })


def convnet_training():
    """One training step of a small convnet (f32, batch 32, 64x64 images): conv-relu-pool x 3,
    then a linear classifier, activations kept for backward. Few candidates, so `memplan sweep`
    scores every subset beside the greedy."""
    B = 32
    g = Builder("f32")
    g.t("images", [B, 3, 64, 64], "input")
    g.t("labels", [B], "input", dtype="i64")
    x, shapes = "images", [(3, 32, 64), (32, 64, 32), (64, 128, 16)]
    saved = []
    for i, (cin, cout, hw) in enumerate(shapes):
        wt = g.t(f"conv{i}_w", [cout, cin, 3, 3], "param")
        c = g.t(f"conv{i}", [B, cout, hw, hw])
        g.s(f"conv{i}_fwd", "conv2d", [x, wt], [c], 2 * B * cout * cin * 9 * hw * hw)
        r = g.t(f"relu{i}", [B, cout, hw, hw])
        g.s(f"relu{i}_fwd", "relu", [c], [r], B * cout * hw * hw)
        p = g.t(f"pool{i}", [B, cout, hw // 2, hw // 2])
        g.s(f"pool{i}_fwd", "max_pool", [r], [p], B * cout * hw * hw)
        saved.append((i, x, wt, c, r, p, cin, cout, hw))
        x = p
    fc_w = g.t("fc_w", [128 * 8 * 8, 10], "param")
    logits = g.t("logits", [B, 10])
    g.s("fc_fwd", "matmul", [x, fc_w], [logits], 2 * B * 128 * 64 * 10)
    loss = g.t("loss", [1], "output")
    g.s("loss_fn", "cross_entropy", [logits, "labels"], [loss], B * 10)
    d_logits = g.t("d_logits", [B, 10])
    g.s("loss_grad", "cross_entropy_grad", [logits, "labels"], [d_logits], B * 10)
    d_fc_w = g.t("d_fc_w", [128 * 8 * 8, 10])
    g.s("fc_w_grad", "matmul_tn", [x, d_logits], [d_fc_w], 2 * B * 128 * 64 * 10)
    g.s("sgd_fc", "sgd", [fc_w, d_fc_w], [fc_w], 2 * 128 * 64 * 10)
    dx = g.t("d_pool2", [B, 128, 8, 8])
    g.s("fc_x_grad", "matmul_nt", [d_logits, fc_w], [dx], 2 * B * 128 * 64 * 10)
    for i, x_in, wt, c, r, p, cin, cout, hw in reversed(saved):
        d_r = g.t(f"d_relu{i}", [B, cout, hw, hw])
        g.s(f"pool{i}_grad", "max_pool_grad", [dx, r], [d_r], B * cout * hw * hw)
        d_c = g.t(f"d_conv{i}", [B, cout, hw, hw])
        g.s(f"relu{i}_grad", "relu_grad", [d_r, c], [d_c], B * cout * hw * hw)
        d_w = g.t(f"d_conv{i}_w", [cout, cin, 3, 3])
        g.s(f"conv{i}_w_grad", "conv2d_w_grad", [x_in, d_c], [d_w], 2 * B * cout * cin * 9 * hw * hw)
        g.s(f"sgd_conv{i}", "sgd", [wt, d_w], [wt], 2 * cout * cin * 9)
        if i > 0:
            d_x = g.t(f"d_pool{i - 1}", [B, cin, hw, hw])
            g.s(f"conv{i}_x_grad", "conv2d_x_grad", [d_c, wt], [d_x], 2 * B * cout * cin * 9 * hw * hw)
            dx = d_x
    write("convnet-training", {
        "memplan": 1,
        "name": "Convnet training step (3 conv blocks, batch 32, f32, activations kept)",
        "alignment": 256,
        "tensors": g.tensors,
        "steps": g.steps,
        "remat_candidates": g.candidates(
            [f"{n}{i}" for i in range(3) for n in ("conv", "relu", "pool")]),
    })


def decoder_routine(prefix, L, d, H, KV, hd, ff, V, T, b, seq, holds):
    """A decoder routine over T new tokens per sequence (T = 1: a decode step; T = the prompt:
    prefill), as a program routine: `holds` (weights and KV cache, held) are what it reads where
    its parent context placed them, unless it is the routine that allocates them."""
    tensors, steps = [], []

    def t(id, shape, kind="intermediate", dtype="bf16", **extra):
        entry = dict(id=prefix + id, shape=shape, dtype=dtype)
        if kind != "intermediate":
            entry["kind"] = kind
        entry.update(extra)
        tensors.append(entry)

    def s(id, op, reads, writes, cost, loop=None):
        step = dict(id=id, op=op, reads=[prefix + r for r in reads],
                    writes=[prefix + w for w in writes], cost=cost)
        if loop:
            step["loop"] = loop
        steps.append(step)

    def weights():
        t("embed", [V, d], "param", name="token embedding (tied with the LM head)")
        for w, shape in (("w_qkv", [L, d, (H + 2 * KV) * hd]), ("w_o", [L, H * hd, d]),
                         ("w_gate_up", [L, d, 2 * ff]), ("w_down", [L, ff, d]),
                         ("ln", [L, 2, d])):
            t(w, shape, "param")
        t("rope", [seq, hd], "constant", dtype="f32", name="rotary table (a per-device constant)")
        t("k_cache", [L, b, seq, KV, hd], "input", held=True, name="K cache (all layers)")
        t("v_cache", [L, b, seq, KV, hd], "input", held=True, name="V cache (all layers)")

    weights()
    if holds:
        # The routine that allocates what the context holds: load the weights (read from the
        # host), clear the cache.
        s("upload", "h2d_copy", [], ["embed", "w_qkv", "w_o", "w_gate_up", "w_down", "ln"], 0)
        s("rope_init", "rope_table", [], ["rope"], seq * hd)
        s("clear_cache", "memset", [], ["k_cache", "v_cache"], 0)
        return tensors, steps, []
    t("tokens", [b, T], "input", dtype="i32")
    t("hidden", [b, T, d], name="residual stream")
    s("embed_lookup", "gather", ["tokens", "embed"], ["hidden"], b * T * d)
    t("h_norm", [b, T, d])
    t("qkv", [b, T, (H + 2 * KV) * hd])
    t("scores", [b, H, T, seq], "scratch", dtype="f32")
    t("attn", [b, T, H * hd])
    t("attn_proj", [b, T, d])
    t("gate_up", [b, T, 2 * ff])
    t("act", [b, T, ff])
    t("down", [b, T, d])
    loop = "layers"
    s("ln_attn", "rms_norm", ["hidden", "ln"], ["h_norm"], 4 * b * T * d, loop)
    s("qkv_proj", "matmul", ["h_norm", "w_qkv"], ["qkv"], 2 * b * T * d * (H + 2 * KV) * hd, loop)
    s("kv_write", "rope_kv_write", ["qkv", "rope"], ["k_cache", "v_cache"], 4 * b * T * KV * hd, loop)
    s("attention", "flash_attention", ["qkv", "k_cache", "v_cache", "rope"], ["attn", "scores"],
      4 * b * H * T * seq * hd, loop)
    s("o_proj", "matmul", ["attn", "w_o"], ["attn_proj"], 2 * b * T * H * hd * d, loop)
    s("residual_attn", "add", ["hidden", "attn_proj"], ["hidden"], b * T * d, loop)
    s("ln_mlp", "rms_norm", ["hidden", "ln"], ["h_norm"], 4 * b * T * d, loop)
    s("mlp_gate_up", "matmul", ["h_norm", "w_gate_up"], ["gate_up"], 4 * b * T * d * ff, loop)
    s("swiglu", "swiglu", ["gate_up"], ["act"], 8 * b * T * ff, loop)
    s("mlp_down", "matmul", ["act", "w_down"], ["down"], 2 * b * T * ff * d, loop)
    s("residual_mlp", "add", ["hidden", "down"], ["hidden"], b * T * d, loop)
    t("logits", [b, V], dtype="f32")
    t("next_tokens", [b], "output", dtype="i32")
    s("lm_head", "matmul_last", ["hidden", "embed"], ["logits"], 2 * b * d * V)
    s("sample", "argmax", ["logits"], ["next_tokens"], b * V)
    return tensors, steps, [{"id": loop, "trip_count": L, "back_edge_reads": [prefix + "hidden"]}]


def routine(id, parts):
    tensors, steps, loops = parts
    r = {"id": id, "tensors": tensors, "steps": steps}
    if loops:
        r["loops"] = loops
    return r


def serving_program():
    """A serving program: a 16-layer, d=2048 decoder's weights and KV cache loaded once in a
    parent context; prefill and decode compiled in child contexts that read them where the
    parent placed them; a small draft model loaded, run and released on the side."""
    big = dict(L=16, d=2048, H=16, KV=8, hd=128, ff=5632, V=32000, b=8, seq=2048)
    draft = dict(L=4, d=1024, H=8, KV=4, hd=128, ff=2816, V=32000, b=8, seq=2048)
    write("serving-program", {
        "memplan": 1,
        "name": "Serving program (a 1B decoder: weights and KV cache in a parent context; prefill and decode in children; a draft model loaded and released)",
        "alignment": 256,
        "devices": [{"id": "gpu0", "hardware_class": "l4-24gb"}],
        "program": {
            "contexts": [
                {"id": "model", "routines": [routine("load", decoder_routine("", T=0, holds=True, **big))]},
                {"id": "prefill", "parent": "model",
                 "routines": [routine("prefill_512", decoder_routine("", T=512, holds=False, **big))]},
                {"id": "decode", "parent": "model",
                 "routines": [routine("decode_step", decoder_routine("", T=1, holds=False, **big))]},
                {"id": "draft", "routines": [
                    routine("draft_load", decoder_routine("draft_", T=0, holds=True, **draft)),
                    routine("draft_decode", decoder_routine("draft_", T=1, holds=False, **draft))]},
            ],
            "events": [
                {"event": "create", "context": "model"},
                {"event": "run", "routine": "load"},
                {"event": "create", "context": "prefill"},
                {"event": "run", "routine": "prefill_512"},
                {"event": "create", "context": "decode"},
                {"event": "run", "routine": "decode_step"},
                {"event": "release", "context": "prefill"},
                {"event": "create", "context": "draft"},
                {"event": "run", "routine": "draft_load"},
                {"event": "run", "routine": "draft_decode"},
                {"event": "run", "routine": "decode_step"},
                {"event": "release", "context": "draft"},
                {"event": "run", "routine": "decode_step"},
                {"event": "release", "context": "decode"},
                {"event": "release", "context": "model"},
            ],
        },
    })


def schedule_search_program():
    """A compile-time schedule search: the parameters live in a parent context; each candidate
    schedule of an MLP training step (a different chunk of the batch at a time) is compiled in
    a context of its own, run, and released. Candidate 2's release is missing and candidate 4's
    fails after its first pool and is retried: the used memory shows what each costs."""
    B, D, F = 256, 4096, 16384
    chunks = [256, 128, 64, 32, 16, 8]

    def weights(holds):
        tensors = [dict(id=w, shape=shape, dtype="f32", kind="param")
                   for w, shape in (("w_up", [D, F]), ("w_down", [F, D]))]
        tensors += [dict(id="m_" + w, shape=shape, dtype="f32", kind="optimizer_state")
                    for w, shape in (("w_up", [D, F]), ("w_down", [F, D]))]
        return tensors

    init = {"id": "init", "tensors": weights(True) + [dict(id="seed", bytes=8, kind="input")],
            "steps": [dict(id="init_params", op="normal_init", reads=["seed"],
                           writes=["w_up", "w_down", "m_w_up", "m_w_down"], cost=0)]}
    contexts = [{"id": "params", "routines": [init]}]
    events = [{"event": "create", "context": "params"}, {"event": "run", "routine": "init"}]
    for i, c in enumerate(chunks):
        tensors = weights(False) + [
            dict(id="x", shape=[B, D], dtype="f32", kind="input"),
            dict(id="dy", shape=[B, D], dtype="f32", kind="input"),
            dict(id="g_up", shape=[D, F], dtype="f32"),
            dict(id="g_down", shape=[F, D], dtype="f32"),
            dict(id="h", shape=[c, F], dtype="f32", name=f"hidden, {c} rows at a time"),
            dict(id="dh", shape=[c, F], dtype="f32"),
            dict(id="loss", shape=[1], dtype="f32", kind="output"),
        ]
        flops = 2 * c * D * F
        steps = []
        for k in range(B // c if c >= 64 else 4):
            steps += [
                dict(id=f"up{k}", op="matmul", reads=["x", "w_up"], writes=["h"], cost=flops),
                dict(id=f"down_grad{k}", op="matmul_bwd", reads=["h", "dy", "w_down"], writes=["dh", "g_down"], cost=2 * flops),
                dict(id=f"up_grad{k}", op="matmul_bwd", reads=["dh", "x"], writes=["g_up"], cost=flops),
            ]
        steps.append(dict(id="adam", op="adam", reads=["g_up", "g_down"],
                          writes=["w_up", "w_down", "m_w_up", "m_w_down", "loss"], cost=8 * D * F))
        ctx = f"candidate{i}"
        routine_id = f"step_chunk{c}"
        contexts.append({"id": ctx, "parent": "params",
                         "routines": [{"id": routine_id, "tensors": tensors, "steps": steps}]})
        events += [{"event": "create", "context": ctx}, {"event": "run", "routine": routine_id}]
        if i == 2:
            continue
        if i == 4:
            events.append({"event": "release", "context": ctx, "fails_after": 1})
        events.append({"event": "release", "context": ctx})
    events.append({"event": "release", "context": "candidate2"})
    events.append({"event": "release", "context": "params"})
    write("schedule-search-program", {
        "memplan": 1,
        "name": "Schedule search program (a context per candidate schedule of an MLP training step; one release late, one retried)",
        "alignment": 256,
        "devices": [{"id": "gpu0", "hardware_class": "a100-40gb"}],
        "program": {"contexts": contexts, "events": events},
    })


if __name__ == "__main__":
    mlp_training()
    transformer_decode()
    decoder_serving()
    transformer_training()
    convnet_training()
    serving_program()
    schedule_search_program()
