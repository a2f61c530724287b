//! Compiles the bundled hardware classes (static/hardware/*.toml) into constants: a bundled
//! class then costs no TOML parser at run time, and the web worker, which reads only bundled
//! classes (a program's devices), links none. The files stay the source; `hardware`'s tests hold
//! the constants equal to what `hardware::parse` reads from them, and `parse` alone validates.

use std::fmt::Write;
use std::path::Path;

fn main() {
    // Read when the script runs, not when it is compiled: a build script compiled for one
    // checkout is reused by another that shares the target directory.
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("../../static/hardware");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("static/hardware is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut out = String::from(
        "/// The bundled classes as constants (generated from static/hardware/*.toml by build.rs).\n\
         pub(crate) const BUNDLED_CLASSES: &[(&str, &str, Option<u64>, memplan_core::budget::DriverTerms)] = &[\n",
    );
    for path in files {
        println!("cargo:rerun-if-changed={}", path.display());
        let class = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a UTF-8 name");
        let text = std::fs::read_to_string(&path).expect("a readable class");
        let table: toml::Table = text.parse().unwrap_or_else(|e| panic!("{class}: {e}"));
        let string =
            |t: &toml::Table, k: &str| t.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let int = |t: &toml::Table, k: &str| t.get(k).and_then(|v| v.as_integer());
        let memory = table
            .get("memory")
            .and_then(|m| m.as_table())
            .unwrap_or_else(|| panic!("{class}: no [memory]"));
        let need = |k: &str| int(memory, k).unwrap_or_else(|| panic!("{class}: no memory.{k}"));
        let _ = writeln!(
            out,
            "    ({class:?}, {name:?}, {page:?}, memplan_core::budget::DriverTerms {{ device_bytes: {}, driver_fixed_bytes: {}, driver_budget_per_mille: {}, unified: {}, util_ceiling: {:?} }}),",
            need("device_bytes"),
            need("driver_fixed_bytes"),
            need("driver_budget_per_mille"),
            memory
                .get("unified")
                .and_then(|v| v.as_bool())
                .unwrap_or_else(|| panic!("{class}: no memory.unified")),
            memory
                .get("util_ceiling")
                .and_then(|v| v.as_float())
                .unwrap_or_else(|| panic!("{class}: no memory.util_ceiling")),
            name = string(&table, "name").unwrap_or_else(|| panic!("{class}: no name")),
            page = int(&table, "page_bytes").map(|p| p as u64),
        );
    }
    out.push_str("];\n");
    let dest =
        Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR is set")).join("bundled_classes.rs");
    std::fs::write(dest, out).expect("OUT_DIR is writable");
}
