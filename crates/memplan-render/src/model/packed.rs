//! Long columns as the wire packs them, each into one JSON string. Integers: each value the
//! step from the value before it in its field (wrapping, so any `u64` follows any), zigzagged
//! so small steps either way are small numbers, in base-64 digits of five bits and a
//! continuation bit, least significant first (source maps' VLQ, over all 64 bits). Strings
//! ([`Words`]): a stem and the number that ends each, the stems listed once.
//!
//! Why: a snapshot's view model is a million buffers whose positions rise by one, whose sizes
//! repeat, whose addresses are near each other and whose ids count up. As JSON each number took
//! up to twenty characters and a parse of its own, and the page parsed the answer in wasm;
//! packed, most take one to four characters of one string, read by a loop over its bytes. (The
//! `vlq` crate packs only what an `i64` holds and loses the top bit of larger magnitudes; the
//! wire needs `u64`.)
//!
//! A column may interleave several fields (an allocation's address, stream and events): each
//! field keeps its own previous value, so each steps from its own. A column starts with its
//! shift (one digit: 0 to 63 bits), and its steps are packed shifted down by it (arithmetically,
//! so a shifted step is never larger, and never longer, than the step): a column of bytes
//! ([`packed_bytes`]: sizes, offsets, live bytes, multiples of an alignment, a snapshot's of
//! 512) by the trailing zero bits all its values have, so its steps take two characters fewer;
//! any other by none. A column is written as a list of strings of at most
//! [`CHUNK`] items each, its fields stepping on across them, so neither the worker writing it
//! nor the page reading it holds a whole column's text at once.

/// The most items one string of a column packs.
pub const CHUNK: usize = 1 << 16;

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
    out: Vec<u8>,
    previous: [u64; FIELDS],
    shift: u32,
}

impl<const FIELDS: usize> Default for Packer<FIELDS> {
    /// A column with no shift.
    fn default() -> Self {
        Packer::shifted(0)
    }
}

impl<const FIELDS: usize> Packer<FIELDS> {
    /// A column whose steps are shifted down by `shift` bits (every value a multiple of
    /// `1 << shift`), written first.
    fn shifted(shift: u32) -> Self {
        Packer {
            out: vec![DIGITS[shift as usize % 64]],
            previous: [0; FIELDS],
            shift,
        }
    }

    /// Appends `value` of field `field`.
    pub fn push(&mut self, field: usize, value: u64) {
        let step = (value.wrapping_sub(self.previous[field]) as i64) >> self.shift;
        self.previous[field] = value;
        let mut zigzag = ((step << 1) ^ (step >> 63)) as u64;
        loop {
            let digit = (zigzag & u64::from(MORE - 1)) as u8;
            zigzag >>= BITS;
            let more = if zigzag == 0 { 0 } else { MORE };
            self.out.push(DIGITS[usize::from(digit | more)]);
            if zigzag == 0 {
                return;
            }
        }
    }

    /// What is packed since the last take; the fields step on from their values.
    pub fn take(&mut self) -> String {
        String::from_utf8(std::mem::take(&mut self.out)).expect("digits are ASCII")
    }

    pub fn finish(mut self) -> String {
        self.take()
    }
}

/// Where a column's reading stands between two of its strings: its shift, once the first
/// string has given it, and each field's last value.
#[derive(Clone, Copy)]
pub struct Stand<const FIELDS: usize> {
    shift: Option<u32>,
    previous: [u64; FIELDS],
}

impl<const FIELDS: usize> Default for Stand<FIELDS> {
    /// Before a column's first string.
    fn default() -> Self {
        Stand {
            shift: None,
            previous: [0; FIELDS],
        }
    }
}

/// Reads a column a [`Packer`] wrote.
pub struct Unpacker<'a, const FIELDS: usize> {
    bytes: &'a [u8],
    previous: [u64; FIELDS],
    shift: u32,
}

impl<'a, const FIELDS: usize> Unpacker<'a, FIELDS> {
    /// The next string of a column, from where the string before it left the reading
    /// ([`Unpacker::stand`]; `Stand::default()` for the first, which starts with the shift).
    pub fn resume(text: &'a str, stand: Stand<FIELDS>) -> Result<Self, String> {
        let mut values = Unpacker {
            bytes: text.as_bytes(),
            previous: stand.previous,
            shift: stand.shift.unwrap_or(0),
        };
        if stand.shift.is_none() {
            let (&digit, rest) = values.bytes.split_first().ok_or("has no shift")?;
            values.shift = u32::from(VALUES[usize::from(digit)]);
            if values.shift >= u64::BITS {
                return Err("has no shift".into());
            }
            values.bytes = rest;
        }
        Ok(values)
    }

