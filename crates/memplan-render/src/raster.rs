//! Rectangles filled straight into an RGBA pixel buffer: how a canvas draws hundreds of
//! thousands of buffers. A canvas records each `fillRect` and rasterizes them all when the frame
//! is flushed (a snapshot's 300,000 buffers took seconds there); filling the pixels here costs
//! one pass over the pixels each rectangle covers, and the canvas then takes the buffer in one
//! `putImageData`.
//!
//! A rectangle fills every pixel its extent touches, at least one each way, as a canvas draws
//! a rectangle narrower than a pixel (its anti-aliased edge then is a whole pixel: at that
//! density no edge can be told from its neighbour's). Colors with alpha blend over what is
//! there, as the canvas's default compositing does.

/// Pixels, row by row, four bytes each (red, green, blue, alpha), as `ImageData` holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pixels {
    pub width: u32,
    pub height: u32,
    pub data: Vec<u8>,
}

impl Pixels {
    /// `width` by `height` pixels of the opaque color `background`.
    pub fn new(width: u32, height: u32, background: [u8; 3]) -> Pixels {
        let [r, g, b] = background;
        let count = width as usize * height as usize;
        Pixels {
            width,
            height,
            data: [r, g, b, 255].repeat(count),
        }
    }

    /// Fills the pixels that `[x0, x1) × [y0, y1)` (pixel coordinates, `x0 <= x1`, `y0 <= y1`)
    /// touches, at least one pixel each way, with `color`, blended over them by its alpha.
    /// What falls outside the buffer is left out.
    pub fn fill(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), color: [u8; 4]) {
        let Some((c0, c1)) = touched(x0, x1, self.width) else {
            return;
        };
        let Some((r0, r1)) = touched(y0, y1, self.height) else {
            return;
        };
        let [r, g, b, a] = color;
        let row_bytes = self.width as usize * 4;
        for row in r0..r1 {
            let line = &mut self.data[row * row_bytes + c0 * 4..row * row_bytes + c1 * 4];
            if a == 255 {
                for px in line.chunks_exact_mut(4) {
                    px.copy_from_slice(&[r, g, b, 255]);
                }
                continue;
            }
            let (a, keep) = (u16::from(a), 255 - u16::from(a));
            let over =
                |src: u8, dst: u8| ((u16::from(src) * a + u16::from(dst) * keep + 127) / 255) as u8;
            for px in line.chunks_exact_mut(4) {
                px[0] = over(r, px[0]);
                px[1] = over(g, px[1]);
                px[2] = over(b, px[2]);
                px[3] = 255 - ((255 - u16::from(px[3])) * keep / 255) as u8;
            }
        }
    }
}

/// The pixels `[lo, hi)` touches on an axis of `len` pixels, at least one, clipped to it:
/// `None` when it lies outside.
fn touched(lo: f64, hi: f64, len: u32) -> Option<(usize, usize)> {
    let first = lo.floor();
    let end = hi.ceil().max(first + 1.0);
    let (first, end) = (first.max(0.0), end.min(f64::from(len)));
    (first < end).then_some((first as usize, end as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(p: &Pixels, x: u32, y: u32) -> [u8; 4] {
        let i = (y * p.width + x) as usize * 4;
        p.data[i..i + 4].try_into().unwrap()
    }

    #[test]
    fn a_rectangle_fills_the_pixels_it_touches() {
        let mut p = Pixels::new(6, 4, [255, 255, 255]);
        p.fill((1.5, 1.0), (3.2, 2.0), [10, 20, 30, 255]);
        for y in 0..4 {
            for x in 0..6 {
                let inside = (1..4).contains(&x) && y == 1;
                let want = if inside { [10, 20, 30, 255] } else { [255; 4] };
                assert_eq!(at(&p, x, y), want, "pixel ({x}, {y})");
            }
        }
    }

    #[test]
    fn a_rectangle_narrower_than_a_pixel_fills_one() {
        let mut p = Pixels::new(4, 4, [255, 255, 255]);
        p.fill((2.3, 0.4), (2.31, 0.41), [0, 0, 0, 255]);
        let black: Vec<(u32, u32)> = (0..16)
            .map(|i| (i % 4, i / 4))
            .filter(|&(x, y)| at(&p, x, y) == [0, 0, 0, 255])
            .collect();
        assert_eq!(black, vec![(2, 0)]);
    }

    #[test]
    fn a_translucent_fill_blends_over_what_is_there() {
        let mut p = Pixels::new(1, 1, [255, 255, 255]);
        p.fill((0.0, 0.0), (1.0, 1.0), [0, 0, 0, 0x73]);
        // 255 * (1 - 115/255) = 140.
        assert_eq!(at(&p, 0, 0), [140, 140, 140, 255]);
    }

    proptest! {
        /// Whatever the rectangle, nothing outside the buffer is written (no panic), and what
        /// is filled is exactly the pixels whose squares meet it (or the one it falls in).
        #[test]
        fn fills_exactly_the_touched_pixels(
            x0 in -20.0f64..40.0, w in 0.0f64..30.0, y0 in -20.0f64..40.0, h in 0.0f64..30.0,
        ) {
            let mut p = Pixels::new(16, 12, [255, 255, 255]);
            p.fill((x0, y0), (x0 + w, y0 + h), [0, 0, 0, 255]);
            for y in 0..12u32 {
                for x in 0..16u32 {
                    let meets = |lo: f64, hi: f64, c: u32| {
                        let c = f64::from(c);
                        (c < hi && lo < c + 1.0) || (lo.floor() == c)
                    };
                    let want = meets(x0, x0 + w, x) && meets(y0, y0 + h, y);
                    prop_assert_eq!(at(&p, x, y) == [0, 0, 0, 255], want, "pixel ({}, {})", x, y);
                }
            }
        }
    }
}
