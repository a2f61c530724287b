//! The two interactive canvases (arena map and live-span timeline), drawn with the 2D context
//! directly: tens of thousands of rectangles, culled to the window, DPR-aware. Geometry and
//! colors come from memplan-render's `scene` and `color`, the same as the SVG export.
//!
//! Interaction. Arena map: wheel zooms to the cursor, drag pans. Timeline: rows have a fixed
//! height and scroll (wheel, or drag up and down); ctrl- or cmd-wheel zooms time at the cursor,
//! shift-wheel pans it. Both: hover shows a card, click selects the smallest rectangle under the
//! cursor (empty space clears the selection); over the usage curve, a readout of the position.
//!
//! Size: each canvas's CSS size comes from a `ResizeObserver`, which reports it after the
//! browser's own layout. A draw never reads `clientWidth`: after a re-plan has just changed the
//! page, that read forces a synchronous layout (about 20 ms on a 2,000-tensor plan).
//!
//! Two sides: the plan shown, and in the compare panel the other plan ([`Side::Other`]). Both
//! draw through the same window signals, so zooming or panning either moves both, and a
//! selection made on either is the same tensor (matched by id) on both.
//!
//! Lifetimes: every listener and observer this module adds is removed when its component is
//! disposed (`on_cleanup`), so an event after a re-render never reaches a disposed signal.

use std::collections::HashSet;
use std::sync::Arc;

use leptos::html::Canvas;
use leptos::prelude::*;
use memplan_human::bytes;
use memplan_render::color::{ColorBy, Rgb, color_of};
use memplan_render::scene::{
    Rect, Viewport, arena_height, arena_rects, pick, position_ticks, timeline_rows,
};
use memplan_render::{DeviceView, ViewModel};
use send_wrapper::SendWrapper;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{CanvasRenderingContext2d, ResizeObserver, ResizeObserverEntry};

use crate::analysis::Analysis;
use crate::state::PageState;
use crate::url_state::Tab;

const LEFT_ARENA: f64 = 84.0;
/// The timeline's left margin holds the row labels (tensor names).
const LEFT_TIMELINE: f64 = 160.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 8.0;
/// The time axis: tick labels, then the loops' band.
const BOTTOM: f64 = 40.0;
/// The height of a timeline row, CSS pixels.
pub const ROW_PX: f64 = 16.0;
/// The share of the timeline's height given to the memory-usage curve.
const BAND: f64 = 0.3;
const FONT: &str = "11px system-ui, sans-serif";
/// An estimate of the width of a character of `FONT`, for truncating labels without measuring.
const CHAR_PX: f64 = 6.2;

/// What a canvas shows, rebuilt only when the dump, device, order, search, colors or focus
/// change (never on pan or zoom).
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    pub rects: Vec<Rect>,
    /// The whole world.
    pub fit: Viewport,
    /// The fill styles used, and each rectangle's (faded ones: not matching the search, or not
    /// live at the peak).
    pub styles: Vec<String>,
    pub style_of: Vec<u16>,
    /// Per style, whether text on it is dark (the fill is light).
    pub dark_text: Vec<bool>,
    /// Rectangle indices grouped by style, so a frame sets each style once.
    pub draw_order: Vec<u32>,
    /// The views leave the always-live buffers out.
    pub arena_only: bool,
}

/// Whether a `#rrggbb` or `#rrggbbaa` fill (over white) is light enough for dark text.
fn light(css: &str) -> bool {
    let hex = |i: usize| u8::from_str_radix(css.get(i..i + 2).unwrap_or("00"), 16).unwrap_or(0);
    let alpha = if css.len() > 7 {
        f64::from(hex(7)) / 255.0
    } else {
        1.0
    };
    let channel = |i: usize| f64::from(hex(i)) * alpha + 255.0 * (1.0 - alpha);
    0.299 * channel(1) + 0.587 * channel(3) + 0.114 * channel(5) > 150.0
}

impl Scene {
    fn new(
        model: &ViewModel,
        rects: Vec<Rect>,
        faded: Vec<bool>,
        fit: Viewport,
        color_by: ColorBy,
        arena_only: bool,
    ) -> Self {
        // A handful of distinct fills: look each rectangle's up by value, format each once.
        let mut fills: Vec<(Rgb, bool)> = Vec::new();
        let style_of: Vec<u16> = rects
            .iter()
            .zip(&faded)
            .map(|(r, &faded)| {
                let fill = (color_of(&model.buffers[r.buffer], color_by), faded);
                match fills.iter().position(|f| *f == fill) {
                    Some(k) => k as u16,
                    None => {
                        fills.push(fill);
                        (fills.len() - 1) as u16
                    }
                }
            })
            .collect();
        let styles: Vec<String> = fills
            .iter()
            .map(|&(rgb, faded)| match faded {
                true => format!("{}73", rgb.css()),
                false => rgb.css(),
            })
            .collect();
        let dark_text = styles.iter().map(|s| light(s)).collect();
        let mut draw_order: Vec<u32> = (0..rects.len() as u32).collect();
        draw_order.sort_by_key(|&i| (style_of[i as usize], i));
        Scene {
            rects,
            fit,
            styles,
            style_of,
            dark_text,
            draw_order,
            arena_only,
        }
    }
}

/// Which plan a canvas draws.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Side {
    /// The plan shown: the page's analysis.
    #[default]
    Shown,
    /// The compare panel's other plan.
    Other,
}

impl Side {
    /// The plan drawn (tracked).
    fn plan(self, state: PageState) -> Option<Arc<Analysis>> {
        match self {
            Side::Shown => state.analysis.get(),
            Side::Other => state
                .comparison
                .with(|c| c.as_ref().map(|c| c.after_plan.clone())),
        }
    }

