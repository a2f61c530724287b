//! A safe unpickler: Python pickles (protocols 2 to 5) read into plain values, executing nothing.
//!
//! It understands the opcodes that build data (none, booleans, integers, floats, strings,
//! bytes, lists, tuples, dicts, sets, the memo, frames) and refuses every opcode that imports or
//! calls (`GLOBAL`, `STACK_GLOBAL`, `REDUCE`, `BUILD`, `NEWOBJ`, `INST`, `OBJ`, persistent ids,
//! extensions), naming the global it was asked for. A PyTorch memory snapshot needs none of
//! those; a pickle that does is not one this reader will trust.
//!
//! Limits, so a hostile file cannot hang, exhaust or crash the reader: lengths are checked
//! against the bytes left before anything is allocated; containers the stack builds nest at most
//! [`MAX_DEPTH`] deep (depths are counted as values are built, never by walking them, so a list
//! the memo makes contain itself cannot loop the reader); a value may be fetched from the memo
//! (and so shared) but the reader never copies it. The memo can nest deeper than the count sees
//! (a container remembered empty is filled afterwards), so nothing recurses over a value's
//! depth: consumers walk only the shapes they expect, to a fixed depth, and a value drops its
//! children a bounded number of levels at a time ([`Items`], [`Pairs`]). A container the memo
//! makes contain itself is never freed (its count of holders never falls to zero); it holds at
//! most what the file holds. Errors name the byte offset and the opcode.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// The deepest containers may nest.
pub const MAX_DEPTH: usize = 200;

/// A value a pickle builds. Containers are shared (`Rc`), as the memo shares them in Python.
///
/// Two words: a snapshot's trace is tens of millions of values moved through the stack, and a
/// value that fits two registers moves without a copy through memory. So every payload is one
/// word: strings, bytes and tuples behind a thin `Rc`, and integers past 64 bits (Python's are
/// unbounded; a snapshot's addresses and sizes fit 64) boxed.
#[derive(Debug, Clone)]
#[repr(u64)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer past 64 bits, up to 128.
    BigInt(Rc<i128>),
    Float(f64),
    Str(Rc<Box<str>>),
    Bytes(Rc<Box<[u8]>>),
    List(Rc<RefCell<Items>>),
    Tuple(Rc<Items>),
    /// Its pairs in the order set, a key set again among them: [`Value::get`] reads the last,
    /// as Python keeps it. Setting a pair checks no earlier key (a dict of many keys would
    /// cost the square of their number).
    Dict(Rc<RefCell<Pairs>>),
    Set(Rc<RefCell<Items>>),
}

/// The values of a list, tuple or set: a vector that frees them with a bounded stack
/// ([`drop_bounded`]).
#[derive(Debug, Default, Clone)]
pub struct Items(pub Vec<Value>);

/// The pairs of a dict, freed as [`Items`] are.
#[derive(Debug, Default, Clone)]
pub struct Pairs(pub Vec<(Value, Value)>);

impl std::ops::Deref for Items {
    type Target = Vec<Value>;
    fn deref(&self) -> &Vec<Value> {
        &self.0
    }
}

impl std::ops::DerefMut for Items {
    fn deref_mut(&mut self) -> &mut Vec<Value> {
        &mut self.0
    }
}

impl std::ops::Deref for Pairs {
    type Target = Vec<(Value, Value)>;
    fn deref(&self) -> &Vec<(Value, Value)> {
        &self.0
    }
}

impl std::ops::DerefMut for Pairs {
    fn deref_mut(&mut self) -> &mut Vec<(Value, Value)> {
        &mut self.0
    }
}

impl Drop for Items {
    fn drop(&mut self) {
        drop_bounded(std::mem::take(&mut self.0), Vec::new());
    }
}

impl Drop for Pairs {
    fn drop(&mut self) {
        drop_bounded(Vec::new(), std::mem::take(&mut self.0));
    }
}

/// How deep the drops of containers nest before [`drop_bounded`] frees the rest in a loop.
const DROP_DEPTH: u32 = 64;

thread_local! {
    /// How deep the drop under way is nested, in containers.
    static DROPPING: Cell<u32> = const { Cell::new(0) };
}

/// Drops the `values` and `pairs` of a container being freed, with a bounded stack. Each level
/// of containers takes a few stack frames to free, and the memo lets a pickle nest containers
/// past any depth counted as they are built (a list remembered empty is filled after, then
/// fetched into the next: two megabytes nested a list 200,000 deep, whose drop overflowed the
/// stack). Past [`DROP_DEPTH`] it frees them in a loop instead ([`drop_in_a_loop`]).
#[inline(never)]
fn drop_bounded(values: Vec<Value>, pairs: Vec<(Value, Value)>) {
    let depth = DROPPING.get();
    if depth < DROP_DEPTH {
        DROPPING.set(depth + 1);
        drop((values, pairs));
        return DROPPING.set(depth);
    }
    drop_in_a_loop(values, pairs);
}

/// [`drop_bounded`] past [`DROP_DEPTH`]: it takes the values out of each container it holds the
/// last of before dropping that, so the drop it leaves is of an empty container.
#[cold]
#[inline(never)]
fn drop_in_a_loop(mut left: Vec<Value>, mut pairs: Vec<(Value, Value)>) {
    let take_pairs = |left: &mut Vec<Value>, pairs: &mut Vec<(Value, Value)>| {
        for (k, v) in pairs.drain(..) {
            left.push(k);
            left.push(v);
        }
    };
    take_pairs(&mut left, &mut pairs);
    while let Some(mut value) = left.pop() {
        match &mut value {
            Value::List(l) | Value::Set(l) => {
                if let Some(l) = Rc::get_mut(l) {
                    left.append(l.get_mut());
                }
            }
            Value::Tuple(t) => {
                if let Some(t) = Rc::get_mut(t) {
                    left.append(t);
                }
            }
            Value::Dict(d) => {
                if let Some(d) = Rc::get_mut(d) {
                    take_pairs(&mut left, d.get_mut());
                }
            }
            _ => {}
        }
    }
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i128> {
        match self {
            Value::Int(i) => Some(i128::from(*i)),
            Value::BigInt(i) => Some(**i),
            Value::Bool(b) => Some(i128::from(*b)),
            _ => None,
        }
    }

    /// The value of `key` in a dict with string keys: the last one set, as in Python.
    pub fn get(&self, key: &str) -> Option<Value> {
        match self {
            Value::Dict(d) => d
                .borrow()
                .iter()
                .rfind(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v.clone()),
            _ => None,
        }
    }

    /// The items of a list or tuple.
    pub fn items(&self) -> Option<Vec<Value>> {
        match self {
            Value::List(l) => Some(l.borrow().to_vec()),
            Value::Tuple(t) => Some(t.to_vec()),
            _ => None,
        }
    }
}

/// A reader that seeks, as a trait object: the unpickler is compiled once whatever the caller
/// reads from (a file, bytes, a browser's `Blob`).
pub trait ReadSeek: std::io::Read + std::io::Seek {}

impl<T: std::io::Read + std::io::Seek> ReadSeek for T {}

/// Why a pickle could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("pickle byte {offset}: {message}")]
pub struct PickleError {
    pub offset: u64,
    pub message: String,
}

/// Reads one pickled value from `bytes`.
pub fn read(bytes: &[u8]) -> Result<Value, PickleError> {
    let len = bytes.len() as u64;
    read_streaming(std::io::Cursor::new(bytes), len, None, &mut |_| {})
}

/// Items that a list of lists under one key of the pickle's root dict streams out instead of
/// holding: `on_item(k, item)` takes each item appended to the `k`-th inner list of
/// `root[key]` (a snapshot's `device_traces`), in order; the lists stay empty.
pub struct Stream<'a> {
    pub key: &'a str,
    pub on_item: &'a mut dyn FnMut(usize, Value) -> Result<(), String>,
}

