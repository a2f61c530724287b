//! The geometry of the views, in world coordinates (x: positions, y: bytes or rows), and the
//! viewport that maps it to pixels. Shared by the canvas and the SVG so they draw the same.

use crate::model::ViewModel;

/// A buffer's rectangle: `x0..x1` positions (its live interval, end exclusive), `y0..y1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    pub buffer: usize,
    pub x0: f64,
    pub x1: f64,
    pub y0: f64,
    pub y1: f64,
}

impl Rect {
    /// Buffer `buffer` (of `model`) over its live interval, from `y0` to `y1`.
    fn spanning(model: &ViewModel, buffer: usize, y0: f64, y1: f64) -> Rect {
        let b = &model.buffers[buffer];
        Rect {
            buffer,
            x0: f64::from(b.first),
            x1: f64::from(b.last) + 1.0,
            y0,
            y1,
        }
    }

    pub fn contains(&self, x: f64, y: f64) -> bool {
        self.x0 <= x && x < self.x1 && self.y0 <= y && y < self.y1
    }

    pub fn area(&self) -> f64 {
        (self.x1 - self.x0) * (self.y1 - self.y0)
    }
}

/// The arena map of `device`: each buffer over its live interval and its bytes, pools end to end
/// (arena pools first, then static ones). `arena_only` leaves the always-live buffers out: the
/// arena is what the plan decides.
pub fn arena_rects(model: &ViewModel, device: usize, arena_only: bool) -> Vec<Rect> {
    model
        .buffers
        .iter()
        .enumerate()
        .filter(|(_, b)| b.device == device && !(arena_only && b.always_live))
        .filter_map(|(i, b)| {
            let (address, occupied) = (model.address(b) as f64, b.occupied());
            (occupied > 0).then(|| Rect::spanning(model, i, address, address + occupied as f64))
        })
        .collect()
}

/// The source allocator's own layout of a device: each allocation at its real address over its
/// live interval.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceLayout {
    pub rects: Vec<Rect>,
    /// The bytes drawn: the spans end to end.
    pub height: u64,
    /// Each span's first address and where it starts in the drawing.
    pub spans: Vec<(u64, u64)>,
}

/// The source's own layout of `device`: where its allocator put each allocation (a PyTorch
/// snapshot or trace), or the plan the dump came with (XLA's offsets). The address space is
/// compressed to the spans in use (the segments the dump lists and the ranges its
/// allocations cover, merged) laid end to end in address order, so the gaps between segments
/// take no room and an allocation keeps its offset in its span.
pub fn source_layout(model: &ViewModel, device: usize) -> Option<SourceLayout> {
    let placed: Vec<(usize, u64, u64)> = (model.buffers.iter().enumerate())
        .filter(|(_, b)| b.device == device && b.size > 0)
        .filter_map(|(i, b)| Some((i, b.source_address()?, b.size)))
        .collect();
    if placed.is_empty() {
        return None;
    }
    let segments = model.allocator.get(device).and_then(Option::as_ref);
    let mut ranges: Vec<(u64, u64)> = (placed.iter())
        .map(|&(_, a, size)| (a, a.saturating_add(size)))
        .chain(segments.into_iter().flat_map(|r| {
            (r.segments.iter()).map(|s| (s.address, s.address.saturating_add(s.bytes)))
        }))
        .collect();
    ranges.sort_unstable();
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for (start, end) in ranges {
        match spans.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => spans.push((start, end)),
        }
    }
    let mut at = 0u64;
    let based: Vec<(u64, u64)> = (spans.iter())
        .map(|&(start, end)| {
            let base = at;
            at = at.saturating_add(end - start);
            (start, base)
        })
        .collect();
    let rects = placed
        .iter()
        .map(|&(i, address, size)| {
            let k = based.partition_point(|s| s.0 <= address) - 1;
            let y = based[k].1 + (address - based[k].0);
            Rect::spanning(model, i, y as f64, y.saturating_add(size) as f64)
        })
        .collect();
    Some(SourceLayout {
        rects,
        height: at,
        spans: based,
    })
}

/// The bytes of `device`'s memory: its pools end to end, or its arena pools alone.
pub fn arena_height(model: &ViewModel, device: usize, arena_only: bool) -> u64 {
    model.devices.get(device).map_or(0, |d| {
        if arena_only {
            d.arena_bytes
        } else {
            d.footprint_bytes
        }
    })
}

/// At most about `most` positions in `x0..x1` to label, as unique integers on a step of 1, 2 or
/// 5 times a power of ten (a label names the position whose column it sits under).
pub fn position_ticks(x0: f64, x1: f64, most: usize) -> Vec<u32> {
    if !(x0.is_finite() && x1.is_finite()) || x1 <= x0 || most == 0 {
        return Vec::new();
    }
    let raw = ((x1 - x0) / most as f64).max(1.0);
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * power)
        .max(1.0);
    let first = (x0.max(0.0) / step).ceil() * step;
    let mut ticks = Vec::new();
    let mut t = first;
    while t < x1 && ticks.len() <= most * 2 {
        ticks.push(t as u32);
        t += step;
    }
    ticks
}