    fn plan_untracked(self, state: PageState) -> Option<Arc<Analysis>> {
        untrack(|| self.plan(state))
    }

    /// The selected tensor's buffer in this side's plan (tracked).
    fn selected(self, state: PageState) -> Option<usize> {
        let selected = state.selected.get()?;
        match self {
            Side::Shown => Some(selected),
            Side::Other => {
                let tensor = state
                    .analysis
                    .with(|a| Some(a.as_ref()?.model.buffers.get(selected)?.tensor.clone()))?;
                self.plan(state)?.model.buffer_of(&tensor)
            }
        }
    }

    /// Selects `buffer` of this side's plan: on the other side, the same tensor in the plan
    /// shown (nothing when the plan shown has no such tensor).
    fn select(self, state: PageState, buffer: Option<usize>) {
        let selected = match (self, buffer) {
            (Side::Shown, b) | (Side::Other, b @ None) => b,
            (Side::Other, Some(b)) => self.plan_untracked(state).and_then(|other| {
                let tensor = &other.model.buffers.get(b)?.tensor;
                state
                    .analysis
                    .with_untracked(|a| a.as_ref()?.model.buffer_of(tensor))
            }),
        };
        state.selected.set(selected);
    }
}

/// The whole world of a view, without building its scene (for the keyboard's zoom and pan).
pub fn world(state: PageState, tab: Tab) -> Option<Viewport> {
    let analysis = state.analysis.get_untracked()?;
    let model = &analysis.model;
    let device = model.clamp_device(state.device.get_untracked());
    let arena_only = state.arena_only_untracked();
    let height = match tab {
        Tab::Arena => arena_height(model, device, arena_only) as f64,
        Tab::Timeline => model
            .rows(
                device,
                &state.search.get_untracked(),
                state.sort.get_untracked(),
                arena_only,
            )
            .len() as f64,
    };
    Some(Viewport::fit(f64::from(model.positions), height))
}

pub fn scene(state: PageState, side: Side, tab: Tab) -> Option<Scene> {
    let analysis = side.plan(state)?;
    let model = &analysis.model;
    let device = model.clamp_device(state.device.get());
    let color_by = state.color_by.get();
    let arena_only = state.arena_only_now();
    match tab {
        Tab::Arena => {
            let matches: HashSet<usize> = model.search(&state.search.get()).into_iter().collect();
            let rects = arena_rects(model, device, arena_only);
            let faded = rects.iter().map(|r| !matches.contains(&r.buffer)).collect();
            let fit = Viewport::fit(
                f64::from(model.positions),
                arena_height(model, device, arena_only) as f64,
            );
            Some(Scene::new(model, rects, faded, fit, color_by, arena_only))
        }
        Tab::Timeline => {
            let rows = model.rows(device, &state.search.get(), state.sort.get(), arena_only);
            let rects = timeline_rows(model, &rows);
            let at_peak: HashSet<usize> = model
                .devices
                .get(device)
                .map(|d| d.live_at_peak.iter().copied().collect())
                .unwrap_or_default();
            let faded = rects.iter().map(|r| !at_peak.contains(&r.buffer)).collect();
            let fit = Viewport::fit(f64::from(model.positions), rects.len() as f64);
            Some(Scene::new(model, rects, faded, fit, color_by, arena_only))
        }
    }
}

/// A plot area in CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Area {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Area {
    fn contains(&self, x: f64, y: f64) -> bool {
        self.x <= x && x < self.x + self.w && self.y <= y && y < self.y + self.h
    }
}

/// The main area and, for the timeline, the usage curve's band above it.
fn areas(tab: Tab, width: f64, height: f64) -> (Area, Option<Area>) {
    let left = match tab {
        Tab::Arena => LEFT_ARENA,
        Tab::Timeline => LEFT_TIMELINE,
    };
    let (w, h) = (
        (width - left - RIGHT).max(10.0),
        (height - TOP - BOTTOM).max(10.0),
    );
    match tab {
        Tab::Arena => (
            Area {
                x: left,
                y: TOP,
                w,
                h,
            },
            None,
        ),
        Tab::Timeline => {
            let band = (h * BAND).floor().max(60.0).min(h / 2.0);
            let gap = 12.0;
            (
                Area {
                    x: left,
                    y: TOP + band + gap,
                    w,
                    h: (h - band - gap).max(10.0),
                },
                Some(Area {
                    x: left,
                    y: TOP,
                    w,
                    h: band,
                }),
            )
        }
    }
}

/// The window actually drawn: for the timeline, the rows that fit at [`ROW_PX`] from the
/// scrolled-to one (the stored window's `y0`), never past the last.
fn effective(tab: Tab, v: Viewport, fit: Viewport, a: Area) -> Viewport {
    match tab {
        Tab::Arena => v,
        Tab::Timeline => {
            let visible = (a.h / ROW_PX).max(1.0);
            let rows = fit.y1;
            let y0 = v.y0.min(rows - visible).max(0.0).floor();
            Viewport {
                y0,
                y1: y0 + visible,
                ..v
            }
        }
    }
}

/// World point under a CSS pixel of the main area (arena addresses grow upwards).
fn to_world(tab: Tab, a: Area, v: Viewport, px: f64, py: f64) -> (f64, f64) {
    let fx = (px - a.x) / a.w;
    let fy = (py - a.y) / a.h;
    let fy = if tab == Tab::Arena { 1.0 - fy } else { fy };
    (v.x0 + fx * (v.x1 - v.x0), v.y0 + fy * (v.y1 - v.y0))
}

fn context(canvas: &web_sys::HtmlCanvasElement) -> Option<CanvasRenderingContext2d> {
    canvas.get_context("2d").ok()??.dyn_into().ok()
}

