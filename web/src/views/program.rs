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
use memplan_render::program::{Owner, chart, owner_color};

use crate::page::state::PageState;

/// The chart's viewBox: a column of `COLUMN` units an event, `HEIGHT` units for the top bytes.
const COLUMN: f64 = 100.0;
const HEIGHT: f64 = 1000.0;

/// The routine index a run event runs, if it is one.
fn routine_of(report: &ProgramReport, event: usize) -> Option<usize> {
    match &report.plan.events[event] {
        memplan_core::program::EventOutcome::Run { routine, .. } => {
            report.routines.iter().position(|r| &r.routine == routine)
        }
        _ => None,
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
    let c = chart(&report.plan, device, class.as_ref().map(|c| c.usable_bytes));
    let events = c.used.len();
    let y = |b: u64| HEIGHT - (b as f64 / c.top_bytes as f64) * HEIGHT;
    let contexts = report.plan.contexts.len();
    let bands = c
        .bands
        .iter()
        .map(|b| {
            let (name, pool) = match b.owner {
                Owner::Constants => ("the device's constants".to_string(), &report.plan.constants[b.pool]),
                Owner::Context(k) => (
                    format!("context `{}`", report.plan.contexts[k].context),
                    &report.plan.contexts[k].pools[b.pool],
                ),
            };
            let title = format!(
                "after event {}: {name}, {} pool{} ({} B, {} page-rounded)",
                b.event,
                pool.role.name(),
                pool.routine.as_ref().map(|r| format!(" of `{r}`")).unwrap_or_default(),
                grouped(pool.bytes),
                bytes(pool.page_rounded_bytes)
            );
            view! {
                <rect x=(b.event as f64 * COLUMN + 8.0).to_string() width=(COLUMN - 16.0).to_string()
                    y=y(b.top).to_string() height=(y(b.bottom) - y(b.top)).max(0.0).to_string()
                    fill=owner_color(b.owner, contexts).css()>
                    <title>{one_line(&title)}</title>
                </rect>
            }
        })
        .collect_view();
    let mut step = String::new();
    for (e, used) in c.used.iter().enumerate() {
        let (x0, x1, h) = (e as f64 * COLUMN, (e + 1) as f64 * COLUMN, y(*used));
        step.push_str(&format!("{x0},{h} {x1},{h} "));
    }
    let models = c
        .model
        .iter()
        .enumerate()
        .filter_map(|(e, m)| m.map(|m| (e, m)))
        .map(|(e, m)| {
            view! {
                <line class="program-model" x1=(e as f64 * COLUMN).to_string() x2=((e + 1) as f64 * COLUMN).to_string()
                    y1=y(m).to_string() y2=y(m).to_string() vector-effect="non-scaling-stroke" />
            }
        })
        .collect_view();
    let usable = class.as_ref().filter(|_| c.usable_in_view).map(|class| {
        let h = y(class.usable_bytes).to_string();
        view! {
            <line class="program-usable" x1="0" x2=(events as f64 * COLUMN).to_string()
                y1=h.clone() y2=h vector-effect="non-scaling-stroke" />
        }
    });
    // A click on a run's column opens its routine.
    let columns = (0..events)
        .map(|e| {
            let routine = routine_of(&report, e);
            let label = memplan_human::event_label(&report.plan.events[e]);
            let used = c.used[e];
            view! {
                <rect class="program-column" class:run=routine.is_some() class:shown=routine == Some(shown)
                    data-testid=format!("program-event-{e}")
                    data-used-bytes=used.to_string()
                    x=(e as f64 * COLUMN).to_string() width=COLUMN.to_string() y="0" height=HEIGHT.to_string()
                    vector-effect="non-scaling-stroke"
                    on:click=move |_| { if let Some(r) = routine { state.open_routine(r, None); } }>
                    <title>{one_line(&format!("event {e}: {label} · used {}", bytes(used)))}</title>
                </rect>
            }
        })
        .collect_view();
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
    view! {
        <div class="program-chart-wrap">
            <div class="program-axis"><span>{top}</span><span>"0"</span></div>
            <svg class="program-chart" data-testid="program-chart" data-device=id
                viewBox=format!("0 0 {} {HEIGHT}", events as f64 * COLUMN) preserveAspectRatio="none"
                role="img" aria-label="the program's used memory after each event, its pools stacked by context">
                {bands}
                <polyline class="program-used" points=step vector-effect="non-scaling-stroke" />
                {models}
                {usable}
                {columns}
            </svg>
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
                    "context `{}`{}: {} pool{}, {} page-rounded",
                    c.context,
                    c.parent.as_ref().map(|p| format!(", a child of `{p}`")).unwrap_or_default(),
                    c.pools.len(),
                    if c.pools.len() == 1 { "" } else { "s" },
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