/// Reads one pickled value of `len` bytes from `input`, in two passes, with bounded memory
/// beside what it keeps: the first finds which memo entries the pickle ever fetches, the
/// second builds values and remembers only those (a snapshot memoizes every event, and
/// fetches only the frames and strings events share). `stream`'s items are handed over as
/// they complete. `progress` hears the bytes read so far, of `2 * len`.
pub fn read_streaming<R: std::io::Read + std::io::Seek>(
    mut input: R,
    len: u64,
    stream: Option<Stream<'_>>,
    progress: &mut dyn FnMut(u64),
) -> Result<Value, PickleError> {
    read_from(&mut input, len, stream, progress)
}

/// [`read_streaming`] over one reader type, so the unpickler is compiled once (the bundle).
fn read_from(
    mut input: &mut dyn ReadSeek,
    len: u64,
    stream: Option<Stream<'_>>,
    progress: &mut dyn FnMut(u64),
) -> Result<Value, PickleError> {
    let fetched = {
        let mut scan = Decoder::new(&mut input, len, 0, progress);
        fetched_memo(&mut scan)
    };
    input
        .seek(std::io::SeekFrom::Start(0))
        .map_err(|e| PickleError {
            offset: 0,
            message: format!("the file could not be read again: {e}"),
        })?;
    let slots = fetched.count();
    let mut unpickler = Unpickler {
        input: Decoder::new(&mut input, len, len, progress),
        stack: Vec::new(),
        memo: vec![None; slots],
        fetched,
        memo_next: 0,
        stream,
        streamed: 0,
        run: Vec::new(),
    };
    loop {
        if let Some(value) = unpickler.run_some()? {
            return Ok(value);
        }
    }
}

/// The memo indices a pickle fetches (`BINGET`, `LONG_BINGET`): a bit set with a count per
/// word before it, so an index's slot among the fetched is found in constant time.
struct Fetched {
    bits: Vec<u64>,
    before: Vec<u32>,
}

impl Fetched {
    fn count(&self) -> usize {
        self.before.last().map_or(0, |&b| b as usize)
            + self.bits.last().map_or(0, |w| w.count_ones() as usize)
    }

    /// The slot of memo index `i`, when the pickle fetches it.
    fn slot(&self, i: usize) -> Option<usize> {
        let (w, b) = (i / 64, i % 64);
        let word = *self.bits.get(w)?;
        (word >> b & 1 == 1)
            .then(|| self.before[w] as usize + (word & ((1u64 << b) - 1)).count_ones() as usize)
    }
}

/// The first pass: the memo indices fetched. It stops at the first opcode it cannot read; the
/// second pass then stops there too, with the error in full.
fn fetched_memo<R: std::io::Read>(input: &mut Decoder<'_, R>) -> Fetched {
    let mut bits: Vec<u64> = Vec::new();
    while scan_some(input, &mut bits) {}
    let mut before = Vec::with_capacity(bits.len());
    let mut total = 0u32;
    for w in &bits {
        before.push(total);
        total += w.count_ones();
    }
    Fetched { bits, before }
}

/// How many opcodes each pass reads per call of its own ([`scan_some`], [`Unpickler::run_some`]):
/// a WebAssembly engine optimizes a hot function for its next call, never the one under way
/// (Chromium's V8 has no on-stack replacement for wasm), so a pass that was one call read a
/// whole snapshot in baseline code. Measured in Chromium (V8's sampling profiler, the generated
/// 241 MiB snapshot): the two passes took 2,451 of the worker's 9,336 samples of a load in
/// baseline code, and take 1,425 of 7,234 optimized.
const OPS_PER_CALL: u32 = 1 << 16;

/// Up to [`OPS_PER_CALL`] opcodes of the first pass, each `BINGET`'s index set in `bits`;
/// `false` once it has read `STOP` or an opcode it cannot read. The opcodes the buffer holds
/// whole are stepped over in a loop of their own; the rest (one cut by the buffer's
/// end, `STOP`, `FRAME`, one refused) go through the checked read, [`Decoder::skip`].
#[inline(never)]
fn scan_some<R: std::io::Read>(input: &mut Decoder<'_, R>, bits: &mut Vec<u64>) -> bool {
    let len = input.len;
    let mut ops = 0;
    while ops < OPS_PER_CALL {
        let ahead = &input.buf[input.start..input.end];
        let mut at = 0;
        while ops < OPS_PER_CALL {
            let Some(&op) = ahead.get(at) else { break };
            let (arg_at, n) = match arg_of(op) {
                // `STOP` too: the checked read ends the pass.
                _ if op == b'.' => break,
                None => break,
                Some(Arg::None) => (1, 0),
                Some(Arg::Fixed(n)) => (1, n),
                Some(Arg::Counted(k)) => {
                    let Some(raw) = ahead.get(at + 1..at + 1 + k) else {
                        break;
                    };
                    (1 + k, index(raw))
                }
            };
            let end = match (at + arg_at).checked_add(n) {
                Some(end) if end <= ahead.len() => end,
                _ => break,
            };
            if op == b'h' {
                note_fetch(bits, usize::from(ahead[at + 1]), len);
            } else if op == b'j' {
                let raw = ahead[at + 1..end].try_into().map_or(0, u32::from_le_bytes);
                note_fetch(bits, raw as usize, len);
            }
            at = end;
            ops += 1;
        }
        input.advance(at);
        if ops == OPS_PER_CALL {
            break;
        }
        match input.skip() {
            Ok(Skipped::Stop) | Err(_) => return false,
            Ok(Skipped::Get(i)) => note_fetch_past(bits, i, len),
            Ok(Skipped::Other) => {}
        }
        ops += 1;
    }
    true
}

/// Sets memo index `i` in `bits`, where it is within the file's `len` (the second pass refuses
/// one past it).
#[inline(always)]
fn note_fetch(bits: &mut Vec<u64>, i: usize, len: u64) {
    match bits.get_mut(i / 64) {
        Some(word) if i as u64 <= len => *word |= 1 << (i % 64),
        _ => note_fetch_past(bits, i, len),
    }
}

/// [`note_fetch`] out of line, for any index: what it leaves to this (an index past the words
/// `bits` has, or past the file) is rare, as are the checked reads that call it.
#[cold]
#[inline(never)]
fn note_fetch_past(bits: &mut Vec<u64>, i: usize, len: u64) {
    if i as u64 <= len {
        if bits.len() <= i / 64 {
            bits.resize(i / 64 + 1, 0);
        }
        bits[i / 64] |= 1 << (i % 64);
    }
}

/// How an opcode's argument follows it in the stream.
#[derive(Clone, Copy)]
enum Arg {
    None,
    /// This many bytes.
    Fixed(usize),
    /// A little-endian length of this many bytes, then that many bytes.
    Counted(usize),
}

/// The argument of each opcode that builds data (or names a global by `STACK_GLOBAL`, whose
/// refusal needs the stack); `None` for the rest, which [`Decoder::op`] refuses. Both passes
/// read opcodes by it: the first skips arguments, the second decodes them; a snapshot has tens
/// of millions, so it is a table ([`ARGS`]).
fn arg_of(op: u8) -> Option<Arg> {
    ARGS[usize::from(op)]
}

/// [`arg_of`] of every byte, made once by [`arg_of_op`].
const ARGS: [Option<Arg>; 256] = {
    let mut table = [None; 256];
    let mut op = 0;
    while op < 256 {
        table[op] = arg_of_op(op as u8);
        op += 1;
    }
    table
};

