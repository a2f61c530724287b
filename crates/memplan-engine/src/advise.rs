//! The advisor: what to change to lower the footprint. Every lever the dump allows is applied to
//! the scenario and the result planned again (measured, never estimated): each remat flip on
//! top of the scenario's, the fit's set of flips, each param at its next smaller power of two,
//! precision classes switched, every other strategy, the steps in the best order memplan finds,
//! and the pool cap lifted where it cost something. The rows are the levers that lower the footprint, largest saving first; each holds
//! the whole scenario it was planned under, so applying a row plans exactly the footprint it
//! claims.
//!
//! Flips are scored by the rematerializer (one relayout each, resuming the last one's decodes);
//! the rest through [`Session::plan`]. A dump with many candidates has the single flips of its
//! [`ADVICE_MOST_FLIPS`] largest scored, and its fit cut to the [`ADVICE_FIT_MOST`] cheapest: the
//! answer says what it left out, so a partial table never reads as a whole one.

use memplan_core::StrategyChoice;
use memplan_core::order::Order;
use memplan_core::remat::Target;
use serde::{Deserialize, Serialize};

use crate::{Ended, EngineError, Scenario, Session, flip_index};

/// The most single flips the advisor scores, the largest candidates: a relayout each, and past
/// the largest few a single flip's saving is small beside the fit's set.
pub const ADVICE_MOST_FLIPS: usize = 64;

/// The most candidates the advisor's fit considers (the cheapest, as `fit --max-candidates`
/// would). A minimizing fit scores each and then accepts them one by one, a few relayouts
/// each: the 288 candidates of the bundled transformer-training example take about 2 s
/// natively, so a dump of thousands is cut rather than left running for minutes.
pub const ADVICE_FIT_MOST: usize = 512;

/// `memplan advise --json`, and the page's advice panel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdviceAnswer {
    /// The footprint of the scenario advised on.
    pub footprint_bytes: u64,
    /// The unit of recompute costs (the dump's `cost_unit`, `FLOPs`), if it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_unit: Option<String>,
    /// The device's usable bytes, when the scenario names a device class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usable_bytes: Option<u64>,
    /// The levers that lower the footprint, largest saving first (ties in the order tried).
    pub rows: Vec<AdviceRow>,
    /// How many levers were planned, the rows' included.
    pub tried: usize,
    /// What the advisor did not try, in words; empty when it tried every lever.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

/// One lever, planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdviceRow {
    pub lever: Lever,
    pub footprint_bytes: u64,
    pub saving_bytes: u64,
    pub cost: LeverCost,
    /// The scenario with the lever applied: what "apply" plans.
    pub scenario: Scenario,
}

impl AdviceRow {
    /// A lever planned to `footprint_bytes` under `scenario`, against the `before` footprint.
    fn of(
        lever: Lever,
        footprint_bytes: u64,
        before: u64,
        cost: LeverCost,
        scenario: Scenario,
    ) -> Self {
        AdviceRow {
            lever,
            footprint_bytes,
            saving_bytes: before.saturating_sub(footprint_bytes),
            cost,
            scenario,
        }
    }
}

/// What a row changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Lever {
    /// Recompute one more tensor at its uses.
    Flip { tensor: String },
    /// Recompute the set `fit --target minimize` chooses (instead of the scenario's flips).
    FitFlips { tensors: Vec<String> },
    /// A param at a smaller value.
    Param { name: String, from: u64, to: u64 },
    /// Precision classes switched on or off.
    PrecisionClasses { on: bool },
    /// Another layout strategy.
    Strategy { strategy: StrategyChoice },
    /// No pool cap (64-bit offsets) where the cap forced an arena into bump-packed pools.
    PoolCap { cap: u64 },
    /// The steps in another valid order (`memplan_core::order`).
    Order { order: Order },
}

/// What a lever costs besides memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LeverCost {
    /// Recompute work per run, in the dump's unit of step costs (`cost_unit`).
    Recompute { work: u64 },
    /// A smaller param (a smaller batch, a shorter sequence): less done per run. Which param,
    /// and from what to what, the row's [`Lever::Param`] says.
    Param,
    /// Tensors of different dtypes share bytes: the runtime must allow reinterpreting memory.
    MixedDtypes,
    /// Only planning work: the program is unchanged.
    PlanningWork,
    /// Offsets past the cap: the computation's offsets must be 64-bit.
    WideOffsets,
    /// The steps run in another order: the same work, `moved_steps` of them moved (what runs
    /// beside what may change).
    Reordered { moved_steps: usize },
}

