//! Warming the worker's code before a user's first file: a browser compiles a wasm function when
//! it first runs, and to optimized code only once it is hot.

use memplan_core::{Control, Strategy, StrategyChoice};
use memplan_engine::{Scenario, Session};

use super::job::Worker;
use super::protocol::{Request, Response};

/// Plans a small, fixed puzzle with `search` and drops the plan; returns the search's nodes.
///
/// A browser compiles a wasm function when it first runs, and to optimized code only once it is
/// hot, so the first search of a page ran at about half the speed of the next (minimalloc B in
/// Chromium: 31-55 ms for the first, 12-20 ms for the ones after). The worker runs this once as
/// it starts, before it says it is ready (a few milliseconds), so that the user's first search
/// runs like the later ones. Run after the first job instead, it overlapped a search asked for
/// right after a load, and helped less. It is not enough alone: see [`WarmUp`].
pub fn warm_up() -> u64 {
    // 100 buffers of 1 to 13 units over 50 steps: the search places and backtracks about a
    // thousand times to reach the lower bound (a few milliseconds natively).
    warm_up_on(&puzzle(100, 50, 25, 13), WARM_UP_WORK)
}

/// What the worker runs while it is idle after [`warm_up`]: [`WarmUp::ROUNDS`] rounds, each a
/// puzzle whose lower bound the search does not reach, loaded and then searched through a
/// throwaway [`Worker`], its answers serialized and dropped: the code of a load (parsing,
/// planning, the views, the answer) and of a search, run until the browser has optimized it.
/// One [`WarmUp::step`] is one request or one step of its job, so a job waits for at most
/// that.
///
/// Measured in node (the CLI built for wasm32-wasip1, one module, three runs): minimalloc F's
/// first search took 76-91 ms cold, 26-28 ms after the quick warm-up, 11-13 ms after rounds of
/// searches alone too, as fast as the searches after it (6-7 ms natively). In Chromium, while
/// the worker started at the first load and its rounds searched only, the code that load ran
/// was still being optimized in the background during a search asked right after it. With the
/// load in the rounds and the worker started with the page (`Link::start_early`),
/// a first file chosen 1.5 s after the page opened (six pages each, medians, against before):
/// loaded in 55-94 ms against 114-217 on minimalloc B, C, E and F, and searched right after in
/// 8, 10, 43 and 11 ms against 19, 15, 54 and 14. Started after the page's first frame
/// instead, it kept that: B and F loaded in 76 and 72 ms against 163 and 182.
pub struct WarmUp {
    worker: Worker,
    rounds_left: u32,
    phase: Phase,
    /// The search nodes of the rounds' plans.
    nodes: u64,
}

/// Where a warm-up round is.
#[derive(Clone, Copy)]
enum Phase {
    Load,
    Loading,
    Searching,
}

impl Default for WarmUp {
    fn default() -> Self {
        WarmUp {
            worker: Worker::default(),
            rounds_left: Self::ROUNDS,
            phase: Phase::Load,
            nodes: 0,
        }
    }
}

impl WarmUp {
    pub const ROUNDS: u32 = 10;

