//! The program view, above the routine's views when the dump is a program of several routines:
//! per device, the used peak beside the model of the peak (and the usable bytes of its class);
//! a chart of the events, each column the pools allocated after the event stacked by context,
//! the used memory on top, the model of the routine a run event runs marked, the usable line
//! dashed; the contexts; the routines, one of which the views below show (click to open
//! another); the runs of that routine, each with why its model and the used memory differ.
//! Every figure is the program report's (the one `memplan plan --json` prints).

use leptos::prelude::*;
use memplan_engine::program::ProgramReport;
use memplan_human::{bytes, grouped, one_line};
use memplan_render::program::{Owner, chart, chart_svg, owner_color};
use wasm_bindgen::JsCast;

use crate::page::state::PageState;

/// The routine index a run event runs, if it is one.
fn routine_of(report: &ProgramReport, event: usize) -> Option<usize> {
    match report.plan.events.get(event)? {
        memplan_core::program::EventOutcome::Run { routine, .. } => {
            report.routines.iter().position(|r| &r.routine == routine)
        }
        _ => None,
    }
}

/// A click on the chart: the run whose column it hit opens its routine.
fn pick(state: PageState, report: &ProgramReport, ev: &leptos::ev::MouseEvent) {
    let event = ev
        .target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .and_then(|t| t.closest("[data-event]").ok().flatten())
        .and_then(|t| t.get_attribute("data-event"))
        .and_then(|e| e.parse::<usize>().ok());
    if let Some(r) = event.and_then(|e| routine_of(report, e)) {
        state.open_routine(r, None);
    }
}

#[component]
fn Chart(
    state: PageState,
    report: std::sync::Arc<ProgramReport>,
    device: usize,
    shown: usize,
) -> impl IntoView {
    let id = report.plan.devices[device].device.clone();
    let class = report
        .device_classes
        .iter()
        .find(|c| c.device == id)
        .cloned();
    let usable = class.as_ref().map(|c| c.usable_bytes);
    let c = chart(&report.plan, device, usable);
    let labels: Vec<String> = report
        .plan
        .events
        .iter()
        .map(memplan_human::event_label)
        .collect();
    let routine = report.routines.get(shown).map(|r| r.routine.as_str());
    let svg = chart_svg(&report.plan, device, usable, &labels, routine);
    let events = c.used.len();
    let top = bytes(c.top_bytes);
    let usable_note = class.map(|class| {
        let sentence =
            memplan_human::program_headroom(&class, report.plan.devices[device].used_peak_bytes);
        if c.usable_in_view {
            sentence
        } else {
            format!("{sentence} (the usable line is above the chart)")
        }
    });
    let clicked = report.clone();
    view! {
        <div class="program-chart-wrap">
            <div class="program-axis"><span>{top}</span><span>"0"</span></div>
            <div class="program-chart-box" on:click=move |ev| pick(state, &clicked, &ev) inner_html=svg></div>
        </div>
        <p class="small program-axis-note">
            {format!("events 0 to {}: hover for what each did; click a run to open its routine (outlined: the one shown). Line: used memory; purple: the run's model of the peak.", events.saturating_sub(1))}
            {usable_note.map(|n| view! { <br/><span data-testid="program-usable">{n}</span> })}
        </p>
    }
}

