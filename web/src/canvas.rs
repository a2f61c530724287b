//! The two interactive canvases (arena map and live-span timeline), drawn with the 2D context
//! directly: tens of thousands of rectangles, culled to the window, DPR-aware. Geometry and
//! colors come from memplan-render's `scene` and `color`, the same as the SVG export.
//!
//! Interaction: wheel zooms to the cursor, drag pans, hover shows a card, click selects the
//! smallest rectangle under the cursor (empty space clears the selection).

use std::collections::HashSet;

use leptos::html::Canvas;
use leptos::prelude::*;
use memplan_formats::human::bytes;
use memplan_render::color::{ColorBy, color_of};
use memplan_render::scene::{Rect, Viewport, arena_height, arena_rects, pick, timeline_rows};
use wasm_bindgen::JsCast;
use web_sys::CanvasRenderingContext2d;

use crate::state::PageState;
use crate::url_state::Tab;

const LEFT: f64 = 84.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 8.0;
const BOTTOM: f64 = 22.0;
/// The share of the timeline's height given to the memory-usage curve.
const BAND: f64 = 0.3;

/// What a canvas shows, rebuilt only when the dump, device, order, search or colors change
/// (never on pan or zoom).
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    pub rects: Vec<Rect>,
    /// The whole world.
    pub fit: Viewport,
    /// The fill styles used, and each rectangle's (faded ones: not matching the search, or not
    /// live at the peak).
    pub styles: Vec<String>,
    pub style_of: Vec<u16>,
    /// Rectangle indices grouped by style, so a frame sets each style once.
    pub draw_order: Vec<u32>,
}

impl Scene {
    fn new(
        model: &memplan_render::ViewModel,
        rects: Vec<Rect>,
        faded: Vec<bool>,
        fit: Viewport,
        color_by: ColorBy,
    ) -> Self {
        let mut styles: Vec<String> = Vec::new();
        let style_of: Vec<u16> = rects
            .iter()
            .zip(&faded)
            .map(|(r, &faded)| {
                let css = color_of(&model.buffers[r.buffer], color_by).css();
                let css = if faded { format!("{css}73") } else { css };
                match styles.iter().position(|s| *s == css) {
                    Some(k) => k as u16,
                    None => {
                        styles.push(css);
                        (styles.len() - 1) as u16
                    }
                }
            })
            .collect();
        let mut draw_order: Vec<u32> = (0..rects.len() as u32).collect();
        draw_order.sort_by_key(|&i| (style_of[i as usize], i));
        Scene {
            rects,
            fit,
            styles,
            style_of,
            draw_order,
        }
    }
}

/// The whole world of a view, without building its scene (for the keyboard's zoom and pan).
pub fn world(state: PageState, tab: Tab) -> Option<Viewport> {
    let analysis = state.analysis.get_untracked()?;
    let model = &analysis.model;
    let device = model.clamp_device(state.device.get_untracked());
    let height = match tab {
        Tab::Arena => arena_height(model, device) as f64,
        Tab::Timeline => model
            .rows(
                device,
                &state.search.get_untracked(),
                state.sort.get_untracked(),
            )
            .len() as f64,
    };
    Some(Viewport::fit(f64::from(model.positions), height))
}

pub fn scene(state: PageState, tab: Tab) -> Option<Scene> {
    let analysis = state.analysis.get()?;
    let model = &analysis.model;
    let device = model.clamp_device(state.device.get());
    let matches: HashSet<usize> = model.search(&state.search.get()).into_iter().collect();
    let color_by = state.color_by.get();
    match tab {
        Tab::Arena => {
            let rects = arena_rects(model, device);
            let faded = rects.iter().map(|r| !matches.contains(&r.buffer)).collect();
            let fit = Viewport::fit(
                f64::from(model.positions),
                arena_height(model, device) as f64,
            );
            Some(Scene::new(model, rects, faded, fit, color_by))
        }
        Tab::Timeline => {
            let rows = model.rows(device, &state.search.get(), state.sort.get());
            let rects = timeline_rows(model, &rows);
            let at_peak: HashSet<usize> = model
                .devices
                .get(device)
                .map(|d| d.live_at_peak.iter().copied().collect())
                .unwrap_or_default();
            let faded = rects.iter().map(|r| !at_peak.contains(&r.buffer)).collect();
            let fit = Viewport::fit(f64::from(model.positions), rects.len() as f64);
            Some(Scene::new(model, rects, faded, fit, color_by))
        }
    }
}

/// The plot area in CSS pixels: x, y, width, height.
#[derive(Debug, Clone, Copy)]
struct Area {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
}

