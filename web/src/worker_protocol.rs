//! What the page and the worker say to each other: typed serde messages.
//!
//! The page posts `{request, bytes}`: the [`Request`] as JSON text, and for a load the dump's
//! bytes as an `ArrayBuffer` that is transferred, not copied (so a binary ONNX model or a pickle
//! arrives intact, and a 50 MB dump is not duplicated). The worker answers with [`Response`]s as
//! JSON text: `ready` once it listens (a message sent before that would be lost), `progress` at
//! each stage and, while a search runs, its best so far and its bound, then `planned` (what the
//! page draws: an [`Analysis`], not the whole report), `exported` or `error`.
//!
//! The worker keeps the session and its outcome, so a re-plan or an export does not re-read the
//! input. [`Worker::handle`] is its whole logic, pure and tested natively; `src/worker.rs` only
//! wires it to the scope. Requests to come (`sweep`, `fit`, `compare`) are variants of the same
//! enum, answered by the same loop.

use memplan_core::{Control, Progress};
use memplan_engine::Scenario;
use serde::{Deserialize, Serialize};

use crate::analysis::{Analysis, Export, ExportKind, Local, export};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// Load the bytes that come with the message, then plan `scenario`.
    Load { source: String, scenario: Scenario },
    /// Plan the loaded dump under another scenario.
    Plan(Scenario),
    /// Make a file of the current plan.
    Export(ExportKind),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    Ready,
    Progress {
        stage: u32,
        of: u32,
        what: String,
        /// While a search runs: the lowest arena so far, and what no layout can go below.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        best_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bound_bytes: Option<u64>,
    },
    Planned(Box<Analysis>),
    Exported(Export),
    Error(String),
}

/// The number of progress stages of a load.
pub const STAGES: u32 = 3;

/// The least time between two progress messages of a search, milliseconds.
const PROGRESS_EVERY_MS: f64 = 100.0;

/// The worker's state: the loaded session and its current outcome.
#[derive(Default)]
pub struct Worker {
    local: Option<Local>,
}

fn progress(stage: u32, what: String) -> Response {
    Response::Progress {
        stage,
        of: STAGES,
        what,
        best_bytes: None,
        bound_bytes: None,
    }
}

impl Worker {
    /// Answers `request` (with `bytes` for a load), posting every response through `post`.
    /// `now` is the caller's clock in milliseconds, used only to space progress messages.
    pub fn handle(
        &mut self,
        request: Request,
        bytes: Option<Vec<u8>>,
        now: &dyn Fn() -> f64,
        post: &mut dyn FnMut(Response),
    ) {
        let scenario = match request {
            Request::Load { source, scenario } => {
                let Some(bytes) = bytes else {
                    return post(Response::Error(format!(
                        "{source}: no bytes came with the load"
                    )));
                };
                post(progress(1, format!("parsing and checking {source}")));
                match memplan_engine::Session::load(&bytes, &source) {
                    Ok(session) => {
                        self.local = None;
                        self.plan(session, &scenario, now, post);
                    }
                    Err(e) => post(Response::Error(e.to_string())),
                }
                return;
            }
            Request::Plan(scenario) => scenario,
            Request::Export(kind) => {
                let Some(local) = &self.local else {
                    return post(Response::Error("nothing is loaded to export".into()));
                };
                return post(match export(&local.session, &local.outcome, kind) {
                    Ok(file) => Response::Exported(file),
                    Err(e) => Response::Error(e.to_string()),
                });
            }
        };
        match self.local.take() {
            Some(local) => self.plan(local.session, &scenario, now, post),
            None => post(Response::Error("nothing is loaded to plan".into())),
        }
    }