const fn arg_of_op(op: u8) -> Option<Arg> {
    Some(match op {
        // PROTO, BININT1, BINPUT, BINGET
        0x80 | b'K' | b'q' | b'h' => Arg::Fixed(1),
        b'M' => Arg::Fixed(2),
        // BININT, LONG_BINPUT, LONG_BINGET
        b'J' | b'r' | b'j' => Arg::Fixed(4),
        // BINFLOAT (FRAME's 8 bytes are skipped by `Decoder::opcode`)
        b'G' => Arg::Fixed(8),
        // LONG1, SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES
        0x8a | 0x8c | b'U' | b'C' => Arg::Counted(1),
        // LONG4, BINUNICODE, BINSTRING, BINBYTES
        0x8b | b'X' | b'T' | 0x42 => Arg::Counted(4),
        // BINUNICODE8, BINBYTES8, BYTEARRAY8
        0x8d | 0x8e | 0x96 => Arg::Counted(8),
        b'.'
        | b'('
        | b'0'
        | b'1'
        | b'2'
        | b'N'
        | 0x88
        | 0x89
        | b'}'
        | b']'
        | b')'
        | 0x8f
        | b't'
        | 0x85..=0x87
        | b'l'
        | b'd'
        | 0x91
        | b'a'
        | b'e'
        | 0x90
        | b's'
        | b'u'
        | 0x94
        | 0x93 => Arg::None,
        _ => return None,
    })
}

/// A little-endian unsigned number of at most 8 bytes.
fn le(raw: &[u8]) -> u64 {
    // The widths the opcodes use, read whole; any other shifted in a byte at a time.
    match *raw {
        [b] => u64::from(b),
        [a, b, c, d] => u64::from(u32::from_le_bytes([a, b, c, d])),
        [a, b, c, d, e, f, g, h] => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
        _ => raw.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)),
    }
}

/// A memo index (`usize::MAX`, which no memo reaches, where it does not fit).
fn index(raw: &[u8]) -> usize {
    usize::try_from(le(raw)).unwrap_or(usize::MAX)
}

/// What the first pass needs of an opcode.
enum Skipped {
    Stop,
    Get(usize),
    Other,
}

/// One opcode with its argument; strings and bytes borrow the reader's buffer.
enum Op<'b> {
    Proto(u8),
    Stop,
    Mark,
    Pop,
    PopMark,
    Dup,
    Value(Value),
    Text(&'b [u8], u64),
    Bytes(&'b [u8]),
    EmptyDict,
    EmptyList,
    EmptyTuple,
    EmptySet,
    Tuple,
    TupleN(usize),
    List,
    Dict,
    FrozenSet,
    Append,
    Appends,
    SetItem,
    SetItems,
    Memoize,
    Put(usize),
    Get(usize),
    StackGlobal,
}

/// Reads opcodes from `input` through a buffer, checking each length against the bytes left
/// before reading it.
struct Decoder<'p, R> {
    input: R,
    len: u64,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The file offset of `buf[start]`.
    at: u64,
    /// What `progress` adds to the offset (the second pass starts at `len`).
    progress_base: u64,
    progress: &'p mut dyn FnMut(u64),
}

/// The buffer's usual size; a longer string grows it.
const BUFFER: usize = 1 << 20;

impl<'p, R: std::io::Read> Decoder<'p, R> {
    fn new(input: R, len: u64, progress_base: u64, progress: &'p mut dyn FnMut(u64)) -> Self {
        Decoder {
            input,
            len,
            buf: Vec::new(),
            start: 0,
            end: 0,
            at: 0,
            progress_base,
            progress,
        }
    }

    fn err(&self, message: impl Into<String>) -> PickleError {
        PickleError {
            offset: self.at,
            message: message.into(),
        }
    }

    /// Makes `n` bytes available in the buffer.
    fn fill(&mut self, n: usize) -> Result<(), PickleError> {
        let left = self.len.saturating_sub(self.at);
        if (n as u64) > left {
            return Err(self.err(format!(
                "wants {n} bytes, {left} are left: the file is cut short"
            )));
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        let want = n
            .max(BUFFER)
            .min(usize::try_from(left).unwrap_or(usize::MAX));
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        while self.end < n {
            let read = self.input.read(&mut self.buf[self.end..want]);
            match read {
                Ok(0) => return Err(self.err("the file ends before its length")),
                Ok(k) => self.end += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.err(format!("the file could not be read: {e}"))),
            }
        }
        (self.progress)(self.progress_base + self.at + self.end as u64);
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&[u8], PickleError> {
        if self.end - self.start < n {
            self.fill(n)?;
        }
        let s = self.start;
        self.start += n;
        self.at += n as u64;
        Ok(&self.buf[s..s + n])
    }

    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn uint(&mut self, n: usize) -> Result<u64, PickleError> {
        Ok(le(self.take(n)?))
    }

    fn len(&mut self, n: usize) -> Result<usize, PickleError> {
        let v = self.uint(n)?;
        usize::try_from(v).map_err(|_| self.err("a length past this machine's reach"))
    }

    /// The next opcode, where its argument starts after it and the argument's length, when
    /// the buffer holds both and the opcode builds data (not FRAME): both passes then read it
    /// straight from the buffer. `None` leaves it to the checked reads ([`Decoder::take`]),
    /// which fill the buffer, skip frames and name what is wrong.
    #[inline(always)]
    fn buffered(&self) -> Option<(u8, usize, usize)> {
        let ahead = &self.buf[self.start..self.end];
        let &op = ahead.first()?;
        let (arg_at, n) = match arg_of(op)? {
            Arg::None => (1, 0),
            Arg::Fixed(n) => (1, n),
            Arg::Counted(k) => (1 + k, usize::try_from(le(ahead.get(1..1 + k)?)).ok()?),
        };
        (ahead.len() >= arg_at.checked_add(n)?).then_some((op, arg_at, n))
    }

    /// Steps over `n` bytes the buffer holds.
    fn advance(&mut self, n: usize) {
        self.start += n;
        self.at += n as u64;
    }

    /// The next opcode but FRAME, only a hint of how much to read at once: frames are skipped
    /// in a loop (a pickle of nothing but frames must not nest a call per frame).
    fn opcode(&mut self) -> Result<u8, PickleError> {
        loop {
            match self.u8()? {
                0x95 => {
                    self.take(8)?;
                }
                op => return Ok(op),
            }
        }
    }

    /// The next opcode, its argument skipped, by checked reads: the first pass's read (which
    /// decodes nothing) where its loop over the buffer ([`scan_some`]) stops. An opcode
    /// [`Decoder::op`] would refuse is an error here, without its message.
    fn skip(&mut self) -> Result<Skipped, PickleError> {
        let op = self.opcode()?;
        match arg_of(op).ok_or_else(|| self.err("an opcode this reader refuses"))? {
            Arg::None if op == b'.' => Ok(Skipped::Stop),
            Arg::None => Ok(Skipped::Other),
            Arg::Fixed(n) if op == b'h' || op == b'j' => Ok(Skipped::Get(self.len(n)?)),
            Arg::Fixed(n) => self.take(n).map(|_| Skipped::Other),
            Arg::Counted(k) => {
                let n = self.len(k)?;
                self.take(n).map(|_| Skipped::Other)
            }
        }
    }

    /// The next opcode. Those that import or call are refused here, by name where the file
    /// gives one.
    fn op(&mut self) -> Result<Op<'_>, PickleError> {
        // The opcode, and its argument with where its bytes start in the file.
        let (op, raw, raw_at) = match self.buffered() {
            Some((op, arg_at, n)) if !(matches!(op, 0x8a | 0x8b) && n > 16) => {
                let (from, raw_at) = (self.start + arg_at, self.at + arg_at as u64);
                self.advance(arg_at + n);
                (op, &self.buf[from..from + n], raw_at)
            }
            _ => {
                let op = self.opcode()?;
                let at = self.at - 1;
                let Some(arg) = arg_of(op) else {
                    return Err(self.refusal(op, at));
                };
                match arg {
                    Arg::None => (op, &[][..], self.at),
                    Arg::Fixed(n) => {
                        let raw_at = self.at;
                        (op, self.take(n)?, raw_at)
                    }
                    Arg::Counted(k) => {
                        let n = self.len(k)?;
                        if matches!(op, 0x8a | 0x8b) && n > 16 {
                            return Err(self.err(format!("an integer of {n} bytes, past 128 bits")));
                        }
                        let raw_at = self.at;
                        (op, self.take(n)?, raw_at)
                    }
                }
            }
        };
        Ok(match op {
            0x80 => Op::Proto(raw[0]),
            b'.' => Op::Stop,
            b'(' => Op::Mark,
            b'0' => Op::Pop,
            b'1' => Op::PopMark,
            b'2' => Op::Dup,
            b'N' => Op::Value(Value::None),
            0x88 => Op::Value(Value::Bool(true)),
            0x89 => Op::Value(Value::Bool(false)),
            b'J' => Op::Value(Value::Int(i64::from(le(raw) as u32 as i32))),
            b'K' | b'M' => Op::Value(Value::Int(le(raw) as i64)),
            0x8a | 0x8b => {
                let n = raw.len();
                let mut v: i128 = 0;
                for (k, &b) in raw.iter().enumerate() {
                    v |= i128::from(b) << (8 * k);
                }
                if n > 0 && n < 16 && raw[n - 1] & 0x80 != 0 {
                    v -= 1i128 << (8 * n);
                }
                Op::Value(i64::try_from(v).map_or_else(|_| Value::BigInt(Rc::new(v)), Value::Int))
            }
            b'G' => Op::Value(Value::Float(f64::from_be_bytes(
                raw.try_into().expect("8 bytes"),
            ))),
            // Text; `U` and `T` are protocol 1 strings (bytes in Python 2), read as text when
            // UTF-8.
            0x8c | b'X' | 0x8d | b'U' | b'T' => Op::Text(raw, raw_at),
            b'C' | 0x42 | 0x8e | 0x96 => Op::Bytes(raw),
            b'}' => Op::EmptyDict,
            b']' => Op::EmptyList,
            b')' => Op::EmptyTuple,
            0x8f => Op::EmptySet,
            b't' => Op::Tuple,
            0x85..=0x87 => Op::TupleN(usize::from(op - 0x84)),
            b'l' => Op::List,
            b'd' => Op::Dict,
            0x91 => Op::FrozenSet,
            b'a' => Op::Append,
            b'e' | 0x90 => Op::Appends,
            b's' => Op::SetItem,
            b'u' => Op::SetItems,
            0x94 => Op::Memoize,
            b'q' | b'r' => Op::Put(index(raw)),
            b'h' | b'j' => Op::Get(index(raw)),
            0x93 => Op::StackGlobal,
            _ => unreachable!("arg_of lists exactly the opcodes above"),
        })
    }

