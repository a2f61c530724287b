//! What the page shows beside the summary: the two interactive views (`canvas`), the side
//! panels, and the downloads (`export`). Each shows what the engine computed, and computes no
//! figure of its own.

pub mod advise;
pub mod canvas;
pub mod compare;
pub mod devices;
pub mod export;
pub mod flips;
pub mod panels;
pub mod program;
pub mod sites;
pub mod spaces;
pub mod sweep;