#[component]
pub fn ProgramView(state: PageState) -> impl IntoView {
    move || {
        let report = state.program.get()?;
        let routine = state.routine.get();
        let plan = &report.plan;
        let verdict = memplan_human::verdict(report.valid, report.complete);
        let devices = plan
            .devices
            .iter()
            .enumerate()
            .map(|(d, peak)| {
                view! {
                    <div class="program-device">
                        <p>
                            <strong>{peak.device.clone()}</strong>
                            {format!(" (page {}): ", bytes(peak.page_bytes))}
                            <span data-testid="program-used-peak" data-bytes=peak.used_peak_bytes.to_string()
                                title=format!("{} B, after event {}", grouped(peak.used_peak_bytes), peak.used_peak_event)>
                                {format!("used peak {}", bytes(peak.used_peak_bytes))}
                            </span>
                            {format!(" after event {} · ", peak.used_peak_event)}
                            <span data-testid="program-model-peak" data-bytes=peak.model_peak_bytes.to_string()
                                title="the largest model of the peak of a routine run: its plan over its whole node set">
                                {format!("model of the peak {}", bytes(peak.model_peak_bytes))}
                            </span>
                            {format!(" · at the end {}", bytes(peak.used_at_end_bytes))}
                        </p>
                        <Chart state=state report=report.clone() device=d shown=routine />
                    </div>
                }
            })
            .collect_view();
        let contexts = plan
            .contexts
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let title = format!(
                    "context `{}`{}: {}, {} page-rounded",
                    c.context,
                    c.parent.as_ref().map(|p| format!(", a child of `{p}`")).unwrap_or_default(),
                    memplan_human::counted(c.pools.len(), "pool"),
                    bytes(c.page_rounded_bytes)
                );
                view! {
                    <li data-testid=format!("program-context-{}", c.context) title=one_line(&title)>
                        <span class="swatch" style=format!("background:{}", owner_color(Owner::Context(k), plan.contexts.len()).css())></span>
                        {one_line(&format!("{} {}", c.context, bytes(c.page_rounded_bytes)))}
                    </li>
                }
            })
            .collect_view();
        let constants = (!plan.constants.is_empty()).then(|| {
            let total: u64 = plan.constants.iter().map(|p| p.page_rounded_bytes).sum();
            view! {
                <li>
                    <span class="swatch" style=format!("background:{}", owner_color(Owner::Constants, plan.contexts.len()).css())></span>
                    {format!("constants {} (never released)", bytes(total))}
                </li>
            }
        });
        let routines = report
            .routines
            .iter()
            .enumerate()
            .map(|(r, rr)| {
                view! {
                    <button class="routine" data-testid=format!("routine-{}", rr.routine)
                        aria-pressed=(r == routine).to_string() class:on=r == routine
                        title=one_line(&format!(
                            "in context `{}`: its model of the peak {}, its own pools {}; {} tensors read where another routine holds them, {} constants",
                            rr.context, bytes(rr.model.footprint_bytes), bytes(rr.own.footprint_bytes), rr.skipped_tensors.len(), rr.constant_tensors.len()))
                        on:click=move |_| state.open_routine(r, None)>
                        {one_line(&format!("{} · {}", rr.routine, bytes(rr.model.footprint_bytes)))}
                    </button>
                }
            })
            .collect_view();
        let shown = report
            .routines
            .get(routine)
            .map(|r| r.routine.clone())
            .unwrap_or_default();
        let runs = plan
            .runs
            .iter()
            .filter(|run| run.routine == shown)
            .map(|run| {
                let why = memplan_human::run_differences(run)
                    .into_iter()
                    .map(|w| view! { <li>{one_line(&w)}</li> })
                    .collect_view();
                view! {
                    <li data-testid=format!("program-run-{}", run.event)
                        data-model-bytes=run.model_bytes.to_string() data-used-bytes=run.used_bytes.to_string()>
                        {format!("event {} on {}: model {}, used {}", run.event, run.device, bytes(run.model_bytes), bytes(run.used_bytes))}
                        <ul>{why}</ul>
                    </li>
                }
            })
            .collect_view();
        let unreleased = (!plan.unreleased.is_empty()).then(|| {
            let list = plan
                .unreleased
                .iter()
                .map(|u| format!("`{}` ({})", u.context, bytes(u.page_rounded_bytes)))
                .collect::<Vec<_>>()
                .join(", ");
            view! { <p class="bad" data-testid="program-unreleased">{one_line(&format!("not released at the end: {list}"))}</p> }
        });
        Some(view! {
            <details class="program" data-testid="program" open>
                <summary class="program-head">
                    <strong>{one_line(&if report.name.is_empty() { "program".to_string() } else { report.name.clone() })}</strong>
                    <span class="small">{format!(" {} contexts, {} routines, {} events · every routine's plan: {verdict}",
                        plan.contexts.len(), report.routines.len(), plan.events.len())}</span>
                </summary>
                <div class="program-body">
                    <div class="program-left">
                        {devices}
                        {unreleased}
                        <ul class="program-contexts">{contexts}{constants}</ul>
                    </div>
                    <div class="program-right">
                        <div class="program-routines" data-testid="program-routines">
                            {routines}
                            <button data-testid="export-program" title="the program's report, as `memplan plan --json` prints it"
                                on:click=move |_| state.export(crate::analysis::ExportKind::ProgramJson)>"program report (JSON)"</button>
                        </div>
                        <p class="small program-runs-title">{one_line(&format!("runs of `{shown}` (shown below): its model of the peak beside the memory the program uses"))}</p>
                        <ul class="program-runs" data-testid="program-runs">{runs}</ul>
                    </div>
                </div>
            </details>
        })
    }
}