    /// Why opcode `op`, at byte `at`, is refused: it imports, builds or calls objects (named
    /// where the file names the global), or it is no opcode of protocols 2 to 5.
    fn refusal(&mut self, op: u8, at: u64) -> PickleError {
        let message = match op {
            b'c' => {
                // GLOBAL: "module\nname\n".
                let mut name = Vec::new();
                let mut lines = 0;
                while lines < 2 && name.len() < 512 {
                    match self.u8() {
                        Ok(b'\n') => {
                            lines += 1;
                            name.push(b'.');
                        }
                        Ok(b) => name.push(b),
                        Err(_) => break,
                    }
                }
                let name = if lines == 2 {
                    String::from_utf8_lossy(&name[..name.len() - 1]).into_owned()
                } else {
                    "an unreadable name".to_string()
                };
                format!(
                    "it refers to `{name}`: this reader builds plain values and never imports or calls anything"
                )
            }
            b'R' | b'b' | 0x81 | 0x92 | b'i' | b'o' | b'P' | b'Q' | 0x82..=0x84 | 0x97 | 0x98 => {
                format!(
                    "opcode 0x{op:02x} builds or calls objects: this reader builds plain values only"
                )
            }
            other => format!("opcode 0x{other:02x} is not one of pickle protocols 2 to 5"),
        };
        PickleError {
            offset: at,
            message,
        }
    }
}

enum Item {
    Mark,
    Value(Value, usize),
}

struct Unpickler<'s, 'p, R> {
    input: Decoder<'p, R>,
    /// Values with their nesting depth, and marks.
    stack: Vec<Item>,
    /// The fetched memo entries, by their slot in `fetched`.
    memo: Vec<Option<(Value, usize)>>,
    fetched: Fetched,
    /// The index `MEMOIZE` stores at next: one past the largest stored (Python's pickler
    /// numbers its entries in order, so this is Python's `len(memo)`).
    memo_next: usize,
    stream: Option<Stream<'s>>,
    /// Items handed to the stream.
    streamed: u64,
    /// The memo slots of a run of fetches ([`Unpickler::fetched_run`]), kept for the next run.
    run: Vec<u32>,
}

impl<R: std::io::Read> Unpickler<'_, '_, R> {
    fn err(&self, message: impl Into<String>) -> PickleError {
        self.input.err(message)
    }

    /// Pushes a scalar or an empty container.
    fn push(&mut self, v: Value) -> Result<(), PickleError> {
        self.push_at(v, 0)
    }

    fn push_at(&mut self, v: Value, depth: usize) -> Result<(), PickleError> {
        if depth > MAX_DEPTH {
            return Err(self.err(format!("containers nest deeper than {MAX_DEPTH}")));
        }
        self.stack.push(Item::Value(v, depth));
        Ok(())
    }

    fn pop(&mut self) -> Result<Value, PickleError> {
        self.pop_with_depth().map(|(v, _)| v)
    }

    fn pop_with_depth(&mut self) -> Result<(Value, usize), PickleError> {
        match self.stack.pop() {
            Some(Item::Value(v, d)) => Ok((v, d)),
            Some(Item::Mark) => Err(self.err("a mark where a value was expected")),
            None => Err(self.err("the stack is empty")),
        }
    }

    fn top(&self) -> Result<&Value, PickleError> {
        match self.stack.last() {
            Some(Item::Value(v, _)) => Ok(v),
            _ => Err(self.err("no value on the stack")),
        }
    }

    /// Where the last mark is on the stack.
    fn last_mark(&self) -> Result<usize, PickleError> {
        (self.stack.iter().rposition(|i| matches!(i, Item::Mark)))
            .ok_or_else(|| self.err("no mark to pop to"))
    }

    /// The values since the last mark (which is removed), and the deepest of them.
    fn pop_mark(&mut self) -> Result<(Vec<Value>, usize), PickleError> {
        let mark = self.last_mark()?;
        let mut depth = 0;
        let items = self
            .stack
            .drain(mark + 1..)
            .map(|i| match i {
                Item::Value(v, d) => {
                    depth = depth.max(d);
                    v
                }
                Item::Mark => Value::None,
            })
            .collect();
        self.stack.pop();
        Ok((items, depth))
    }

    /// Raises the depth recorded for the container at `at` on the stack to hold children
    /// `child_depth` deep.
    fn deepen(&mut self, at: usize, child_depth: usize) -> Result<(), PickleError> {
        if child_depth + 1 > MAX_DEPTH {
            return Err(self.err(format!("containers nest deeper than {MAX_DEPTH}")));
        }
        if let Some(Item::Value(_, d)) = self.stack.get_mut(at) {
            *d = (*d).max(child_depth + 1);
        }
        Ok(())
    }

    fn memo_put(&mut self, index: usize) -> Result<(), PickleError> {
        let (v, depth) = match self.stack.last() {
            Some(Item::Value(v, d)) => (v, *d),
            _ => return Err(self.err("no value on the stack to remember")),
        };
        if index as u64 > self.input.len {
            return Err(self.err(format!("memo index {index} is implausibly large")));
        }
        if let Some(slot) = self.fetched.slot(index) {
            self.memo[slot] = Some((v.clone(), depth));
        }
        Ok(())
    }

