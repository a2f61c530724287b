//! What every fuzz target does with its bytes: load them as a file named `name` (the name picks
//! the importer, as a user's file name does) and, when they load, plan them with first-fit and
//! with `best` (its exact search held to a little work). Neither may panic, and a plan of what
//! loaded never places two buffers in the same bytes or outside their pool: the validator
//! finds no violation but a pool over the dump's cap, which a file can ask for.

use memplan_core::{Strategy, StrategyChoice};
use memplan_engine::{Scenario, Session};

pub fn load_and_plan(data: &[u8], name: &str) {
    let Ok(session) = Session::load(data, name) else {
        return;
    };
    for strategy in [
        StrategyChoice::One(Strategy::FirstFit),
        StrategyChoice::Best,
    ] {
        let scenario = Scenario {
            strategy,
            work_limit: Some(20_000),
            ..Scenario::default()
        };
        if let Ok(outcome) = session.plan(&scenario) {
            for violation in &outcome.plan.violations {
                assert!(
                    matches!(violation, memplan_core::check::Violation::OverCap { .. }),
                    "{strategy:?} planned {name} invalidly: {violation}"
                );
            }
        }
    }
}
