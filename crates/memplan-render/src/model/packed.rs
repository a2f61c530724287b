//! Long columns of integers as the wire packs them: one JSON string per column, each value the
//! step from the value before it in its field (wrapping, so any `u64` follows any), zigzagged
//! so small steps either way are small numbers, in base-64 digits of five bits and a
//! continuation bit, least significant first (source maps' VLQ, over all 64 bits).
//!
//! Why: a snapshot's view model is a million buffers whose positions rise by one, whose sizes
//! repeat and whose addresses are near each other. As JSON numbers each took up to twenty
//! characters and a parse per number, and the page parsed the answer in wasm; packed, most take
//! one to four characters of one string, read by a loop over its bytes. (The `vlq` crate packs
//! only what an `i64` holds and loses the top bit of larger magnitudes; the wire needs `u64`.)
//!
//! A column may interleave several fields (an allocation's address, stream and events): each
//! field keeps its own previous value, so each steps from its own.

/// The digits, by value.
const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Each byte's digit value; `NOT_A_DIGIT` for the rest.
const VALUES: [u8; 256] = {
    let mut table = [NOT_A_DIGIT; 256];
    let mut d = 0;
    while d < 64 {
        table[DIGITS[d] as usize] = d as u8;
        d += 1;
    }
    table
};

const NOT_A_DIGIT: u8 = 0xff;

/// Bits a digit carries; the sixth says another digit follows.
const BITS: u32 = 5;
const MORE: u8 = 1 << BITS;

/// Writes a packed column of up to `FIELDS` interleaved fields.
pub struct Packer<const FIELDS: usize> {
    out: String,
    previous: [u64; FIELDS],
}

impl<const FIELDS: usize> Default for Packer<FIELDS> {
    fn default() -> Self {
        Packer {
            out: String::new(),
            previous: [0; FIELDS],
        }
    }
}

impl<const FIELDS: usize> Packer<FIELDS> {
    /// Appends `value` of field `field`.
    pub fn push(&mut self, field: usize, value: u64) {
        let step = value.wrapping_sub(self.previous[field]) as i64;
        self.previous[field] = value;
        let mut zigzag = ((step << 1) ^ (step >> 63)) as u64;
        loop {
            let digit = (zigzag & u64::from(MORE - 1)) as u8;
            zigzag >>= BITS;
            let more = if zigzag == 0 { 0 } else { MORE };
            self.out.push(char::from(DIGITS[usize::from(digit | more)]));
            if zigzag == 0 {
                return;
            }
        }
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// Reads a column a [`Packer`] wrote.
pub struct Unpacker<'a, const FIELDS: usize> {
    bytes: &'a [u8],
    previous: [u64; FIELDS],
}

impl<'a, const FIELDS: usize> Unpacker<'a, FIELDS> {
    pub fn new(text: &'a str) -> Self {
        Unpacker {
            bytes: text.as_bytes(),
            previous: [0; FIELDS],
        }
    }

    /// Whether every value is read.
    pub fn is_done(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The next value, of field `field`.
    pub fn next(&mut self, field: usize) -> Result<u64, String> {
        let mut zigzag = 0u64;
        let mut shift = 0;
        loop {
            let Some((&byte, rest)) = self.bytes.split_first() else {
                return Err("ends inside a value".into());
            };
            self.bytes = rest;
            let digit = VALUES[usize::from(byte)];
            if digit == NOT_A_DIGIT {
                return Err(format!("holds `{}`, not a digit", char::from(byte)));
            }
            let bits = u64::from(digit & (MORE - 1));
            if shift >= u64::BITS || (bits << shift) >> shift != bits {
                return Err("holds a value past 64 bits".into());
            }
            zigzag |= bits << shift;
            shift += BITS;
            if digit & MORE == 0 {
                break;
            }
        }
        let step = ((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64);
        let value = self.previous[field].wrapping_add(step as u64);
        self.previous[field] = value;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the values, in whatever fields, they read back in order.
        #[test]
        fn values_read_back(values in prop::collection::vec((0usize..3, any::<u64>()), 0..40)) {
            let mut packer = Packer::<3>::default();
            for &(field, value) in &values {
                packer.push(field, value);
            }
            let text = packer.finish();
            let mut unpacker = Unpacker::<3>::new(&text);
            for &(field, value) in &values {
                prop_assert_eq!(unpacker.next(field), Ok(value));
            }
            prop_assert!(unpacker.is_done());
        }
    }

    #[test]
    fn small_steps_take_a_character_and_extremes_round_trip() {
        let mut packer = Packer::<1>::default();
        for value in [0, 1, 2, 3, 2, 1, 1] {
            packer.push(0, value);
        }
        assert_eq!(packer.finish().len(), 7);
        for value in [u64::MAX, 0, 1 << 63, (1 << 63) - 1, u64::MAX - 1] {
            let mut packer = Packer::<1>::default();
            packer.push(0, value);
            packer.push(0, 0);
            let text = packer.finish();
            assert!(text.len() <= 2 * 13, "{text}");
            let mut unpacker = Unpacker::<1>::new(&text);
            assert_eq!(unpacker.next(0), Ok(value));
            assert_eq!(unpacker.next(0), Ok(0));
        }
    }

    #[test]
    fn what_no_packer_writes_is_refused() {
        let next = |text: &str| Unpacker::<1>::new(text).next(0);
        assert_eq!(next("g"), Err("ends inside a value".into()));
        assert_eq!(next("A,"), Ok(0));
        assert_eq!(next(","), Err("holds `,`, not a digit".into()));
        assert_eq!(
            next("//////////////"),
            Err("holds a value past 64 bits".into())
        );
    }
}