    fn memo_get(&mut self, index: usize) -> Result<(), PickleError> {
        let (v, depth) = self
            .fetched
            .slot(index)
            .and_then(|slot| self.memo[slot].clone())
            .ok_or_else(|| self.err(format!("memo entry {index} was never stored")))?;
        self.push_at(v, depth)
    }

    /// Which inner list of the stream the list on top is (`root[key][k]`), if any. The root
    /// dict is at the stack's bottom; its pairs, then the outer list's items, are each either
    /// after a mark (a batch) or alone (a batch of one).
    fn streamed_list(&self) -> Option<usize> {
        let key = self.stream.as_ref()?.key;
        let s = &self.stack;
        let value = |i: usize| match s.get(i) {
            Some(Item::Value(v, _)) => Some(v),
            _ => None,
        };
        let i = s.len().checked_sub(1)?;
        if !matches!(value(i)?, Value::List(_)) {
            return None;
        }
        // The outer list: right below (a batch of one), or below the batch's mark.
        let (outer, before) = match value(i.checked_sub(1)?) {
            Some(Value::List(l)) if is_root_key(s, i.checked_sub(2)?, key) => (l, 0),
            _ => {
                let mark = s[..i].iter().rposition(|x| matches!(x, Item::Mark))?;
                let Some(Value::List(l)) = value(mark.checked_sub(1)?) else {
                    return None;
                };
                if !is_root_key(s, mark.checked_sub(2)?, key) {
                    return None;
                }
                (l, i - mark - 1)
            }
        };
        Some(outer.borrow().len() + before)
    }

    fn append(&mut self, items: Vec<Value>, depth: usize) -> Result<(), PickleError> {
        if let Some(k) = self.streamed_list() {
            let stream = self.stream.as_mut().expect("a stream");
            for item in items {
                (stream.on_item)(k, item).map_err(|message| PickleError {
                    offset: self.input.at,
                    message,
                })?;
                self.streamed += 1;
            }
            return Ok(());
        }
        self.deepen(self.stack.len().wrapping_sub(1), depth)?;
        let extend = |into: &mut Vec<Value>| match into.is_empty() {
            true => *into = items,
            false => into.extend(items),
        };
        match self.top()? {
            Value::List(l) => extend(&mut l.borrow_mut()),
            Value::Set(s) => extend(&mut s.borrow_mut()),
            _ => return Err(self.err("appending to a value that is not a list")),
        }
        Ok(())
    }

    /// Sets the pairs of the values from `first` up on the stack (which it removes) in the dict
    /// at `dict`, whose recorded depth rises to hold them.
    fn set_items_from(&mut self, dict: usize, first: usize) -> Result<(), PickleError> {
        if !(self.stack.len() - first).is_multiple_of(2) {
            return Err(self.err("a dict update with a key but no value"));
        }
        let depth = (self.stack[first..].iter())
            .map(|i| match i {
                Item::Value(_, d) => *d,
                Item::Mark => 0,
            })
            .max()
            .unwrap_or(0);
        self.deepen(dict, depth)?;
        let d = match self.stack.get(dict) {
            Some(Item::Value(Value::Dict(d), _)) => Rc::clone(d),
            _ => return Err(self.err("setting an item of a value that is not a dict")),
        };
        let mut d = d.borrow_mut();
        d.reserve((self.stack.len() - first) / 2);
        let mut it = self.stack.drain(first..).map(|i| match i {
            Item::Value(v, _) => v,
            Item::Mark => Value::None,
        });
        // Appended as they come, a key set again too: [`Value::get`] reads the last.
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            d.push((k, v));
        }
        Ok(())
    }

    /// `SETITEMS`: the pairs since the last mark (which goes) set in the dict below it.
    fn set_items_since_mark(&mut self) -> Result<(), PickleError> {
        let mark = self.last_mark()?;
        self.set_items_from(mark.wrapping_sub(1), mark + 1)?;
        self.stack.pop();
        Ok(())
    }

    /// After a `MARK`: a run of memo fetches closed by `APPENDS` (a snapshot's stacks: an
    /// allocation's frames, fetched from the memo, are most of its event's opcodes), when the
    /// buffer holds it whole and the memo every entry, appended at once with no stack in
    /// between. `false` leaves it to the opcodes one by one, which name what is wrong.
    fn fetched_run(&mut self) -> Result<bool, PickleError> {
        let ahead = &self.input.buf[self.input.start..self.input.end];
        let mut at = 0;
        let mut depth = 0;
        self.run.clear();
        loop {
            let (index, n) = match ahead.get(at) {
                Some(b'h') => match ahead.get(at + 1) {
                    Some(&i) => (usize::from(i), 2),
                    None => return Ok(false),
                },
                Some(b'j') => match ahead.get(at + 1..at + 5) {
                    Some(raw) => (index(raw), 5),
                    None => return Ok(false),
                },
                Some(b'e') if !self.run.is_empty() => break,
                _ => return Ok(false),
            };
            let Some(slot) = self.fetched.slot(index) else {
                return Ok(false);
            };
            let Some((_, d)) = &self.memo[slot] else {
                return Ok(false);
            };
            depth = depth.max(*d);
            self.run.push(slot as u32);
            at += n;
        }
        // Cloned in one pass into a list made at its length (each slot was found remembered
        // above), not as the run is read nor pushed in a loop: there each value goes through
        // the stack into a vector that may grow under it, and the copy stalls (x86 store
        // forwarding).
        let memo = &self.memo;
        let items: Vec<Value> = (self.run.iter())
            .map(|&slot| (memo[slot as usize].as_ref()).map_or(Value::None, |(v, _)| v.clone()))
            .collect();
        self.input.advance(at + 1);
        self.append(items, depth)?;
        Ok(true)
    }

    /// Up to [`OPS_PER_CALL`] opcodes of the second pass; the pickle's value once it has read
    /// `STOP`.
    #[inline(never)]
    fn run_some(&mut self) -> Result<Option<Value>, PickleError> {
        for _ in 0..OPS_PER_CALL {
            let at = self.input.at;
            let v = match self.input.op()? {
                Op::Proto(version) => {
                    if !(2..=5).contains(&version) {
                        return Err(self.err(format!(
                            "pickle protocol {version} (this reader reads 2 to 5)"
                        )));
                    }
                    continue;
                }
                Op::Stop => return self.pop().map(Some),
                Op::Mark => {
                    if !self.fetched_run()? {
                        self.stack.push(Item::Mark);
                    }
                    continue;
                }
                Op::Pop => {
                    self.stack.pop();
                    continue;
                }
                Op::PopMark => {
                    self.pop_mark()?;
                    continue;
                }
                Op::Dup => {
                    let (v, d) = self.pop_with_depth()?;
                    self.push_at(v.clone(), d)?;
                    self.push_at(v, d)?;
                    continue;
                }
                Op::Value(v) => v,
                Op::Text(raw, text_at) => match std::str::from_utf8(raw) {
                    Ok(s) => Value::Str(Rc::new(s.into())),
                    Err(_) => {
                        return Err(PickleError {
                            offset: text_at,
                            message: "a string that is not UTF-8".into(),
                        });
                    }
                },
                Op::Bytes(raw) => Value::Bytes(Rc::new(raw.into())),
                Op::EmptyDict => Value::Dict(Rc::default()),
                Op::EmptyList => Value::List(Rc::default()),
                Op::EmptyTuple => Value::Tuple(Rc::default()),
                Op::EmptySet => Value::Set(Rc::default()),
                Op::Tuple => {
                    let (items, d) = self.pop_mark()?;
                    self.push_at(Value::Tuple(Rc::new(Items(items))), d + 1)?;
                    continue;
                }
                Op::TupleN(n) => {
                    let mut items = Vec::with_capacity(n);
                    let mut depth = 0;
                    for _ in 0..n {
                        let (v, d) = self.pop_with_depth()?;
                        depth = depth.max(d);
                        items.push(v);
                    }
                    items.reverse();
                    self.push_at(Value::Tuple(Rc::new(Items(items))), depth + 1)?;
                    continue;
                }
                Op::List => {
                    let (items, d) = self.pop_mark()?;
                    self.push_at(Value::List(Rc::new(RefCell::new(Items(items)))), d + 1)?;
                    continue;
                }
                Op::Dict => {
                    // The dict takes the mark's place: its pairs are the values above it.
                    let mark = self.last_mark()?;
                    self.stack[mark] = Item::Value(Value::Dict(Rc::default()), 0);
                    self.set_items_from(mark, mark + 1)?;
                    continue;
                }
                Op::FrozenSet => {
                    let (items, d) = self.pop_mark()?;
                    self.push_at(Value::Set(Rc::new(RefCell::new(Items(items)))), d + 1)?;
                    continue;
                }
                Op::Append => {
                    let (v, d) = self.pop_with_depth()?;
                    self.append(vec![v], d)?;
                    continue;
                }
                Op::Appends => {
                    let (items, d) = self.pop_mark()?;
                    self.append(items, d)?;
                    continue;
                }
                Op::SetItem => {
                    let Some(first) = self.stack.len().checked_sub(2) else {
                        return Err(self.err("the stack is empty"));
                    };
                    if self.stack[first..].iter().any(|i| matches!(i, Item::Mark)) {
                        return Err(self.err("a mark where a value was expected"));
                    }
                    self.set_items_from(first.wrapping_sub(1), first)?;
                    continue;
                }
                Op::SetItems => {
                    self.set_items_since_mark()?;
                    continue;
                }
                Op::Memoize => {
                    let index = self.memo_next;
                    self.memo_put(index)?;
                    self.memo_next += 1;
                    continue;
                }
                Op::Put(i) => {
                    self.memo_put(i)?;
                    self.memo_next = self.memo_next.max(i + 1);
                    continue;
                }
                Op::Get(i) => {
                    self.memo_get(i)?;
                    continue;
                }
                Op::StackGlobal => {
                    let name = self.pop().ok();
                    let module = self.pop().ok();
                    let name = match (module.as_ref(), name.as_ref()) {
                        (Some(Value::Str(m)), Some(Value::Str(n))) => format!("{m}.{n}"),
                        _ => "a global".to_string(),
                    };
                    return Err(PickleError {
                        offset: at,
                        message: format!(
                            "it refers to `{name}`: this reader builds plain values and never imports or calls anything"
                        ),
                    });
                }
            };
            self.push(v)?;
        }
        Ok(None)
    }
}