    /// Runs the next request or job step; `false` once every round is done.
    pub fn step(&mut self) -> bool {
        if self.rounds_left == 0 {
            return false;
        }
        let nodes = &mut self.nodes;
        let mut sink = |r: Response| {
            if let Response::Planned { analysis, .. } = &r {
                *nodes += analysis.summary.nodes.unwrap_or(0);
            }
            let _ = super::protocol::write_answer(&r, &mut std::io::sink());
        };
        let (now, never) = (|| 0.0, || false);
        match self.phase {
            Phase::Load => {
                // `best`, as a page's load plans, but within a round's work: a user's request
                // waits for at most one step (its exact search would otherwise take `best`'s
                // whole budget on this puzzle, a tenth of a second or more in the browser).
                let load = Request::Load {
                    source: "warm-up.csv".into(),
                    scenario: Scenario {
                        work_limit: Some(WARM_UP_ROUND_WORK),
                        ..Scenario::default()
                    },
                    import: Default::default(),
                    routine: None,
                };
                let bytes = puzzle(200, 80, 30, 37).into_bytes();
                self.worker
                    .handle(load, Some(super::job::input_of(bytes)), &never, &mut sink);
                self.phase = Phase::Loading;
            }
            Phase::Loading => {
                if !self.worker.step(&now, &never, &mut sink) {
                    let search = Scenario {
                        strategy: StrategyChoice::One(Strategy::Search),
                        work_limit: Some(WARM_UP_ROUND_WORK),
                        ..Scenario::default()
                    };
                    self.worker
                        .handle(Request::Plan(search), None, &never, &mut sink);
                    self.phase = Phase::Searching;
                }
            }
            Phase::Searching => {
                if !self.worker.step(&now, &never, &mut sink) {
                    self.rounds_left -= 1;
                    self.phase = Phase::Load;
                }
            }
        }
        self.rounds_left > 0
    }

    /// The search nodes of the rounds done.
    pub fn nodes(&self) -> u64 {
        self.nodes
    }
}

/// `buffers` buffers of 1 to `sizes` units of 64 bytes, each live for 1 to `longest` of `steps`
/// steps, scattered by a fixed hash: a minimalloc CSV.
fn puzzle(buffers: u64, steps: u64, longest: u64, sizes: u64) -> String {
    let mut csv = String::from("id,lower,upper,size\n");
    for i in 0..buffers {
        let h = (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
        let lower = h % steps;
        let upper = lower + 1 + (h >> 8) % longest;
        let size = 64 * (1 + (h >> 16) % sizes);
        csv.push_str(&format!("b{i},{lower},{upper},{size}\n"));
    }
    csv
}

/// Plans `csv` with `search` under `work` and drops the plan; the search's nodes.
fn warm_up_on(csv: &str, work: u64) -> u64 {
    let Ok(session) = Session::load(csv.as_bytes(), "warm-up.csv") else {
        return 0;
    };
    let scenario = Scenario {
        strategy: StrategyChoice::One(Strategy::Search),
        work_limit: Some(work),
        ..Scenario::default()
    };
    session
        .plan_with(&scenario, &mut Control::default())
        .map_or(0, |outcome| {
            (outcome.plan.devices.iter())
                .filter_map(|d| d.exact.map(|e| e.nodes))
                .sum()
        })
}

/// The warm-up's budget of work (conflict visits).
const WARM_UP_WORK: u64 = 2_000_000;

/// A round's budget of work: about 3 ms natively.
const WARM_UP_ROUND_WORK: u64 = 300_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// The warm-up runs the exact search's hot code: it places and backtracks, well past the
    /// one dive a puzzle that first-fit already solves would take (100 nodes).
    #[test]
    fn the_warm_up_searches() {
        let nodes = warm_up();
        assert!(nodes > 100, "{nodes} nodes");
        // The rounds load and search, a step at a time, to their end.
        let mut rounds = WarmUp::default();
        let mut steps = 1;
        while rounds.step() {
            steps += 1;
            assert!(steps < 1000, "the rounds end");
        }
        assert!(!rounds.step());
        assert!(steps >= 3 * WarmUp::ROUNDS as usize, "{steps} steps");
        // Each round runs the search to its budget: its puzzle is not solved at the bound.
        let each = rounds.nodes() / u64::from(WarmUp::ROUNDS);
        assert!(each > 300, "{} nodes", rounds.nodes());
        let again = Session::load(puzzle(200, 80, 30, 37).as_bytes(), "round.csv").unwrap();
        let plan = again
            .plan(&Scenario {
                strategy: StrategyChoice::One(Strategy::Search),
                work_limit: Some(WARM_UP_ROUND_WORK),
                ..Scenario::default()
            })
            .unwrap()
            .plan;
        assert!(!plan.devices[0].exact.unwrap().optimal);
    }
}