fn areas(tab: Tab, width: f64, height: f64) -> (Area, Option<Area>) {
    let (w, h) = (
        (width - LEFT - RIGHT).max(10.0),
        (height - TOP - BOTTOM).max(10.0),
    );
    match tab {
        Tab::Arena => (
            Area {
                x: LEFT,
                y: TOP,
                w,
                h,
            },
            None,
        ),
        Tab::Timeline => {
            let band = (h * BAND).floor();
            let gap = 10.0;
            (
                Area {
                    x: LEFT,
                    y: TOP + band + gap,
                    w,
                    h: (h - band - gap).max(10.0),
                },
                Some(Area {
                    x: LEFT,
                    y: TOP,
                    w,
                    h: band,
                }),
            )
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

/// Draws `scene` through window `v` on `canvas`.
fn draw(
    canvas: &web_sys::HtmlCanvasElement,
    state: PageState,
    tab: Tab,
    scene: &Scene,
    v: Viewport,
) {
    let Some(analysis) = state.analysis.get_untracked() else {
        return;
    };
    let performance = web_sys::window().and_then(|w| w.performance());
    let started = performance.as_ref().map(|p| p.now());
    let model = &analysis.model;
    let device = model.clamp_device(state.device.get_untracked());
    let dpr = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio());
    let (width, height) = (
        f64::from(canvas.client_width()),
        f64::from(canvas.client_height()),
    );
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
    let sx = a.w / (v.x1 - v.x0);
    let sy = a.h / (v.y1 - v.y0);
    let px = |x: f64| a.x + (x - v.x0) * sx;
    let py = |y: f64| match tab {
        Tab::Arena => a.y + a.h - (y - v.y0) * sy,
        Tab::Timeline => a.y + (y - v.y0) * sy,
    };
    let selected = state.selected.get_untracked();

    ctx.save();
    ctx.begin_path();
    ctx.rect(a.x, a.y, a.w, a.h);
    ctx.clip();
    let mut current_style = None;
    let mut selected_box = None;
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
        ctx.fill_rect(x0, y0, w, h);
        if w > 3.0 && h > 3.0 {
            ctx.stroke_rect(x0, y0, w, h);
        }
        if Some(r.buffer) == selected {
            selected_box = Some((x0, y0, w, h));
        }
    }
    if tab == Tab::Arena {
        // Pool boundaries.
        if let Some(d) = model.devices.get(device)
            && d.pools.len() > 1
        {
            ctx.set_stroke_style_str("#1b1f24");
            ctx.set_line_width(1.0);
            ctx.set_fill_style_str("#1b1f24");
            ctx.set_font("11px system-ui, sans-serif");
            for (k, p) in d.pools.iter().enumerate() {
                let y = py(p.base as f64);
                ctx.begin_path();
                ctx.move_to(a.x, y);
                ctx.line_to(a.x + a.w, y);
                ctx.stroke();
                let _ = ctx.fill_text(&format!("pool {k} ({})", p.role.name()), a.x + 4.0, y - 3.0);
            }
        }
    }
    if let Some((x, y, w, h)) = selected_box {
        ctx.set_stroke_style_str("#111111");
        ctx.set_line_width(2.0);
        ctx.stroke_rect(x - 1.0, y - 1.0, w + 2.0, h + 2.0);
    }
    ctx.restore();

    // Axes.
    ctx.set_fill_style_str("#5b6470");
    ctx.set_font("11px system-ui, sans-serif");
    ctx.set_text_align("center");
    let ticks = 8.0;
    for k in 0..=ticks as u32 {
        let x = v.x0 + (v.x1 - v.x0) * f64::from(k) / ticks;
        let _ = ctx.fill_text(&format!("{}", x.floor() as i64), px(x), height - 6.0);
    }
    ctx.set_text_align("right");
    if tab == Tab::Arena {
        for k in 0..=4 {
            let y = v.y0 + (v.y1 - v.y0) * f64::from(k) / 4.0;
            let _ = ctx.fill_text(&bytes(y.max(0.0) as u64), a.x - 6.0, py(y) + 4.0);
        }
    } else {
        let _ = ctx.fill_text(
            &format!("{} rows", scene.rects.len()),
            a.x - 6.0,
            a.y + 12.0,
        );
    }
    if let (Some(band), Some(d)) = (band, model.devices.get(device)) {
        usage_band(&ctx, band, v, d);
    }
    // What was drawn and how long it took: hooks for tests and for the curious.
    let _ = canvas.set_attribute("data-items", &scene.rects.len().to_string());
    if let (Some(p), Some(t0)) = (performance, started) {
        let _ = canvas.set_attribute("data-draw-ms", &format!("{:.2}", p.now() - t0));
    }
}

/// The memory-usage curve above the timeline, the footprint line, the peak marked.
fn usage_band(
    ctx: &CanvasRenderingContext2d,
    b: Area,
    v: Viewport,
    d: &memplan_render::DeviceView,
) {
    let top = (d.footprint_bytes.max(d.lower_bound) as f64 * 1.05).max(1.0);
    let px = |x: f64| b.x + (x - v.x0) / (v.x1 - v.x0) * b.w;
    let py = |y: f64| b.y + b.h - y / top * b.h;
    ctx.save();
    ctx.begin_path();
    ctx.rect(b.x, b.y, b.w, b.h);
    ctx.clip();
    ctx.set_fill_style_str("#eef3fc");
    ctx.fill_rect(b.x, b.y, b.w, b.h);
    ctx.begin_path();
    ctx.move_to(px(0.0), py(0.0));
    for (p, &live) in d.curve.iter().enumerate() {
        ctx.line_to(px(p as f64), py(live as f64));
        ctx.line_to(px(p as f64 + 1.0), py(live as f64));
    }
    ctx.line_to(px(d.curve.len() as f64), py(0.0));
    ctx.set_fill_style_str("rgba(47, 111, 222, 0.35)");
    ctx.fill();
    ctx.set_stroke_style_str("#2f6fde");
    ctx.set_line_width(1.5);
    ctx.stroke();
    ctx.set_stroke_style_str("#d62728");
    ctx.set_line_width(1.0);
    ctx.begin_path();
    ctx.move_to(b.x, py(d.footprint_bytes as f64));
    ctx.line_to(b.x + b.w, py(d.footprint_bytes as f64));
    ctx.stroke();
    if let Some(p) = d.peak_position {
        let x = px(f64::from(p) + 0.5);
        ctx.set_stroke_style_str("#111111");
        ctx.begin_path();
        ctx.move_to(x, b.y + b.h);
        ctx.line_to(x, py(d.lower_bound as f64));
        ctx.stroke();
        ctx.set_fill_style_str("#111111");
        ctx.set_text_align("left");
        ctx.set_font("11px system-ui, sans-serif");
        let _ = ctx.fill_text(
            &format!("lower bound {}", bytes(d.lower_bound)),
            x + 4.0,
            py(d.lower_bound as f64) + 12.0,
        );
    }
    ctx.restore();
    ctx.set_fill_style_str("#b3261e");
    ctx.set_text_align("right");
    ctx.set_font("11px system-ui, sans-serif");
    let _ = ctx.fill_text(
        &format!("footprint {}", bytes(d.footprint_bytes)),
        b.x + b.w - 4.0,
        py(d.footprint_bytes as f64) - 4.0,
    );
    ctx.set_fill_style_str("#5b6470");
    let _ = ctx.fill_text("0", b.x - 6.0, b.y + b.h);
}

#[component]
pub fn PlotCanvas(state: PageState, tab: Tab) -> impl IntoView {
    let canvas = NodeRef::<Canvas>::new();
    let hover = RwSignal::new(None::<(usize, f64, f64)>);
    let drag = StoredValue::new(None::<(f64, f64, Viewport, bool)>);
    let scene = Memo::new(move |_| scene(state, tab));
    let window = match tab {
        Tab::Arena => state.arena_window,
        Tab::Timeline => state.timeline_window,
    };
    let current = move || scene.with(|s| s.as_ref().map(|s| window.get().unwrap_or(s.fit)));

    Effect::new(move |_| {
        let (Some(el), Some(v)) = (canvas.get(), current()) else {
            return;
        };
        state.selected.track();
        scene.with(|s| {
            if let Some(s) = s {
                draw(&el, state, tab, s, v);
            }
        });
    });
    // Redraw on resize.
    let _ = leptos::prelude::window_event_listener(leptos::ev::resize, move |_| {
        if let (Some(el), Some(v)) = (
            canvas.get_untracked(),
            scene.with_untracked(|s| s.as_ref().map(|s| window.get_untracked().unwrap_or(s.fit))),
        ) {
            scene.with_untracked(|s| {
                if let Some(s) = s {
                    draw(&el, state, tab, s, v)
                }
            });
        }
    });

    let local = move |ev: &web_sys::MouseEvent| -> Option<(f64, f64, Area)> {
        let el = canvas.get_untracked()?;
        let r = el.get_bounding_client_rect();
        let (a, _) = areas(tab, r.width(), r.height());
        Some((
            f64::from(ev.client_x()) - r.left(),
            f64::from(ev.client_y()) - r.top(),
            a,
        ))
    };
    let viewport = move || {
        scene.with_untracked(|s| s.as_ref().map(|s| window.get_untracked().unwrap_or(s.fit)))
    };

    let on_wheel = move |ev: web_sys::WheelEvent| {
        ev.prevent_default();
        let (Some((x, y, a)), Some(v)) = (local(&ev), viewport()) else {
            return;
        };
        let factor = (-ev.delta_y() * 0.0015).exp();
        let fx = ((x - a.x) / a.w).clamp(0.0, 1.0);
        let fy = ((y - a.y) / a.h).clamp(0.0, 1.0);
        let fy = if tab == Tab::Arena { 1.0 - fy } else { fy };
        window.set(Some(v.zoom(factor, fx, fy, 1.0)));
    };
    let on_down = move |ev: web_sys::MouseEvent| {
        if let (Some((x, y, _)), Some(v)) = (local(&ev), viewport()) {
            drag.set_value(Some((x, y, v, false)));
        }
    };
    let on_move = move |ev: web_sys::MouseEvent| {
        let Some((x, y, a)) = local(&ev) else { return };
        if let Some((sx, sy, start, moved)) = drag.get_value() {
            let (dx, dy) = (x - sx, y - sy);
            if moved || dx.abs() + dy.abs() > 3.0 {
                let fy = if tab == Tab::Arena {
                    dy / a.h
                } else {
                    -dy / a.h
                };
                window.set(Some(start.pan(-dx / a.w, fy)));
                drag.set_value(Some((sx, sy, start, true)));
                hover.set(None);
                return;
            }
        }
        let Some(v) = viewport() else { return };
        let (wx, wy) = to_world(tab, a, v, x, y);
        let under = scene.with_untracked(|s| s.as_ref().and_then(|s| pick(&s.rects, wx, wy)));
        hover.set(under.map(|b| (b, x, y)));
    };
    let on_up = move |ev: web_sys::MouseEvent| {
        let clicked = matches!(drag.get_value(), Some((_, _, _, false)));
        drag.set_value(None);
        if !clicked {
            return;
        }
        let (Some((x, y, a)), Some(v)) = (local(&ev), viewport()) else {
            return;
        };
        let (wx, wy) = to_world(tab, a, v, x, y);
        let under = scene.with_untracked(|s| s.as_ref().and_then(|s| pick(&s.rects, wx, wy)));
        state.selected.set(under);
    };
    let on_leave = move |_| {
        hover.set(None);
        drag.set_value(None);
    };

    let testid = match tab {
        Tab::Arena => "arena-canvas",
        Tab::Timeline => "timeline-canvas",
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
            {move || {
                let (b, x, y) = hover.get()?;
                let a = state.analysis.get().filter(|a| b < a.model.buffers.len())?;
                Some(view! { <HoverCard analysis=a buffer=b x=x y=y /> })
            }}
        </div>
    }
}

/// The card under the cursor: what the buffer is, where and when it lives, who writes and reads it.
#[component]
fn HoverCard(
    analysis: std::sync::Arc<crate::analysis::Analysis>,
    buffer: usize,
    x: f64,
    y: f64,
) -> impl IntoView {
    let m = &analysis.model;
    let b = &m.buffers[buffer];
    let label = |p: u32| {
        m.position_labels
            .get(p as usize)
            .cloned()
            .unwrap_or_default()
    };
    let list = |steps: &[String]| {
        if steps.is_empty() {
            "none".to_string()
        } else if steps.len() > 6 {
            format!("{} and {} more", steps[..6].join(", "), steps.len() - 6)
        } else {
            steps.join(", ")
        }
    };
    let when = if b.always_live {
        "always live".to_string()
    } else {
        format!(
            "positions {}..={} ({} .. {})",
            b.first,
            b.last,
            label(b.first),
            label(b.last)
        )
    };
    let dtype = b
        .dtype
        .map_or_else(|| "-".to_string(), |d| d.name().to_string());
    view! {
        <div class="hover-card" data-testid="hover-card" style=format!("left: {}px; top: {}px", x + 14.0, y + 14.0)>
            <div class="name">{b.name.clone()}</div>
            <div class="muted">{format!("{} · {} · {}", b.tensor, b.kind.name(), dtype)}</div>
            <div>{format!("size {} ({} B)", bytes(b.size), b.size)}</div>
            <div>{format!("offset {} in pool {} · address {}", b.offset, b.pool, b.address)}</div>
            <div>{when}</div>
            <div>{format!("producers: {}", list(&b.producers))}</div>
            <div>{format!("consumers: {}", list(&b.consumers))}</div>
        </div>
    }
}
