//! memplan-render: what the views show, and their drawings.
//!
//! [`model::ViewModel`] gathers, from a graph, its liveness and a plan, everything the timeline
//! and arena views show (per buffer: name, kind, dtype, size, pool, offset, address, live
//! interval, producers and consumers; per device: pools, usage curve, lower bound, peak). It
//! computes nothing new: every figure comes from memplan-core. [`color`] holds the palettes,
//! [`scene`] the geometry both views draw and [`label`] the names cut to fit them (shared by the
//! web canvas and the SVG), and [`svg`]
//! draws them with plotters for `memplan render` and the web app's SVG export, so the two agree.
//!
//! Pure like the core: no I/O, no clock, no DOM.

pub mod color;
pub mod label;
pub mod model;
pub mod program;
pub mod raster;
pub mod scene;
pub mod svg;

pub use model::{
    BufferPlace, BufferRows, BufferView, DeviceView, Labels, PlannedBuffers, StepIndices,
    TensorLabel, TensorRef, ViewModel,
};
