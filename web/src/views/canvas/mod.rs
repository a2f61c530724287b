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
use memplan_render::ViewModel;
use memplan_render::color::{ColorBy, Rgb, color_of};
use memplan_render::scene::{Rect, Viewport, arena_height, arena_rects, pick, timeline_rows};
use send_wrapper::SendWrapper;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{ResizeObserver, ResizeObserverEntry};

use crate::analysis::Analysis;
use crate::page::state::PageState;
use crate::page::url::Tab;

mod draw;
use draw::*;

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
    /// Each style as red, green, blue and alpha, for fills made in a pixel buffer.
    pub rgba: Vec<[u8; 4]>,
    /// Per style, whether text on it is dark (the fill is light).
    pub dark_text: Vec<bool>,
    /// Rectangle indices grouped by style, so a frame sets each style once.
    pub draw_order: Vec<u32>,
    /// The views leave the always-live buffers out.
    pub arena_only: bool,
}

/// The opacity of a faded buffer's fill (not matching the search, or not live at the peak).
const FADED_ALPHA: u8 = 0x73;

/// Whether a fill (red, green, blue, alpha; over white) is light enough for dark text.
fn light([r, g, b, a]: [u8; 4]) -> bool {
    let alpha = f64::from(a) / 255.0;
    let channel = |c: u8| f64::from(c) * alpha + 255.0 * (1.0 - alpha);
    0.299 * channel(r) + 0.587 * channel(g) + 0.114 * channel(b) > 150.0
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
                true => format!("{}{FADED_ALPHA:02x}", rgb.css()),
                false => rgb.css(),
            })
            .collect();
        let rgba: Vec<[u8; 4]> = (fills.iter())
            .map(|&(Rgb(r, g, b), faded)| [r, g, b, if faded { FADED_ALPHA } else { 255 }])
            .collect();
        let dark_text = rgba.iter().map(|&c| light(c)).collect();
        let mut draw_order: Vec<u32> = (0..rects.len() as u32).collect();
        draw_order.sort_by_key(|&i| (style_of[i as usize], i));
        Scene {
            rects,
            fit,
            styles,
            style_of,
            rgba,
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
                    .with(|a| Some(a.as_ref()?.model.buffers.get(selected)?.tensor.id.clone()))?;
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
                let tensor = &other.model.buffers.get(b)?.tensor.id;
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
    let allocator = (tab == Tab::Arena && state.source_layout.get_untracked())
        .then(|| memplan_render::scene::source_layout(model, device))
        .flatten();
    let height = match tab {
        Tab::Arena if allocator.is_some() => allocator.map_or(0, |l| l.height) as f64,
        Tab::Arena => compared_height(state, device, arena_only) as f64,
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

/// The bytes the arena map of `device` spans: the plan's, or while a comparison is open the
/// larger of the two plans', so both views share one scale and a larger plan looks larger.
fn compared_height(state: PageState, device: usize, arena_only: bool) -> u64 {
    [Side::Shown, Side::Other]
        .into_iter()
        .filter_map(|side| {
            let a = side.plan(state)?;
            let d = a.model.clamp_device(device);
            Some(arena_height(&a.model, d, arena_only))
        })
        .max()
        .unwrap_or(0)
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
            let allocator = state
                .source_layout
                .get()
                .then(|| memplan_render::scene::source_layout(model, device))
                .flatten();
            let (rects, height) = match allocator {
                Some(layout) => (layout.rects, layout.height),
                None => (
                    arena_rects(model, device, arena_only),
                    compared_height(state, device, arena_only),
                ),
            };
            let faded = rects.iter().map(|r| !matches.contains(&r.buffer)).collect();
            let fit = Viewport::fit(f64::from(model.positions), height as f64);
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
    let label = |p: u32| model.position_label(p).unwrap_or_default();
    match (b.always_live, b.first == b.last) {
        (true, _) => "always live".to_string(),
        (false, true) => format!("position {} ({})", b.first, label(b.first)),
        (false, false) => format!(
            "positions {} to {} ({} to {})",
            b.first,
            b.last,
            label(b.first),
            label(b.last)
        ),
    }
}

/// What heads a buffer's card and details: its id, kind and dtype (where the dump gives one).
pub fn identity_text(b: &memplan_render::BufferView) -> String {
    let dtype = b.dtype.map_or("", |d| d.name());
    let sep = if dtype.is_empty() { "" } else { " · " };
    format!("{} · {}{sep}{dtype}", b.tensor.id, b.tensor.kind.name())
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
    view! {
        <div class="hover-card" data-testid="hover-card" style=style>
            <div class="name">{b.tensor.display_name().to_string()}</div>
            <div class="muted">{identity_text(b)}</div>
            <div>{format!("size {} ({} B)", bytes(b.size), b.size)}</div>
            <div>{format!("offset {} in pool {} · address {}", b.offset, b.pool, m.address(b))}</div>
            <div>{interval_text(m, b)}</div>
            {match b.tensor.allocation() {
                Some(a) => view! {
                    <div>{memplan_render::model::allocated_text(a)}</div>
                    <div>{memplan_render::model::freed_text(a)}</div>
                }.into_any(),
                None => view! {
                    <div>{format!("producers: {}", step_list(m, &b.tensor.producers))}</div>
                    <div>{format!("consumers: {}", step_list(m, &b.tensor.consumers))}</div>
                }.into_any(),
            }}
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
    let reserved = (m.allocator.get(m.clamp_device(device)))
        .and_then(Option::as_ref)
        .and_then(|r| r.reserved.get(position as usize).copied());
    let runs: Vec<String> = match m.loop_at(position) {
        Some(l) => {
            let trips = l.trip_count.map_or_else(String::new, |n| format!(" ×{n}"));
            vec![format!("loop {}{trips}: {} steps", l.id, l.steps)]
        }
        None => m
            .steps_at(position)
            .map(|(_, s)| s.name_with_op())
            .collect(),
    };
    view! {
        <div class="hover-card" data-testid="curve-readout" style=style>
            <div class="name">{format!("position {position}")}</div>
            {runs.into_iter().map(|r| view! { <div>{r}</div> }).collect_view()}
            <div>{format!("live{what} {} ({live} B)", bytes(live))}</div>
            <div>{format!("footprint{what} {}", bytes(d.shown_footprint(arena_only)))}</div>
            {reserved.map(|r| view! { <div>{format!("reserved by the allocator {}", bytes(r))}</div> })}
        </div>
    }
}