/// `text` cut to about `px` pixels of `FONT`, with an ellipsis when cut.
fn fit_text(text: &str, px: f64) -> Option<String> {
    let most = (px / CHAR_PX).floor() as usize;
    let count = text.chars().count();
    if most < 2 {
        None
    } else if count <= most {
        Some(text.to_string())
    } else {
        Some(text.chars().take(most - 1).chain(['…']).collect())
    }
}

/// Draws `scene` of `analysis` through window `v` on `canvas`, whose CSS size is
/// `(width, height)`, with buffer `selected` outlined.
#[allow(clippy::too_many_arguments)]
fn draw(
    canvas: &web_sys::HtmlCanvasElement,
    (width, height): (f64, f64),
    state: PageState,
    analysis: &Analysis,
    tab: Tab,
    scene: &Scene,
    v: Viewport,
    selected: Option<usize>,
) {
    let performance = web_sys::window().and_then(|w| w.performance());
    let started = performance.as_ref().map(|p| p.now());
    let model = &analysis.model;
    let device = model.clamp_device(state.device.get_untracked());
    let dpr = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio());
    if width < 1.0 || height < 1.0 {
        return;
    }
    let (pw, ph) = ((width * dpr).round() as u32, (height * dpr).round() as u32);
    if canvas.width() != pw || canvas.height() != ph {
        canvas.set_width(pw);
        canvas.set_height(ph);
    }
    let Some(ctx) = context(canvas) else { return };
    let _ = ctx.set_transform(dpr, 0.0, 0.0, dpr, 0.0, 0.0);
    ctx.set_fill_style_str("#ffffff");
    ctx.fill_rect(0.0, 0.0, width, height);
    let (a, band) = areas(tab, width, height);
    let v = effective(tab, v, scene.fit, a);
    let sx = a.w / (v.x1 - v.x0);
    let sy = a.h / (v.y1 - v.y0);
    let px = |x: f64| a.x + (x - v.x0) * sx;
    let py = |y: f64| match tab {
        Tab::Arena => a.y + a.h - (y - v.y0) * sy,
        Tab::Timeline => a.y + (y - v.y0) * sy,
    };

    ctx.save();
    ctx.begin_path();
    ctx.rect(a.x, a.y, a.w, a.h);
    ctx.clip();
    let mut current_style = None;
    let mut selected_box = None;
    // Rectangles with room for a label, labelled after all are drawn.
    let mut labelled: Vec<(usize, f64, f64, f64, f64, bool)> = Vec::new();
    ctx.set_stroke_style_str("#ffffff");
    ctx.set_line_width(0.5);
    for &k in &scene.draw_order {
        let r = &scene.rects[k as usize];
        if !v.shows(r) {
            continue;
        }
        let (x0, x1) = (px(r.x0.max(v.x0)), px(r.x1.min(v.x1)));
        let (ya, yb) = (py(r.y0.max(v.y0)), py(r.y1.min(v.y1)));
        let (y0, y1) = (ya.min(yb), ya.max(yb));
        let style = scene.style_of[k as usize];
        if current_style != Some(style) {
            ctx.set_fill_style_str(&scene.styles[style as usize]);
            current_style = Some(style);
        }
        let (w, h) = ((x1 - x0).max(1.0), (y1 - y0).max(1.0));
        let inset = if tab == Tab::Timeline { 1.5 } else { 0.0 };
        ctx.fill_rect(x0, y0 + inset, w, (h - 2.0 * inset).max(1.0));
        if w > 3.0 && h > 3.0 && tab == Tab::Arena {
            ctx.stroke_rect(x0, y0, w, h);
        }
        if w >= 36.0 && h >= 13.0 {
            labelled.push((r.buffer, x0, y0, w, h, scene.dark_text[style as usize]));
        }
        if Some(r.buffer) == selected {
            selected_box = Some((x0, y0, w, h));
        }
    }
    ctx.set_font(FONT);
    // Pool boundaries, each labelled on a white tag (`(text, x, y, width)`) so it reads over
    // any color; a buffer's name that the tag would cover is left out (its card has it).
    let mut tags: Vec<(String, f64, f64, f64)> = Vec::new();
    if tab == Tab::Arena
        && let Some(d) = model.devices.get(device)
        && d.pools.len() > 1
    {
        for (k, p) in d.pools.iter().enumerate() {
            if scene.arena_only && p.role != memplan_core::PoolRole::Arena {
                continue;
            }
            let label = format!("pool {k} ({}, {})", p.role.name(), bytes(p.bytes));
            let tw = ctx.measure_text(&label).map_or(120.0, |m| m.width());
            tags.push((label, a.x + 2.0, py(p.base as f64), tw + 8.0));
        }
    }
    // A name's box: 10 px above its baseline to 2 below; a tag's: 16 to 2 above its line.
    let covered = |x: f64, baseline: f64, w: f64| {
        tags.iter().any(|&(_, tx, ty, tw)| {
            x < tx + tw && tx < x + w && baseline - 10.0 < ty - 2.0 && ty - 16.0 < baseline + 2.0
        })
    };
    ctx.set_text_align("left");
    for (b, x, y, w, h, dark) in labelled {
        let baseline = y + h / 2.0 + 4.0;
        if let Some(text) = fit_text(&model.buffers[b].name, w - 8.0)
            && !covered(x + 4.0, baseline, text.chars().count() as f64 * CHAR_PX)
        {
            ctx.set_fill_style_str(if dark { "#1b1f24" } else { "#ffffff" });
            let _ = ctx.fill_text(&text, x + 4.0, baseline);
        }
    }
    for (label, x, y, w) in &tags {
        ctx.set_stroke_style_str("#1b1f24");
        ctx.set_line_width(1.0);
        ctx.begin_path();
        ctx.move_to(a.x, *y);
        ctx.line_to(a.x + a.w, *y);
        ctx.stroke();
        ctx.set_fill_style_str("rgba(255, 255, 255, 0.92)");
        ctx.fill_rect(*x, y - 16.0, *w, 14.0);
        ctx.set_fill_style_str("#1b1f24");
        let _ = ctx.fill_text(label, x + 4.0, y - 5.0);
    }
    if let Some((x, y, w, h)) = selected_box {
        ctx.set_stroke_style_str("#111111");
        ctx.set_line_width(2.0);
        ctx.stroke_rect(x - 1.0, y - 1.0, w + 2.0, h + 2.0);
    }
    ctx.restore();

    time_axis(&ctx, model, a, v, state.axis_steps.get_untracked());
    ctx.set_fill_style_str("#5b6470");
    ctx.set_font(FONT);
    ctx.set_text_align("right");
    // The device's usable bytes, in the view's bytes (above the always-live floor when the
    // view leaves those out; `None` when the floor alone passes them).
    let usable = analysis.summary.budget.as_ref().and_then(|b| {
        let floor = model.devices.get(device)?.floor(scene.arena_only);
        Some((b.usable_bytes.checked_sub(floor), b.usable_bytes))
    });
    // Where the usable line went, in the main area and in the band: test hooks.
    let mut usable_at: (Option<Place>, Option<Place>) = (None, None);
    match tab {
        Tab::Arena => {
            for k in 0..=4 {
                let y = v.y0 + (v.y1 - v.y0) * f64::from(k) / 4.0;
                let _ = ctx.fill_text(&bytes(y.max(0.0) as u64), a.x - 6.0, py(y) + 4.0);
            }
            if let Some((line, usable)) = usable {
                let at = line.map_or(Place::Below, |l| Place::of(l as f64, v.y0, v.y1));
                let y = line.map_or(v.y1, |l| (l as f64).clamp(v.y0, v.y1));
                budget_line(&ctx, a.x, a.x + a.w, py(y), usable, at);
                usable_at.0 = Some(at);
            }
        }
        Tab::Timeline => {
            // Row labels: the tensor names of the rows shown.
            for r in scene.rects.iter().filter(|r| r.y0 >= v.y0 && r.y0 < v.y1) {
                if let Some(text) = fit_text(&model.buffers[r.buffer].name, a.x - 12.0) {
                    let y = py(r.y0) + ROW_PX / 2.0 + 4.0;
                    ctx.set_fill_style_str(if Some(r.buffer) == selected {
                        "#1b1f24"
                    } else {
                        "#5b6470"
                    });
                    let _ = ctx.fill_text(&text, a.x - 6.0, y);
                }
            }
        }
    }
    if let (Some(band), Some(d)) = (band, model.devices.get(device)) {
        let ghost = analysis
            .baseline
            .as_ref()
            .and_then(|b| b.curves.get(device))
            .map(Vec::as_slice);
        usable_at.1 = usage_band(&ctx, band, v, d, ghost, usable, scene.arena_only);
    }
    for (name, at) in [
        ("data-usable-line", usable_at.0),
        ("data-usable-band", usable_at.1),
    ] {
        let _ = match at {
            Some(at) => canvas.set_attribute(name, at.name()),
            None => canvas.remove_attribute(name),
        };
    }
    // What was drawn and how long it took: hooks for tests and for the curious.
    let _ = canvas.set_attribute("data-items", &scene.rects.len().to_string());
    let _ = canvas.set_attribute(
        "data-window",
        &format!("{},{},{},{}", v.x0, v.x1, v.y0, v.y1),
    );
    let _ = canvas.set_attribute("data-area", &format!("{},{},{},{}", a.x, a.y, a.w, a.h));
    let _ = match band {
        Some(b) => canvas.set_attribute("data-band", &format!("{},{},{},{}", b.x, b.y, b.w, b.h)),
        None => canvas.remove_attribute("data-band"),
    };
    if let (Some(p), Some(t0)) = (performance, started) {
        let _ = canvas.set_attribute("data-draw-ms", &format!("{:.2}", p.now() - t0));
    }
}

