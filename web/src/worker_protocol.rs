//! What the page and the worker say to each other.
//!
//! The page sends a [`Request`] (as a JS array, so a 50 MB dump crosses without JSON escaping);
//! the worker answers with [`Response`]s as JSON text: `ready` once it listens (a message sent
//! before that would be lost), `progress` at each stage, then `planned` or `error`. The worker
//! keeps the last loaded session, so a re-plan does not re-read the input. [`handle`] is the
//! worker's whole logic, pure and tested natively; `src/worker.rs` only wires it to the scope.

use memplan_core::Strategy;
use serde::{Deserialize, Serialize};

use crate::analysis::{Analysis, Session};

#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Load {
        source: String,
        text: String,
        strategy: Strategy,
    },
    Replan {
        strategy: Strategy,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    Ready,
    Progress { stage: u32, of: u32, what: String },
    Planned(Box<Analysis>),
    Error(String),
}

/// The number of progress stages of a load.
pub const STAGES: u32 = 3;

/// Answers `request`, posting every response through `post`.
pub fn handle(session: &mut Option<Session>, request: Request, post: &mut dyn FnMut(Response)) {
    let progress = |stage: u32, what: &str| Response::Progress {
        stage,
        of: STAGES,
        what: what.to_string(),
    };
    let strategy = match request {
        Request::Load {
            source,
            text,
            strategy,
        } => {
            post(progress(1, &format!("parsing and checking {source}")));
            match Session::load(text.as_bytes(), &source) {
                Ok(s) => *session = Some(s),
                Err(e) => return post(Response::Error(e)),
            }
            strategy
        }
        Request::Replan { strategy } => strategy,
    };
    let Some(s) = session.as_ref() else {
        return post(Response::Error("nothing is loaded to plan".into()));
    };
    post(progress(2, &format!("planning with {strategy}")));
    match s.plan(strategy) {
        Ok(a) => {
            post(progress(3, "preparing the views"));
            post(Response::Planned(Box::new(a)));
        }
        Err(e) => post(Response::Error(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(session: &mut Option<Session>, request: Request) -> Vec<Response> {
        let mut out = Vec::new();
        handle(session, request, &mut |r| out.push(r));
        out
    }

    #[test]
    fn a_load_reports_progress_then_the_plan_and_a_replan_reuses_the_session() {
        let mut session = None;
        let text = "id,lower,upper,size\na,0,2,100\nb,1,3,50\n".to_string();
        let out = run(
            &mut session,
            Request::Load {
                source: "x.csv".into(),
                text,
                strategy: Strategy::Bump,
            },
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
        assert_eq!((a.tensor_count, a.report.peak_bytes), (2, 150));
        let out = run(
            &mut session,
            Request::Replan {
                strategy: Strategy::FirstFit,
            },
        );
        let Response::Planned(a) = out.last().unwrap() else {
            panic!("{out:?}")
        };
        assert_eq!(a.strategy, Strategy::FirstFit);
    }

    #[test]
    fn errors_are_answers_not_panics() {
        let mut session = None;
        let out = run(
            &mut session,
            Request::Replan {
                strategy: Strategy::Best,
            },
        );
        assert_eq!(
            out,
            vec![Response::Error("nothing is loaded to plan".into())]
        );
        let out = run(
            &mut session,
            Request::Load {
                source: "bad.json".into(),
                text: "{".into(),
                strategy: Strategy::Best,
            },
        );
        assert!(
            matches!(out.last(), Some(Response::Error(e)) if e.starts_with("bad.json: JSON line 1"))
        );
        let json = serde_json::to_string(&Response::Progress {
            stage: 1,
            of: 3,
            what: "x".into(),
        })
        .unwrap();
        assert_eq!(json, r#"{"progress":{"stage":1,"of":3,"what":"x"}}"#);
    }
}
