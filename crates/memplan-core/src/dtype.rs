//! Element types: their widths, and the names a dump spells them with.
//!
//! A dtype does two jobs: with a shape it gives a tensor's byte size, and with precision classes on
//! it decides which tensors may share bytes (only equal dtypes). Sub-byte types round the whole
//! tensor up to a byte, never each element.

use std::fmt;
use std::str::FromStr;

/// An element type. The order of the variants is the canonical order of precision classes (the
/// microscaling types, added later, come last, so that no earlier type's place changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DType {
    Bool,
    I4,
    U4,
    I8,
    U8,
    F8E4M3,
    F8E5M2,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    I64,
    U64,
    F64,
    C64,
    C128,
    /// Four-bit float (OCP microscaling FP4, ONNX `FLOAT4E2M1`).
    F4E2M1,
    /// Eight-bit power-of-two scale (OCP microscaling E8M0, ONNX `FLOAT8E8M0`).
    F8E8M0,
    /// Two-bit integers (ONNX `INT2`, `UINT2`), four to a byte.
    I2,
    U2,
}

impl DType {
    /// Every dtype, in canonical order.
    pub const ALL: [DType; 23] = [
        DType::Bool,
        DType::I4,
        DType::U4,
        DType::I8,
        DType::U8,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::I16,
        DType::U16,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U32,
        DType::F32,
        DType::I64,
        DType::U64,
        DType::F64,
        DType::C64,
        DType::C128,
        DType::F4E2M1,
        DType::F8E8M0,
        DType::I2,
        DType::U2,
    ];

    /// The name a dump uses for this dtype.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I4 => "i4",
            DType::U4 => "u4",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::F32 => "f32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::F64 => "f64",
            DType::C64 => "c64",
            DType::C128 => "c128",
            DType::F4E2M1 => "f4e2m1",
            DType::F8E8M0 => "f8e8m0",
            DType::I2 => "i2",
            DType::U2 => "u2",
        }
    }

    /// Bits per element.
    pub fn bits(self) -> u64 {
        match self {
            DType::I2 | DType::U2 => 2,
            DType::I4 | DType::U4 | DType::F4E2M1 => 4,
            DType::Bool | DType::I8 | DType::U8 | DType::F8E4M3 | DType::F8E5M2 | DType::F8E8M0 => {
                8
            }
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 16,
            DType::I32 | DType::U32 | DType::F32 => 32,
            DType::I64 | DType::U64 | DType::F64 | DType::C64 => 64,
            DType::C128 => 128,
        }
    }

    /// The bytes of `elements` elements, rounded up to a whole byte; `None` on overflow.
    pub fn bytes_for(self, elements: u64) -> Option<u64> {
        let bits = elements.checked_mul(self.bits())?;
        Some(bits.div_ceil(8))
    }
}

/// Serialized as its name (`"f32"`), like a dump spells it.
impl serde::Serialize for DType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for DType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse()
            .map_err(|_| serde::de::Error::custom(format!("unknown dtype `{name}`")))
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error of parsing a dtype name that memplan does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownDType;

impl FromStr for DType {
    type Err = UnknownDType;

    /// Accepts the canonical names and the common spellings of numpy and PyTorch
    /// (`float32`, `half`, `bfloat16`, `int64`, ...).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let canonical = match s.to_ascii_lowercase().as_str() {
            "bool" => DType::Bool,
            "i4" | "int4" => DType::I4,
            "u4" | "uint4" => DType::U4,
            "i8" | "int8" => DType::I8,
            "u8" | "uint8" => DType::U8,
            "f8e4m3" | "float8_e4m3fn" | "float8e4m3fn" => DType::F8E4M3,
            "f8e5m2" | "float8_e5m2" | "float8e5m2" => DType::F8E5M2,
            "i16" | "int16" | "short" => DType::I16,
            "u16" | "uint16" => DType::U16,
            "f16" | "float16" | "half" | "fp16" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "i32" | "int32" | "int" => DType::I32,
            "u32" | "uint32" => DType::U32,
            "f32" | "float32" | "float" | "fp32" => DType::F32,
            "i64" | "int64" | "long" => DType::I64,
            "u64" | "uint64" => DType::U64,
            "f64" | "float64" | "double" | "fp64" => DType::F64,
            "c64" | "complex64" => DType::C64,
            "c128" | "complex128" => DType::C128,
            "f4e2m1" | "float4e2m1" => DType::F4E2M1,
            "f8e8m0" | "float8_e8m0fnu" | "float8e8m0" => DType::F8E8M0,
            "i2" | "int2" => DType::I2,
            "u2" | "uint2" => DType::U2,
            _ => return Err(UnknownDType),
        };
        Ok(canonical)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_parse() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>(), Ok(d));
        }
        assert_eq!("float32".parse::<DType>(), Ok(DType::F32));
        assert_eq!("BFloat16".parse::<DType>(), Ok(DType::BF16));
        assert_eq!("f33".parse::<DType>(), Err(UnknownDType));
    }

    #[test]
    fn sub_byte_types_round_the_tensor_up() {
        assert_eq!(DType::I4.bytes_for(3), Some(2));
        assert_eq!(DType::F4E2M1.bytes_for(5), Some(3));
        assert_eq!(DType::F8E8M0.bytes_for(5), Some(5));
        assert_eq!(DType::U2.bytes_for(5), Some(2));
        assert_eq!(DType::F32.bytes_for(10), Some(40));
        assert_eq!(DType::F64.bytes_for(u64::MAX), None);
    }
}
