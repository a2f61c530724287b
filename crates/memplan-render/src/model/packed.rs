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
//! field keeps its own previous value, so each steps from its own. A column is written as a list
//! of strings of at most [`CHUNK`] items each, its fields stepping on across them, so neither the
//! worker writing it nor the page reading it holds a whole column's text at once.

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
}

impl<const FIELDS: usize> Default for Packer<FIELDS> {
    fn default() -> Self {
        Packer {
            out: Vec::new(),
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

/// Reads a column a [`Packer`] wrote.
pub struct Unpacker<'a, const FIELDS: usize> {
    bytes: &'a [u8],
    previous: [u64; FIELDS],
}

impl<'a, const FIELDS: usize> Unpacker<'a, FIELDS> {
    /// The next string of a column, its fields stepping from `previous` (what
    /// [`Unpacker::previous`] said at the end of the string before).
    pub fn resume(text: &'a str, previous: [u64; FIELDS]) -> Self {
        Unpacker {
            bytes: text.as_bytes(),
            previous,
        }
    }

    pub fn previous(&self) -> [u64; FIELDS] {
        self.previous
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

/// Reads a column's strings in order, the fields stepping on across them: `item` reads one
/// item's values each time, until every string is read. Inlined into its two readers: called,
/// it cost the page's bundle 87 bytes more gzipped.
#[inline(always)]
fn each_item<const N: usize>(
    chunks: &[String],
    mut item: impl FnMut(&mut Unpacker<N>) -> Result<(), String>,
) -> Result<(), String> {
    let mut previous = [0; N];
    for text in chunks {
        let mut values = Unpacker::resume(text, previous);
        while !values.is_done() {
            item(&mut values)?;
        }
        previous = values.previous();
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
/// each item's values.
pub struct Packed<'a, I, F, const N: usize>(&'a [I], F);

impl<I, F: Fn(&I, &mut Packer<N>), const N: usize> serde::Serialize for Packed<'_, I, F, N> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut packer = Packer::default();
        let mut chunks = serializer.serialize_seq(Some(self.0.len().div_ceil(CHUNK)))?;
        for items in self.0.chunks(CHUNK) {
            for item in items {
                (self.1)(item, &mut packer);
            }
            chunks.serialize_element(&packer.take())?;
        }
        chunks.end()
    }
}

pub fn packed<I, F: Fn(&I, &mut Packer<N>), const N: usize>(
    items: &[I],
    push: F,
) -> Packed<'_, I, F, N> {
    Packed(items, push)
}

/// One integer of each item, packed.
pub fn packed_ints<I>(items: &[I], value: impl Fn(&I) -> u64) -> impl serde::Serialize {
    packed(items, move |item, p: &mut Packer<1>| p.push(0, value(item)))
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
        let mut stems = Vec::new();
        // The type the graph's id index is (one instantiation in the bundle).
        let mut index: rustc_hash::FxHashMap<&str, usize> = rustc_hash::FxHashMap::default();
        let mut packer = Packer::<2>::default();
        let mut packed = Vec::new();
        for (n, word) in words.enumerate() {
            if n > 0 && n % CHUNK == 0 {
                packed.push(packer.take());
            }
            let digits = word.bytes().rev().take_while(u8::is_ascii_digit).count();
            let split = (1..=19).contains(&digits)
                && (digits == 1 || !word[word.len() - digits..].starts_with('0'));
            let (stem, number) = match split {
                true => {
                    let (stem, digits) = word.split_at(word.len() - digits);
                    (stem, digits.parse::<u64>().map_or(0, |n| n + 1))
                }
                false => (word, 0),
            };
            let k = match index.get(stem) {
                Some(&k) => k,
                None => {
                    stems.push(stem);
                    index.insert(stem, stems.len() - 1);
                    stems.len() - 1
                }
            };
            packer.push(0, k as u64);
            packer.push(1, number);
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
/// a `Vec<u64>` (a usage curve holds a value per position, a snapshot's millions).
pub mod ints {
    use super::{packed_ints, unpack};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(values: &[u64], serializer: S) -> Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&packed_ints(values, |&v| v), serializer)
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
            let mut unpacker = Unpacker::<3>::resume(&text, [0; 3]);
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
            let mut unpacker = Unpacker::<1>::resume(&text, [0; 1]);
            assert_eq!(unpacker.next(0), Ok(value));
            assert_eq!(unpacker.next(0), Ok(0));
        }
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
        assert_eq!(packed.packed.concat().len(), 2000);
        let leading = Words::pack(["t=007", "x", "x1"].into_iter());
        assert_eq!(leading.stems, ["t=007", "x"]);
        let bad = Words::<&str> {
            stems: vec!["a"],
            packed: vec!["CA".into()],
        };
        assert_eq!(bad.unpack(|_| Ok(())), Err("names stem 1 of 1".into()));
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Curve(#[serde(with = "super::ints")] Vec<u64>);

    #[test]
    fn a_list_crosses_as_one_string_and_reads_back() {
        let curve = Curve(vec![0, 5, 5, 4, u64::MAX, 7]);
        let json = serde_json::to_string(&curve).unwrap();
        // Steps 0, +5, 0, -1, -5 (wrapping to the top) and +8: a character each.
        assert_eq!(json, r#"["AKABJQ"]"#);
        assert_eq!(serde_json::from_str::<Curve>(&json).unwrap(), curve);
        let e = serde_json::from_str::<Curve>(r#"["AK!"]"#).unwrap_err();
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
        let next = |text: &str| Unpacker::<1>::resume(text, [0; 1]).next(0);
        assert_eq!(next("g"), Err("ends inside a value".into()));
        assert_eq!(next("A,"), Ok(0));
        assert_eq!(next(","), Err("holds `,`, not a digit".into()));
        assert_eq!(
            next("//////////////"),
            Err("holds a value past 64 bits".into())
        );
    }
}
