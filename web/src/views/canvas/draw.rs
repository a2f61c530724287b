//! The views' drawing on a 2D context: the rectangles culled to the viewport at the device's
//! pixel ratio, the row labels, the time axis with its loops, the usage band with the footprint,
//! the lower bound and the usable line. No event handling: that is the component's, in `mod.rs`.

use crate::analysis::Analysis;
use crate::page::state::PageState;
use crate::page::url::Tab;
use leptos::prelude::*;
use memplan_human::bytes;
use memplan_render::model::AllocatorDeviceView;
use memplan_render::raster::Pixels;
use memplan_render::scene::{Viewport, position_ticks, step_vertices};
use memplan_render::{DeviceView, ViewModel};

/// The source allocator's curves: what it reserved, and its own count of what it allocated.
const RESERVED_COLOR: &str = "#c2410c";
const ALLOCATED_COLOR: &str = "#7c3aed";
use wasm_bindgen::JsCast;
use web_sys::CanvasRenderingContext2d;

use super::*;

fn device_pixel_ratio() -> f64 {
    web_sys::window().map_or(1.0, |w| w.device_pixel_ratio())
}

/// Past this many rectangles in the window, their fills go to a [`Pixels`] buffer put on the
/// canvas at once, not a `fillRect` each (see `memplan_render::raster`): below it, the canvas's
/// own anti-aliased fills, a few milliseconds.
const PIXEL_FILLS_FROM: usize = 20_000;

/// The device pixels of the plot area `a`, as a buffer the rectangles are filled into (the
/// area is white when they are drawn).
struct PixelArea {
    /// The buffer's top left corner in the canvas's device pixels.
    origin: (f64, f64),
    dpr: f64,
    pixels: Pixels,
}

impl PixelArea {
    fn of(a: Area, dpr: f64) -> PixelArea {
        let origin = ((a.x * dpr).floor(), (a.y * dpr).floor());
        let width = ((a.x + a.w) * dpr).ceil() - origin.0;
        let height = ((a.y + a.h) * dpr).ceil() - origin.1;
        PixelArea {
            origin,
            dpr,
            pixels: Pixels::new(
                width.max(1.0) as u32,
                height.max(1.0) as u32,
                [255, 255, 255],
            ),
        }
    }

    /// Fills `(x, y, w, h)`, in the canvas's CSS pixels.
    fn fill(&mut self, x: f64, y: f64, w: f64, h: f64, color: [u8; 4]) {
        let (ox, oy) = self.origin;
        let at = |x: f64, y: f64| (x * self.dpr - ox, y * self.dpr - oy);
        self.pixels.fill(at(x, y), at(x + w, y + h), color);
    }

    /// Puts the buffer on the canvas (in device pixels: no transform or clip applies).
    fn put(self, ctx: &CanvasRenderingContext2d) {
        let p = &self.pixels;
        let image = web_sys::ImageData::new_with_u8_clamped_array_and_sh(
            wasm_bindgen::Clamped(&p.data),
            p.width,
            p.height,
        );
        if let Ok(image) = image {
            let _ = ctx.put_image_data(&image, self.origin.0, self.origin.1);
        }
    }
}

pub(super) fn context(canvas: &web_sys::HtmlCanvasElement) -> Option<CanvasRenderingContext2d> {
    canvas.get_context("2d").ok()??.dyn_into().ok()
}

/// `text` cut to about `px` pixels of `FONT` ([`memplan_render::label::fit`]).
pub(super) fn fit_text(text: &str, px: f64) -> Option<String> {
    memplan_render::label::fit(text, (px / CHAR_PX).floor() as usize)
}

