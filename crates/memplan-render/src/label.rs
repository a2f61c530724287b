//! Names cut to the room a drawing gives them, the same on the canvas and in the SVG.
//!
//! A scoped name (`MobilenetV1/MobilenetV1/Conv2d_1_pointwise/Relu6`, an ONNX export's
//! `/model/layers.0/attn/MatMul_output_0`) shares its head with its neighbours: cut at its end,
//! every block of a model reads `Mobil…`. Such a name keeps its last scopes instead
//! (`…Relu6`, `…Conv2d_1_pointwise/Relu6`); any other name keeps its head
//! (`forward (model.py:5…`).

/// `name` in at most `most` characters: whole, else `…` and its last `/`-scopes (as many as
/// fit), else its head and `…`; `None` where not even two characters fit.
pub fn fit(name: &str, most: usize) -> Option<String> {
    if most < 2 {
        return None;
    }
    let count = name.chars().count();
    if count <= most {
        return Some(name.to_string());
    }
    // The longest tail of whole scopes that fits after `…`; the last scope must be a name.
    let tail = (name.char_indices())
        .filter(|&(_, c)| c == '/')
        .map(|(at, _)| &name[at + 1..])
        .find(|tail| !tail.is_empty() && tail.chars().count() < most);
    Some(match tail {
        Some(tail) => format!("…{tail}"),
        None => name.chars().take(most - 1).chain(['…']).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::fit;

    #[test]
    fn a_scoped_name_keeps_its_last_scopes_and_any_other_its_head() {
        let scoped = "MobilenetV1/MobilenetV1/Conv2d_1_pointwise/Relu6";
        assert_eq!(fit(scoped, 60).as_deref(), Some(scoped));
        assert_eq!(
            fit(scoped, 30).as_deref(),
            Some("…Conv2d_1_pointwise/Relu6")
        );
        assert_eq!(fit(scoped, 10).as_deref(), Some("…Relu6"));
        assert_eq!(fit(scoped, 6).as_deref(), Some("…Relu6"));
        // Not even the last scope fits: the head, as for any name.
        assert_eq!(fit(scoped, 5).as_deref(), Some("Mobi…"));
        assert_eq!(
            fit("forward (model.py:54)", 10).as_deref(),
            Some("forward (…")
        );
        // A trailing `/` is no scope to keep.
        assert_eq!(fit("abcdefgh/", 5).as_deref(), Some("abcd…"));
        assert_eq!(fit("ab", 1), None);
        // Characters, not bytes.
        assert_eq!(fit("é/éééé/ü", 4).as_deref(), Some("…ü"));
        for (name, most) in [(scoped, 7), (scoped, 8), ("a/b/c/d/e", 4), ("/x/yy", 3)] {
            let cut = fit(name, most).unwrap();
            assert!(cut.chars().count() <= most, "{cut} in {most}");
        }
    }
}