/// The time axis under `a`: unique position numbers (or step names), and each loop's extent
/// with its trip count.
fn time_axis(ctx: &CanvasRenderingContext2d, model: &ViewModel, a: Area, v: Viewport, steps: bool) {
    let px = |x: f64| a.x + (x - v.x0) / (v.x1 - v.x0) * a.w;
    let spacing = if steps { 110.0 } else { 70.0 };
    let most = (a.w / spacing).floor().max(1.0) as usize;
    ctx.set_fill_style_str("#5b6470");
    ctx.set_font(FONT);
    ctx.set_text_align("center");
    let per_position = a.w / (v.x1 - v.x0);
    let y = a.y + a.h + 14.0;
    for t in position_ticks(v.x0, v.x1, most) {
        let label = if steps {
            let room = per_position.max(spacing) - 6.0;
            model
                .position_labels
                .get(t as usize)
                .and_then(|l| fit_text(l, room.min(spacing - 6.0)))
                .unwrap_or_default()
        } else {
            t.to_string()
        };
        let x = px(f64::from(t) + 0.5);
        if x >= a.x - 1.0 && x <= a.x + a.w + 1.0 {
            let _ = ctx.fill_text(&label, x, y);
        }
    }
    // The loops: a bracket under the axis over the loop's position, with its trip count.
    let y = a.y + a.h + 28.0;
    ctx.set_stroke_style_str("#8a6d00");
    ctx.set_line_width(1.5);
    for l in model.loops.iter() {
        let (x0, x1) = (
            px(f64::from(l.position)).max(a.x),
            px(f64::from(l.position) + 1.0).min(a.x + a.w),
        );
        if x1 <= x0 {
            continue;
        }
        ctx.begin_path();
        ctx.move_to(x0 + 1.0, y - 5.0);
        ctx.line_to(x0 + 1.0, y);
        ctx.line_to(x1 - 1.0, y);
        ctx.line_to(x1 - 1.0, y - 5.0);
        ctx.stroke();
        let trips = l.trip_count.map_or_else(String::new, |n| format!(" ×{n}"));
        let text = format!("↻ {}{trips} ({} steps)", l.id, l.steps);
        let short = format!("↻{trips}");
        ctx.set_fill_style_str("#8a6d00");
        let label = fit_text(&text, (x1 - x0).max(0.0) + 60.0)
            .filter(|t| t.chars().count() == text.chars().count())
            .unwrap_or(short);
        let _ = ctx.fill_text(&label, (x0 + x1) / 2.0, y + 11.0);
    }
}

