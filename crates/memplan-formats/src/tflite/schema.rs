//! The tables of the TFLite schema (`tests/data/tflite/schema.fbs`) that memplan reads, over the
//! `flatbuffers` crate's zero-copy reader.
//!
//! Each table is declared with its fields' slots in the schema (slot `n` is vtable offset
//! `4 + 2n`; a union takes two slots, its type and its value), as the flatbuffers code
//! generator declares them, for the fields memplan reads and no others. [`Model::verified`] runs
//! the crate's verifier over exactly those fields (bounds, alignment, UTF-8, the depth and count
//! of tables), so every accessor after it reads verified bytes: that is what makes the `unsafe`
//! reads of the crate's `Table::get` sound here, as in generated code.

use flatbuffers::{
    Follow, ForwardsUOffset, InvalidFlatbuffer, Table, VOffsetT, Vector, Verifiable, Verifier,
    VerifierOptions,
};

/// The vtable offset of field slot `n`.
pub(super) const fn slot(n: VOffsetT) -> VOffsetT {
    4 + 2 * n
}

macro_rules! table {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name<'a>(Table<'a>);

        impl<'a> Follow<'a> for $name<'a> {
            type Inner = $name<'a>;
            unsafe fn follow(buf: &'a [u8], loc: usize) -> Self::Inner {
                // SAFETY: as in generated code: `loc` is a table's position the verifier checked.
                $name(unsafe { Table::new(buf, loc) })
            }
        }
    };
}

/// A field of a verified table: `None` when absent.
macro_rules! field {
    ($self:ident, $ty:ty, $slot:expr) => {
        // SAFETY: the table was verified with this field at this slot and of this type.
        unsafe { $self.0.get::<$ty>(slot($slot), None) }
    };
    ($self:ident, $ty:ty, $slot:expr, $default:expr) => {
        // SAFETY: as above; a scalar field has its default when absent.
        unsafe { $self.0.get::<$ty>(slot($slot), Some($default)) }.unwrap_or($default)
    };
}

type Offsets<'a, T> = ForwardsUOffset<Vector<'a, ForwardsUOffset<T>>>;
type Ints<'a> = ForwardsUOffset<Vector<'a, i32>>;
type Bytes<'a> = ForwardsUOffset<Vector<'a, u8>>;

table!(
    /// The root: operator codes, subgraphs, buffers and metadata.
    Model
);
table!(SubGraph);
table!(Tensor);
table!(Operator);
table!(OperatorCode);
table!(Buffer);
table!(Metadata);
table!(
    /// The options of the control-flow operators: the subgraphs they run.
    SubgraphIndices
);

/// The `BuiltinOptions` union's members memplan reads: the control-flow operators' options.
pub const WHILE_OPTIONS: u8 = 93;
pub const IF_OPTIONS: u8 = 92;
pub const CALL_ONCE_OPTIONS: u8 = 103;

/// The most tables a model may hold for the verifier (bounds the work on a hostile file).
const MAX_TABLES: usize = 4_000_000;

impl<'a> Model<'a> {
    /// The model in `bytes`, verified; the error says what is wrong where.
    pub fn verified(bytes: &'a [u8]) -> Result<Model<'a>, InvalidFlatbuffer> {
        let options = VerifierOptions {
            max_tables: MAX_TABLES,
            ..VerifierOptions::default()
        };
        flatbuffers::root_with_opts::<Model>(&options, bytes)
    }

    /// The root table itself, for [`super::write`] to find its fields.
    pub fn table(&self) -> Table<'a> {
        self.0
    }
    pub fn operator_codes(&self) -> Option<Vector<'a, ForwardsUOffset<OperatorCode<'a>>>> {
        field!(self, Offsets<'a, OperatorCode>, 1)
    }
    pub fn subgraphs(&self) -> Option<Vector<'a, ForwardsUOffset<SubGraph<'a>>>> {
        field!(self, Offsets<'a, SubGraph>, 2)
    }
    pub fn description(&self) -> Option<&'a str> {
        field!(self, ForwardsUOffset<&str>, 3)
    }
    pub fn buffers(&self) -> Option<Vector<'a, ForwardsUOffset<Buffer<'a>>>> {
        field!(self, Offsets<'a, Buffer>, 4)
    }
    pub fn metadata(&self) -> Option<Vector<'a, ForwardsUOffset<Metadata<'a>>>> {
        field!(self, Offsets<'a, Metadata>, 6)
    }
}

impl Verifiable for Model<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<Offsets<OperatorCode>>("operator_codes", slot(1), false)?
            .visit_field::<Offsets<SubGraph>>("subgraphs", slot(2), false)?
            .visit_field::<ForwardsUOffset<&str>>("description", slot(3), false)?
            .visit_field::<Offsets<Buffer>>("buffers", slot(4), false)?
            .visit_field::<Offsets<Metadata>>("metadata", slot(6), false)?
            .finish();
        Ok(())
    }
}

impl<'a> SubGraph<'a> {
    pub fn tensors(&self) -> Option<Vector<'a, ForwardsUOffset<Tensor<'a>>>> {
        field!(self, Offsets<'a, Tensor>, 0)
    }
    pub fn inputs(&self) -> Option<Vector<'a, i32>> {
        field!(self, Ints<'a>, 1)
    }
    pub fn outputs(&self) -> Option<Vector<'a, i32>> {
        field!(self, Ints<'a>, 2)
    }
    pub fn operators(&self) -> Option<Vector<'a, ForwardsUOffset<Operator<'a>>>> {
        field!(self, Offsets<'a, Operator>, 3)
    }
}

impl Verifiable for SubGraph<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<Offsets<Tensor>>("tensors", slot(0), false)?
            .visit_field::<Ints>("inputs", slot(1), false)?
            .visit_field::<Ints>("outputs", slot(2), false)?
            .visit_field::<Offsets<Operator>>("operators", slot(3), false)?
            .finish();
        Ok(())
    }
}

impl<'a> Tensor<'a> {
    pub fn shape(&self) -> Option<Vector<'a, i32>> {
        field!(self, Ints<'a>, 0)
    }
    /// The `TensorType` code.
    pub fn element_type(&self) -> i8 {
        field!(self, i8, 1, 0)
    }
    pub fn buffer(&self) -> u32 {
        field!(self, u32, 2, 0)
    }
    pub fn name(&self) -> Option<&'a str> {
        field!(self, ForwardsUOffset<&str>, 3)
    }
    pub fn is_variable(&self) -> bool {
        field!(self, bool, 5, false)
    }
    /// Non-zero: the data is in an external file.
    pub fn external_buffer(&self) -> u32 {
        field!(self, u32, 10, 0)
    }
}

