//! What the page and the worker say to each other: typed serde messages.
//!
//! The page posts `{request, bytes}`: the [`Request`] as JSON text, and for a load the dump as a
//! `Blob` (a dropped file is one), which the worker reads in chunks: a binary ONNX model or a
//! pickle arrives intact, and a gigabyte snapshot is never copied whole. The worker answers with [`Response`]s as
//! UTF-8 JSON in a transferred `ArrayBuffer` (no string decoded and encoded again): `ready` once
//! it listens (a message sent before that would be lost), `progress` at each stage and, while a
//! search runs, its best so far and its bound, then `planned` (what the page draws: an
//! [`Analysis`], not the whole report), `exported`, or an `error`, a [`WebError`] that crosses
//! as its message.

use serde::{Deserialize, Serialize};

use crate::analysis::{Analysis, BuffersSent, CompareView, Export, ExportKind, LeftOut, SweepView};
use crate::error::{Message, WebError};
use memplan_engine::Scenario;
use memplan_engine::answers::FitAnswer;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// Load the bytes that come with the message, then plan `scenario`.
    Load {
        source: String,
        scenario: Scenario,
        #[serde(default)]
        import: memplan_formats::onnx::Options,
        /// For a program: the routine to open (an id); absent or unknown, the first one run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        routine: Option<String>,
    },
    /// Import the last loaded bytes again with other options (an ONNX model's input shapes).
    Reimport {
        scenario: Scenario,
        import: memplan_formats::onnx::Options,
    },
    /// Plan the loaded dump under another scenario.
    Plan(Scenario),
    /// Fit the loaded dump to a target (`512MiB`, or `minimize`) from no flips, then plan it
    /// with the fit's flips.
    Fit { scenario: Scenario, target: String },
    /// The largest value of `param` in `lo..=hi` that fits the scenario's device.
    Fits {
        scenario: Scenario,
        param: String,
        lo: u64,
        /// `None`: no top.
        hi: Option<u64>,
    },
    /// Rank the levers of `scenario` by how much each lowers its footprint, each planned.
    Advise(Scenario),
    /// The plan under `before` against the plan under `after`, tensor by tensor.
    Diff { before: Scenario, after: Scenario },
    /// Sweep targets from the minimized footprint to the baseline: fit at `points` targets.
    Sweep { scenario: Scenario, points: usize },
    /// Compare the plan shown with the loaded dump under `scenario`, or (with bytes beside
    /// the message) with the dump `source` under it.
    Compare {
        scenario: Scenario,
        source: Option<String>,
    },
    /// Open routine `index` of the loaded program: plan it under its own scenario.
    Routine(usize),
    /// Make a file of the current plan.
    Export(ExportKind),
    /// Read a hardware class file (TOML) the user chose, named `class` (its stem).
    ReadHardware { class: String, text: String },
    /// End the running plan with its best so far.
    Cancel,
}