/// Where a line falls against the bytes a view shows.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    Below,
    In,
    Above,
}

impl Place {
    /// How the test hooks name it.
    fn name(self) -> &'static str {
        match self {
            Place::Below => "below",
            Place::In => "in",
            Place::Above => "above",
        }
    }

    fn of(y: f64, low: f64, high: f64) -> Place {
        if y < low {
            Place::Below
        } else if y > high {
            Place::Above
        } else {
            Place::In
        }
    }
}

/// The device's usable bytes as a line across `[x0, x1]` at `y`, labelled; out of the view's
/// range, only the label under the top `y`, saying where it is.
fn budget_line(ctx: &CanvasRenderingContext2d, x0: f64, x1: f64, y: f64, usable: u64, at: Place) {
    ctx.save();
    ctx.set_stroke_style_str("#1a7f37");
    ctx.set_line_width(1.5);
    ctx.set_line_dash(&js_sys::Array::of2(&8.0.into(), &4.0.into()))
        .unwrap_or_default();
    if at == Place::In {
        ctx.begin_path();
        ctx.move_to(x0, y);
        ctx.line_to(x1, y);
        ctx.stroke();
    }
    ctx.set_font(FONT);
    ctx.set_fill_style_str("#1a7f37");
    ctx.set_text_align("right");
    let label = match at {
        Place::Above => format!("usable {} (above)", bytes(usable)),
        Place::Below => format!("usable {} (below the view: over budget)", bytes(usable)),
        Place::In => format!("usable {}", bytes(usable)),
    };
    ctx.set_fill_style_str(if at == Place::Below {
        "#b3261e"
    } else {
        "#1a7f37"
    });
    let _ = ctx.fill_text(
        &label,
        x1 - 4.0,
        if at == Place::In { y - 3.0 } else { y + 22.0 },
    );
    ctx.restore();
}

