//! What can go wrong in the page and the worker, typed where it happens: a [`WebError`] crosses
//! from the worker to the page as its message ([`WebError::Said`]), since showing it as one line
//! ([`memplan_human::one_line`]) is all the page does with it; so the page's module carries no
//! decoder of the engine's and importers' error types. Text from outside (a browser's
//! exception, a decoder's message) is kept only as the `detail` of a variant that says what
//! failed.

use memplan_engine::EngineError;
use memplan_formats::hardware::HardwareError;
use memplan_formats::onnx::BadInputShape;
use memplan_render::svg::RenderError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WebError {
    /// An error the worker sent: its message.
    #[error("{0}")]
    Said(String),
    /// The browser could not do a step of something the page asked of it.
    #[error("the browser could not {0}")]
    Browser(BrowserStep),
    #[error("the background worker could not start: {detail}")]
    WorkerStart { detail: String },
    /// No Web Worker could start, and the worker's module could not load on the page either.
    #[error(
        "the background worker could not start: nor could its module load on this page: {detail}"
    )]
    ModuleLoad { detail: String },
    #[error("the background worker failed: {detail}")]
    WorkerFailed { detail: String },
    /// A message between the page and the worker that the other cannot read (a bug, or a
    /// page and worker of different builds).
    #[error("an unreadable {what}: {detail}")]
    Unreadable { what: Message, detail: String },
    /// A worker's answer that leaves out what the page does not hold.
    #[error("the worker's answer cannot be read: {0}")]
    Answer(AnswerMismatch),
    #[error("{url}: {reason}")]
    Fetch { url: String, reason: FetchFailure },
    #[error("nothing is loaded to {0}")]
    NothingLoaded(Operation),
    #[error("{input}: no bytes came with the load")]
    NoBytes { input: String },
    #[error("the target {0:?} is not a size (512MiB, 1.5GB, 4096) or `minimize`")]
    Target(String),
    #[error("{name} could not be read")]
    FileUnreadable { name: String },
    #[error("a posted load of {name} has neither `bytes` (an ArrayBuffer) nor `text`")]
    PostedNoBytes { name: String },
    #[error("a posted message of type {kind:?} is not known (expected \"load\")")]
    PostedUnknown { kind: String },
    #[error("export failed: {0}")]
    Export(Box<WebError>),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error(transparent)]
    Hardware(#[from] HardwareError),
    #[error(transparent)]
    InputShape(#[from] BadInputShape),
    /// `what` the limit is for: "a PyTorch snapshot", "a file read whole (...)".
    #[error(
        "{name}: {} is more than the {} this page reads of {what}; the CLI reads it (`memplan plan {name}`)",
        memplan_human::bytes(*size),
        memplan_human::bytes(*most)
    )]
    TooLarge {
        name: String,
        size: u64,
        most: u64,
        what: String,
    },
    /// The worker ran out of memory (wasm's 4 GiB at most) working on `name`.
    #[error(
        "{name}: the worker ran out of memory: it held {} and asked for {} more, past what a browser gives a page's worker (4 GiB at most); the CLI has no such limit (`memplan plan {name}`)",
        memplan_human::bytes(*held),
        memplan_human::bytes(*requested)
    )]
    OutOfMemory {
        name: String,
        requested: u64,
        held: u64,
    },
    /// A dump whose buffers are more than the worker can plan and draw.
    #[error(
        "{name}: {} buffers are more than the {} this page plans (its worker's memory, 4 GiB at most, holds the plan and views of about that many); the CLI plans it (`memplan plan {name}`)",
        memplan_human::grouped(*buffers as u64),
        memplan_human::grouped(*most as u64)
    )]
    TooManyBuffers {
        name: String,
        buffers: usize,
        most: usize,
    },
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl Serialize for WebError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for WebError {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(WebError::Said)
    }
}

/// Each enum's words, written once: `Display` says them.
macro_rules! words {
    ($t:ty { $($variant:ident => $text:literal),* $(,)? }) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(match self {
                    $(<$t>::$variant => $text),*
                })
            }
        }
    };
}

/// Which message could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Message {
    Request,
    Answer,
}
words!(Message { Request => "request to the worker", Answer => "answer from the worker" });

/// What a request needs loaded first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Plan,
    ImportAgain,
    Fit,
    Sweep,
    AskAbout,
    Advise,
    Compare,
    Export,
}
words!(Operation {
    Plan => "plan",
    ImportAgain => "import again",
    Fit => "fit",
    Sweep => "sweep",
    AskAbout => "ask about",
    Advise => "advise on",
    Compare => "compare",
    Export => "export",
});

/// A step the browser could not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BrowserStep {
    FindWindow,
    FindDocument,
    FindCanvas,
    MakeCanvas,
    Draw,
    CopyView,
    ReadPng,
    MakeBlob,
    MakeUrl,
    MakeLink,
}
words!(BrowserStep {
    FindWindow => "find the window",
    FindDocument => "find the document",
    FindCanvas => "find the view's canvas",
    MakeCanvas => "make a canvas",
    Draw => "draw on a canvas",
    CopyView => "copy the view into the image",
    ReadPng => "read the canvas as PNG",
    MakeBlob => "make a blob of the file",
    MakeUrl => "make a URL of the file",
    MakeLink => "make a download link",
});

/// How a worker's answer fails to fit what the page holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerMismatch {
    #[error("it leaves out what an earlier answer carried")]
    NoEarlier,
    #[error("it leaves out a baseline the page does not hold")]
    NoBaseline,
    #[error(
        "the plan's buffers were sent against a plan of {sent} buffers, and the page holds {held}"
    )]
    BufferCount { sent: usize, held: usize },
    #[error("buffers {from} to {from}+{count} of the earlier plan do not exist")]
    NoSuchRun { from: usize, count: usize },
    #[error("fewer whole buffers were sent than announced")]
    TooFewWhole,
    #[error("more whole buffers were sent than announced")]
    TooManyWhole,
    #[error("buffer {0} moved, and the plan has no buffer {0}")]
    NoSuchBuffer(u32),
}

/// Why a `?src=` fetch failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FetchFailure {
    #[error("the request failed (network, or the server does not allow cross-origin reads)")]
    Network,
    #[error("the server answered {0}")]
    Status(u16),
    #[error("the body cannot be read")]
    Body,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_crosses_to_the_page_as_its_message() {
        let errors = [
            WebError::NothingLoaded(Operation::Fit),
            WebError::Target("lots".into()),
            WebError::Engine(EngineError::NoProgram {
                input: "mlp.json".into(),
            }),
        ];
        for e in errors {
            let json = serde_json::to_string(&e).unwrap();
            assert_eq!(json, serde_json::to_string(&e.to_string()).unwrap());
            let back: WebError = serde_json::from_str(&json).unwrap();
            assert_eq!(back, WebError::Said(e.to_string()));
            assert_eq!(back.to_string(), e.to_string());
        }
    }
}