impl Request {
    /// Whether it asks for a job: every request but a cancel, an export and a hardware file
    /// read. The page's link and the worker number jobs alike, so a cancel names the last job
    /// it stops (the shared stop flag holds that number), and an answer names its job.
    pub fn is_job(&self) -> bool {
        !matches!(
            self,
            Request::Cancel | Request::Export(_) | Request::ReadHardware { .. }
        )
    }
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
        /// The exact search's nodes so far.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nodes: Option<u64>,
        /// While a dump is read as a stream: how far.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read: Option<ReadProgress>,
    },
    /// The plan to draw; `cancelled` when a cancel ended its search early (this is its best
    /// plan so far, complete and checked).
    Planned {
        analysis: Box<Analysis>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cancelled: bool,
        /// What the analysis leaves out because the last plan sent had it too; the page puts
        /// back the parts it holds ([`Analysis::received`]).
        #[serde(default, skip_serializing_if = "LeftOut::is_nothing")]
        left_out: LeftOut,
        /// The plan's buffers, sent against those of the last plan sent (all of them for a
        /// first plan): the analysis holds none of its own.
        buffers: BuffersSent,
    },
    /// A cancel came before any plan of the new scenario: the page keeps what it shows.
    Cancelled,
    /// The loaded dump's program planned under each routine's scenario (after every load:
    /// `None` for a dump of one computation).
    Program(Option<Box<memplan_engine::program::ProgramReport>>),
    /// The routine of the program opened (its index and id), and its scenario: the plan that
    /// follows is of it.
    Routine {
        index: usize,
        id: String,
        scenario: Box<Scenario>,
    },
    Exported(Export),
    /// A fit's answer; the plan with its flips follows.
    Fitted(Box<FitAnswer>),
    /// A "largest that fits" answer, with both witnesses.
    Fits(Box<memplan_engine::answers::FitsAnswer>),
    /// The advisor's answer, for the scenario it was asked about.
    Advised {
        scenario: Box<Scenario>,
        answer: Box<memplan_engine::advise::AdviceAnswer>,
    },
    /// A diff of two scenarios' plans (the plan before an advice was applied, and after).
    Diffed(Box<memplan_engine::diff::PlanDiff>),
    /// A sweep's answer (the budgets fitted before a cancel, if one came).
    Swept(Box<SweepView>),
    Compared(Box<CompareView>),
    /// What the scenario of a load holds that the dump does not know: left out of its plan.
    Unknown(Vec<memplan_engine::Unknown>),
    /// A hardware class file read: its class and memory terms, or why it cannot be used.
    HardwareRead(Result<(String, memplan_core::budget::DriverTerms), WebError>),
    Error(Box<WebError>),
}

impl Response {
    /// Whether a later job's answers supersede it: what the page shows of the dump and its plan
    /// (a job's progress, its plan, a fit's flips, the program and routine, a cancel's or an
    /// error's end). The Web Worker numbers each answer with the last job it was asked
    /// ([`Request::is_job`]), and the page drops one of these whose job a later job replaced; a
    /// question's answer (an export, a diff, a sweep, ...) is shown whenever it comes, and where
    /// a later job was posted, the page stays busy with that one.
    pub fn superseded_by_later_jobs(&self) -> bool {
        matches!(
            self,
            Response::Progress { .. }
                | Response::Planned { .. }
                | Response::Fitted(_)
                | Response::Program(_)
                | Response::Routine { .. }
                | Response::Unknown(_)
                | Response::Cancelled
                | Response::Error(_)
        )
    }
}

/// How far a dump read as a stream is: `done` of `of` (a snapshot is read twice, so `of` is
/// twice its length).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadProgress {
    pub done: u64,
    pub of: u64,
}

pub(crate) fn failed(e: impl Into<WebError>) -> Response {
    Response::Error(Box::new(e.into()))
}

/// Writes an answer's UTF-8 JSON to `out`: every answer the worker sends (or warms up with)
/// goes through here, so its serializer is compiled once for one writer type (the bundle).
pub fn write_answer(r: &Response, out: &mut dyn std::io::Write) -> serde_json::Result<()> {
    serde_json::to_writer(out, r)
}

/// A request's JSON text, as the worker reads it (in a Web Worker or on the page's thread).
pub fn read_request(text: &str) -> Result<Request, WebError> {
    serde_json::from_str(text).map_err(|e| WebError::Unreadable {
        what: Message::Request,
        detail: e.to_string(),
    })
}

/// An answer's UTF-8 JSON, as the page reads it (from a Web Worker or from its own thread),
/// from `input`, a chunk at a time: a large snapshot's answer is hundreds of megabytes, which a
/// whole copy would add to the page's memory for good (wasm memory only grows). One reader
/// type, so the deserializer is compiled once (the bundle).
pub fn read_answer(input: &mut dyn std::io::Read) -> Result<Response, WebError> {
    let input = std::io::BufReader::with_capacity(1 << 16, input);
    serde_json::from_reader(input).map_err(|e| WebError::Unreadable {
        what: Message::Answer,
        detail: e.to_string(),
    })
}

/// The number of progress stages of a load.
pub const STAGES: u32 = 3;
