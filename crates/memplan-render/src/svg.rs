//! SVG drawings of the views with plotters: what `memplan render` writes and what the web app
//! exports, from the same code.

use std::collections::HashSet;

use memplan_core::units::bytes;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::color::{ColorBy, Rgb, color_of, legend, series_color};
use crate::model::{OTHER_SITES, SiteSeries, ViewModel};
use crate::scene::{Viewport, arena_height, arena_rects, timeline_rows};

/// Why a drawing failed: plotters' error, which carries no more than its description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("drawing failed: {detail}")]
pub struct RenderError {
    pub detail: String,
}

fn err<E: std::fmt::Debug>(e: E) -> RenderError {
    RenderError {
        detail: format!("{e:?}"),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SvgOptions {
    pub width: u32,
    pub height: u32,
    pub color_by: ColorBy,
    /// Leave the always-live buffers out and scale to the arena.
    pub arena_only: bool,
}

impl Default for SvgOptions {
    fn default() -> Self {
        SvgOptions {
            width: 1200,
            height: 700,
            color_by: ColorBy::Kind,
            arena_only: false,
        }
    }
}

fn rgb(c: Rgb) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}

fn device_title(model: &ViewModel, device: usize, view: &str) -> String {
    let d = &model.devices[device];
    let title = if model.title.is_empty() {
        String::new()
    } else {
        format!("{} · ", model.title)
    };
    format!(
        "{title}{} · {view} · footprint {} · lower bound {}",
        d.id,
        bytes(d.footprint_bytes),
        bytes(d.lower_bound)
    )
}

/// The arena map of `device`: time (positions) across, addresses up, a rectangle per buffer,
/// pool boundaries as lines, a legend. `viewport` is the window shown (the whole arena when
/// `None`).
pub fn arena_svg(
    model: &ViewModel,
    device: usize,
    viewport: Option<Viewport>,
    options: SvgOptions,
) -> Result<String, RenderError> {
    let height = arena_height(model, device, options.arena_only) as f64;
    let v = viewport.unwrap_or_else(|| Viewport::fit(f64::from(model.positions), height));
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (options.width, options.height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = titled(root, &device_title(model, device, "arena map"))?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(80)
            .build_cartesian_2d(v.x0..v.x1, v.y0..v.y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("position")
            .y_desc("address")
            .y_label_formatter(&|y| bytes(y.max(0.0) as u64))
            .draw()
            .map_err(err)?;
        let rects: Vec<_> = arena_rects(model, device, options.arena_only)
            .into_iter()
            .filter(|r| v.shows(r))
            .collect();
        chart
            .draw_series(rects.iter().map(|r| {
                let c = rgb(color_of(&model.buffers[r.buffer], options.color_by));
                Rectangle::new(
                    [
                        (r.x0.max(v.x0), r.y0.max(v.y0)),
                        (r.x1.min(v.x1), r.y1.min(v.y1)),
                    ],
                    c.filled(),
                )
            }))
            .map_err(err)?;
        chart
            .draw_series(rects.iter().map(|r| {
                Rectangle::new(
                    [
                        (r.x0.max(v.x0), r.y0.max(v.y0)),
                        (r.x1.min(v.x1), r.y1.min(v.y1)),
                    ],
                    WHITE.stroke_width(1),
                )
            }))
            .map_err(err)?;
        let pools = &model.devices[device].pools;
        let mut entries = color_entries(model, options.color_by);
        for (k, p) in pools.iter().enumerate().skip(1) {
            if options.arena_only && p.role != memplan_core::PoolRole::Arena {
                continue;
            }
            let y = p.base as f64;
            chart
                .draw_series(LineSeries::new(
                    [(v.x0, y), (v.x1, y)],
                    BLACK.stroke_width(1),
                ))
                .map_err(err)?;
            entries.push((
                format!("pool {k} ({}) from {}", p.role.name(), bytes(p.base)),
                Swatch::Line(BLACK),
            ));
        }
        legend_box(&root, &entries, Corner::Right)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// How a legend entry is marked.
#[derive(Clone, Copy)]
enum Swatch {
    Fill(RGBColor),
    Line(RGBColor),
}

#[derive(Clone, Copy, PartialEq)]
enum Corner {
    Left,
    Right,
    /// At the area's left edge: a legend in an area of its own.
    Edge,
}

fn color_entries(model: &ViewModel, by: ColorBy) -> Vec<(String, Swatch)> {
    legend(model, by)
        .into_iter()
        .map(|(label, c)| (label, Swatch::Fill(rgb(c))))
        .collect()
}

/// A fixed-pitch estimate of a label's width, px: the layout must not depend on font metrics,
/// which differ between the browser and the CLI, so both draw the same bytes.
fn text_width(text: &str) -> i32 {
    text.chars().count() as i32 * 7
}

/// A legend in a top corner of `area`, laid out without measuring text.
fn legend_box<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, Swatch)],
    corner: Corner,
) -> Result<(), RenderError> {
    if entries.is_empty() {
        return Ok(());
    }
    let (width, _) = area.dim_in_pixel();
    let w = 34
        + entries
            .iter()
            .map(|(l, _)| text_width(l))
            .max()
            .unwrap_or(0);
    let h = 8 + 18 * entries.len() as i32;
    let x = match corner {
        Corner::Right => width as i32 - w - 110,
        Corner::Left => 100,
        Corner::Edge => 4,
    };
    let y = 24;
    area.draw(&Rectangle::new(
        [(x, y), (x + w, y + h)],
        WHITE.mix(0.9).filled(),
    ))
    .map_err(err)?;
    area.draw(&Rectangle::new([(x, y), (x + w, y + h)], BLACK.mix(0.3)))
        .map_err(err)?;
    for (k, (label, swatch)) in entries.iter().enumerate() {
        let cy = y + 13 + 18 * k as i32;
        match *swatch {
            Swatch::Fill(c) => area.draw(&Rectangle::new(
                [(x + 8, cy - 5), (x + 22, cy + 5)],
                c.filled(),
            )),
            Swatch::Line(c) => area.draw(&PathElement::new(
                [(x + 8, cy), (x + 22, cy)],
                c.stroke_width(2),
            )),
        }
        .map_err(err)?;
        let style = TextStyle::from(("sans-serif", 12)).pos(Pos::new(HPos::Left, VPos::Center));
        area.draw_text(label, &style, (x + 28, cy)).map_err(err)?;
    }
    Ok(())
}

/// Draws `title` in a fixed band at the top of `root` and returns the rest.
fn titled<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
) -> Result<DrawingArea<DB, Shift>, RenderError> {
    let (band, rest) = root.split_vertically(30);
    let style = TextStyle::from(("sans-serif", 15)).pos(Pos::new(HPos::Left, VPos::Center));
    band.draw_text(title, &style, (12, 15)).map_err(err)?;
    Ok(rest)
}

