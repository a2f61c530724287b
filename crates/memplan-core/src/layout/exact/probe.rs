//! A probe asks one capacity: the preorderings (`Heuristic`) take turns under a doubling node
//! budget, the fixed orders resuming, a randomized one restarting with lengths in the Luby
//! sequence.

use super::*;

/// The preorderings tried in turn. Each sorts a part's buffers by a key, largest first, made of
/// the buffer's total (the most bytes still to place beside it at any time), its width (how long
/// it lives, before compression) and its area (size times width): three of MiniMalloc's orders,
/// a fourth with the width in the problem's time units where it has them, and one that breaks
/// the ties of the first two keys at random, with a new seed each restart.
/// Search times are heavy-tailed (one order finds in a thousand nodes what another misses in a
/// million), and randomized restarts are the standard cure; the seed is the restart's number,
/// so the search stays deterministic.
#[derive(Clone, Copy)]
pub(super) enum Heuristic {
    TotalWidthArea,
    AreaTotalWidth,
    TotalAreaWidth,
    TotalWidthRandom,
    /// `TotalWidthArea` with the width in the problem's time units: MiniMalloc's own measure.
    TotalDurationArea,
}

impl Heuristic {
    /// The orders that do not change from round to round.
    pub(super) const FIXED: [Heuristic; 3] = [
        Heuristic::TotalWidthArea,
        Heuristic::AreaTotalWidth,
        Heuristic::TotalAreaWidth,
    ];

    /// The same, and one more where the problem has times (a minimalloc CSV): its positions
    /// are the distinct start times, so a lifetime's length in positions is not its length in
    /// time, and the preorders differ. Which one a problem falls to is heavy-tailed: upstream's
    /// benchmark G at its lower bound, 1,549 nodes by time and over 400,000 by positions (so
    /// about 1.2M in all with the three); at their file-name capacity A, B, C, E and F take
    /// 16-27% more nodes with four in turn, D fewer.
    pub(super) const FIXED_TIMED: [Heuristic; 4] = [
        Heuristic::TotalWidthArea,
        Heuristic::AreaTotalWidth,
        Heuristic::TotalAreaWidth,
        Heuristic::TotalDurationArea,
    ];

    pub(super) fn key(self, width: u64, area: u64, total: u64, random: u64) -> (u64, u64, u64) {
        match self {
            Heuristic::TotalWidthArea | Heuristic::TotalDurationArea => (total, width, area),
            Heuristic::AreaTotalWidth => (area, total, width),
            Heuristic::TotalAreaWidth => (total, area, width),
            Heuristic::TotalWidthRandom => (total, width, random),
        }
    }
}

/// How many nodes pass between two reports on a region of `n` buffers: 1,024, or fewer where a
/// node costs more (it visits the unplaced buffers a few times), so that a caller's stop is
/// heard within about ten milliseconds (a node of 29,176 buffers takes about 0.1 ms).
pub(super) fn report_every(n: usize) -> u64 {
    ((1u64 << 21) / (n as u64).max(1)).clamp(1, 1024)
}

/// A fixed hash of a buffer and a seed: the random tie-break.
pub(super) fn scramble(i: u32, seed: u64) -> u64 {
    SplitMix64::mix(u64::from(i) ^ seed.wrapping_mul(SplitMix64::GAMMA))
}

/// The items with time renumbered to their distinct start positions: two buffers overlap iff
/// one starts while the other is live, and the live bytes peak at a start, so neither the
/// conflicts nor the cross-section bound change, while each placement touches far fewer
/// positions.
pub(super) fn compress(items: &[Item]) -> Vec<Item> {
    let mut starts: Vec<u32> = items.iter().map(|i| i.live.first).collect();
    starts.sort_unstable();
    starts.dedup();
    let at = |t: u32| starts.partition_point(|&s| s <= t) as u32 - 1;
    items
        .iter()
        .map(|i| Item {
            live: LiveInterval::new(at(i.live.first), at(i.live.last)),
            ..*i
        })
        .collect()
}

/// Whether one capacity fits, searched in slices of nodes.
///
/// The preorderings take turns under a node budget that doubles each round (from the number of
/// buffers), so an easy instance under any one of them is found quickly; a proof of
/// infeasibility from any one is final. The fixed orders resume where their last turn stopped
/// (running one again from the start would only repeat its nodes); the random one's turns are
/// spent on restarts, each with a new seed, of lengths in the Luby sequence (1, 1, 2, 1, 1, 2,
/// 4, ... times the number of buffers): a layout a lucky dive finds in a few hundred nodes is
/// often missed by a million nodes of one order (minimalloc D at 1,038,336 B: 421 nodes into
/// one restart), and the Luby lengths are within a log factor of the best fixed length for any
/// such distribution (Luby, Sinclair and Zuckerman, 1993). A probe paused between slices resumes
/// where it stopped, so [`minimize`] can run several side by side.
pub(super) struct Probe<'a> {
    pub(super) shape: &'a Shape<'a>,
    pub(super) capacity: u64,
    /// The fixed orders, and their searches, each made when its first turn comes (a large
    /// region's few nodes may never reach the later ones, and each holds its own lists).
    pub(super) orders: &'static [Heuristic],
    pub(super) fixed: Vec<Search<'a>>,
    /// Its answer, once it has one: a later run returns it again.
    pub(super) answer: Option<Feasibility>,
    /// The current restart, how many have begun (its seed) and the nodes it has left.
    pub(super) restart: Option<Search<'a>>,
    pub(super) restarts: u64,
    pub(super) restart_left: u64,
    /// Whose turn it is (the fixed orders, then the restart), with what per turn this round,
    /// and how much of it the turn has spent.
    pub(super) turn: usize,
    pub(super) budget: u64,
    /// How many turns' nodes the restart's turn gets.
    pub(super) restart_weight: u64,
    pub(super) spent: u64,
    pub(super) nodes: u64,
}