/// The memory-usage curve above the timeline: the footprint line, the lower bound at the peak,
/// and the gap between them (fragmentation), shaded and labelled; with flips, the curve
/// without them as a dashed ghost.
fn usage_band(
    ctx: &CanvasRenderingContext2d,
    b: Area,
    v: Viewport,
    d: &DeviceView,
    ghost: Option<&[u64]>,
    usable: Option<(Option<u64>, u64)>,
    arena_only: bool,
) -> Option<Place> {
    let floor = d.floor(arena_only);
    let footprint = d.shown_footprint(arena_only);
    let lower_bound = d.lower_bound.saturating_sub(floor);
    let ghost_top = ghost
        .and_then(|g| g.iter().max())
        .map_or(0, |&m| m.saturating_sub(floor));
    let high = footprint.max(lower_bound).max(ghost_top);
    // The usable line joins the scale when it is near the curve; far above, it is only named.
    let budget_top = usable
        .and_then(|(line, _)| line)
        .map_or(0, |line| if line <= 2 * high { line } else { 0 });
    let top = (high.max(budget_top) as f64 * 1.12).max(1.0);
    let px = |x: f64| b.x + (x - v.x0) / (v.x1 - v.x0) * b.w;
    let py = |y: f64| b.y + b.h - y / top * b.h;
    ctx.save();
    ctx.begin_path();
    ctx.rect(b.x, b.y, b.w, b.h);
    ctx.clip();
    ctx.set_fill_style_str("#f4f7fd");
    ctx.fill_rect(b.x, b.y, b.w, b.h);
    // Fragmentation: between the lower bound and the footprint.
    ctx.set_fill_style_str("rgba(214, 39, 40, 0.10)");
    ctx.fill_rect(
        b.x,
        py(footprint as f64),
        b.w,
        py(lower_bound as f64) - py(footprint as f64),
    );
    ctx.begin_path();
    ctx.move_to(px(0.0), py(0.0));
    for (p, &live) in d.curve.iter().enumerate() {
        let live = live.saturating_sub(floor) as f64;
        ctx.line_to(px(p as f64), py(live));
        ctx.line_to(px(p as f64 + 1.0), py(live));
    }
    ctx.line_to(px(d.curve.len() as f64), py(0.0));
    ctx.set_fill_style_str("rgba(47, 111, 222, 0.35)");
    ctx.fill();
    ctx.set_stroke_style_str("#2f6fde");
    ctx.set_line_width(1.5);
    ctx.stroke();
    if let Some(ghost) = ghost {
        ctx.begin_path();
        for (p, &live) in ghost.iter().enumerate() {
            let live = live.saturating_sub(floor) as f64;
            if p == 0 {
                ctx.move_to(px(0.0), py(live));
            }
            ctx.line_to(px(p as f64), py(live));
            ctx.line_to(px(p as f64 + 1.0), py(live));
        }
        ctx.set_stroke_style_str("#6b7280");
        ctx.set_line_width(1.0);
        ctx.set_line_dash(&js_sys::Array::of2(&3.0.into(), &3.0.into()))
            .unwrap_or_default();
        ctx.stroke();
        ctx.set_line_dash(&js_sys::Array::new()).unwrap_or_default();
    }
    ctx.set_stroke_style_str("#d62728");
    ctx.set_line_width(1.0);
    ctx.begin_path();
    ctx.move_to(b.x, py(footprint as f64));
    ctx.line_to(b.x + b.w, py(footprint as f64));
    ctx.stroke();
    ctx.set_stroke_style_str("#111111");
    ctx.set_line_dash(&js_sys::Array::of2(&4.0.into(), &3.0.into()))
        .unwrap_or_default();
    ctx.begin_path();
    ctx.move_to(b.x, py(lower_bound as f64));
    ctx.line_to(b.x + b.w, py(lower_bound as f64));
    ctx.stroke();
    ctx.set_line_dash(&js_sys::Array::new()).unwrap_or_default();
    let usable_at = usable.map(|(line, usable)| {
        let at = line.map_or(Place::Below, |l| Place::of(l as f64, 0.0, top));
        let y = line.map_or(top, |l| (l as f64).min(top));
        budget_line(ctx, b.x, b.x + b.w, py(y), usable, at);
        at
    });
    ctx.set_font(FONT);
    if let Some(p) = d.peak_position {
        let x = px(f64::from(p) + 0.5);
        ctx.begin_path();
        ctx.move_to(x, b.y + b.h);
        ctx.line_to(x, py(lower_bound as f64));
        ctx.stroke();
        ctx.set_fill_style_str("#111111");
        ctx.set_text_align(if x > b.x + b.w * 0.7 { "right" } else { "left" });
        let dx = if x > b.x + b.w * 0.7 { -4.0 } else { 4.0 };
        let _ = ctx.fill_text("peak", x + dx, b.y + b.h - 4.0);
    }
    ctx.restore();
    let what = if arena_only { " (arena)" } else { "" };
    ctx.set_font(FONT);
    let (top_line, bottom_line) = (py(footprint as f64), py(lower_bound as f64));
    let footprint_label = format!("footprint{what} {}", bytes(footprint));
    tagged_text(
        ctx,
        &footprint_label,
        (b.x + 4.0, top_line - 3.0),
        "left",
        "#b3261e",
    );
    // Between the two lines when there is room for the text, else above the footprint's (at
    // the other end from its label): on a line it cannot be read.
    let fragmentation_y = match bottom_line - top_line >= 14.0 {
        true => (top_line + bottom_line) / 2.0 + 4.0,
        false => top_line - 3.0,
    };
    let fragmentation = bytes(footprint.saturating_sub(lower_bound));
    let at = (b.x + b.w - 4.0, fragmentation_y);
    tagged_text(
        ctx,
        &format!("fragmentation {fragmentation}"),
        at,
        "right",
        "#b3261e",
    );
    let lower_bound_label = format!("lower bound{what} {}", bytes(lower_bound));
    tagged_text(
        ctx,
        &lower_bound_label,
        (b.x + 4.0, bottom_line + 12.0),
        "left",
        "#111111",
    );
    if ghost.is_some() {
        let at = (b.x + b.w / 2.0, b.y + 10.0);
        tagged_text(ctx, "dashed: without flips", at, "center", "#5b6470");
    }
    ctx.set_fill_style_str("#5b6470");
    ctx.set_text_align("right");
    let _ = ctx.fill_text("live bytes", b.x - 6.0, b.y + 10.0);
    let _ = ctx.fill_text("0", b.x - 6.0, b.y + b.h);
    usable_at
}

/// `text` with its baseline at `(x, y)`, aligned `align`, on a white tag: the usage band's
/// curves run under its labels. The tag stops 2 px under the baseline, clear of a line 3 px
/// below it.
fn tagged_text(
    ctx: &CanvasRenderingContext2d,
    text: &str,
    (x, y): (f64, f64),
    align: &str,
    color: &str,
) {
    let w = ctx
        .measure_text(text)
        .map_or(text.chars().count() as f64 * CHAR_PX, |m| m.width());
    let left = match align {
        "right" => x - w,
        "center" => x - w / 2.0,
        _ => x,
    };
    ctx.set_fill_style_str("rgba(255, 255, 255, 0.85)");
    ctx.fill_rect(left - 2.0, y - 10.0, w + 4.0, 12.0);
    ctx.set_fill_style_str(color);
    ctx.set_text_align(align);
    let _ = ctx.fill_text(text, x, y);
}

/// Where the hover card sits: beside the cursor, on the side with room, inside the container.
fn card_style(x: f64, y: f64, width: f64, height: f64) -> String {
    let horizontal = if x > width * 0.55 {
        format!("right: {}px", (width - x + 14.0).max(0.0))
    } else {
        format!("left: {}px", x + 14.0)
    };
    let vertical = if y > height * 0.5 {
        format!("bottom: {}px", (height - y + 14.0).max(0.0))
    } else {
        format!("top: {}px", y + 14.0)
    };
    format!("{horizontal}; {vertical}")
}

/// What the pointer is over.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Hover {
    /// A buffer's rectangle, at `(x, y)` in a container of `(w, h)` CSS pixels.
    Buffer {
        buffer: usize,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
    },
    /// The usage curve at a position.
    Curve {
        position: u32,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
    },
}