/// The live-span timeline of `device`: the memory-usage curve with the peak marked above, a bar
/// per buffer of `rows` (in that order: [`ViewModel::rows`] of `device`) below, the buffers live at
/// the peak drawn solid.
/// `window` is the span of positions shown (all when `None`).
pub fn timeline_svg(
    model: &ViewModel,
    device: usize,
    rows: &[usize],
    window: Option<(f64, f64)>,
    options: SvgOptions,
) -> Result<String, RenderError> {
    let (x0, x1) = window.unwrap_or((0.0, f64::from(model.positions.max(1))));
    let d = &model.devices[device];
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (options.width, options.height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = titled(root, &device_title(model, device, "live spans"))?;
        let (upper, lower) = root.split_vertically(options.height / 3);
        usage_chart(&upper, model, device, x0, x1, options.arena_only)?;
        let n = rows.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&lower)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(ROW_NAMES_PX)
            .build_cartesian_2d(x0..x1, n..0.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("position")
            .y_desc("buffers")
            .y_labels(0)
            .draw()
            .map_err(err)?;
        let at_peak: HashSet<usize> = d.live_at_peak.iter().copied().collect();
        let bars = timeline_rows(model, rows);
        let shown = |r: &&crate::scene::Rect| r.x1 > x0 && r.x0 < x1;
        chart
            .draw_series(bars.iter().filter(shown).map(|r| {
                let c = rgb(color_of(&model.buffers[r.buffer], options.color_by));
                let style = if at_peak.contains(&r.buffer) {
                    c.filled()
                } else {
                    c.mix(0.45).filled()
                };
                Rectangle::new(
                    [(r.x0.max(x0), r.y0 + 0.1), (r.x1.min(x1), r.y1 - 0.1)],
                    style,
                )
            }))
            .map_err(err)?;
        // Each row's name at its left, where rows are tall enough to read one (else every
        // k-th), cut to the label area.
        let (base_x, base_y) = lower.get_base_pixel();
        let row_px = (chart.backend_coord(&(x0, 1.0)).1 - chart.backend_coord(&(x0, 0.0)).1).max(1);
        let every = (12 / row_px + 1).max(1) as usize;
        let style = TextStyle::from(("sans-serif", 11)).pos(Pos::new(HPos::Right, VPos::Center));
        for (k, &b) in rows.iter().enumerate().step_by(every) {
            let (x, y) = chart.backend_coord(&(x0, k as f64 + 0.5));
            let name = model.buffers[b].tensor.display_name();
            let name =
                crate::label::fit(name, (ROW_NAMES_PX as usize - 12) / 6).unwrap_or_default();
            lower
                .draw_text(&name, &style, (x - base_x - 4, y - base_y))
                .map_err(err)?;
        }
        legend_box(
            &lower,
            &color_entries(model, options.color_by),
            Corner::Right,
        )?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// The width of the live spans' row names, pixels.
const ROW_NAMES_PX: u32 = 120;

fn usage_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    model: &ViewModel,
    device: usize,
    x0: f64,
    x1: f64,
    arena_only: bool,
) -> Result<(), RenderError> {
    let d = &model.devices[device];
    let floor = d.floor(arena_only);
    let footprint_bytes = d.shown_footprint(arena_only);
    let lower_bound = d.lower_bound.saturating_sub(floor);
    let top = (footprint_bytes.max(lower_bound) as f64 * 1.05).max(1.0);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(20)
        .y_label_area_size(80)
        .build_cartesian_2d(x0..x1, 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .y_desc("live bytes")
        .y_labels(4)
        .y_label_formatter(&|y| bytes(y.max(0.0) as u64))
        .draw()
        .map_err(err)?;
    let steps = d
        .curve
        .iter()
        .enumerate()
        .map(|(p, &v)| (p, v.saturating_sub(floor)))
        .flat_map(|(p, v)| [(p as f64, v as f64), (p as f64 + 1.0, v as f64)]);
    let blue = RGBColor(0x2f, 0x6f, 0xde);
    chart
        .draw_series(LineSeries::new(steps, blue.stroke_width(2)))
        .map_err(err)?;
    let footprint = footprint_bytes as f64;
    chart
        .draw_series(LineSeries::new(
            [(x0, footprint), (x1, footprint)],
            RED.stroke_width(1),
        ))
        .map_err(err)?;
    let mut entries = vec![
        ("live bytes".to_string(), Swatch::Line(blue)),
        (
            format!("footprint {}", bytes(footprint_bytes)),
            Swatch::Line(RED),
        ),
        (
            format!(
                "fragmentation {} (footprint - lower bound)",
                bytes(footprint_bytes.saturating_sub(lower_bound))
            ),
            Swatch::Fill(RGBColor(0xf6, 0xc8, 0xc4)),
        ),
    ];
    if let Some(p) = d.peak_position {
        let x = f64::from(p) + 0.5;
        chart
            .draw_series(LineSeries::new(
                [(x, 0.0), (x, lower_bound as f64)],
                BLACK.stroke_width(1),
            ))
            .map_err(err)?;
        let at = model.position_label(p).unwrap_or_default();
        entries.push((
            format!("lower bound {} (live at {at})", bytes(lower_bound)),
            Swatch::Line(BLACK),
        ));
    }
    legend_box(area, &entries, Corner::Left)
}

/// The live bytes over the schedule by allocation site, stacked (largest site at the bottom),
/// each site in its color with its bytes at the peak in the legend: which line of the user's
/// code holds the memory, and when.
pub fn sites_svg(series: &SiteSeries, width: u32, height: u32) -> Result<String, RenderError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let columns = series.positions.len();
        let rest_last = series.sites.last().is_some_and(|s| s == OTHER_SITES);
        // Cumulative sums from the bottom: layer k's top is the sum of sites 0..=k.
        let mut tops: Vec<Vec<u64>> = Vec::with_capacity(series.values.len());
        for (k, values) in series.values.iter().enumerate() {
            let below = if k == 0 { None } else { tops.get(k - 1) };
            tops.push(
                (0..columns)
                    .map(|c| values[c].saturating_add(below.map_or(0, |b| b[c])))
                    .collect(),
            );
        }
        let top = tops
            .last()
            .and_then(|t| t.iter().max())
            .copied()
            .unwrap_or(1)
            .max(1) as f64
            * 1.05;
        let x_end = series.positions.last().map_or(1.0, |&p| f64::from(p) + 1.0);
        let legend_width = 300.min(width / 3);
        let (plot, legend) = root.split_horizontally(width.saturating_sub(legend_width));
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..x_end, 0.0..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("position")
            .y_desc("live bytes")
            .x_labels(6)
            .y_labels(5)
            .x_label_formatter(&|x| format!("{}", x.max(0.0) as u64))
            .y_label_formatter(&|y| bytes(y.max(0.0) as u64))
            .draw()
            .map_err(err)?;
        for (k, layer) in tops.iter().enumerate().rev() {
            let color = rgb(series_color(k, series.sites.len(), rest_last));
            let points =
                series.positions.iter().zip(layer).flat_map(|(&p, &v)| {
                    [(f64::from(p), v as f64), (f64::from(p) + 1.0, v as f64)]
                });
            chart
                .draw_series(AreaSeries::new(points, 0.0, color.mix(0.85)).border_style(color))
                .map_err(err)?;
        }
        let entries: Vec<(String, Swatch)> = series
            .sites
            .iter()
            .zip(&series.at_peak)
            .enumerate()
            .map(|(k, (site, &b))| {
                let color = rgb(series_color(k, series.sites.len(), rest_last));
                let site: String = if site.chars().count() > 40 {
                    site.chars().take(39).chain(['…']).collect()
                } else {
                    site.clone()
                };
                (format!("{} · {site}", bytes(b)), Swatch::Fill(color))
            })
            .collect();
        legend_box(&legend, &entries, Corner::Edge)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RowOrder;

    fn example() -> ViewModel {
        crate::model::tests::model_of(include_str!("../../../static/examples/mlp-training.json"))
    }

    #[test]
    fn the_arena_svg_draws_a_rectangle_per_buffer_and_the_legend() {
        let m = example();
        let svg = arena_svg(&m, 0, None, SvgOptions::default()).unwrap();
        assert!(svg.starts_with("<svg"));
        let filled = svg.matches("<rect").count();
        // Background + a fill and an outline per buffer + legend swatches and frame.
        assert!(
            filled > 2 * m.buffers.len(),
            "{filled} rects for {} buffers",
            m.buffers.len()
        );
        assert!(svg.contains("arena map"));
        assert!(
            svg.contains("intermediate") && svg.contains("param"),
            "legend entries"
        );
    }

    #[test]
    fn the_timeline_svg_marks_the_peak() {
        let m = example();
        let rows = m.rows(0, "", RowOrder::Start, false);
        let svg = timeline_svg(&m, 0, &rows, None, SvgOptions::default()).unwrap();
        assert!(
            svg.contains("lower bound") && svg.contains("(live at "),
            "no peak marker"
        );
        assert!(svg.contains("footprint"));
        // Each row named at its left, where the rows are tall enough to read one.
        let tall = SvgOptions {
            height: 1600,
            ..SvgOptions::default()
        };
        let named = timeline_svg(&m, 0, &rows, None, tall).unwrap();
        for &b in &rows {
            let name = m.buffers[b].tensor.display_name();
            assert!(named.contains(&format!(">\n{name}\n</text>")), "{name}");
        }
        assert!(svg.contains(&format!(
            ">\n{}\n</text>",
            m.buffers[rows[0]].tensor.display_name()
        )));
        // Same inputs, same bytes.
        assert_eq!(
            svg,
            timeline_svg(&m, 0, &rows, None, SvgOptions::default()).unwrap()
        );
    }

    #[test]
    fn names_are_escaped_in_svg() {
        let mut m = example();
        m.title = "<script>alert(1)</script>".into();
        let svg = arena_svg(&m, 0, None, SvgOptions::default()).unwrap();
        assert!(!svg.contains("<script>"), "unescaped title in SVG");
    }
}

/// The sweep chart's margin and the width of each of its two value axes, pixels.
const SWEEP_MARGIN: u32 = 12;
const SWEEP_AXIS: u32 = 80;
/// The right axis's ticks carry a unit (`500.00 MFLOPs`): a little wider.
const SWEEP_RIGHT_AXIS: u32 = 96;
/// The band above the plot that holds the legend (two rows, three with the given order's
/// front), so it never covers a curve.
const SWEEP_LEGEND: u32 = 40;
const SWEEP_LEGEND_ROW: u32 = 18;

/// The targets a sweep chart spans: the least and the greatest of its points and of the given
/// order's (widened when they are one).
fn sweep_span(
    points: &[memplan_core::remat::SweepPoint],
    given: &[memplan_core::remat::SweepPoint],
) -> (f64, f64) {
    let (lo, hi) = points
        .iter()
        .chain(given)
        .fold((u64::MAX, 0), |(lo, hi), p| {
            (lo.min(p.target_bytes), hi.max(p.target_bytes))
        });
    if lo >= hi {
        (lo as f64 * 0.95, (hi as f64 * 1.05).max(1.0))
    } else {
        (lo as f64, hi as f64)
    }
}

/// The point of [`sweep_svg`]'s chart (drawn `width` wide) nearest to `x` pixels from its left
/// edge, by budget: what a click on the chart picks.
pub fn sweep_point_at(
    points: &[memplan_core::remat::SweepPoint],
    given: &[memplan_core::remat::SweepPoint],
    width: u32,
    x: f64,
) -> Option<usize> {
    let (x0, x1) = sweep_span(points, given);
    let left = f64::from(SWEEP_MARGIN + SWEEP_AXIS);
    let right = f64::from(width.saturating_sub(SWEEP_MARGIN + SWEEP_RIGHT_AXIS)).max(left + 1.0);
    let budget = x0 + (x - left) / (right - left) * (x1 - x0);
    (0..points.len()).min_by(|&a, &b| {
        let d = |k: usize| (points[k].target_bytes as f64 - budget).abs();
        d(a).total_cmp(&d(b))
    })
}

/// A budget sweep as a chart: per budget, the footprint fitted (left axis) and its recompute
/// cost (right axis), Pareto points filled, and the exhaustive optimum's cost dashed where it
/// was computed. What `memplan sweep` tabulates, drawn. Under a reordered schedule, `given` is
/// the same sweep under the given order, whose footprint is drawn dashed beside this one's. The
/// legend sits in a band above the plot; costs read in the dump's `cost_unit` where it names
/// one.
pub fn sweep_svg(
    points: &[memplan_core::remat::SweepPoint],
    given: &[memplan_core::remat::SweepPoint],
    cost_unit: Option<&str>,
    width: u32,
    height: u32,
) -> Result<String, RenderError> {
    let mut svg = String::new();
    {
        let whole = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        whole.fill(&WHITE).map_err(err)?;
        let legend = SWEEP_LEGEND
            + if given.is_empty() {
                0
            } else {
                SWEEP_LEGEND_ROW
            };
        let (band, root) = whole.split_vertically(legend);
        let (x0, x1) = sweep_span(points, given);
        let top = (points.iter().chain(given))
            .map(|p| p.footprint_bytes)
            .max()
            .unwrap_or(1) as f64
            * 1.08;
        let cost_top = points
            .iter()
            .flat_map(|p| [Some(p.recompute_cost), p.exhaustive_cost])
            .flatten()
            .max()
            .unwrap_or(1)
            .max(1) as f64
            * 1.08;
        let mut chart = ChartBuilder::on(&root)
            .margin(SWEEP_MARGIN)
            .x_label_area_size(36)
            .y_label_area_size(SWEEP_AXIS)
            .right_y_label_area_size(SWEEP_RIGHT_AXIS)
            .build_cartesian_2d(x0..x1, 0.0..top.max(1.0))
            .map_err(err)?
            .set_secondary_coord(x0..x1, 0.0..cost_top);
        chart
            .configure_mesh()
            .x_desc("target")
            .y_desc("footprint")
            .x_labels(6)
            .y_labels(5)
            .x_label_formatter(&|x| bytes(x.max(0.0) as u64))
            .y_label_formatter(&|y| bytes(y.max(0.0) as u64))
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        // The right axis is named by the legend; its ticks carry the unit.
        chart
            .configure_secondary_axes()
            .y_labels(5)
            .y_label_formatter(&|c| memplan_core::units::work(c.max(0.0) as u64, cost_unit))
            .draw()
            .map_err(err)?;
        let blue = RGBColor(0x2f, 0x6f, 0xde);
        let orange = RGBColor(0xe0, 0x7b, 0x1a);
        let gray = RGBColor(0x6b, 0x72, 0x80);
        sweep_legend(
            &band,
            width,
            points.iter().any(|p| p.exhaustive_cost.is_some()),
            !given.is_empty(),
        )?;
        let xy = |p: &memplan_core::remat::SweepPoint, y: u64| (p.target_bytes as f64, y as f64);
        if !given.is_empty() {
            chart
                .draw_series(DashedLineSeries::new(
                    given.iter().map(|p| xy(p, p.footprint_bytes)),
                    5,
                    3,
                    gray.stroke_width(1),
                ))
                .map_err(err)?;
        }
        chart
            .draw_series(LineSeries::new(
                points.iter().map(|p| xy(p, p.footprint_bytes)),
                blue.stroke_width(2),
            ))
            .map_err(err)?;
        chart
            .draw_series(points.iter().map(|p| {
                let style = if p.pareto {
                    blue.filled()
                } else {
                    WHITE.filled()
                };
                Circle::new(xy(p, p.footprint_bytes), 4, style)
            }))
            .map_err(err)?;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|p| Circle::new(xy(p, p.footprint_bytes), 4, blue.stroke_width(1))),
            )
            .map_err(err)?;
        chart
            .draw_secondary_series(LineSeries::new(
                points.iter().map(|p| xy(p, p.recompute_cost)),
                orange.stroke_width(2),
            ))
            .map_err(err)?;
        let exhaustive: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| Some(xy(p, p.exhaustive_cost?)))
            .collect();
        if !exhaustive.is_empty() {
            chart
                .draw_secondary_series(DashedLineSeries::new(
                    exhaustive,
                    6,
                    4,
                    gray.stroke_width(2),
                ))
                .map_err(err)?;
        }
        whole.present().map_err(err)?;
    }
    Ok(svg)
}