impl<'a> Probe<'a> {
    /// A probe of `capacity` that runs the fixed `orders` besides its restarts, these getting
    /// `restart_weight` turns' nodes a round.
    pub(super) fn new(
        shape: &'a Shape<'a>,
        capacity: u64,
        (orders, restart_weight): (&'static [Heuristic], u64),
    ) -> Self {
        Probe {
            shape,
            capacity,
            orders,
            fixed: Vec::new(),
            // No layout holds a buffer larger than the capacity.
            answer: (shape.items.iter().any(|i| i.size > capacity))
                .then_some(Feasibility::Infeasible),
            restart: None,
            restarts: 0,
            restart_left: 0,
            turn: 0,
            budget: (shape.items.len() as u64).max(16),
            restart_weight,
            spent: 0,
            nodes: 0,
        }
    }

    /// Searches on for up to `allowance` more nodes; `Unknown` when they run out (or the caller
    /// stops it). `heard` counts the evaluations before this slice.
    pub(super) fn run(
        &mut self,
        allowance: u64,
        heard: Progress,
        control: &mut Control<'_>,
    ) -> Feasibility {
        if let Some(answer) = &self.answer {
            return answer.clone();
        }
        let end = self.nodes.saturating_add(allowance);
        let start = self.nodes;
        while self.nodes < end {
            let restarting = self.turn == self.orders.len();
            let turn_budget = match restarting {
                true => self.budget.saturating_mul(self.restart_weight),
                false => self.budget,
            };
            let mut share = (turn_budget - self.spent).min(end - self.nodes);
            let s = match self.orders.get(self.turn) {
                Some(&order) => {
                    if self.turn == self.fixed.len() {
                        let search = Search::new(self.shape, order, 0, self.capacity);
                        self.fixed.push(search);
                    }
                    &mut self.fixed[self.turn]
                }
                None => {
                    if self.restart_left == 0 {
                        self.restarts += 1;
                        let unit = (self.shape.items.len() as u64).max(16);
                        self.restart_left = luby(self.restarts).saturating_mul(unit);
                        let random = Heuristic::TotalWidthRandom;
                        let search = Search::new(self.shape, random, self.restarts, self.capacity);
                        self.restart = Some(search);
                    }
                    share = share.min(self.restart_left);
                    self.restart.as_mut().expect("begun above")
                }
            };
            let before = s.nodes;
            let heard = Progress {
                evaluations: heard.evaluations + (self.nodes - start),
                ..heard
            };
            let run = s.resume(before + share, heard, control);
            let used = s.nodes - before;
            (self.nodes, self.spent) = (self.nodes + used, self.spent + used);
            if restarting {
                self.restart_left -= used.min(self.restart_left);
            }
            match run {
                Run::Found => {
                    let offsets = s.solution.clone();
                    let extent = (self.shape.items.iter().zip(&offsets))
                        .map(|(i, &o)| o + i.size)
                        .max()
                        .unwrap_or(0);
                    let answer = Feasibility::Fits(RegionLayout { offsets, extent });
                    self.answer = Some(answer.clone());
                    return answer;
                }
                Run::Exhausted => {
                    self.answer = Some(Feasibility::Infeasible);
                    return Feasibility::Infeasible;
                }
                Run::Stopped => return Feasibility::Unknown,
                Run::OutOfNodes => {}
            }
            if self.spent >= turn_budget {
                self.spent = 0;
                self.turn += 1;
                if self.turn > self.orders.len() {
                    self.turn = 0;
                    self.budget = self.budget.saturating_mul(2);
                }
            }
        }
        Feasibility::Unknown
    }
}

/// The `i`-th term (from 1) of the Luby sequence: 1, 1, 2, 1, 1, 2, 4, 1, 1, 2, 1, 1, 2, 4, 8...
pub(super) fn luby(mut i: u64) -> u64 {
    loop {
        let k = 64 - i.leading_zeros();
        if i == (1u64 << k) - 1 {
            return 1 << (k - 1);
        }
        i -= (1 << (k - 1)) - 1;
    }
}