/// The CSS size of `canvas` as a `ResizeObserver` reports it: `None` until its first report
/// (once the canvas is laid out), then each change. The observer goes with the component.
fn observed_size(canvas: NodeRef<Canvas>) -> ReadSignal<Option<(f64, f64)>> {
    let (size, set_size) = signal(None::<(f64, f64)>);
    Effect::new(move |_| {
        let Some(el) = canvas.get() else { return };
        let report = Closure::<dyn FnMut(js_sys::Array)>::new(move |entries: js_sys::Array| {
            let last = entries.iter().last();
            if let Some(entry) = last.and_then(|e| e.dyn_into::<ResizeObserverEntry>().ok()) {
                let rect = entry.content_rect();
                set_size.set(Some((rect.width(), rect.height())));
            }
        });
        let Ok(observer) = ResizeObserver::new(report.as_ref().unchecked_ref()) else {
            return;
        };
        observer.observe(&el);
        let held = SendWrapper::new((observer, report));
        on_cleanup(move || held.0.disconnect());
    });
    size
}

#[component]
pub fn PlotCanvas(state: PageState, tab: Tab, #[prop(optional)] side: Side) -> impl IntoView {
    let canvas = NodeRef::<Canvas>::new();
    let hover = RwSignal::new(None::<Hover>);
    let drag = StoredValue::new(None::<(f64, f64, Viewport, bool)>);
    let scene = Memo::new(move |_| scene(state, side, tab));
    let window = match tab {
        Tab::Arena => state.arena_window,
        Tab::Timeline => state.timeline_window,
    };
    let current = move || scene.with(|s| s.as_ref().map(|s| window.get().unwrap_or(s.fit)));
    let size = observed_size(canvas);

    Effect::new(move |_| {
        let (Some(el), Some(size), Some(v)) = (canvas.get(), size.get(), current()) else {
            return;
        };
        let selected = side.selected(state);
        state.axis_steps.track();
        let Some(analysis) = side.plan_untracked(state) else {
            return;
        };
        scene.with(|s| {
            if let Some(s) = s {
                draw(&el, size, state, &analysis, tab, s, v, selected);
            }
        });
    });

    let local =
        move |ev: &web_sys::MouseEvent| -> Option<(f64, f64, Area, Option<Area>, f64, f64)> {
            let el = canvas.get_untracked()?;
            let r = el.get_bounding_client_rect();
            let (a, band) = areas(tab, r.width(), r.height());
            Some((
                f64::from(ev.client_x()) - r.left(),
                f64::from(ev.client_y()) - r.top(),
                a,
                band,
                r.width(),
                r.height(),
            ))
        };
    // The window as drawn (for the timeline, the rows that fit).
    let viewport = move |a: Area| {
        scene.with_untracked(|s| {
            s.as_ref()
                .map(|s| effective(tab, window.get_untracked().unwrap_or(s.fit), s.fit, a))
        })
    };

    let on_wheel = move |ev: web_sys::WheelEvent| {
        ev.prevent_default();
        let Some((x, y, a, _, _, _)) = local(&ev) else {
            return;
        };
        let Some(v) = viewport(a) else { return };
        let fx = ((x - a.x) / a.w).clamp(0.0, 1.0);
        let factor = (-ev.delta_y() * 0.0015).exp();
        let next = match tab {
            Tab::Arena => {
                let fy = 1.0 - ((y - a.y) / a.h).clamp(0.0, 1.0);
                v.zoom(factor, fx, fy, 1.0)
            }
            Tab::Timeline if ev.ctrl_key() || ev.meta_key() => v.zoom_x(factor, fx, 1.0),
            Tab::Timeline if ev.shift_key() => {
                let delta = if ev.delta_x() != 0.0 {
                    ev.delta_x()
                } else {
                    ev.delta_y()
                };
                v.pan(delta / a.w, 0.0)
            }
            Tab::Timeline => Viewport {
                y0: v.y0 + (ev.delta_y() / ROW_PX).round(),
                ..v
            },
        };
        window.set(Some(next));
    };
    let on_down = move |ev: web_sys::MouseEvent| {
        if let Some((x, y, a, _, _, _)) = local(&ev)
            && let Some(v) = viewport(a)
        {
            drag.set_value(Some((x, y, v, false)));
        }
    };
    let on_move = move |ev: web_sys::MouseEvent| {
        let Some((x, y, a, band, w, h)) = local(&ev) else {
            return;
        };
        if let Some((sx, sy, start, moved)) = drag.get_value() {
            let (dx, dy) = (x - sx, y - sy);
            if moved || dx.abs() + dy.abs() > 3.0 {
                let next = match tab {
                    Tab::Arena => start.pan(-dx / a.w, dy / a.h),
                    Tab::Timeline => Viewport {
                        y0: start.y0 - (dy / ROW_PX).round(),
                        ..start.pan(-dx / a.w, 0.0)
                    },
                };
                window.set(Some(next));
                drag.set_value(Some((sx, sy, start, true)));
                hover.set(None);
                return;
            }
        }
        let Some(v) = viewport(a) else { return };
        if let Some(band) = band
            && band.contains(x, y)
        {
            let (wx, _) = to_world(tab, band, v, x, y);
            let positions = side.plan_untracked(state).map_or(0, |a| a.model.positions);
            hover.set(
                (wx >= 0.0 && (wx as u32) < positions).then_some(Hover::Curve {
                    position: wx as u32,
                    x,
                    y,
                    w,
                    h,
                }),
            );
            return;
        }
        let (wx, wy) = to_world(tab, a, v, x, y);
        let under = scene.with_untracked(|s| s.as_ref().and_then(|s| pick(&s.rects, wx, wy)));
        hover.set(under.map(|buffer| Hover::Buffer { buffer, x, y, w, h }));
    };
    let on_up = move |ev: web_sys::MouseEvent| {
        let clicked = matches!(drag.get_value(), Some((_, _, _, false)));
        drag.set_value(None);
        if !clicked {
            return;
        }
        let Some((x, y, a, band, _, _)) = local(&ev) else {
            return;
        };
        if band.is_some_and(|b| b.contains(x, y)) {
            return;
        }
        let Some(v) = viewport(a) else { return };
        let (wx, wy) = to_world(tab, a, v, x, y);
        let under = scene.with_untracked(|s| s.as_ref().and_then(|s| pick(&s.rects, wx, wy)));
        side.select(state, under);
    };
    let on_leave = move |_| {
        hover.set(None);
        drag.set_value(None);
    };

    let testid = match (side, tab) {
        (Side::Shown, Tab::Arena) => "arena-canvas",
        (Side::Shown, Tab::Timeline) => "timeline-canvas",
        (Side::Other, Tab::Arena) => "compare-arena-canvas",
        (Side::Other, Tab::Timeline) => "compare-timeline-canvas",
    };
    let no_match = move || {
        let query = state.search.get();
        let empty = scene.with(|s| s.as_ref().is_some_and(|s| s.rects.is_empty()));
        (empty && !query.trim().is_empty()).then(|| {
            view! {
                <div class="no-match" data-testid="no-match">
                    {format!("no tensor matches “{}”", query.trim())}
                </div>
            }
        })
    };
    view! {
        <div class="canvas-wrap">
            <canvas
                node_ref=canvas
                data-testid=testid
                class="plot"
                on:wheel=on_wheel
                on:mousedown=on_down
                on:mousemove=on_move
                on:mouseup=on_up
                on:mouseleave=on_leave
            ></canvas>
            {no_match}
            {move || {
                let a = side.plan(state)?;
                match hover.get()? {
                    Hover::Buffer { buffer, x, y, w, h } => {
                        a.model.buffers.get(buffer)?;
                        let style = card_style(x, y, w, h);
                        Some(view! { <HoverCard model=a.clone() buffer=buffer style=style /> }.into_any())
                    }
                    Hover::Curve { position, x, y, w, h } => {
                        let style = card_style(x, y, w, h);
                        let arena_only = state.arena_only_untracked();
                        Some(view! { <CurveReadout analysis=a.clone() position=position style=style arena_only=arena_only device=state.device.get_untracked() /> }.into_any())
                    }
                }
            }}
        </div>
    }
}

