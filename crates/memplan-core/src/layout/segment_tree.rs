//! The two walks of a segment tree kept as a heap (node 1 the root, node `n`'s children `2n`
//! and `2n + 1`, the leaves on the bottom level), shared by the trees over time that
//! `occupancy` and `resume` keep. An interval of leaves is kept at its canonical nodes, whose
//! strict ancestors all lie on the root paths of its two end leaves: a query meets every
//! interval sharing a leaf with it by reading its own canonical nodes and those paths.

/// Visits the canonical nodes of the leaf span `[lo, hi)` (node indices): the fewest nodes
/// whose spans make it up.
pub(super) fn canonical(mut lo: usize, mut hi: usize, mut visit: impl FnMut(usize)) {
    while lo < hi {
        if lo & 1 == 1 {
            visit(lo);
            lo += 1;
        }
        if hi & 1 == 1 {
            hi -= 1;
            visit(hi);
        }
        lo /= 2;
        hi /= 2;
    }
}

/// Visits the nodes on the root paths of nodes `lo` and `hi` (on one level), each once, up to
/// node `lowest`.
pub(super) fn root_paths(
    mut lo: usize,
    mut hi: usize,
    lowest: usize,
    mut visit: impl FnMut(usize),
) {
    while lo != hi && lo >= lowest {
        visit(lo);
        visit(hi);
        lo /= 2;
        hi /= 2;
    }
    while lo >= lowest {
        visit(lo);
        lo /= 2;
    }
}
