#!/usr/bin/env python3
"""Writes a memplan JSON dump with its steps in a valid but poor order, for reorder tests and
benches: what an unguided compiler might emit.

The order keeps every dependency docs/format.md ("Reordering") lists: units are top-level steps
or whole loops; accesses are to storage (a view's are its root's); reads follow the last write,
writes follow the reads since and the last write; pinned units keep their order. Among the
ready units it runs, each time, the one that grows the live bytes most (what it allocates less
what it frees; ties broken by a seeded generator), so allocations come early and frees late. Written apart from memplan's
own code: `memplan check` and the tests verify the result against the original.

    python3 scripts/poor-order.py static/examples/mlp-training.json --seed 1 -o poor.json
"""
import argparse
import json
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    dump = json.load(open(args.dump))
    tensors = {t["id"]: t for t in dump["tensors"]}

    def root(tid):
        seen = set()
        while tensors[tid].get("view_of") and tid not in seen:
            seen.add(tid)
            tid = tensors[tid]["view_of"]
        return tid

    # Units: runs of steps of one loop, or single steps.
    units = []
    for i, s in enumerate(dump["steps"]):
        loop = s.get("loop")
        if loop is not None and units and units[-1]["loop"] == loop:
            units[-1]["steps"].append(i)
        else:
            units.append({"loop": loop, "steps": [i]})
    back_edge = {l["id"]: l.get("back_edge_reads", []) for l in dump.get("loops", [])}
    for u in units:
        steps = [dump["steps"][i] for i in u["steps"]]
        u["reads"] = {root(t) for s in steps for t in s.get("reads", [])}
        u["reads"] |= {root(t) for t in back_edge.get(u["loop"], [])}
        u["writes"] = {root(t) for s in steps for t in s["writes"]}
        u["pinned"] = any(s.get("pinned") for s in steps)

    preds = [set() for _ in units]
    last_write, reads_since, last_pinned = {}, {}, None
    for k, u in enumerate(units):
        for r in u["reads"]:
            if r in last_write:
                preds[k].add(last_write[r])
        for w in u["writes"]:
            if w in last_write:
                preds[k].add(last_write[w])
            preds[k] |= set(reads_since.get(w, []))
        for r in u["reads"]:
            reads_since.setdefault(r, []).append(k)
        for w in u["writes"]:
            last_write[w] = k
            reads_since[w] = []
        if u["pinned"]:
            if last_pinned is not None:
                preds[k].add(last_pinned)
            last_pinned = k
        preds[k].discard(k)

    def size(tid):
        t = tensors[tid]
        if "bytes" in t:
            return t["bytes"]
        n = 1
        for d in t.get("shape", []):
            n *= d if isinstance(d, int) else dump.get("params", {}).get(d, 1)
        return n * 4

    rng = random.Random(args.seed)
    succs = [[] for _ in units]
    for k, ps in enumerate(preds):
        for p in ps:
            succs[p].append(k)
    indegree = [len(p) for p in preds]
    ready = [k for k in range(len(units)) if indegree[k] == 0]
    touches = [u["reads"] | u["writes"] for u in units]
    users = {}
    for t in touches:
        for key in t:
            users[key] = users.get(key, 0) + 1
    live, order = set(), []
    while ready:
        def growth(k):
            allocated = sum(size(t) for t in touches[k] if t not in live)
            freed = sum(size(t) for t in touches[k] if users[t] == 1)
            return allocated - freed
        rng.shuffle(ready)
        k = max(ready, key=growth)
        ready.remove(k)
        order.append(k)
        live |= touches[k]
        for t in touches[k]:
            users[t] -= 1
        for v in succs[k]:
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    assert len(order) == len(units), "the dependencies form a cycle"
    dump["steps"] = [dump["steps"][i] for k in order for i in units[k]["steps"]]
    for s in dump["steps"]:
        s.pop("time", None)
    if dump.get("name"):
        dump["name"] += " (steps in a poor order)"
    with open(args.output, "w") as f:
        json.dump(dump, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