/// The vertices of the line that draws a step curve (`values[p]` over positions `[p, p + 1)`)
/// through `x0..x1` at `columns` pixels, as `(position, value)`, left to right.
///
/// Where a pixel spans at most two positions, every step is drawn: its two corners. Past that
/// the visible positions split into `columns` runs, and each run gives its first value, its
/// lowest and highest in the order they come (at the run's middle) and its last: the line
/// still reaches every run's extremes, so no peak of the curve is lost however far it is
/// zoomed out, and a curve of a million positions is drawn with a few thousand vertices.
pub fn step_vertices(values: &[u64], x0: f64, x1: f64, columns: usize) -> Vec<(f64, u64)> {
    let n = values.len();
    let lo = (x0.floor().max(0.0) as usize).min(n);
    let hi = (x1.ceil().max(0.0) as usize).clamp(lo, n);
    let shown = &values[lo..hi];
    let columns = columns.max(1);
    if shown.len() <= 2 * columns {
        return (shown.iter().enumerate())
            .flat_map(|(k, &v)| [((lo + k) as f64, v), ((lo + k + 1) as f64, v)])
            .collect();
    }
    let mut out = Vec::with_capacity(4 * columns);
    for c in 0..columns {
        let (a, b) = (c * shown.len() / columns, (c + 1) * shown.len() / columns);
        let run = &shown[a..b];
        let (mut low, mut high) = (0, 0);
        for (k, &v) in run.iter().enumerate() {
            if v < run[low] {
                low = k;
            }
            if v > run[high] {
                high = k;
            }
        }
        let middle = (lo + a) as f64 + run.len() as f64 / 2.0;
        let (first, second) = (low.min(high), low.max(high));
        out.push(((lo + a) as f64, run[0]));
        out.push((middle, run[first]));
        out.push((middle, run[second]));
        out.push(((lo + b) as f64, run[run.len() - 1]));
    }
    out
}

/// Timeline rows: row `k` shows buffer `rows[k]` over its live interval, at `y = k..k+1`.
pub fn timeline_rows(model: &ViewModel, rows: &[usize]) -> Vec<Rect> {
    rows.iter()
        .enumerate()
        .map(|(k, &i)| Rect::spanning(model, i, k as f64, k as f64 + 1.0))
        .collect()
}

/// The rectangle under `(x, y)` with the smallest area (so a small buffer drawn over a large
/// one can be picked), ties by canonical order.
pub fn pick(rects: &[Rect], x: f64, y: f64) -> Option<usize> {
    rects
        .iter()
        .filter(|r| r.contains(x, y))
        .min_by(|a, b| a.area().total_cmp(&b.area()).then(a.buffer.cmp(&b.buffer)))
        .map(|r| r.buffer)
}

/// The world window shown: `x0..x1` by `y0..y1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Viewport {
    pub x0: f64,
    pub x1: f64,
    pub y0: f64,
    pub y1: f64,
}

