//! The web crate in a real browser (headless Chromium through wasm-bindgen-test-runner):
//! the planner in wasm gives the same bytes as natively, the app mounts and shows the default
//! example's counts (planned on the page's thread where no worker can start), and the panic
//! banner appears as text.

#![cfg(target_arch = "wasm32")]

use memplan_engine::Scenario;
use memplan_web::analysis::{best_order, example_report_json, program_example_report_json};
use memplan_web::page::examples::{EXAMPLES, Example, PROGRAMS};
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
fn wasm_plans_the_examples_to_the_native_bytes() {
    let goldens = [
        include_str!("../../tests/golden/mlp-training.plan.json"),
        include_str!("../../tests/golden/transformer-decode.plan.json"),
        include_str!("../../tests/golden/convnet-training.plan.json"),
        include_str!("../../tests/golden/decoder-serving.plan.json"),
    ];
    assert_reports_are(EXAMPLES, &goldens, example_report_json);
    // An order search too: the same order and plan in wasm as natively.
    let mlp = EXAMPLES.iter().find(|e| e.name == "mlp-training").unwrap();
    assert_eq!(
        example_report_json(mlp, &best_order()),
        include_str!("../../tests/golden/mlp-training.order-best.plan.json")
    );
}

#[wasm_bindgen_test]
fn wasm_plans_the_programs_to_the_native_bytes() {
    let goldens = [
        include_str!("../../tests/golden/serving-program.plan.json"),
        include_str!("../../tests/golden/schedule-search-program.plan.json"),
    ];
    assert_reports_are(PROGRAMS, &goldens, program_example_report_json);
}

/// Each of `examples` planned under the default scenario reports its golden, to the byte.
fn assert_reports_are(
    examples: &[Example],
    goldens: &[&str],
    report: fn(&Example, &Scenario) -> String,
) {
    assert_eq!(examples.len(), goldens.len(), "a golden report per example");
    for (example, golden) in examples.iter().zip(goldens) {
        assert_eq!(
            report(example, &Scenario::default()),
            *golden,
            "{}",
            example.name
        );
    }
}

fn document() -> web_sys::Document {
    web_sys::window().unwrap().document().unwrap()
}

fn testid_text(id: &str) -> Option<String> {
    document()
        .query_selector(&format!("[data-testid={id}]"))
        .unwrap()
        .and_then(|e| e.text_content())
}

/// Resolves after `ms` milliseconds (a timer task).
async fn sleep_ms(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let _ = web_sys::window()
            .unwrap()
            .set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

#[wasm_bindgen_test]
async fn the_app_mounts_and_says_plainly_when_no_worker_can_plan() {
    let container: web_sys::HtmlElement =
        document().create_element("div").unwrap().unchecked_into();
    document().body().unwrap().append_child(&container).unwrap();
    let handle = leptos::mount::mount_to(container.clone(), memplan_web::app::App);
    // The test server has neither the worker's script nor its module: the page, which links no
    // engine of its own, says that no worker could start and then that its module could not
    // load on the page either; it does not panic and shows no plan it did not get. (The release
    // bundle's plans, in a Web Worker and on the page's thread, are tests/e2e's.)
    for _ in 0..1000 {
        if testid_text("error").is_some() {
            break;
        }
        sleep_ms(10).await;
    }
    let error = testid_text("error").unwrap_or_default();
    assert!(
        error.contains(
            "the background worker could not start: nor could its module load on this page"
        ),
        "{error}"
    );
    let notice = testid_text("url-warning").unwrap_or_default();
    assert!(notice.contains("planning on this page instead"), "{notice}");
    assert_eq!(testid_text("tensor-count"), None);
    drop(handle);
    container.remove();
}

#[wasm_bindgen_test]
fn the_panic_banner_shows_text_not_html() {
    memplan_web::panic::show_banner("<img src=x onerror=alert(1)> broke");
    let banner = document()
        .get_element_by_id(memplan_web::panic::PANIC_BANNER_ID)
        .unwrap();
    assert_eq!(
        banner.get_attribute("data-testid").as_deref(),
        Some("error")
    );
    assert_eq!(
        banner.text_content().as_deref(),
        Some("<img src=x onerror=alert(1)> broke")
    );
    assert!(banner.query_selector("img").unwrap().is_none());
    banner.remove();
}

#[wasm_bindgen_test]
fn an_answer_is_read_from_js_memory_a_chunk_at_a_time() {
    use memplan_web::analysis::Export;
    use memplan_web::worker::client::JsBytes;
    use memplan_web::worker::protocol::{Response, read_answer, write_answer};
    use std::io::Read;
    // Bytes across many of the reader's chunks come back whole and in order.
    let pattern: Vec<u8> = (0..300_007u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut read = Vec::new();
    JsBytes::of(js_sys::Uint8Array::from(pattern.as_slice()))
        .read_to_end(&mut read)
        .unwrap();
    assert_eq!(read, pattern);
    // An answer longer than a chunk reads back as it was written.
    let answer = Response::Exported(Export {
        file_name: "plan.json".into(),
        mime: "application/json".into(),
        text: "é\"\n".repeat(50_000),
    });
    let mut json = Vec::new();
    write_answer(&answer, &mut json).unwrap();
    assert!(json.len() > 1 << 17);
    let array = js_sys::Uint8Array::from(json.as_slice());
    assert_eq!(read_answer(&mut JsBytes::of(array)).unwrap(), answer);
    // A cut answer is an error, not a panic.
    let cut = js_sys::Uint8Array::from(&json[..json.len() / 2]);
    assert!(read_answer(&mut JsBytes::of(cut)).is_err());
}