/// A list of steps for a card: their ids, the first six and a count of the rest.
pub fn step_list(model: &ViewModel, steps: &[u32]) -> String {
    let ids = model.step_ids(steps);
    if ids.is_empty() {
        "none".to_string()
    } else if ids.len() > 6 {
        format!("{} and {} more", ids[..6].join(", "), ids.len() - 6)
    } else {
        ids.join(", ")
    }
}

/// When a buffer lives, in positions and what runs there.
pub fn interval_text(model: &ViewModel, b: &memplan_render::BufferView) -> String {
    let label = |p: u32| {
        model
            .position_labels
            .get(p as usize)
            .cloned()
            .unwrap_or_default()
    };
    if b.always_live {
        "always live".to_string()
    } else {
        format!(
            "positions {}..={} ({} .. {})",
            b.first,
            b.last,
            label(b.first),
            label(b.last)
        )
    }
}

/// The card under the cursor: what the buffer is, where and when it lives, who writes and reads it.
#[component]
fn HoverCard(
    model: std::sync::Arc<crate::analysis::Analysis>,
    buffer: usize,
    style: String,
) -> impl IntoView {
    let m = &model.model;
    let b = &m.buffers[buffer];
    let dtype = b
        .dtype
        .map_or_else(|| "-".to_string(), |d| d.name().to_string());
    view! {
        <div class="hover-card" data-testid="hover-card" style=style>
            <div class="name">{b.name.clone()}</div>
            <div class="muted">{format!("{} · {} · {}", b.tensor, b.kind.name(), dtype)}</div>
            <div>{format!("size {} ({} B)", bytes(b.size), b.size)}</div>
            <div>{format!("offset {} in pool {} · address {}", b.offset, b.pool, b.address)}</div>
            <div>{interval_text(m, b)}</div>
            <div>{format!("producers: {}", step_list(m, &b.producers))}</div>
            <div>{format!("consumers: {}", step_list(m, &b.consumers))}</div>
        </div>
    }
}

/// The readout over the usage curve: what runs at the position and what is live there.
#[component]
fn CurveReadout(
    analysis: std::sync::Arc<crate::analysis::Analysis>,
    position: u32,
    style: String,
    arena_only: bool,
    device: usize,
) -> impl IntoView {
    let m = &analysis.model;
    let d = &m.devices[m.clamp_device(device)];
    let floor = d.floor(arena_only);
    let live = d
        .curve
        .get(position as usize)
        .copied()
        .unwrap_or(0)
        .saturating_sub(floor);
    let what = if arena_only { " (arena)" } else { "" };
    let runs: Vec<String> = match m.loop_at(position) {
        Some(l) => {
            let trips = l.trip_count.map_or_else(String::new, |n| format!(" ×{n}"));
            vec![format!("loop {}{trips}: {} steps", l.id, l.steps)]
        }
        None => m
            .steps_at(position)
            .map(|(_, s)| {
                if s.op.is_empty() {
                    s.name.clone()
                } else {
                    format!("{} · {}", s.name, s.op)
                }
            })
            .collect(),
    };
    view! {
        <div class="hover-card" data-testid="curve-readout" style=style>
            <div class="name">{format!("position {position}")}</div>
            {runs.into_iter().map(|r| view! { <div>{r}</div> }).collect_view()}
            <div>{format!("live{what} {} ({live} B)", bytes(live))}</div>
            <div>{format!("footprint{what} {}", bytes(d.shown_footprint(arena_only)))}</div>
        </div>
    }
}
