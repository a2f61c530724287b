//! The schedule's steps as the views name them.
//!
//! Step `s` here is step `s` of the graph, in schedule order, which is position order. A dump
//! that lists its steps names each (an id, a name, an operator); one that records its schedule
//! as events (a PyTorch snapshot, a minimalloc CSV: a step per allocation) names none, and its
//! steps are kept as the graph keeps them, a time each and the prefix of each run of them
//! (`cuda:0 t=4656` is the run's `cuda:0 t=` and 4656). A step's id is made when a view asks for
//! it: made up front, a million ids and their strings were the views' largest list after the
//! buffers, in the worker and again in the page. The wire carries them as they are held
//! ([`super::columns::steps`]).

use std::borrow::Cow;
use std::sync::Arc;

use memplan_core::ResolvedGraph;
use memplan_core::graph::Graph;

/// The steps of a schedule, each with the position it runs at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Steps {
    /// Per step, its position: non-decreasing.
    positions: Arc<[u32]>,
    names: Names,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Names {
    /// One per step.
    Listed(Arc<[ListedStep]>),
    /// Step `s` is its time after the prefix of the run it is in (`cuda:0 t=`); `runs` are the
    /// runs' ends (one past their last step), increasing, the last at the last step, and
    /// prefixes.
    Events {
        runs: Arc<[(u32, Arc<str>)]>,
        times: Arc<[u64]>,
    },
}

impl Default for Names {
    fn default() -> Self {
        Names::Listed(Arc::new([]))
    }
}

/// A step as a dump that lists its steps names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedStep {
    pub id: Arc<str>,
    /// The display name (the id itself, shared, when the dump gives none).
    pub name: Arc<str>,
    pub op: String,
}

/// One step as the views show it, named when asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepView<'a> {
    pub id: Cow<'a, str>,
    /// The display name (the id when the dump gives none).
    pub name: Cow<'a, str>,
    /// The operator; empty when the dump names none.
    pub op: &'a str,
    /// The position it runs at.
    pub position: u32,
}

impl StepView<'_> {
    /// The step as the views name it: its name, and its operator in parentheses unless the name
    /// already says it: its last `/` scope starts with the operator, as a word (case aside):
    /// `dot_general.181`, not `dot_general.181 (dot_general)`; but `padding_1 (Add)`.
    pub fn name_with_op(&self) -> String {
        let last = self.name.rsplit('/').next().unwrap_or("");
        let said = self.op.is_empty()
            || (last.get(..self.op.len())).is_some_and(|head| head.eq_ignore_ascii_case(self.op))
                && !(last[self.op.len()..].starts_with(char::is_alphabetic));
        match said {
            true => self.name.to_string(),
            false => format!("{} ({})", self.name, self.op),
        }
    }
}

impl Steps {
    /// Steps a dump lists, at `positions` (one each, non-decreasing).
    pub fn listed(
        steps: Arc<[ListedStep]>,
        positions: impl Into<Arc<[u32]>>,
    ) -> Result<Steps, String> {
        let positions = positions.into();
        if steps.len() != positions.len() {
            return Err(positions_for(positions.len(), steps.len()));
        }
        Steps::at(positions, Names::Listed(steps))
    }

    /// Steps recorded as events: `times` one each, in runs that end (one past their last step)
    /// where `runs` say, with their ids' prefixes; at `positions`.
    pub fn events(
        runs: impl Into<Arc<[(u32, Arc<str>)]>>,
        times: impl Into<Arc<[u64]>>,
        positions: impl Into<Arc<[u32]>>,
    ) -> Result<Steps, String> {
        let (runs, times, positions) = (runs.into(), times.into(), positions.into());
        let n = times.len();
        if positions.len() != n {
            return Err(positions_for(positions.len(), n));
        }
        if runs.windows(2).any(|w| w[0].0 >= w[1].0) || runs.first().is_some_and(|r| r.0 == 0) {
            return Err("the runs of steps do not end in order".into());
        }
        if runs.last().map_or(0, |r| r.0 as usize) != n {
            return Err(format!("the runs of steps do not end at step {n}"));
        }
        Steps::at(positions, Names::Events { runs, times })
    }

    fn at(positions: Arc<[u32]>, names: Names) -> Result<Steps, String> {
        if positions.windows(2).any(|w| w[0] > w[1]) {
            return Err("the steps' positions go back".into());
        }
        Ok(Steps { positions, names })
    }

    /// The steps of `graph`, resolved as `resolved`.
    /// Each list is made once, at its length, straight into what holds it: the views are made
    /// at the worker's peak, and a list made and then copied was a transient copy per step.
    pub fn of(graph: &Graph, resolved: &ResolvedGraph) -> Steps {
        // The positions cover the steps in order.
        let mut p = 0;
        let positions: Arc<[u32]> = (0..graph.step_count())
            .map(|s| {
                while (resolved.positions.get(p)).is_some_and(|q| *q.steps().end() < s) {
                    p += 1;
                }
                p as u32
            })
            .collect();
        let events = (graph.events.as_ref()).and_then(|events| {
            let runs = (events.runs.iter()).map(|r| (r.end, format!("{}t=", r.prefix).into()));
            let runs: Arc<[(u32, Arc<str>)]> = runs.collect();
            Steps::events(runs, events.times.clone(), positions.clone()).ok()
        });
        events.unwrap_or_else(|| {
            let steps = (0..graph.step_count())
                .map(|s| {
                    let step = graph.step(s);
                    let id: Arc<str> = step.id.as_str().into();
                    ListedStep {
                        name: step.name.as_deref().map_or_else(|| id.clone(), Arc::from),
                        id,
                        op: step.op.to_string(),
                    }
                })
                .collect();
            Steps {
                positions,
                names: Names::Listed(steps),
            }
        })
    }