/// The sweep chart's legend, in its band: two rows of two entries at fixed columns (the SVG
/// layout never depends on font metrics).
fn sweep_legend(
    band: &DrawingArea<SVGBackend<'_>, Shift>,
    width: u32,
    exhaustive: bool,
    given: bool,
) -> Result<(), RenderError> {
    let blue = RGBColor(0x2f, 0x6f, 0xde);
    let orange = RGBColor(0xe0, 0x7b, 0x1a);
    let gray = RGBColor(0x6b, 0x72, 0x80);
    let font = ("sans-serif", 12).into_font().color(&BLACK);
    let columns = [
        (SWEEP_MARGIN + SWEEP_AXIS) as i32,
        (width / 2 + SWEEP_MARGIN) as i32,
    ];
    let rows = [12, 30, 48];
    let line = |x: i32, y: i32, style: ShapeStyle| PathElement::new([(x, y), (x + 18, y)], style);
    let text_at = |x: i32, y: i32, t: &str| {
        Text::new(
            t.to_string(),
            (x + 24, y),
            font.clone().pos(Pos::new(HPos::Left, VPos::Center)),
        )
    };
    // A dashed sample: three short strokes.
    let dashed = |x: i32, y: i32, stroke: u32| -> Result<(), RenderError> {
        for k in 0..3 {
            let x = x + k * 7;
            band.draw(&PathElement::new(
                [(x, y), (x + 4, y)],
                gray.stroke_width(stroke),
            ))
            .map_err(err)?;
        }
        Ok(())
    };
    let (a, b) = (columns[0], columns[1]);
    band.draw(&line(a, rows[0], blue.stroke_width(2)))
        .map_err(err)?;
    band.draw(&text_at(a, rows[0], "footprint")).map_err(err)?;
    band.draw(&Circle::new((b + 9, rows[0]), 4, blue.filled()))
        .map_err(err)?;
    band.draw(&text_at(b, rows[0], "Pareto point (filled)"))
        .map_err(err)?;
    band.draw(&line(a, rows[1], orange.stroke_width(2)))
        .map_err(err)?;
    band.draw(&text_at(a, rows[1], "recompute cost (greedy)"))
        .map_err(err)?;
    if exhaustive {
        dashed(b, rows[1], 2)?;
        band.draw(&text_at(b, rows[1], "recompute cost (exhaustive optimum)"))
            .map_err(err)?;
    }
    if given {
        dashed(a, rows[2], 1)?;
        band.draw(&text_at(a, rows[2], "footprint under the given order"))
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod sweep_tests {
    use super::*;
    use memplan_core::remat::SweepPoint;

    fn point(budget: u64, footprint: u64, cost: u64, pareto: bool) -> SweepPoint {
        SweepPoint {
            target_bytes: budget,
            footprint_bytes: footprint,
            recompute_cost: cost,
            flips: Vec::new(),
            within_target: footprint <= budget,
            pareto,
            exhaustive_cost: Some(cost / 2),
        }
    }

    #[test]
    fn a_sweep_draws_each_point_and_marks_the_frontier() {
        let points = [
            point(100, 100, 50, true),
            point(200, 180, 10, true),
            point(300, 300, 0, true),
            point(400, 300, 5, false),
        ];
        let svg = sweep_svg(&points, &[], None, 600, 300).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        for label in ["footprint", "recompute cost (greedy)", "exhaustive optimum"] {
            assert!(svg.contains(label), "{label}");
        }
        // The legend is drawn in the band above the plot, never over a curve.
        for label in [
            "Pareto point (filled)",
            "recompute cost (exhaustive optimum)",
        ] {
            let at = svg.find(label).unwrap();
            let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
            let y: f64 = tag
                .split("y=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(y < f64::from(SWEEP_LEGEND), "{label} at y={y}");
        }
        // Two circles per point (fill, outline) and one in the legend.
        assert_eq!(svg.matches("<circle").count(), 2 * points.len() + 1);
        // A click picks the nearest budget: the ends of the plot pick the ends.
        assert_eq!(sweep_point_at(&points, &[], 600, 92.0), Some(0));
        assert_eq!(sweep_point_at(&points, &[], 600, 492.0), Some(3));
        assert_eq!(
            sweep_point_at(&points, &[], 600, 92.0 + 400.0 / 3.0),
            Some(1)
        );
        assert_eq!(sweep_point_at(&[], &[], 600, 100.0), None);
        // A lone point: its fill, its outline and the legend's; costs in the dump's unit.
        let lone = sweep_svg(&points[..1], &[], Some("FLOPs"), 600, 300).unwrap();
        assert_eq!(lone.matches("<circle").count(), 3);
        assert!(lone.contains("FLOPs"), "{lone}");
        // Under a reordered schedule, the given order's footprint too, named in a third legend
        // row; no points of its own.
        let given = [point(100, 120, 50, true), point(300, 260, 0, true)];
        let both = sweep_svg(&points, &given, None, 600, 300).unwrap();
        assert!(both.contains("footprint under the given order"));
        assert!(!svg.contains("footprint under the given order"));
        assert_eq!(both.matches("<circle").count(), 2 * points.len() + 1);
        assert!(both.matches("<polyline").count() > svg.matches("<polyline").count());
    }
}