    pub fn stand(&self) -> Stand<FIELDS> {
        Stand {
            shift: Some(self.shift),
            previous: self.previous,
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
        let shifted = step << self.shift;
        if shifted >> self.shift != step {
            return Err("holds a value past 64 bits".into());
        }
        let value = self.previous[field].wrapping_add(shifted as u64);
        self.previous[field] = value;
        Ok(value)
    }
}

/// Reads a column's strings in order, the fields stepping on across them: `item` reads one
/// item's values each time, until every string is read. Inlined into its two readers: called,
/// it cost the page's bundle 87 bytes more gzipped.
#[inline(always)]
fn each_item<const N: usize>(
    chunks: &[String],
    mut item: impl FnMut(&mut Unpacker<N>) -> Result<(), String>,
) -> Result<(), String> {
    let mut stand = Stand::default();
    for text in chunks {
        let mut values = Unpacker::resume(text, stand)?;
        while !values.is_done() {
            item(&mut values)?;
        }
        stand = values.stand();
    }
    Ok(())
}

/// The values of a packed column of one field, each converted by `convert` (`None`: out of its
/// range).
pub fn unpack<T>(chunks: &[String], convert: impl Fn(u64) -> Option<T>) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    each_item(chunks, |values: &mut Unpacker<1>| {
        let value = values.next(0)?;
        out.push(convert(value).ok_or_else(|| format!("holds {value}, out of range"))?);
        Ok(())
    })?;
    Ok(out)
}

/// A packed column of `N` interleaved fields, written straight from the items: `push` packs
/// item `k`'s values, for each `k` below the count.
pub struct Packed<F, const N: usize>(usize, F, u32);

impl<F: Fn(usize, &mut Packer<N>), const N: usize> serde::Serialize for Packed<F, N> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut packer = Packer::shifted(self.2);
        let mut chunks = serializer.serialize_seq(Some(self.0.div_ceil(CHUNK)))?;
        for start in (0..self.0).step_by(CHUNK) {
            for k in start..self.0.min(start + CHUNK) {
                (self.1)(k, &mut packer);
            }
            chunks.serialize_element(&packer.take())?;
        }
        chunks.end()
    }
}

/// The items `0..count`, each packed by `push`.
pub fn packed_each<F: Fn(usize, &mut Packer<N>), const N: usize>(
    count: usize,
    push: F,
) -> Packed<F, N> {
    Packed(count, push, 0)
}

/// One integer of each item, packed.
pub fn packed_ints<I>(items: &[I], value: impl Fn(&I) -> u64) -> impl serde::Serialize {
    packed_ints_each(items.len(), move |k| value(&items[k]))
}

/// [`packed_ints`] of the items `0..count`.
pub fn packed_ints_each(count: usize, value: impl Fn(usize) -> u64) -> impl serde::Serialize {
    packed_each(count, move |k, p: &mut Packer<1>| p.push(0, value(k)))
}

/// [`packed_ints`] of integers that are mostly multiples of an alignment (sizes, offsets, live
/// bytes): shifted down by the trailing zero bits they all have.
pub fn packed_bytes<I>(items: &[I], value: impl Fn(&I) -> u64) -> impl serde::Serialize {
    packed_bytes_each(items.len(), move |k| value(&items[k]))
}

/// [`packed_bytes`] of the items `0..count`.
pub fn packed_bytes_each(count: usize, value: impl Fn(usize) -> u64) -> impl serde::Serialize {
    let zeros = (0..count).fold(0, |or, k| or | value(k)).trailing_zeros();
    let push = move |k, p: &mut Packer<1>| p.push(0, value(k));
    Packed(count, push, zeros % u64::BITS)
}

/// Strings as the wire packs a long column of them: each is a stem and the decimal number that
/// ends it (`alloc` and 41, `cuda:0 t=` and 7), the distinct stems listed once, and per string
/// its stem's index and its number (0 for none, else the number plus one), packed. A snapshot's
/// million ids are a few stems and numbers that rise by one: a character or two each. A string
/// without such a number (or whose digits start with a zero, which a number would drop) is a
/// stem whole.
#[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Words<S> {
    pub stems: Vec<S>,
    pub packed: Vec<String>,
}

impl<'a> Words<&'a str> {
    pub fn pack(words: impl Iterator<Item = &'a str>) -> Self {
        Words::pack_parts(words.map(|word| {
            let digits = word.bytes().rev().take_while(u8::is_ascii_digit).count();
            let split = (1..=19).contains(&digits)
                && (digits == 1 || !word[word.len() - digits..].starts_with('0'));
            match split {
                true => {
                    let (stem, digits) = word.split_at(word.len() - digits);
                    (stem, digits.parse::<u64>().ok())
                }
                false => (word, None),
            }
        }))
    }