/// Whether stack item `i` is a key of the root dict (the stack's bottom): alone on it (a batch
/// of one pair), or at a key's place in its batch after the mark right above it.
fn is_root_key(s: &[Item], i: usize, key: &str) -> bool {
    let is_key = matches!(s.get(i), Some(Item::Value(Value::Str(k), _)) if &***k == key);
    let root = matches!(s.first(), Some(Item::Value(Value::Dict(_), _)));
    is_key
        && root
        && (i == 1
            || (matches!(s.get(1), Some(Item::Mark))
                && i >= 2
                && (i - 2).is_multiple_of(2)
                && !s[2..i].iter().any(|x| matches!(x, Item::Mark))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn little_endian_reads_every_width_as_a_shift_would() {
        let shifted = |raw: &[u8]| raw.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x));
        let bytes: Vec<u8> = (1..=12).map(|b| b * 17).collect();
        for n in 0..=bytes.len() {
            assert_eq!(le(&bytes[..n]), shifted(&bytes[..n]), "{n} bytes");
        }
    }

    /// A key set again reads as the value set last, as Python reads it, however it was set:
    /// by `SETITEMS`, `SETITEM` or `DICT` (the bytes as `pickle.loads` reads them: `{'a': 2,
    /// 'b': 5}`, `{'a': 3}`, `{'a': 4}`).
    #[test]
    fn a_key_set_again_reads_as_its_last_value() {
        let cases: [(&[u8], i128); 3] = [
            (b"\x80\x02}(X\x01\x00\x00\x00aK\x01X\x01\x00\x00\x00bK\x05X\x01\x00\x00\x00aK\x02u.", 2),
            (b"\x80\x02}X\x01\x00\x00\x00aK\x01sX\x01\x00\x00\x00aK\x03s.", 3),
            (b"\x80\x02(X\x01\x00\x00\x00aK\x01X\x01\x00\x00\x00aK\x04d.", 4),
        ];
        for (bytes, a) in cases {
            let dict = read(bytes).unwrap();
            assert_eq!(dict.get("a").and_then(|v| v.as_int()), Some(a));
        }
        let dict = read(cases[0].0).unwrap();
        assert_eq!(dict.get("b").and_then(|v| v.as_int()), Some(5));
        assert!(dict.get("c").is_none());
    }

    /// A dict keeps its pairs in the order set, a key set again among them.
    #[test]
    fn a_dict_keeps_its_pairs_in_the_order_set() {
        let keys: Vec<u32> = (0..1000).chain([5]).collect();
        let mut bytes = b"\x80\x02}(".to_vec();
        for &k in &keys {
            bytes.push(b'J');
            bytes.extend(k.to_le_bytes());
            bytes.extend(b"K\x01");
        }
        bytes.extend(b"u.");
        let dict = read(&bytes).unwrap();
        let Value::Dict(d) = &dict else {
            panic!("not a dict");
        };
        let read: Vec<i128> = d.borrow().iter().filter_map(|(k, _)| k.as_int()).collect();
        assert_eq!(
            read,
            keys.iter().map(|&k| i128::from(k)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_table_of_arguments_is_the_match() {
        for op in 0..=255u8 {
            let (table, matched) = (arg_of(op), arg_of_op(op));
            let same = match (table, matched) {
                (None, None) | (Some(Arg::None), Some(Arg::None)) => true,
                (Some(Arg::Fixed(a)), Some(Arg::Fixed(b)))
                | (Some(Arg::Counted(a)), Some(Arg::Counted(b))) => a == b,
                _ => false,
            };
            assert!(same, "opcode {op:#x}");
        }
    }

    #[test]
    fn plain_values_of_protocol_4() {
        // pickle.dumps({'a': [1, -2, 3.5, 'x', b'y', None, True, (1, 2)], 'big': 2**70}, 4)
        let bytes: &[u8] = b"\x80\x04\x95>\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94]\x94(K\x01J\xfe\xff\xff\xffG@\x0c\x00\x00\x00\x00\x00\x00\x8c\x01x\x94C\x01y\x94N\x88K\x01K\x02\x86\x94e\x8c\x03big\x94\x8a\t\x00\x00\x00\x00\x00\x00\x00\x00@u.";
        let v = read(bytes).unwrap();
        let a = v.get("a").unwrap().items().unwrap();
        assert_eq!(a[0].as_int(), Some(1));
        assert_eq!(a[1].as_int(), Some(-2));
        assert!(matches!(a[2], Value::Float(f) if f == 3.5));
        assert_eq!(a[3].as_str(), Some("x"));
        assert!(matches!(&a[4], Value::Bytes(b) if &b[..] == b"y"));
        assert!(matches!(a[5], Value::None));
        assert_eq!(a[6].as_int(), Some(1));
        assert_eq!(a[7].items().unwrap().len(), 2);
        assert_eq!(v.get("big").unwrap().as_int(), Some(1i128 << 70));
    }

    #[test]
    fn globals_and_calls_are_refused_by_name() {
        // pickle.dumps(os.system, 2) style: GLOBAL 'os\nsystem\n'.
        let e = read(b"\x80\x02cos\nsystem\nq\x00.").unwrap_err();
        assert_eq!(e.offset, 2);
        assert!(e.to_string().contains("`os.system`"), "{e}");
        let e = read(b"\x80\x04\x8c\x02os\x8c\x06system\x93.").unwrap_err();
        assert!(e.to_string().contains("`os.system`"), "{e}");
        let e = read(b"\x80\x02N)R.").unwrap_err();
        assert!(e.to_string().contains("builds or calls objects"), "{e}");
    }

    #[test]
    fn hostile_shapes_are_errors_not_hangs_or_huge_allocations() {
        // A string claiming 2^64 - 1 bytes.
        let e = read(b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff").unwrap_err();
        assert!(
            e.to_string().contains("cut short") || e.to_string().contains("reach"),
            "{e}"
        );
        // Lists nested past the limit.
        let mut deep = b"\x80\x04".to_vec();
        deep.extend(vec![b']'; MAX_DEPTH + 5]);
        deep.extend(vec![b'a'; MAX_DEPTH + 4]);
        deep.push(b'.');
        assert!(read(&deep).unwrap_err().to_string().contains("nest deeper"));
        assert!(read(b"").is_err());
        assert!(read(b"\x80\x01N.").is_err());
        assert!(
            read(b"\x80\x04h\x05.")
                .unwrap_err()
                .to_string()
                .contains("never stored")
        );
        // A list that contains itself (through the memo) is built without looping.
        let v = read(b"\x80\x04]\x94h\x00a.").unwrap();
        assert!(matches!(v, Value::List(_)));
    }

    /// A list remembered empty, filled after, and fetched into the next, 200,000 times: the
    /// memo nests past [`MAX_DEPTH`] unseen (each list was at depth 0 when remembered), and
    /// dropping the chain recursed once a level (the CLI aborted on a stack overflow). It reads,
    /// and drops, on a thread of a 256 KiB stack; so does a chain of dicts.
    #[test]
    fn containers_nested_through_the_memo_drop_on_a_small_stack() {
        // Each container is made, remembered, given the one before (after `key`, for a dict),
        // and popped; the last is the pickle's value.
        let chain = |open: &[u8], key: &[u8], set: u8| {
            let mut bytes = b"\x80\x04".to_vec();
            for k in 0..200_000u32 {
                bytes.extend(open);
                bytes.push(b'r');
                bytes.extend(k.to_le_bytes());
                if k > 0 {
                    bytes.extend(key);
                    bytes.push(b'j');
                    bytes.extend((k - 1).to_le_bytes());
                    bytes.push(set);
                }
                bytes.push(b'0');
            }
            bytes.push(b'j');
            bytes.extend(199_999u32.to_le_bytes());
            bytes.push(b'.');
            bytes
        };
        let (lists, dicts) = (chain(b"]", b"", b'a'), chain(b"}", b"K\x00", b's'));
        let read_and_drop = move || {
            let list = read(&lists).unwrap();
            assert_eq!(list.items().map(|items| items.len()), Some(1));
            drop(list);
            let dict = read(&dicts).unwrap();
            assert!(dict.get("absent").is_none() && matches!(dict, Value::Dict(_)));
            drop(dict);
        };
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(read_and_drop)
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn the_memo_shares_a_container_filled_after_it_was_stored() {
        // l = []; pickle.dumps([l, l], 4): the second element is a memo get of the first.
        let v = read(b"\x80\x04\x95\t\x00\x00\x00\x00\x00\x00\x00]\x94(]\x94h\x01e.").unwrap();
        let outer = v.items().unwrap();
        assert_eq!(outer.len(), 2);
        let (Value::List(a), Value::List(b)) = (&outer[0], &outer[1]) else {
            panic!("{outer:?}")
        };
        assert!(Rc::ptr_eq(a, b), "one list, shared");
        // A list memoized empty and filled afterwards is seen filled through the memo.
        let v = read(b"\x80\x04]\x94K\x07a(h\x00h\x00l.").unwrap();
        assert_eq!(v.items().unwrap()[0].items().unwrap()[0].as_int(), Some(7));
    }

    #[test]
    fn a_run_of_memo_fetches_reads_as_the_fetches_one_by_one() {
        // (xs, xs[::-1]) for 300 memoized strings: the second list is one run of fetches,
        // `LONG_BINGET` for indices past 255, `BINGET` below.
        let mut bytes = b"\x80\x04](".to_vec();
        for i in 0..300 {
            let s = i.to_string();
            bytes.extend([0x8c, s.len() as u8]);
            bytes.extend(s.as_bytes());
            bytes.push(0x94);
        }
        bytes.extend(b"e](");
        for i in (0..300u32).rev() {
            match u8::try_from(i) {
                Ok(i) => bytes.extend([b'h', i]),
                Err(_) => {
                    bytes.push(b'j');
                    bytes.extend(i.to_le_bytes());
                }
            }
        }
        bytes.extend(b"e\x86.");
        let whole = read(&bytes).unwrap();
        let lists = whole.items().unwrap();
        let (xs, back) = (lists[0].items().unwrap(), lists[1].items().unwrap());
        assert_eq!(back.len(), 300);
        for (k, v) in back.iter().enumerate() {
            assert_eq!(v.as_str(), xs[299 - k].as_str());
        }

        // A run that a `LIST` closes, not `APPENDS`, and one that fetches what was never
        // stored, read as the opcodes one by one read them. (The snapshots of tests/data, read
        // a byte at a time so that no run is ever whole in the buffer, read as they do whole:
        // memplan-formats' torch tests.)
        let listed = b"\x80\x04\x8c\x01a\x94\x8c\x01b\x94(h\x00h\x01h\x00l\x86.";
        let list = read(listed).unwrap().items().unwrap()[1].items().unwrap();
        let texts: Vec<_> = list.iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(texts, ["a", "b", "a"]);
        let e = read(b"\x80\x04\x8c\x01a\x94](h\x00h\x07e.").unwrap_err();
        assert_eq!(e.offset, 12);
        assert!(
            e.to_string().contains("memo entry 7 was never stored"),
            "{e}"
        );
    }

    #[test]
    fn a_run_of_memo_fetches_into_a_streamed_list_is_streamed() {
        // x = {'a': 7}; pickle.dumps({'p': x, 'device_traces': [[x, x], [x]]}, 4)
        let bytes: &[u8] = b"\x80\x04\x953\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01p\x94}\x94\x8c\x01a\x94K\x07s\x8c\rdevice_traces\x94]\x94(]\x94(h\x02h\x02e]\x94h\x02aeu.";
        let (got, root) = streamed(bytes);
        assert_eq!(got, vec![(0, 7), (0, 7), (1, 7)]);
        let lists = root.get("device_traces").unwrap().items().unwrap();
        assert!(lists.iter().all(|l| l.items().unwrap().is_empty()));
    }

    /// Reads `bytes` streaming `device_traces`' items: what was streamed, and the root.
    fn streamed(bytes: &[u8]) -> (Vec<(usize, i128)>, Value) {
        let mut got = Vec::new();
        let mut on_item = |k: usize, v: Value| {
            got.push((k, v.get("a").and_then(|a| a.as_int()).unwrap_or(-1)));
            Ok(())
        };
        let stream = Stream {
            key: "device_traces",
            on_item: &mut on_item,
        };
        let len = bytes.len() as u64;
        let root =
            read_streaming(std::io::Cursor::new(bytes), len, Some(stream), &mut |_| {}).unwrap();
        (got, root)
    }

    #[test]
    fn a_streamed_list_hands_its_items_over_in_order_and_stays_empty() {
        // pickle.dumps({'device_traces': [[{'a': 1}, {'a': 2}, {'a': 3}], [{'a': 4}]], 'x': 1}, P)
        let p2: &[u8] = b"\x80\x02}q\x00(X\r\x00\x00\x00device_tracesq\x01]q\x02(]q\x03(}q\x04X\x01\x00\x00\x00aq\x05K\x01s}q\x06h\x05K\x02s}q\x07h\x05K\x03se]q\x08}q\th\x05K\x04saeX\x01\x00\x00\x00xq\nK\x01u.";
        let p4: &[u8] = b"\x80\x04\x95D\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\rdevice_traces\x94]\x94(]\x94(}\x94\x8c\x01a\x94K\x01s}\x94h\x05K\x02s}\x94h\x05K\x03se]\x94}\x94h\x05K\x04sae\x8c\x01x\x94K\x01u.";
        for bytes in [p2, p4] {
            let (got, root) = streamed(bytes);
            assert_eq!(got, vec![(0, 1), (0, 2), (0, 3), (1, 4)]);
            let lists = root.get("device_traces").unwrap().items().unwrap();
            assert_eq!(lists.len(), 2);
            assert!(lists.iter().all(|l| l.items().unwrap().is_empty()));
            assert_eq!(root.get("x").unwrap().as_int(), Some(1));
            // Read whole, the same pickle holds the items.
            let whole = read(bytes).unwrap();
            let first = whole.get("device_traces").unwrap().items().unwrap()[0].clone();
            assert_eq!(first.items().unwrap().len(), 3);
        }
        // A dict of one key and lists of one item: no marks, each a batch of one.
        // pickle.dumps({'device_traces': [[{'a': 5}]]}, 4)
        let one: &[u8] = b"\x80\x04\x95#\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\rdevice_traces\x94]\x94]\x94}\x94\x8c\x01a\x94K\x05saas.";
        assert_eq!(streamed(one).0, vec![(0, 5)]);
    }

    /// Hands out at most one byte per read: every opcode and string crosses a buffer's end.
    struct OneByte<'a>(&'a [u8], u64);

    impl std::io::Read for OneByte<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let at = self.1 as usize;
            if at >= self.0.len() || buf.is_empty() {
                return Ok(0);
            }
            buf[0] = self.0[at];
            self.1 += 1;
            Ok(1)
        }
    }

    impl std::io::Seek for OneByte<'_> {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            let std::io::SeekFrom::Start(at) = to else {
                unreachable!("only rewinds")
            };
            self.1 = at;
            Ok(at)
        }
    }

    /// FRAME opcodes, a hint each, are read in a loop: a pickle of a million of them (hostile,
    /// or just odd) reads like the value after them, in both passes, without a stack to match.
    #[test]
    fn a_million_frames_read_without_recursing() {
        let mut bytes = vec![0x80, 4];
        for _ in 0..1_000_000 {
            bytes.push(0x95);
            bytes.extend_from_slice(&0u64.to_le_bytes());
        }
        bytes.extend_from_slice(&[b'K', 7, b'.']);
        assert_eq!(read(&bytes).unwrap().as_int(), Some(7));
    }

    /// Both passes read each opcode's argument by one table: skipping and decoding step over
    /// the same bytes, opcode by opcode, to the end of every pickle protocol's snapshot.
    #[test]
    fn skipping_an_opcode_steps_over_the_bytes_decoding_it_reads() {
        for bytes in [
            &include_bytes!("../../../tests/data/torch/magma27_memory_snapshot.pickle")[..],
            include_bytes!("../../../tests/data/torch/generated-p2.pickle"),
            include_bytes!("../../../tests/data/torch/generated-p3.pickle"),
            include_bytes!("../../../tests/data/torch/generated-p5.pickle"),
        ] {
            let len = bytes.len() as u64;
            let (mut heard_skip, mut heard_op) = (|_| {}, |_| {});
            let mut skipping = Decoder::new(bytes, len, 0, &mut heard_skip);
            let mut decoding = Decoder::new(bytes, len, 0, &mut heard_op);
            let mut opcodes = 0;
            loop {
                let skipped = skipping.skip().unwrap();
                let stop = matches!(decoding.op().unwrap(), Op::Stop);
                assert_eq!(skipping.at, decoding.at, "after opcode {opcodes}");
                assert_eq!(matches!(skipped, Skipped::Stop), stop);
                opcodes += 1;
                if stop {
                    break;
                }
            }
            assert!(opcodes > 1000);
            assert_eq!(skipping.at, len);
        }
    }

    /// The first pass's loop over the buffer finds the fetches the checked read finds opcode by
    /// opcode, whether the buffer holds the whole pickle or a byte of it at a time.
    #[test]
    fn the_first_pass_finds_every_fetch_the_checked_read_finds() {
        let set = |f: &Fetched| -> Vec<usize> {
            (0..f.bits.len() * 64)
                .filter(|&i| f.slot(i).is_some())
                .collect()
        };
        for bytes in [
            &include_bytes!("../../../tests/data/torch/magma27_memory_snapshot.pickle")[..],
            include_bytes!("../../../tests/data/torch/generated-p2.pickle"),
            include_bytes!("../../../tests/data/torch/generated-p5.pickle"),
        ] {
            let len = bytes.len() as u64;
            let mut heard = |_| {};
            let mut one_by_one = Decoder::new(bytes, len, 0, &mut heard);
            let mut expected = std::collections::BTreeSet::new();
            loop {
                match one_by_one.skip().unwrap() {
                    Skipped::Stop => break,
                    Skipped::Get(i) => {
                        expected.insert(i);
                    }
                    Skipped::Other => {}
                }
            }
            let expected: Vec<usize> = expected.into_iter().collect();
            assert!(expected.len() > 100);
            let mut heard = |_| {};
            let whole = fetched_memo(&mut Decoder::new(bytes, len, 0, &mut heard));
            assert_eq!(set(&whole), expected);
            let mut heard = |_| {};
            let split = fetched_memo(&mut Decoder::new(OneByte(bytes, 0), len, 0, &mut heard));
            assert_eq!(set(&split), expected);
        }
    }

    #[test]
    fn reads_split_anywhere_give_the_same_values() {
        let bytes = include_bytes!("../../../tests/data/torch/magma27_memory_snapshot.pickle");
        let len = bytes.len() as u64;
        let mut heard = Vec::new();
        let split = read_streaming(OneByte(bytes, 0), len, None, &mut |at| heard.push(at)).unwrap();
        let whole = read(bytes).unwrap();
        let count = |v: &Value| {
            v.get("device_traces").unwrap().items().unwrap()[0]
                .items()
                .unwrap()
                .len()
        };
        assert_eq!(count(&split), count(&whole));
        assert_eq!(count(&whole), 5163);
        // Progress rises to both passes' end.
        assert!(heard.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(heard.last(), Some(&(2 * len)));
    }

    #[test]
    fn only_the_memo_entries_the_pickle_fetches_are_kept() {
        // pickle.dumps([l, l], 4) with l = []: two lists memoized, the inner one fetched.
        let bytes: &[u8] = b"\x80\x04\x95\t\x00\x00\x00\x00\x00\x00\x00]\x94(]\x94h\x01e.";
        let mut progress = |_| {};
        let mut scan = Decoder::new(bytes, bytes.len() as u64, 0, &mut progress);
        let fetched = fetched_memo(&mut scan);
        assert_eq!(fetched.count(), 1);
        assert_eq!(fetched.slot(1), Some(0));
        assert_eq!(fetched.slot(0), None);
        // A cut-short or hostile pickle ends the first pass early, not in error.
        let mut scan = Decoder::new(&b"\x80\x04j\xff\xff\xff\xff"[..], 7, 0, &mut progress);
        assert_eq!(fetched_memo(&mut scan).count(), 0);
    }
}