impl Viewport {
    /// Reads `x0,x1,y0,y1` (finite, x0 < x1, y0 < y1), as a link's `?zoom=` and
    /// `memplan render --window` spell a window.
    pub fn parse(s: &str) -> Option<Viewport> {
        let v: Vec<f64> = s
            .split(',')
            .map(|x| x.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .ok()?;
        match v[..] {
            [x0, x1, y0, y1] if x0 < x1 && y0 < y1 && v.iter().all(|x| x.is_finite()) => {
                Some(Viewport { x0, x1, y0, y1 })
            }
            _ => None,
        }
    }

    /// The whole world `0..width` by `0..height` (never empty).
    pub fn fit(width: f64, height: f64) -> Self {
        Viewport {
            x0: 0.0,
            x1: width.max(1.0),
            y0: 0.0,
            y1: height.max(1.0),
        }
    }

    /// Zooms by `factor` (> 1 zooms in) keeping the world point at fractions `(fx, fy)` of the
    /// window where it is (zoom to the cursor). Never narrower than `min_span` in x.
    pub fn zoom(self, factor: f64, fx: f64, fy: f64, min_span: f64) -> Self {
        let (w, h) = (self.x1 - self.x0, self.y1 - self.y0);
        let (nw, nh) = (
            (w / factor).max(min_span),
            (h / factor).max(min_span * h / w),
        );
        let (cx, cy) = (self.x0 + fx * w, self.y0 + fy * h);
        Viewport {
            x0: cx - fx * nw,
            x1: cx - fx * nw + nw,
            y0: cy - fy * nh,
            y1: cy - fy * nh + nh,
        }
    }

    /// Zooms in time only by `factor`, keeping the position at fraction `fx` of the window
    /// where it is; never narrower than `min_span`.
    pub fn zoom_x(self, factor: f64, fx: f64, min_span: f64) -> Self {
        let w = self.x1 - self.x0;
        let nw = (w / factor).max(min_span);
        let cx = self.x0 + fx * w;
        Viewport {
            x0: cx - fx * nw,
            x1: cx - fx * nw + nw,
            ..self
        }
    }

    /// Moves by fractions of the window.
    pub fn pan(self, fx: f64, fy: f64) -> Self {
        let (dx, dy) = ((self.x1 - self.x0) * fx, (self.y1 - self.y0) * fy);
        Viewport {
            x0: self.x0 + dx,
            x1: self.x1 + dx,
            y0: self.y0 + dy,
            y1: self.y1 + dy,
        }
    }

    /// Whether a rectangle is at least partly inside.
    pub fn shows(&self, r: &Rect) -> bool {
        r.x1 > self.x0 && r.x0 < self.x1 && r.y1 > self.y0 && r.y0 < self.y1
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    #[test]
    fn a_step_curve_with_room_is_drawn_step_by_step() {
        let v = super::step_vertices(&[3, 5, 1, 4], 1.0, 3.0, 10);
        assert_eq!(v, vec![(1.0, 5), (2.0, 5), (2.0, 1), (3.0, 1)]);
    }

    proptest! {
        /// Zoomed out, each run of positions a pixel covers is drawn by its extremes: the
        /// vertices reach the highest and lowest value of every run, never a value the run
        /// does not have, left to right; and there are at most four a pixel.
        #[test]
        fn a_dense_step_curve_keeps_every_runs_extremes(
            values in proptest::collection::vec(0u64..1000, 0..400),
            columns in 1usize..40,
        ) {
            let n = values.len();
            let v = super::step_vertices(&values, 0.0, n as f64, columns);
            prop_assert!(v.windows(2).all(|w| w[0].0 <= w[1].0));
            if n <= 2 * columns {
                prop_assert_eq!(v.len(), 2 * n);
                return Ok(());
            }
            prop_assert_eq!(v.len(), 4 * columns);
            for c in 0..columns {
                let (a, b) = (c * n / columns, (c + 1) * n / columns);
                let run = &values[a..b];
                let drawn: Vec<u64> = v[4 * c..4 * c + 4].iter().map(|p| p.1).collect();
                prop_assert!(drawn.iter().all(|d| run.contains(d)));
                prop_assert_eq!(drawn.iter().max(), run.iter().max());
                prop_assert_eq!(drawn.iter().min(), run.iter().min());
                prop_assert_eq!((v[4 * c].0, v[4 * c + 3].0), (a as f64, b as f64));
            }
        }
    }

    #[test]
    fn ticks_are_unique_integers_on_a_round_step() {
        // A window of 5 positions on a wide axis: each tick once, not "0 0 1 1 2".
        assert_eq!(super::position_ticks(0.0, 5.0, 8), vec![0, 1, 2, 3, 4]);
        assert_eq!(super::position_ticks(0.0, 23.0, 8), vec![0, 5, 10, 15, 20]);
        assert_eq!(super::position_ticks(3.5, 4.2, 8), vec![4]);
        let t = super::position_ticks(0.0, 1_000_000.0, 8);
        assert!(t.len() <= 8 && t.windows(2).all(|w| w[0] < w[1]));
        assert!(super::position_ticks(5.0, 5.0, 8).is_empty());
    }

    #[test]
    fn zooming_in_time_keeps_the_rows() {
        let v = super::Viewport::fit(100.0, 50.0).zoom_x(2.0, 0.5, 1.0);
        assert_eq!((v.x0, v.x1, v.y0, v.y1), (25.0, 75.0, 0.0, 50.0));
    }

    use super::*;

    #[test]
    fn pick_prefers_the_smallest_rectangle() {
        let rects = [
            Rect {
                buffer: 0,
                x0: 0.0,
                x1: 10.0,
                y0: 0.0,
                y1: 10.0,
            },
            Rect {
                buffer: 1,
                x0: 2.0,
                x1: 3.0,
                y0: 2.0,
                y1: 3.0,
            },
        ];
        assert_eq!(pick(&rects, 2.5, 2.5), Some(1));
        assert_eq!(pick(&rects, 5.0, 5.0), Some(0));
        assert_eq!(pick(&rects, 11.0, 5.0), None);
    }

    #[test]
    fn zoom_keeps_the_cursor_point_and_pan_moves_by_fractions() {
        let v = Viewport::fit(100.0, 1000.0);
        let z = v.zoom(2.0, 0.25, 0.5, 1.0);
        assert_eq!(
            (z.x0 + 0.25 * (z.x1 - z.x0), z.y0 + 0.5 * (z.y1 - z.y0)),
            (25.0, 500.0)
        );
        assert_eq!(z.x1 - z.x0, 50.0);
        let p = z.pan(0.5, 0.0);
        assert_eq!(p.x0 - z.x0, 25.0);
        assert!(p.shows(&Rect {
            buffer: 0,
            x0: 60.0,
            x1: 61.0,
            y0: 300.0,
            y1: 400.0
        }));
    }
}