    /// Strings given as their stems and numbers (`cuda:0 t=` and 7 for `cuda:0 t=7`), packed as
    /// [`Words::pack`] packs them, with no string made.
    pub fn pack_parts(parts: impl Iterator<Item = (&'a str, Option<u64>)>) -> Self {
        let mut stems = Vec::new();
        // The type the graph's id index is (one instantiation in the bundle).
        let mut index: rustc_hash::FxHashMap<&str, usize> = rustc_hash::FxHashMap::default();
        let mut packer = Packer::<2>::default();
        let mut packed = Vec::new();
        for (n, (stem, number)) in parts.enumerate() {
            if n > 0 && n % CHUNK == 0 {
                packed.push(packer.take());
            }
            let k = match index.get(stem) {
                Some(&k) => k,
                None => {
                    stems.push(stem);
                    index.insert(stem, stems.len() - 1);
                    stems.len() - 1
                }
            };
            packer.push(0, k as u64);
            packer.push(1, number.map_or(0, |n| n + 1));
        }
        packed.push(packer.finish());
        Words { stems, packed }
    }
}

impl<S: AsRef<str>> Words<S> {
    /// Hands each string to `each`, in order; how many there were.
    pub fn unpack(&self, mut each: impl FnMut(&str) -> Result<(), String>) -> Result<u32, String> {
        let mut word = String::new();
        let mut count = 0u32;
        each_item(&self.packed, |values: &mut Unpacker<2>| {
            let k = values.next(0)?;
            let stem = usize::try_from(k).ok().and_then(|k| self.stems.get(k));
            let stem = stem.ok_or_else(|| format!("names stem {k} of {}", self.stems.len()))?;
            word.clear();
            word.push_str(stem.as_ref());
            match values.next(1)? {
                0 => {}
                n => {
                    use std::fmt::Write;
                    let _ = write!(word, "{}", n - 1);
                }
            }
            each(&word)?;
            count = count.checked_add(1).ok_or("holds more than 2^32 strings")?;
            Ok(())
        })?;
        Ok(count)
    }
}

/// A list of integers as one packed string: `#[serde(with = "crate::model::packed::ints")]` on
/// a `Vec<u64>` (a usage curve holds a value per position, a snapshot's millions), shifted as
/// [`packed_bytes`] shifts.
pub mod ints {
    use super::{packed_bytes, unpack};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(values: &[u64], serializer: S) -> Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&packed_bytes(values, |&v| v), serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u64>, D::Error> {
        let chunks = Vec::<String>::deserialize(deserializer)?;
        unpack(&chunks, Some).map_err(|e| serde::de::Error::custom(format!("packed integers {e}")))
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
            let mut unpacker = Unpacker::<3>::resume(&text, Stand::default()).unwrap();
            for &(field, value) in &values {
                prop_assert_eq!(unpacker.next(field), Ok(value));
            }
            prop_assert!(unpacker.is_done());
        }

        /// A column whose values share trailing zero bits packs them shifted down, never longer
        /// and shorter by about a character a value for each five bits, and reads back the same.
        #[test]
        fn shared_trailing_zeros_are_shifted_out(
            values in prop::collection::vec(any::<u64>(), 1..40),
            bits in 0u32..64,
        ) {
            let values: Vec<u64> = values.iter().map(|v| (v >> bits) << bits).collect();
            let chunks: Vec<String> =
                serde_json::from_str(&serde_json::to_string(&packed_bytes(&values, |&v| v)).unwrap())
                    .unwrap();
            prop_assert_eq!(unpack(&chunks, Some), Ok(values.clone()));
            let shift = values.iter().fold(0, |or, v| or | v).trailing_zeros() % 64;
            let mut unshifted = Packer::<1>::default();
            for &v in &values {
                unshifted.push(0, v);
            }
            let (packed, unshifted) = (chunks.concat().len(), unshifted.finish().len());
            prop_assert!(packed <= unshifted, "{} against {}", packed, unshifted);
            if shift >= 15 && values.len() >= 8 {
                prop_assert!(packed < unshifted, "{} against {}", packed, unshifted);
            }
        }
    }

