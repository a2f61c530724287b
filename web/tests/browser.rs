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
async fn the_app_mounts_with_the_default_example() {
    let container: web_sys::HtmlElement =
        document().create_element("div").unwrap().unchecked_into();
    document().body().unwrap().append_child(&container).unwrap();
    let handle = leptos::mount::mount_to(container.clone(), memplan_web::app::App);
    let expected: serde_json::Value =
        serde_json::from_str(memplan_web::page::examples::DEFAULT_EXAMPLE.text).unwrap();
    let tensors = expected["tensors"].as_array().unwrap().len();
    let steps = expected["steps"].as_array().unwrap().len();
    // The plan comes from the worker. The test server has no worker script, so the page plans
    // on its own thread, says so, and shows the same plan.
    for _ in 0..1000 {
        if testid_text("tensor-count").is_some() {
            break;
        }
        sleep_ms(10).await;
    }
    assert_eq!(testid_text("tensor-count"), Some(tensors.to_string()));
    let notice = testid_text("url-warning").unwrap_or_default();
    assert!(notice.contains("planning on this page instead"), "{notice}");
    assert_eq!(testid_text("step-count"), Some(steps.to_string()));
    assert!(testid_text("error").is_none());
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