/// The value below `v` a user reaches for: the next smaller power of two (`64` gives `32`,
/// `48` gives `32`); `None` at 1.
pub fn next_smaller(v: u64) -> Option<u64> {
    (v > 1).then(|| {
        let p = 1u64 << (63 - v.leading_zeros());
        if p == v { v / 2 } else { p }
    })
}

impl Session {
    /// Ranks the levers of `scenario` by how much each lowers its footprint, each planned.
    pub fn advise(&self, scenario: &Scenario) -> Result<AdviceAnswer, EngineError> {
        let advice = self.advise_unless(scenario, &|| false)?;
        Ok(advice.expect("only a stop leaves advice unfinished"))
    }

    /// [`Session::advise`], asking `stopped` during and after each plan it makes (and after the
    /// rematerialization fit, which runs to its end): `None` once it says so (a caller's
    /// cancel), with no advice, as the levers not yet planned would be missing from it unsaid.
    pub fn advise_unless(
        &self,
        scenario: &Scenario,
        stopped: &dyn Fn() -> bool,
    ) -> Result<Option<AdviceAnswer>, EngineError> {
        Ended::unless_stopped(self.advise_levers(scenario, stopped))
    }

    /// The advice of [`Session::advise_unless`], each plan made under `stopped`.
    fn advise_levers(
        &self,
        scenario: &Scenario,
        stopped: &dyn Fn() -> bool,
    ) -> Result<AdviceAnswer, Ended> {
        let plan = |s: &Scenario| self.plan_unless(s, stopped);
        let outcome = plan(scenario)?;
        let footprint = outcome.plan.footprint_bytes();
        let mut tried = Vec::new();
        let mut left_out = Vec::new();
        self.advise_flips(scenario, footprint, &mut tried, &mut left_out)?;
        if stopped() {
            return Err(Ended::Stopped);
        }
        // The params as planned: the bound graph's, the dump's own where nothing was bound.
        for (name, &from) in &self.parts(&outcome).0.params {
            let Some(to) = next_smaller(from) else {
                continue;
            };
            let mut s = scenario.clone();
            s.params.insert(name.clone(), to);
            let lever = Lever::Param {
                name: name.clone(),
                from,
                to,
            };
            let cost = LeverCost::Param;
            // A smaller value can leave a dump unplannable (a view past its base): said, not hidden.
            match plan(&s) {
                Ok(o) => tried.push(AdviceRow::of(
                    lever,
                    o.plan.footprint_bytes(),
                    footprint,
                    cost,
                    s,
                )),
                Err(Ended::Failed(e)) => left_out.push(format!("{name}={to}: {e}")),
                Err(stopped) => return Err(stopped),
            }
        }
        let mut s = scenario.clone();
        s.precision_classes = !scenario.precision_classes;
        let on = s.precision_classes;
        let cost = if on {
            LeverCost::PlanningWork
        } else {
            LeverCost::MixedDtypes
        };
        let planned = plan(&s)?.plan.footprint_bytes();
        tried.push(AdviceRow::of(
            Lever::PrecisionClasses { on },
            planned,
            footprint,
            cost,
            s,
        ));
        for strategy in StrategyChoice::ALL {
            if strategy == scenario.strategy {
                continue;
            }
            let s = Scenario {
                strategy,
                ..scenario.clone()
            };
            let planned = plan(&s)?.plan.footprint_bytes();
            let lever = Lever::Strategy { strategy };
            tried.push(AdviceRow::of(
                lever,
                planned,
                footprint,
                LeverCost::PlanningWork,
                s,
            ));
        }
        if scenario.order != Order::Best {
            let s = Scenario {
                order: Order::Best,
                ..scenario.clone()
            };
            let o = plan(&s)?;
            let moved_steps = (o.bound.as_ref())
                .and_then(|b| b.reordering.as_ref())
                .map_or(0, |r| r.moved.iter().filter(|&&m| m).count());
            tried.push(AdviceRow::of(
                Lever::Order { order: Order::Best },
                o.plan.footprint_bytes(),
                footprint,
                LeverCost::Reordered { moved_steps },
                s,
            ));
        }
        let capped = (outcome.plan.devices.iter()).find_map(|d| d.cap_fallback.as_ref());
        if let Some(fallback) = capped {
            let s = Scenario {
                pool_cap: Some(u64::MAX),
                ..scenario.clone()
            };
            let planned = plan(&s)?.plan.footprint_bytes();
            let lever = Lever::PoolCap { cap: fallback.cap };
            tried.push(AdviceRow::of(
                lever,
                planned,
                footprint,
                LeverCost::WideOffsets,
                s,
            ));
        }
        let count = tried.len();
        let mut rows: Vec<AdviceRow> = (tried.into_iter())
            .filter(|r| r.footprint_bytes < footprint)
            .collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.saving_bytes));
        Ok(AdviceAnswer {
            footprint_bytes: footprint,
            cost_unit: self.graph.cost_unit.clone(),
            usable_bytes: outcome.budget.map(|b| b.usable_bytes),
            rows,
            tried: count,
            left_out,
        })
    }

    /// The flip levers: each candidate on top of the scenario's flips, the largest first, and
    /// the fit's set.
    fn advise_flips(
        &self,
        scenario: &Scenario,
        footprint: u64,
        tried: &mut Vec<AdviceRow>,
        left_out: &mut Vec<String>,
    ) -> Result<(), EngineError> {
        // One rematerializer for the single flips and the fit: their scores are shared.
        let (flipped, pool, scored, fit) = self.with_remat(scenario, |remat| {
            let mut flipped = Vec::new();
            for id in &scenario.flips {
                // `plan` has refused a scenario whose flips are not candidates.
                if let Ok(t) = flip_index(remat.graph, remat.resolved, &remat.candidates, id) {
                    flipped.push(t);
                }
            }
            let mut pool: Vec<_> = (remat.candidates.iter())
                .filter(|c| !flipped.contains(&c.tensor))
                .map(|c| (remat.resolved.tensors[c.tensor].bytes, *c))
                .collect();
            pool.sort_by_key(|&(bytes, c)| (std::cmp::Reverse(bytes), c.tensor));
            let mut scored = Vec::new();
            for &(_, c) in pool.iter().take(ADVICE_MOST_FLIPS) {
                let set: Vec<usize> = flipped.iter().copied().chain([c.tensor]).collect();
                scored.push((c, remat.score(&set)?));
            }
            let fit = remat.fit(Target::Minimize, Some(ADVICE_FIT_MOST))?;
            Ok((flipped, pool.len(), scored, fit))
        })?;
        let id = |t: usize| self.graph.tensors[t].id.to_string();
        for (c, planned) in scored {
            let mut s = scenario.clone();
            s.flips.push(id(c.tensor));
            let lever = Lever::Flip {
                tensor: id(c.tensor),
            };
            let work = LeverCost::Recompute {
                work: c.recompute_cost,
            };
            tried.push(AdviceRow::of(lever, planned, footprint, work, s));
        }
        if pool > ADVICE_MOST_FLIPS {
            left_out.push(format!(
                "single flips of the {} smaller of {pool} candidates",
                pool - ADVICE_MOST_FLIPS
            ));
        }
        if fit.dropped > 0 {
            left_out.push(format!(
                "the fit considered the {} cheapest of {} candidates",
                fit.considered,
                fit.considered + fit.dropped
            ));
        }
        let mut set = fit.tensors();
        set.sort_unstable();
        let mut current = flipped;
        current.sort_unstable();
        // One flip is already a row of its own; the scenario's own set is no change.
        if set.len() > 1 && set != current {
            let tensors: Vec<String> = fit.tensors().into_iter().map(id).collect();
            let s = Scenario {
                flips: tensors.clone(),
                ..scenario.clone()
            };
            let work = LeverCost::Recompute {
                work: fit.recompute_cost(),
            };
            let lever = Lever::FitFlips { tensors };
            tried.push(AdviceRow::of(lever, fit.final_bytes, footprint, work, s));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_smaller_is_the_power_of_two_below() {
        assert_eq!(next_smaller(64), Some(32));
        assert_eq!(next_smaller(48), Some(32));
        assert_eq!(next_smaller(33), Some(32));
        assert_eq!(next_smaller(2), Some(1));
        assert_eq!(next_smaller(1), None);
        assert_eq!(next_smaller(0), None);
        assert_eq!(next_smaller(u64::MAX), Some(1 << 63));
    }

    /// A smaller param's row says which param and from what to what in its lever alone.
    #[test]
    fn a_smaller_params_row_says_the_param_in_its_lever_only() {
        let text = include_str!("../../../static/examples/decoder-serving.json");
        let s = Session::load(text.as_bytes(), "decoder-serving.json").unwrap();
        let answer = s.advise(&Scenario::default()).unwrap();
        let row = (answer.rows.iter())
            .find(|r| matches!(r.lever, Lever::Param { .. }))
            .expect("a param row");
        assert_eq!(row.cost, LeverCost::Param);
        let json = serde_json::to_value(row).unwrap();
        assert_eq!(json["cost"], serde_json::json!({"kind": "param"}));
        assert!(json["lever"]["name"].is_string() && json["lever"]["to"].is_u64());
    }

    const EXAMPLES: [&str; 3] = [
        include_str!("../../../static/examples/convnet-training.json"),
        include_str!("../../../static/examples/mlp-training.json"),
        include_str!("../../../static/examples/transformer-training.json"),
    ];

    /// Every row plans, applied as the page applies it, to the footprint it claims; the rows
    /// are in order of saving; the first saves more than any single flip.
    #[test]
    fn every_row_replans_to_its_claim_and_the_first_beats_every_single_flip() {
        for text in EXAMPLES {
            let s = Session::load(text.as_bytes(), "example.json").unwrap();
            let answer = s.advise(&Scenario::default()).unwrap();
            assert!(!answer.rows.is_empty());
            let baseline = s.plan(&Scenario::default()).unwrap().plan.footprint_bytes();
            assert_eq!(answer.footprint_bytes, baseline);
            for row in &answer.rows {
                let planned = s.plan(&row.scenario).unwrap().plan.footprint_bytes();
                assert_eq!(planned, row.footprint_bytes, "{:?}", row.lever);
                assert_eq!(row.saving_bytes, baseline - planned);
            }
            assert!(
                answer
                    .rows
                    .windows(2)
                    .all(|w| w[0].saving_bytes >= w[1].saving_bytes)
            );
            let best_flip = (answer.rows.iter())
                .filter(|r| matches!(r.lever, Lever::Flip { .. }))
                .map(|r| r.saving_bytes)
                .max()
                .unwrap_or(0);
            assert!(
                answer.rows[0].saving_bytes > best_flip,
                "{:?} saves {}, a single flip {best_flip}",
                answer.rows[0].lever,
                answer.rows[0].saving_bytes
            );
        }
    }

    /// A stop heard at any of advice's questions ends it without advice; never heard, the
    /// advice is [`Session::advise`]'s.
    #[test]
    fn a_stop_ends_advice_without_an_answer() {
        let s = Session::load(EXAMPLES[0].as_bytes(), "convnet.json").unwrap();
        let whole = s.advise(&Scenario::default()).unwrap();
        let never = s.advise_unless(&Scenario::default(), &|| false).unwrap();
        assert_eq!(never.as_ref(), Some(&whole));
        let asked = std::cell::Cell::new(0);
        let count = || {
            asked.set(asked.get() + 1);
            false
        };
        s.advise_unless(&Scenario::default(), &count).unwrap();
        let questions = asked.get();
        for after in [0, 1, questions / 2, questions - 1] {
            asked.set(0);
            let stopped = || {
                asked.set(asked.get() + 1);
                asked.get() > after
            };
            let advice = s.advise_unless(&Scenario::default(), &stopped).unwrap();
            assert_eq!(
                advice, None,
                "stopped after {after} of {questions} questions"
            );
        }
    }

    #[test]
    fn advice_starts_from_the_scenario_flips_and_strategy() {
        let s = Session::load(EXAMPLES[0].as_bytes(), "convnet.json").unwrap();
        let first = s.advise(&Scenario::default()).unwrap();
        let Lever::Flip { tensor } = (first.rows.iter())
            .map(|r| &r.lever)
            .find(|l| matches!(l, Lever::Flip { .. }))
            .unwrap()
            .clone()
        else {
            unreachable!()
        };
        let scenario = Scenario {
            flips: vec![tensor.clone()],
            strategy: memplan_core::Strategy::Bump.into(),
            ..Scenario::default()
        };
        let answer = s.advise(&scenario).unwrap();
        for row in &answer.rows {
            if let Lever::Flip { tensor: t } = &row.lever {
                assert_ne!(t, &tensor, "a flip the scenario has is no lever");
                assert_eq!(row.scenario.flips[0], tensor);
            }
            if !matches!(row.lever, Lever::Strategy { .. }) {
                assert_eq!(row.scenario.strategy, scenario.strategy);
            }
        }
        // From bump, another strategy is a lever that saves.
        assert!((answer.rows.iter()).any(|r| matches!(r.lever, Lever::Strategy { .. })));
        // A flip that is not a candidate is refused, as a plan refuses it.
        let wrong = Scenario {
            flips: vec!["nosuch".into()],
            ..Scenario::default()
        };
        assert!(s.advise(&wrong).is_err());
    }
}
