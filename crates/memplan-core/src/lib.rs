//! memplan-core: where every buffer of a scheduled computation lives, in time and in memory.
//!
//! The data flows one way: a [`Graph`] (what a dump says) is resolved ([`Graph::resolve`]),
//! [`liveness`] turns it into a [`Problem`] (buffers with sizes and live intervals), a strategy
//! lays the problem out ([`plan`]), and the independent [`check()`]er verifies the layout before
//! anyone sees it. The [`lower_bound`] says how far any layout could go.
//!
//! Beside the plan: [`spaces`] classifies every slot into a memory space with its access and host
//! transfer, and [`budget`] says what a device class leaves a plan and answers "the largest value
//! that fits" by checked bisection. [`units`] reads and writes sizes as people do.
//!
//! This crate is pure: no I/O, no clocks, no threads, no randomness that is not seeded. The same
//! input gives the same bytes out, natively and in WebAssembly. Reading and writing formats is
//! `memplan-formats`' job; showing plans is the CLI's and the web app's.

pub mod budget;
pub mod check;
pub mod dtype;
pub mod graph;
pub mod layout;
pub mod lists;
pub mod liveness;
pub mod lower_bound;
pub mod order;
pub mod placement;
pub mod problem;
pub mod program;
pub mod recorded;
pub mod remat;
mod reused;
pub mod spaces;
pub mod units;

pub use check::{Layout, Violation, check};
pub use dtype::DType;
pub use graph::{Graph, GraphError, ResolvedGraph};
pub use layout::{
    CapFallback, Control, Decodes, DevicePlan, ExactStats, FoundAt, Placement, Plan, PlanError,
    PlanOptions, Pool, PoolRole, Progress, Strategy, StrategyChoice, U32_OFFSET_POOL_CAP,
    UnknownStrategy, plan, plan_unless_cancelled, plan_with,
};
pub use liveness::{Liveness, analyze};
pub use lower_bound::DeviceUsage;
pub use problem::{Buffer, Lifetime, LiveInterval, Problem};

/// Resolves `graph` and builds its planning problem: the first half of the pipeline.
pub fn liveness_of(graph: &Graph) -> Result<Liveness, GraphError> {
    let resolved = graph.resolve()?;
    Ok(analyze(graph, &resolved))
}