    fn plan(
        &mut self,
        session: memplan_engine::Session,
        scenario: &Scenario,
        now: &dyn Fn() -> f64,
        post: &mut dyn FnMut(Response),
    ) {
        let what = format!("planning with {}", scenario.strategy);
        post(progress(2, what.clone()));
        let mut last = now();
        let mut heard = |p: Progress| {
            let t = now();
            if t - last >= PROGRESS_EVERY_MS {
                last = t;
                post(Response::Progress {
                    stage: 2,
                    of: STAGES,
                    what: what.clone(),
                    best_bytes: Some(p.best_bytes),
                    bound_bytes: Some(p.bound_bytes),
                });
            }
        };
        let planned = session.plan_with(
            scenario,
            &mut Control {
                should_stop: None,
                progress: Some(&mut heard),
            },
        );
        match planned {
            Ok(outcome) => {
                post(progress(3, "preparing the views".into()));
                let local = Local { session, outcome };
                post(Response::Planned(Box::new(local.analysis())));
                self.local = Some(local);
            }
            Err(e) => {
                post(Response::Error(e.to_string()));
                // The session stays loaded under its last good outcome, if any.
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_core::Strategy;

    fn run(worker: &mut Worker, request: Request, bytes: Option<&[u8]>) -> Vec<Response> {
        let mut out = Vec::new();
        let clock = std::cell::Cell::new(0.0);
        let now = || {
            clock.set(clock.get() + 50.0);
            clock.get()
        };
        worker.handle(request, bytes.map(<[u8]>::to_vec), &now, &mut |r| {
            out.push(r)
        });
        out
    }

    fn scenario(strategy: Strategy) -> Scenario {
        Scenario {
            strategy: strategy.into(),
            ..Scenario::default()
        }
    }

    #[test]
    fn a_load_reports_progress_then_the_plan_and_a_replan_reuses_the_session() {
        let mut worker = Worker::default();
        let out = run(
            &mut worker,
            Request::Load {
                source: "x.csv".into(),
                scenario: scenario(Strategy::Bump),
            },
            Some(b"id,lower,upper,size\na,0,2,100\nb,1,3,50\n"),
        );
        assert_eq!(out.len(), 4);
        assert!(matches!(
            &out[0],
            Response::Progress {
                stage: 1,
                of: 3,
                ..
            }
        ));
        let Response::Planned(a) = &out[3] else {
            panic!("{out:?}")
        };
        assert_eq!((a.tensor_count, a.summary.footprint_bytes), (2, 150));
        let out = run(
            &mut worker,
            Request::Plan(scenario(Strategy::FirstFit)),
            None,
        );
        let Response::Planned(a) = out.last().unwrap() else {
            panic!("{out:?}")
        };
        assert_eq!(a.strategy(), Strategy::FirstFit.into());
        let out = run(
            &mut worker,
            Request::Export(ExportKind::MinimallocCsv),
            None,
        );
        let Response::Exported(file) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(file.file_name, "x.plan.csv");
        assert!(
            file.text.starts_with("id,lower,upper,size,offset\n"),
            "{}",
            file.text
        );
    }

    #[test]
    fn binary_bytes_reach_the_importer_intact() {
        // Not UTF-8: the importer, not the transport, says what is wrong with them.
        let mut worker = Worker::default();
        let out = run(
            &mut worker,
            Request::Load {
                source: "model.onnx".into(),
                scenario: Scenario::default(),
            },
            Some(&[0x08, 0x07, 0x12, 0xff, 0xfe, 0x00]),
        );
        assert_eq!(
            out.last(),
            Some(&Response::Error(
                "model.onnx: model.onnx is not UTF-8 text".into()
            ))
        );
    }

    #[test]
    fn a_search_reports_its_best_so_far() {
        let mut worker = Worker::default();
        let out = run(
            &mut worker,
            Request::Load {
                source: "A.csv".into(),
                scenario: scenario(Strategy::Search),
            },
            Some(include_bytes!("../../tests/data/minimalloc/A.1048576.csv")),
        );
        let best: Vec<(u64, u64)> = out
            .iter()
            .filter_map(|r| match r {
                Response::Progress {
                    best_bytes: Some(b),
                    bound_bytes: Some(l),
                    ..
                } => Some((*b, *l)),
                _ => None,
            })
            .collect();
        assert!(!best.is_empty(), "{out:?}");
        assert!(best.iter().all(|(b, l)| b >= l));
        assert!(
            best.windows(2).all(|w| w[1].0 <= w[0].0),
            "best so far never rises"
        );
    }

    #[test]
    fn errors_are_answers_not_panics() {
        let mut worker = Worker::default();
        let out = run(&mut worker, Request::Plan(Scenario::default()), None);
        assert_eq!(
            out,
            vec![Response::Error("nothing is loaded to plan".into())]
        );
        let out = run(
            &mut worker,
            Request::Load {
                source: "bad.json".into(),
                scenario: Scenario::default(),
            },
            Some(b"{"),
        );
        assert!(
            matches!(out.last(), Some(Response::Error(e)) if e.starts_with("bad.json: JSON line 1"))
        );
        let request = serde_json::to_string(&Request::Plan(scenario(Strategy::Tlsf))).unwrap();
        assert_eq!(
            request,
            r#"{"plan":{"strategy":"tlsf","precision_classes":true,"pool_cap":null,"work_limit":null}}"#
        );
    }
}
