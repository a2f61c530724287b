#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| memplan_fuzz::load_and_plan(data, "fuzz.pickle"));
