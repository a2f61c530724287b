//! SVG drawings of the views with plotters: what `memplan render` writes and what the web app
//! exports, from the same code.

use std::collections::HashSet;

use memplan_formats::human::bytes;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::color::{ColorBy, Rgb, color_of, legend};
use crate::model::ViewModel;
use crate::scene::{Viewport, arena_height, arena_rects, timeline_rows};

/// Why a drawing failed (plotters' error, as text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderError(pub String);

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "drawing failed: {}", self.0)
    }
}

impl std::error::Error for RenderError {}

fn err<E: std::fmt::Debug>(e: E) -> RenderError {
    RenderError(format!("{e:?}"))
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SvgOptions {
    pub width: u32,
    pub height: u32,
    pub color_by: ColorBy,
}

impl Default for SvgOptions {
    fn default() -> Self {
        SvgOptions {
            width: 1200,
            height: 700,
            color_by: ColorBy::Kind,
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
        "{title}{} · {view} · peak {} · lower bound {}",
        d.id,
        bytes(d.peak_bytes),
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
    let height = arena_height(model, device) as f64;
    let v = viewport.unwrap_or_else(|| Viewport::fit(f64::from(model.positions), height));
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (options.width, options.height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(device_title(model, device, "arena map"), ("sans-serif", 16))
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
        let rects: Vec<_> = arena_rects(model, device)
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
        if pools.len() > 1 {
            for (k, p) in pools.iter().enumerate().skip(1) {
                let y = p.base as f64;
                chart
                    .draw_series(LineSeries::new(
                        [(v.x0, y), (v.x1, y)],
                        BLACK.stroke_width(1),
                    ))
                    .map_err(err)?
                    .label(format!(
                        "pool {k} ({}) from {}",
                        p.role.name(),
                        bytes(p.base)
                    ))
                    .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], BLACK));
            }
        }
        draw_legend(&mut chart, model, options.color_by)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn draw_legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    model: &ViewModel,
    by: ColorBy,
) -> Result<(), RenderError> {
    for (label, color) in legend(model, by) {
        let c = rgb(color);
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(err)
}

/// The live-span timeline of `device`: the memory-usage curve with the peak marked above, a bar
/// per buffer of `rows` (in that order) below, the buffers live at the peak outlined.
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
        let root = root
            .titled(
                &device_title(model, device, "live spans"),
                ("sans-serif", 16),
            )
            .map_err(err)?;
        let (upper, lower) = root.split_vertically(options.height / 3);
        usage_chart(&upper, model, device, x0, x1)?;
        let rows_here: Vec<usize> = rows
            .iter()
            .copied()
            .filter(|&b| model.buffers[b].device == device)
            .collect();
        let n = rows_here.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&lower)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(80)
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
        let bars = timeline_rows(model, &rows_here);
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
        draw_legend(&mut chart, model, options.color_by)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

fn usage_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    model: &ViewModel,
    device: usize,
    x0: f64,
    x1: f64,
) -> Result<(), RenderError> {
    let d = &model.devices[device];
    let top = (d.peak_bytes.max(d.lower_bound) as f64 * 1.05).max(1.0);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(20)
        .y_label_area_size(80)
        .build_cartesian_2d(x0..x1, 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("live bytes")
        .y_labels(4)
        .y_label_formatter(&|y| bytes(y.max(0.0) as u64))
        .draw()
        .map_err(err)?;
    let steps = d
        .curve
        .iter()
        .enumerate()
        .flat_map(|(p, &v)| [(p as f64, v as f64), (p as f64 + 1.0, v as f64)]);
    chart
        .draw_series(LineSeries::new(
            steps,
            RGBColor(0x2f, 0x6f, 0xde).stroke_width(2),
        ))
        .map_err(err)?
        .label("live bytes")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], RGBColor(0x2f, 0x6f, 0xde)));
    let footprint = d.peak_bytes as f64;
    chart
        .draw_series(LineSeries::new(
            [(x0, footprint), (x1, footprint)],
            RED.stroke_width(1),
        ))
        .map_err(err)?
        .label(format!("footprint {}", bytes(d.peak_bytes)))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], RED));
    if let Some(p) = d.peak_position {
        let x = f64::from(p) + 0.5;
        chart
            .draw_series(LineSeries::new(
                [(x, 0.0), (x, d.lower_bound as f64)],
                BLACK.stroke_width(1),
            ))
            .map_err(err)?
            .label(format!(
                "peak at {} ({})",
                model
                    .position_labels
                    .get(p as usize)
                    .map_or("", String::as_str),
                bytes(d.lower_bound)
            ))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], BLACK));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RowOrder;

    fn example() -> ViewModel {
        let graph = memplan_formats::json::parse(include_str!(
            "../../../static/examples/mlp-training.json"
        ))
        .unwrap();
        let resolved = graph.resolve().unwrap();
        let liveness = memplan_core::analyze(&graph, &resolved);
        let plan =
            memplan_core::plan(&liveness.problem, &memplan_core::PlanOptions::default()).unwrap();
        ViewModel::new(&graph, &resolved, &liveness, &plan)
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
        let mut rows = m.search("");
        RowOrder::Start.sort(&m, &mut rows);
        let svg = timeline_svg(&m, 0, &rows, None, SvgOptions::default()).unwrap();
        assert!(svg.contains("peak at"), "no peak marker");
        assert!(svg.contains("footprint"));
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