    #[test]
    fn small_steps_take_a_character_and_extremes_round_trip() {
        let mut packer = Packer::<1>::default();
        for value in [0, 1, 2, 3, 2, 1, 1] {
            packer.push(0, value);
        }
        // And the column's shift first.
        assert_eq!(packer.finish().len(), 1 + 7);
        for value in [u64::MAX, 0, 1 << 63, (1 << 63) - 1, u64::MAX - 1] {
            let mut packer = Packer::<1>::default();
            packer.push(0, value);
            packer.push(0, 0);
            let text = packer.finish();
            assert!(text.len() <= 1 + 2 * 13, "{text}");
            let mut unpacker = Unpacker::<1>::resume(&text, Stand::default()).unwrap();
            assert_eq!(unpacker.next(0), Ok(value));
            assert_eq!(unpacker.next(0), Ok(0));
        }
        // A shifted column of values past 1 << 63 packs no longer than unshifted: the step from
        // 0 wraps to a small negative number, and shifting it keeps it one.
        let values = [17870283387039104034, 0, u64::MAX - 1];
        let shifted = serde_json::to_string(&packed_bytes(&values, |&v| v)).unwrap();
        let mut unshifted = Packer::<1>::default();
        values.iter().for_each(|&v| unshifted.push(0, v));
        // `["…"]`: the string less its brackets and quotes.
        assert!(shifted.len() - 4 <= unshifted.finish().len(), "{shifted}");
        let chunks: Vec<String> = serde_json::from_str(&shifted).unwrap();
        assert_eq!(unpack(&chunks, Some), Ok(values.to_vec()));
    }

    proptest! {
        /// Whatever the strings, they read back in order.
        #[test]
        fn words_read_back(words in prop::collection::vec("[a-c]{0,2}[0-9]{0,21}", 0..20)) {
            let packed = Words::pack(words.iter().map(String::as_str));
            let mut back = Vec::new();
            let count = packed.unpack(|w| {
                back.push(w.to_string());
                Ok(())
            });
            prop_assert_eq!(count, Ok(words.len() as u32));
            prop_assert_eq!(back, words);
        }
    }

    #[test]
    fn ids_with_rising_numbers_share_their_stem_and_take_a_character_or_two() {
        let ids: Vec<String> = (0..1000).map(|k| format!("alloc{k}")).collect();
        let packed = Words::pack(ids.iter().map(String::as_str));
        assert_eq!(packed.stems, ["alloc"]);
        assert_eq!(packed.packed.concat().len(), 1 + 2000);
        let leading = Words::pack(["t=007", "x", "x1"].into_iter());
        assert_eq!(leading.stems, ["t=007", "x"]);
        let bad = Words::<&str> {
            stems: vec!["a"],
            packed: vec!["ACA".into()],
        };
        assert_eq!(bad.unpack(|_| Ok(())), Err("names stem 1 of 1".into()));
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Curve(#[serde(with = "super::ints")] Vec<u64>);

    #[test]
    fn a_list_crosses_as_one_string_and_reads_back() {
        let curve = Curve(vec![0, 5, 5, 4, u64::MAX, 7]);
        let json = serde_json::to_string(&curve).unwrap();
        // No shift, then steps 0, +5, 0, -1, -5 (wrapping to the top) and +8: a character each.
        assert_eq!(json, r#"["AAKABJQ"]"#);
        assert_eq!(serde_json::from_str::<Curve>(&json).unwrap(), curve);
        let e = serde_json::from_str::<Curve>(r#"["AAK!"]"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("packed integers holds `!`, not a digit"),
            "{e}"
        );
        assert!(serde_json::from_str::<Curve>("[0, 5]").is_err());
        // A column past a string's items goes on in the next, each field stepping on.
        let long = Curve((0..CHUNK as u64 * 2 + 3).map(|k| k * 3).collect());
        let json = serde_json::to_string(&long).unwrap();
        assert_eq!(json.matches('"').count(), 6, "three strings");
        assert_eq!(serde_json::from_str::<Curve>(&json).unwrap(), long);
    }

    #[test]
    fn what_no_packer_writes_is_refused() {
        // The first value of a column is its shift.
        let next = |text: &str| Unpacker::<1>::resume(text, Stand::default())?.next(0);
        assert_eq!(next("Ag"), Err("ends inside a value".into()));
        assert_eq!(next("AA,"), Ok(0));
        assert_eq!(next("A,"), Err("holds `,`, not a digit".into()));
        assert_eq!(
            next("A//////////////"),
            Err("holds a value past 64 bits".into())
        );
        assert_eq!(next(""), Err("has no shift".into()));
        assert_eq!(next("!A"), Err("has no shift".into()));
        // A step shifted past 64 bits: 2^60 by sixteen bits.
        let mut packer = Packer::<1>::default();
        packer.push(0, 1 << 60);
        let text = format!("Q{}", &packer.finish()[1..]);
        assert_eq!(next(&text), Err("holds a value past 64 bits".into()));
    }
}
