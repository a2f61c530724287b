//! Colors of buffers, by kind or by dtype, the same on the canvas and in SVG.

use memplan_core::DType;
use memplan_core::graph::TensorKind;

use crate::model::{BufferView, ViewModel};

/// An RGB color.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    /// `#rrggbb`.
    pub fn css(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }
}

/// What the color of a buffer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColorBy {
    #[default]
    Kind,
    DType,
}

impl ColorBy {
    pub const ALL: [ColorBy; 2] = [ColorBy::Kind, ColorBy::DType];

    pub fn name(self) -> &'static str {
        match self {
            ColorBy::Kind => "kind",
            ColorBy::DType => "dtype",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// The color of series `k` of `n` in a stacked chart: the palette's, and gray for the last when
/// `rest_last` (the series that sums the rest).
pub fn series_color(k: usize, n: usize, rest_last: bool) -> Rgb {
    if rest_last && k + 1 == n {
        Rgb(0xb0, 0xb4, 0xba)
    } else {
        PALETTE[k % PALETTE.len()]
    }
}

/// A qualitative palette (Tableau 10), readable on white and on a projector.
const PALETTE: [Rgb; 10] = [
    Rgb(0x4e, 0x79, 0xa7),
    Rgb(0xf2, 0x8e, 0x2b),
    Rgb(0xe1, 0x57, 0x59),
    Rgb(0x76, 0xb7, 0xb2),
    Rgb(0x59, 0xa1, 0x4f),
    Rgb(0xed, 0xc9, 0x48),
    Rgb(0xb0, 0x7a, 0xa1),
    Rgb(0xff, 0x9d, 0xa7),
    Rgb(0x9c, 0x75, 0x5f),
    Rgb(0xba, 0xb0, 0xac),
];

fn kind_color(kind: TensorKind) -> Rgb {
    match kind {
        TensorKind::Input => PALETTE[0],
        TensorKind::Param => PALETTE[8],
        TensorKind::OptimizerState => PALETTE[6],
        TensorKind::Constant => PALETTE[9],
        TensorKind::Intermediate => PALETTE[3],
        TensorKind::Output => PALETTE[2],
        TensorKind::Scratch => PALETTE[5],
    }
}

fn dtype_color(dtype: Option<DType>) -> Rgb {
    match dtype {
        None => PALETTE[9],
        Some(d) => PALETTE[DType::ALL.iter().position(|&x| x == d).unwrap_or(0) % 9],
    }
}

fn dtype_label(dtype: Option<DType>) -> String {
    dtype.map_or_else(|| "no dtype".to_string(), |d| d.name().to_string())
}

pub fn color_of(buffer: &BufferView, by: ColorBy) -> Rgb {
    match by {
        ColorBy::Kind => kind_color(buffer.tensor.kind),
        ColorBy::DType => dtype_color(buffer.dtype),
    }
}

/// The legend: each kind or dtype present in the model, in canonical order, with its color.
/// One pass over the buffers, whatever the legend holds (a pass per kind, or a sort of every
/// buffer's dtype, took a third of a second at millions of buffers, on every redraw of the key).
pub fn legend(model: &ViewModel, by: ColorBy) -> Vec<(String, Rgb)> {
    match by {
        ColorBy::Kind => {
            // A bit per kind; the scan stops once every kind is seen.
            let every = (1u32 << TensorKind::ALL.len()) - 1;
            let mut seen = 0u32;
            for b in model.buffers.iter() {
                seen |= 1 << b.tensor.kind as u32;
                if seen == every {
                    break;
                }
            }
            TensorKind::ALL
                .into_iter()
                .filter(|&k| seen & (1 << k as u32) != 0)
                .map(|k| (k.name().to_string(), kind_color(k)))
                .collect()
        }
        ColorBy::DType => {
            let mut present = distinct(model.buffers.iter().map(|b| b.dtype));
            present.sort();
            present
                .into_iter()
                .map(|d| (dtype_label(d), dtype_color(d)))
                .collect()
        }
    }
}

/// The distinct values of `values` in the order met (a model has a handful of dtypes, so each
/// is looked for in a short list).
fn distinct<T: PartialEq>(values: impl Iterator<Item = T>) -> Vec<T> {
    let mut found = Vec::new();
    for value in values {
        if !found.contains(&value) {
            found.push(value);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The legend lists each kind in canonical order and each dtype in order, once, whatever
    /// order the buffers meet them in.
    #[test]
    fn the_legend_lists_what_the_buffers_hold_once_in_order() {
        let model = crate::model::tests::model_of(
            r#"{"memplan": 1, "tensors": [
                {"id": "o", "kind": "output", "shape": [4], "dtype": "f16"},
                {"id": "w", "kind": "param", "shape": [4], "dtype": "f32"},
                {"id": "x", "shape": [4], "dtype": "f16"},
                {"id": "y", "bytes": 8},
                {"id": "v", "kind": "param", "shape": [2], "dtype": "f32"}],
              "steps": [{"id": "s", "reads": ["w", "v"], "writes": ["x", "y"]},
                        {"id": "t", "reads": ["x", "y"], "writes": ["o"]}]}"#,
        );
        let names =
            |by| -> Vec<String> { legend(&model, by).into_iter().map(|(n, _)| n).collect() };
        assert_eq!(names(ColorBy::Kind), ["param", "intermediate", "output"]);
        let mut dtypes = vec![None, Some(DType::F16), Some(DType::F32)];
        dtypes.sort();
        let expected: Vec<String> = dtypes.into_iter().map(dtype_label).collect();
        assert_eq!(names(ColorBy::DType), expected);
    }

    #[test]
    fn distinct_values_come_once_in_the_order_met() {
        assert_eq!(distinct([3, 1, 3, 2, 1].into_iter()), [3, 1, 2]);
    }
}