/// Draws `scene` of `analysis` through window `v` on `canvas`, whose CSS size is
/// `(width, height)`, with buffer `selected` outlined.
#[allow(clippy::too_many_arguments)]
pub(super) fn draw(
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
    let dpr = device_pixel_ratio();
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
    let shown = |k: &&u32| v.shows(&scene.rects[**k as usize]);
    // Many rectangles are filled in a pixel buffer, outlined after it is put.
    let mut pixels = (scene.draw_order.iter().filter(shown).count() > PIXEL_FILLS_FROM)
        .then(|| PixelArea::of(a, dpr));
    let mut outlined: Vec<(f64, f64, f64, f64)> = Vec::new();
    for &k in scene.draw_order.iter().filter(shown) {
        let r = &scene.rects[k as usize];
        let (x0, x1) = (px(r.x0.max(v.x0)), px(r.x1.min(v.x1)));
        let (ya, yb) = (py(r.y0.max(v.y0)), py(r.y1.min(v.y1)));
        let (y0, y1) = (ya.min(yb), ya.max(yb));
        let style = scene.style_of[k as usize];
        let (w, h) = ((x1 - x0).max(1.0), (y1 - y0).max(1.0));
        let inset = if tab == Tab::Timeline { 1.5 } else { 0.0 };
        let (fill_y, fill_h) = (y0 + inset, (h - 2.0 * inset).max(1.0));
        match pixels.as_mut() {
            Some(p) => p.fill(x0, fill_y, w, fill_h, scene.rgba[style as usize]),
            None => {
                if current_style != Some(style) {
                    ctx.set_fill_style_str(&scene.styles[style as usize]);
                    current_style = Some(style);
                }
                ctx.fill_rect(x0, fill_y, w, fill_h);
            }
        }
        if w > 3.0 && h > 3.0 && tab == Tab::Arena {
            outlined.push((x0, y0, w, h));
        }
        if w >= 36.0 && h >= 13.0 {
            labelled.push((r.buffer, x0, y0, w, h, scene.dark_text[style as usize]));
        }
        if Some(r.buffer) == selected {
            selected_box = Some((x0, y0, w, h));
        }
    }
    // Which way the fills went: a hook for the tests.
    let _ = canvas.set_attribute(
        "data-fills",
        if pixels.is_some() { "pixels" } else { "rects" },
    );
    if let Some(p) = pixels {
        p.put(&ctx);
    }
    ctx.set_stroke_style_str("#ffffff");
    ctx.set_line_width(0.5);
    for (x, y, w, h) in outlined {
        ctx.stroke_rect(x, y, w, h);
    }
    ctx.set_font(FONT);
    // Pool boundaries, each labelled on a white tag (`(text, x, y, width)`) so it reads over
    // any color; a buffer's name that the tag would cover is left out (its card has it). The
    // source's own layout has no pools of memplan's.
    let mut tags: Vec<(String, f64, f64, f64)> = Vec::new();
    let source_shown = state.source_layout.get_untracked() && model.layout_source().is_some();
    if tab == Tab::Arena
        && !source_shown
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
        // An underscore sits two pixels under the baseline: it must stay on the bar, where its
        // color shows (`ps_0__w1`, not `ps_0  w1`).
        let baseline = y + h / 2.0 + 3.0;
        if let Some(text) = fit_text(model.buffers[b].tensor.display_name(), w - 8.0)
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

    let moved = analysis
        .reordered
        .as_ref()
        .map_or(&[][..], |r| r.moved_positions.as_slice());
    time_axis(&ctx, model, a, v, state.axis_steps.get_untracked(), moved);
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
                if let Some(text) =
                    fit_text(model.buffers[r.buffer].tensor.display_name(), a.x - 12.0)
                {
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
        // With flips, the plan without them; else, reordered, the given order's.
        let ghost = match (&analysis.baseline, &analysis.reordered) {
            (Some(b), _) => b
                .curves
                .get(device)
                .map(|c| (c.as_slice(), "dashed: without flips")),
            (None, Some(r)) => r
                .given_curves
                .get(device)
                .map(|c| (c.as_slice(), "dashed: the given order")),
            (None, None) => None,
        };
        let allocator = model.allocator.get(device).and_then(Option::as_ref);
        usable_at.1 = usage_band(
            &ctx,
            band,
            v,
            (d, allocator),
            ghost,
            usable,
            scene.arena_only,
        );
    }
    if tab == Tab::Arena {
        let layout = match model.layout_source() {
            Some(source) if state.source_layout.get_untracked() => source.key(),
            _ => "plan",
        };
        let _ = canvas.set_attribute("data-layout", layout);
    }
    // What the band drew of the source allocator's record, for the tests.
    let reserved = band
        .is_some()
        .then(|| model.allocator.get(device).and_then(Option::as_ref))
        .flatten();
    let _ = match reserved.filter(|r| !r.reserved.is_empty()) {
        Some(r) => canvas.set_attribute("data-reserved", &r.reserved_peak().to_string()),
        None => canvas.remove_attribute("data-reserved"),
    };
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
    let _ = canvas.set_attribute("data-moved", &moved.len().to_string());
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

/// The color of the marks of moved steps on the time axis.
const MOVED_COLOR: &str = "#c2185b";

/// The time axis under `a`: unique position numbers (or step names), each loop's extent with
/// its trip count, and a mark under each position whose step a reorder moved.
pub(super) fn time_axis(
    ctx: &CanvasRenderingContext2d,
    model: &ViewModel,
    a: Area,
    v: Viewport,
    steps: bool,
    moved: &[u32],
) {
    let px = |x: f64| a.x + (x - v.x0) / (v.x1 - v.x0) * a.w;
    // The positions whose step a reorder moved: a mark on the axis line, or where positions
    // are too narrow for one, a strip as wide as the position.
    ctx.set_fill_style_str(MOVED_COLOR);
    for &m in moved {
        let (x0, x1) = (px(f64::from(m)), px(f64::from(m) + 1.0));
        if x1 < a.x || x0 > a.x + a.w {
            continue;
        }
        if x1 - x0 < 8.0 {
            ctx.fill_rect(x0, a.y + a.h + 1.0, (x1 - x0).max(1.0), 4.0);
            continue;
        }
        let x = (x0 + x1) / 2.0;
        ctx.begin_path();
        ctx.move_to(x, a.y + a.h + 1.0);
        ctx.line_to(x - 3.5, a.y + a.h + 6.0);
        ctx.line_to(x + 3.5, a.y + a.h + 6.0);
        ctx.close_path();
        ctx.fill();
    }
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
                .position_label(t)
                .and_then(|l| fit_text(&l, room.min(spacing - 6.0)))
                .unwrap_or_default()
        } else {
            t.to_string()
        };
        let x = px(f64::from(t) + 0.5);
        if x >= a.x - 1.0 && x <= a.x + a.w + 1.0 {
            // A label centred on the last position would pass the canvas's right edge.
            let half = ctx.measure_text(&label).map_or(0.0, |m| m.width()) / 2.0;
            let _ = ctx.fill_text(&label, x.min(a.x + a.w + RIGHT - half - 1.0), y);
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
pub(super) enum Place {
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
pub(super) fn budget_line(
    ctx: &CanvasRenderingContext2d,
    x0: f64,
    x1: f64,
    y: f64,
    usable: u64,
    at: Place,
) {
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
/// and the gap between them (fragmentation), shaded and labelled; a dashed ghost, labelled
/// (with flips, the curve without them; reordered, the given order's); with the source allocator's record, what it reserved (and
/// its own allocated count), labelled, and its out-of-memory events marked.
pub(super) fn usage_band(
    ctx: &CanvasRenderingContext2d,
    b: Area,
    v: Viewport,
    (d, allocator): (&DeviceView, Option<&AllocatorDeviceView>),
    ghost: Option<(&[u64], &str)>,
    usable: Option<(Option<u64>, u64)>,
    arena_only: bool,
) -> Option<Place> {
    let floor = d.floor(arena_only);
    let footprint = d.shown_footprint(arena_only);
    let lower_bound = d.lower_bound.saturating_sub(floor);
    let ghost_top = ghost
        .and_then(|(g, _)| g.iter().max())
        .map_or(0, |&m| m.saturating_sub(floor));
    let reserved_top = allocator.map_or(0, |r| {
        let allocated = r.allocated.iter().copied().max().unwrap_or(0);
        r.reserved_peak().max(allocated).saturating_sub(floor)
    });
    let high = footprint.max(lower_bound).max(ghost_top).max(reserved_top);
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
    // Each curve drawn through the window at the band's pixels (see `step_vertices`).
    let columns = (b.w * device_pixel_ratio()).ceil().max(1.0) as usize;
    // With `from_zero`, the path rises from zero at its start and falls to it at its end.
    let curve = |values: &[u64], from_zero: bool| {
        ctx.begin_path();
        let vertices = step_vertices(values, v.x0, v.x1, columns);
        let (Some(&(first, _)), Some(&(last, _))) = (vertices.first(), vertices.last()) else {
            return;
        };
        match from_zero {
            true => ctx.move_to(px(first), py(0.0)),
            false => ctx.move_to(px(first), py(vertices[0].1.saturating_sub(floor) as f64)),
        }
        for &(x, value) in &vertices {
            ctx.line_to(px(x), py(value.saturating_sub(floor) as f64));
        }
        if from_zero {
            ctx.line_to(px(last), py(0.0));
        }
    };
    curve(&d.curve, true);
    ctx.set_fill_style_str("rgba(47, 111, 222, 0.35)");
    ctx.fill();
    ctx.set_stroke_style_str("#2f6fde");
    ctx.set_line_width(1.5);
    ctx.stroke();
    if let Some((ghost, _)) = ghost {
        curve(ghost, false);
        ctx.set_stroke_style_str("#6b7280");
        ctx.set_line_width(1.0);
        ctx.set_line_dash(&js_sys::Array::of2(&3.0.into(), &3.0.into()))
            .unwrap_or_default();
        ctx.stroke();
        ctx.set_line_dash(&js_sys::Array::new()).unwrap_or_default();
    }
    if let Some(r) = allocator {
        let series = |values: &[u64], color: &str, dash: Option<(f64, f64)>| {
            curve(values, false);
            ctx.set_stroke_style_str(color);
            ctx.set_line_width(1.5);
            let pattern = dash.map_or_else(js_sys::Array::new, |(on, off)| {
                js_sys::Array::of2(&on.into(), &off.into())
            });
            ctx.set_line_dash(&pattern).unwrap_or_default();
            ctx.stroke();
            ctx.set_line_dash(&js_sys::Array::new()).unwrap_or_default();
        };
        series(&r.allocated, ALLOCATED_COLOR, Some((5.0, 3.0)));
        series(
            &r.reserved,
            RESERVED_COLOR,
            (!r.reserved_traced).then_some((2.0, 2.0)),
        );
        ctx.set_stroke_style_str("#b3261e");
        for &(position, _) in &r.ooms {
            let x = px(f64::from(position) + 0.5);
            ctx.begin_path();
            ctx.move_to(x, b.y);
            ctx.line_to(x, b.y + b.h);
            ctx.stroke();
        }
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
    if let Some((_, label)) = ghost {
        let at = (b.x + b.w / 2.0, b.y + 10.0);
        tagged_text(ctx, label, at, "center", "#5b6470");
    }
    if let Some(r) = allocator {
        // The reserved line's label, and where it stands (the band's top where the record has
        // no reserved figure for the device).
        let peak = r.reserved_peak();
        let y = match r.reserved.is_empty() {
            true => b.y + 10.0,
            false => (py(peak.saturating_sub(floor) as f64) - 3.0).max(b.y + 10.0),
        };
        let label = match (r.reserved.is_empty(), r.reserved_traced) {
            (true, _) => "the trace counts no memory reserved on this device".to_string(),
            (false, true) => format!("reserved by the allocator {}", bytes(peak)),
            (false, false) => format!("reserved by the allocator at the dump {}", bytes(peak)),
        };
        tagged_text(ctx, &label, (b.x + b.w / 2.0, y), "center", RESERVED_COLOR);
        if !r.allocated.is_empty() {
            // Under the reserved line's label where every curve stays below it (the allocator
            // reserving far more than it allocates), else at the band's foot: a label on a
            // curve hides it.
            let highest = (r.allocated.iter().chain(&d.curve))
                .max()
                .map_or(0.0, |&v| v.saturating_sub(floor) as f64);
            let under = y + 13.0;
            let at_y = match py(highest) > under + 3.0 {
                true => under,
                false => b.y + b.h - 4.0,
            };
            let at = (b.x + b.w / 2.0, at_y);
            let text =
                "dashed: allocated, the allocator's own count (with memory from before the trace)";
            tagged_text(ctx, text, at, "center", ALLOCATED_COLOR);
        }
        for &(position, oom) in &r.ooms {
            let x = px(f64::from(position) + 0.5);
            let free = oom
                .device_free
                .map_or_else(String::new, |f| format!(", {} free", bytes(f)));
            let text = format!("out of memory: asked {}{free}", bytes(oom.requested));
            tagged_text(ctx, &text, (x + 3.0, b.y + 22.0), "left", "#b3261e");
        }
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
pub(super) fn tagged_text(
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