    pub fn len(&self) -> usize {
        self.positions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// The position step `s` runs at.
    pub fn position(&self, s: usize) -> Option<u32> {
        self.positions.get(s).copied()
    }

    /// Step `s`, named.
    pub fn get(&self, s: usize) -> Option<StepView<'_>> {
        let position = self.position(s)?;
        Some(match &self.names {
            Names::Listed(steps) => {
                let step = &steps[s];
                StepView {
                    id: Cow::Borrowed(&step.id),
                    name: Cow::Borrowed(&step.name),
                    op: &step.op,
                    position,
                }
            }
            Names::Events { runs, times } => {
                let run = runs.partition_point(|r| r.0 as usize <= s);
                let id = format!("{}{}", runs[run].1, times[s]);
                StepView {
                    name: Cow::Owned(id.clone()),
                    id: Cow::Owned(id),
                    op: "",
                    position,
                }
            }
        })
    }

    /// Every step, named, in order.
    pub fn iter(&self) -> impl Iterator<Item = StepView<'_>> {
        (0..self.len()).filter_map(|s| self.get(s))
    }

    /// The steps that run at `position`.
    pub fn at_position(&self, position: u32) -> std::ops::Range<usize> {
        let start = self.positions.partition_point(|&p| p < position);
        let end = start + self.positions[start..].partition_point(|&p| p == position);
        start..end
    }

    /// The positions, one per step.
    pub fn positions(&self) -> &[u32] {
        &self.positions
    }

    /// The steps as listed, or as events (their runs and times), for the wire.
    pub(crate) fn parts(&self) -> StepParts<'_> {
        match &self.names {
            Names::Listed(steps) => StepParts::Listed(steps),
            Names::Events { runs, times } => StepParts::Events(runs, times),
        }
    }
}

/// Why `n` steps cannot have `positions` positions.
fn positions_for(positions: usize, n: usize) -> String {
    format!("the steps' positions number {positions} for {n} steps")
}

/// How [`Steps`] hold their names, borrowed (what the wire writes).
pub(crate) enum StepParts<'a> {
    Listed(&'a [ListedStep]),
    Events(&'a [(u32, Arc<str>)], &'a [u64]),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(id: &str, name: Option<&str>, op: &str) -> ListedStep {
        let id: Arc<str> = id.into();
        ListedStep {
            name: name.map_or_else(|| id.clone(), Arc::from),
            id,
            op: op.into(),
        }
    }

    #[test]
    fn a_step_names_its_operator_unless_its_name_says_it() {
        let named = |name: &str, op: &str| {
            let steps = Steps::listed([listed(name, None, op)].into(), vec![0]).unwrap();
            steps.get(0).unwrap().name_with_op()
        };
        assert_eq!(named("n82", "Concat"), "n82 (Concat)");
        assert_eq!(named("dot_general.181", "dot_general"), "dot_general.181");
        assert_eq!(named("MatMul_3", "matmul"), "MatMul_3");
        assert_eq!(
            named("resnet/layer1/Conv_2", "Conv"),
            "resnet/layer1/Conv_2"
        );
        assert_eq!(named("t=5", ""), "t=5");
        // Said as a word at the start, not inside another.
        assert_eq!(named("padding_1", "Add"), "padding_1 (Add)");
        assert_eq!(named("relu2_grad", "relu_grad"), "relu2_grad (relu_grad)");
        assert_eq!(named("address", "add"), "address (add)");
        assert_eq!(named("é", "e"), "é (e)");
    }

    #[test]
    fn events_are_named_by_their_run_and_time() {
        let runs = vec![(2, "cuda:0 t=".into()), (3, "cuda:1 t=".into())];
        let steps = Steps::events(runs, vec![4, 9, 4], vec![0, 1, 1]).unwrap();
        let ids: Vec<String> = steps.iter().map(|s| s.id.into_owned()).collect();
        assert_eq!(ids, ["cuda:0 t=4", "cuda:0 t=9", "cuda:1 t=4"]);
        let s = steps.get(2).unwrap();
        assert_eq!((&*s.name, s.op, s.position), ("cuda:1 t=4", "", 1));
        assert_eq!(steps.get(3), None);
        assert_eq!(steps.at_position(1), 1..3);
        assert_eq!(steps.at_position(0), 0..1);
        assert_eq!(steps.at_position(7), 3..3);
    }

    #[test]
    fn steps_that_do_not_hold_together_are_refused() {
        let run = |end: u32| (end, Arc::<str>::from("p "));
        assert!(Steps::events(vec![run(2)], vec![1], vec![0]).is_err());
        assert!(Steps::events(vec![run(1)], vec![1], vec![0, 1]).is_err());
        assert!(Steps::events(vec![run(1), run(1)], vec![1], vec![0]).is_err());
        assert!(Steps::events(vec![run(0), run(1)], vec![1], vec![0]).is_err());
        assert!(Steps::events(vec![run(2)], vec![1, 2], vec![1, 0]).is_err());
        assert!(Steps::events(vec![], vec![], vec![]).is_ok());
        assert!(Steps::listed([listed("a", None, "")].into(), vec![]).is_err());
    }
}