impl Verifiable for Tensor<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<Ints>("shape", slot(0), false)?
            .visit_field::<i8>("type", slot(1), false)?
            .visit_field::<u32>("buffer", slot(2), false)?
            .visit_field::<ForwardsUOffset<&str>>("name", slot(3), false)?
            .visit_field::<bool>("is_variable", slot(5), false)?
            .visit_field::<u32>("external_buffer", slot(10), false)?
            .finish();
        Ok(())
    }
}

impl<'a> Operator<'a> {
    pub fn opcode_index(&self) -> u32 {
        field!(self, u32, 0, 0)
    }
    pub fn inputs(&self) -> Option<Vector<'a, i32>> {
        field!(self, Ints<'a>, 1)
    }
    pub fn outputs(&self) -> Option<Vector<'a, i32>> {
        field!(self, Ints<'a>, 2)
    }
    /// The `BuiltinOptions` member its options are (0: none).
    pub fn builtin_options_type(&self) -> u8 {
        field!(self, u8, 3, 0)
    }
    /// The options of a control-flow operator (`WHILE_OPTIONS`, `IF_OPTIONS`,
    /// `CALL_ONCE_OPTIONS`); `None` for any other.
    pub fn subgraph_indices(&self) -> Option<SubgraphIndices<'a>> {
        match self.builtin_options_type() {
            WHILE_OPTIONS | IF_OPTIONS | CALL_ONCE_OPTIONS => {
                field!(self, ForwardsUOffset<SubgraphIndices>, 4)
            }
            _ => None,
        }
    }
    pub fn intermediates(&self) -> Option<Vector<'a, i32>> {
        field!(self, Ints<'a>, 8)
    }
}

impl Verifiable for Operator<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<u32>("opcode_index", slot(0), false)?
            .visit_field::<Ints>("inputs", slot(1), false)?
            .visit_field::<Ints>("outputs", slot(2), false)?
            .visit_union::<u8, _>(
                "builtin_options_type",
                slot(3),
                "builtin_options",
                slot(4),
                false,
                |key, v, pos| match key {
                    WHILE_OPTIONS | IF_OPTIONS | CALL_ONCE_OPTIONS => v
                        .verify_union_variant::<ForwardsUOffset<SubgraphIndices>>(
                            "control-flow options",
                            pos,
                        ),
                    _ => Ok(()),
                },
            )?
            .visit_field::<Ints>("intermediates", slot(8), false)?
            .finish();
        Ok(())
    }
}

impl SubgraphIndices<'_> {
    /// `WhileOptions`: cond, body; `IfOptions`: then, else; `CallOnceOptions`: init.
    pub fn first(&self) -> i32 {
        field!(self, i32, 0, 0)
    }
    pub fn second(&self) -> i32 {
        field!(self, i32, 1, 0)
    }
}

impl Verifiable for SubgraphIndices<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<i32>("first", slot(0), false)?
            .visit_field::<i32>("second", slot(1), false)?
            .finish();
        Ok(())
    }
}

impl<'a> OperatorCode<'a> {
    pub fn deprecated_builtin_code(&self) -> i8 {
        field!(self, i8, 0, 0)
    }
    pub fn custom_code(&self) -> Option<&'a str> {
        field!(self, ForwardsUOffset<&str>, 1)
    }
    pub fn builtin_code(&self) -> i32 {
        field!(self, i32, 3, 0)
    }
}

impl Verifiable for OperatorCode<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<i8>("deprecated_builtin_code", slot(0), false)?
            .visit_field::<ForwardsUOffset<&str>>("custom_code", slot(1), false)?
            .visit_field::<i32>("builtin_code", slot(3), false)?
            .finish();
        Ok(())
    }
}

impl<'a> Buffer<'a> {
    pub fn data(&self) -> Option<Vector<'a, u8>> {
        field!(self, Bytes<'a>, 0)
    }
    /// Past 2 GB the data lies outside the FlatBuffer: its offset (valid when above 1).
    pub fn offset(&self) -> u64 {
        field!(self, u64, 1, 0)
    }
}

impl Verifiable for Buffer<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<Bytes>("data", slot(0), false)?
            .visit_field::<u64>("offset", slot(1), false)?
            .finish();
        Ok(())
    }
}

impl<'a> Metadata<'a> {
    pub fn name(&self) -> Option<&'a str> {
        field!(self, ForwardsUOffset<&str>, 0)
    }
    pub fn buffer(&self) -> u32 {
        field!(self, u32, 1, 0)
    }
}

impl Verifiable for Metadata<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<&str>>("name", slot(0), false)?
            .visit_field::<u32>("buffer", slot(1), false)?
            .finish();
        Ok(())
    }
}
