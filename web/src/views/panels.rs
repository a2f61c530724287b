//! The side panels: what makes the peak and why ([`PeakTable`]), everything about the selected
//! tensor ([`Details`]), and the tensors that own no bytes ([`Unplanned`]). They read the view
//! model only: every figure is one the CLI's report has too.

use std::sync::Arc;

use leptos::prelude::*;
use memplan_human::bytes;
use memplan_render::ViewModel;
use memplan_render::model::{Alive, PeakRow};
use wasm_bindgen::JsCast;

use crate::page::state::PageState;
use crate::page::url::Tab;
use crate::views::canvas::{identity_text, interval_text, step_list};

/// A step as a reader names it ([`memplan_render::model::StepView::name_with_op`]).
fn step_text(model: &ViewModel, step: u32) -> String {
    model
        .steps
        .get(step as usize)
        .map_or("-".into(), |s| s.name_with_op())
}

/// Why a tensor is alive at the peak, in words: its last use, and how long it waits for it.
fn alive_text(model: &ViewModel, row: &PeakRow) -> String {
    let waits = |n: u32| match n {
        0 => ", at the peak".to_string(),
        1 => ", 1 position later".to_string(),
        n => format!(", {n} positions later"),
    };
    match row.alive {
        Alive::AlwaysLive => format!(
            "always live ({})",
            model.buffers[row.buffer].tensor.kind.name()
        ),
        Alive::UntilRead { step, wait } => {
            format!("read by {}{}", step_text(model, step), waits(wait))
        }
        Alive::UntilWritten { step, wait } => format!(
            "written by {}{} (no later reader)",
            step_text(model, step),
            waits(wait)
        ),
        Alive::UntilFreed { event, wait } => match event {
            Some(event) => format!("freed at event {event}{}", waits(wait)),
            None => "still allocated at the end of the trace".to_string(),
        },
        Alive::UntilPosition { position, wait } => {
            let label = model.position_label(position).unwrap_or_default();
            format!("lives until {label}{}", waits(wait))
        }
    }
}

/// The tensor of the peak row a click landed in (its `data-tensor`).
fn clicked_tensor(ev: &web_sys::MouseEvent) -> Option<String> {
    let target = ev.target()?.dyn_into::<web_sys::Element>().ok()?;
    let row = target.closest("tr[data-tensor]").ok()??;
    row.get_attribute("data-tensor")
}

/// The allocation site of the site row a click landed in (its `data-site`).
fn clicked_site(ev: &web_sys::MouseEvent) -> Option<String> {
    let target = ev.target()?.dyn_into::<web_sys::Element>().ok()?;
    let row = target.closest("tr[data-site]").ok()??;
    row.get_attribute("data-site")
}

/// Selects `buffer` and scrolls the timeline to its row.
pub fn select(state: PageState, buffer: usize) {
    state.selected.set(Some(buffer));
    let Some(a) = state.analysis.get_untracked() else {
        return;
    };
    let m = &a.model;
    let rows = m.rows(
        m.clamp_device(state.device.get_untracked()),
        &state.search.get_untracked(),
        state.sort.get_untracked(),
        state.arena_only_untracked(),
    );
    if let Some(k) = rows.iter().position(|&b| b == buffer) {
        let fit = memplan_render::scene::Viewport::fit(f64::from(m.positions), rows.len() as f64);
        let v = state.timeline_window.get_untracked().unwrap_or(fit);
        let first = (k as f64 - 3.0).max(0.0);
        if state.tab.get_untracked() == Tab::Timeline || (k as f64) < v.y0 {
            state
                .timeline_window
                .set(Some(memplan_render::scene::Viewport { y0: first, ..v }));
        }
    }
}

/// The most rows the peak table lists (largest first): past a few hundred, rows cost the page
/// more to lay out than a reader gets from them; the rest are counted.
const PEAK_ROWS: usize = 200;

/// One row of the peak table as shown. Rows are keyed by all they show: a re-plan (a flip
/// moves a few tensors) rebuilds the rows that changed, not two hundred.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PeakLine {
    tensor: Arc<str>,
    name: Arc<str>,
    bytes: u64,
    share: String,
    producer: String,
    why: String,
}

/// What the peak table shows of a plan.
#[derive(Debug, Clone, PartialEq)]
struct PeakView {
    device: usize,
    head: String,
    lines: Vec<PeakLine>,
    /// The rows past [`PEAK_ROWS`], counted.
    smaller: Option<String>,
    /// The always-live rows left out in arena-only mode, counted.
    hidden: Option<String>,
    /// The rows grouped by allocation site (empty when the dump records no stacks).
    sites: Vec<SiteLine>,
    /// The sites past [`PEAK_ROWS`], counted.
    smaller_sites: Option<String>,
    /// Whether the rows are allocations of a trace (begun at an event, not written by a step).
    traced: bool,
}

/// The tensors live at the peak from one allocation site.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SiteLine {
    site: String,
    bytes: u64,
    share: String,
    /// Its rows, largest first.
    lines: Vec<PeakLine>,
}

/// The peak table of the plan shown, if its device has a peak.
fn peak_view(state: PageState) -> Option<PeakView> {
    let a = state.analysis.get()?;
    let m = &a.model;
    let device = m.clamp_device(state.device.get());
    let d = &m.devices[device];
    let peak = d.peak_position?;
    let arena_only = state.arena_only_now();
    let (shown, hidden): (Vec<PeakRow>, Vec<PeakRow>) = m
        .peak_rows(device)
        .into_iter()
        .partition(|r| !(arena_only && m.buffers[r.buffer].always_live));
    let at = m.position_label(peak).unwrap_or_default();
    // In arena-only mode the shares are of the arena's part of the lower bound.
    let bound = d.lower_bound.saturating_sub(d.floor(arena_only));
    let share = |bytes: u64| {
        if bound == 0 {
            "-".to_string()
        } else {
            format!("{:.1}%", bytes as f64 * 100.0 / bound as f64)
        }
    };
    let lines: Vec<PeakLine> = (shown.iter())
        .map(|r| {
            let b = &m.buffers[r.buffer];
            PeakLine {
                tensor: b.tensor.id.as_str().into(),
                name: b.tensor.display_name().into(),
                bytes: r.bytes,
                share: share(r.bytes),
                producer: match b.tensor.allocation() {
                    Some(a) => format!("event {}", a.allocated_at),
                    None => r.producer.map_or("-".into(), |s| step_text(m, s)),
                },
                why: alive_text(m, r),
            }
        })
        .collect();
    let line_of: std::collections::HashMap<usize, &PeakLine> =
        shown.iter().map(|r| r.buffer).zip(&lines).collect();
    let counted = |rows: &[PeakRow], what: &str| {
        let total: u64 = rows.iter().map(|r| r.bytes).sum();
        format!("+ {} {what} ({}) not listed", rows.len(), bytes(total))
    };
    let head = if arena_only {
        format!(
            "position {peak} ({at}): {} live in the arena's {} tensors (the lower bound is {} with the always-live pools)",
            bytes(bound),
            shown.len(),
            bytes(d.lower_bound)
        )
    } else {
        format!(
            "position {peak} ({at}): {} live in {} tensors, the lower bound",
            bytes(d.lower_bound),
            shown.len()
        )
    };
    let mut sites: Vec<SiteLine> = (m.peak_sites(device).into_iter())
        .filter_map(|g| {
            let members: Vec<PeakLine> = (g.tensors.iter())
                .filter_map(|&b| line_of.get(&b).map(|l| (*l).clone()))
                .collect();
            (!members.is_empty()).then(|| SiteLine {
                share: share(members.iter().map(|l| l.bytes).sum()),
                bytes: members.iter().map(|l| l.bytes).sum(),
                site: g.site,
                lines: members,
            })
        })
        .collect();
    let smaller_sites = (sites.get(PEAK_ROWS..))
        .filter(|rest| !rest.is_empty())
        .map(|rest| {
            let total: u64 = rest.iter().map(|g| g.bytes).sum();
            format!(
                "+ {} smaller sites ({}) not listed",
                rest.len(),
                bytes(total)
            )
        });
    sites.truncate(PEAK_ROWS);
    Some(PeakView {
        device,
        head,
        sites,
        smaller_sites,
        traced: m
            .buffers
            .first()
            .is_some_and(|b| b.tensor.allocation().is_some()),
        lines: lines.into_iter().take(PEAK_ROWS).collect(),
        smaller: (shown.get(PEAK_ROWS..))
            .filter(|rest| !rest.is_empty())
            .map(|rest| counted(rest, "smaller tensors")),
        hidden: (!hidden.is_empty())
            .then(|| counted(&hidden, "always-live tensors") + ": arena only"),
    })
}

/// The tensors live at the peak, largest first, each with why it is still alive.
#[component]
pub fn PeakTable(state: PageState) -> impl IntoView {
    let peak = Memo::new(move |_| peak_view(state));
    let has_peak = Memo::new(move |_| peak.with(Option::is_some));
    let selected = Memo::new(move |_| {
        let b = state.selected.get()?;
        state
            .analysis
            .with(|a| Some(a.as_ref()?.model.buffers.get(b)?.tensor.id.as_str().into()))
    });
    let text =
        move |f: fn(&PeakView) -> Option<String>| move || peak.with(|v| v.as_ref().and_then(f));
    let has_sites =
        Memo::new(move |_| peak.with(|v| v.as_ref().is_some_and(|v| !v.sites.is_empty())));
    let by_site = RwSignal::new(false);
    let expanded = RwSignal::new(std::collections::BTreeSet::<String>::new());
    let origin_header = move || {
        if peak.with(|v| v.as_ref().is_some_and(|v| v.traced)) {
            "allocated at"
        } else {
            "written by"
        }
    };
    let row = move |line: PeakLine, selected: Memo<Option<Arc<str>>>| {
        let tensor = line.tensor.clone();
        view! {
            <tr
                data-testid="peak-row"
                data-tensor=line.tensor.to_string()
                data-bytes=line.bytes.to_string()
                class:selected=move || selected.with(|s| s.as_deref() == Some(&*tensor))
                title="select it in the views"
            >
                <td class="name">{line.name.to_string()}</td>
                <td class="num">{bytes(line.bytes)}</td>
                <td class="num">{line.share}</td>
                <td>{line.producer}</td>
                <td>{line.why}</td>
            </tr>
        }
    };
    let on_rows = move |ev: web_sys::MouseEvent| {
        if let Some(site) = clicked_site(&ev) {
            expanded.update(|e| {
                if !e.remove(&site) {
                    e.insert(site);
                }
            });
            return;
        }
        let Some(tensor) = clicked_tensor(&ev) else {
            return;
        };
        let device = peak.with_untracked(|v| v.as_ref().map(|v| v.device));
        let buffer = state.analysis.with_untracked(|a| {
            a.as_ref()?
                .model
                .buffers
                .iter()
                .position(|b| *b.tensor.id == *tensor && Some(b.device) == device)
        });
        if let Some(buffer) = buffer {
            select(state, buffer);
        }
    };
    let sites_table = move || {
        let sites = peak.with(|v| v.as_ref().map(|v| v.sites.clone()).unwrap_or_default());
        let open = expanded.get();
        let groups = sites
            .into_iter()
            .map(|g| {
                let is_open = open.contains(&g.site);
                let members = is_open
                    .then(|| g.lines.iter().cloned().map(|l| row(l, selected)).collect_view());
                view! {
                    <tr
                        class="site-row"
                        data-testid="site-row"
                        data-site=g.site.clone()
                        data-bytes=g.bytes.to_string()
                        title="show its tensors"
                    >
                        <td class="name">{format!("{} {}", if is_open { "▾" } else { "▸" }, g.site)}</td>
                        <td class="num">{bytes(g.bytes)}</td>
                        <td class="num">{g.share.clone()}</td>
                        <td>{match g.lines.len() { 1 => "1 tensor".to_string(), n => format!("{n} tensors") }}</td>
                    </tr>
                    {members}
                }
            })
            .collect_view();
        view! {
            <table data-testid="peak-sites">
                <thead>
                    <tr>
                        <th>"allocation site"</th><th class="num">"size"</th><th class="num">"share"</th>
                        <th class="num">"tensors"</th>
                    </tr>
                </thead>
                <tbody on:click=on_rows>{groups}</tbody>
            </table>
        }
    };
    move || {
        has_peak.get().then(|| view! {
            <section class="panel peak" data-testid="peak-table">
                <h3>"Live at the peak"</h3>
                <p class="muted small">{text(|v| Some(v.head.clone()))}</p>
                {move || has_sites.get().then(|| view! {
                    <label class="small">
                        <input type="checkbox" data-testid="peak-by-site"
                            prop:checked=move || by_site.get()
                            on:change=move |ev| by_site.set(event_target_checked(&ev)) />
                        " group by allocation site"
                    </label>
                })}
                <div class="table-scroll">
                    {move || (by_site.get() && has_sites.get()).then(sites_table)}
                    <table style:display=move || if by_site.get() && has_sites.get() { "none" } else { "" }>
                        <thead>
                            <tr>
                                <th>"tensor"</th><th class="num">"size"</th><th class="num">"share"</th>
                                <th>{origin_header}</th><th>"alive because"</th>
                            </tr>
                        </thead>
                        // One listener for all rows: a closure per row costs more than the rows.
                        <tbody on:click=on_rows>
                            <For
                                each=move || peak.with(|v| v.as_ref().map(|v| v.lines.clone()).unwrap_or_default())
                                key=Clone::clone
                                children=move |line: PeakLine| row(line, selected)
                            />
                        </tbody>
                    </table>
                </div>
                // Grouped, the sites hold every tensor live at the peak; only sites are left out.
                {move || {
                    let grouped = by_site.get() && has_sites.get();
                    text(if grouped { |v| v.smaller_sites.clone() } else { |v| v.smaller.clone() })()
                        .map(|s| view! { <p class="muted small" data-testid="peak-more">{s}</p> })
                }}
                {move || text(|v| v.hidden.clone())().map(|s| view! {
                    <p class="muted small" data-testid="peak-hidden">{s}</p>
                })}
            </section>
        })
    }
}

/// Everything about the selected tensor: what the hover card has, plus its views and loops.
#[component]
pub fn Details(state: PageState) -> impl IntoView {
    move || {
        let a = state.analysis.get()?;
        let m = &a.model;
        let Some(b) = state.selected.get().and_then(|k| m.buffers.get(k)) else {
            return Some(
                view! {
                    <section class="panel details" data-testid="details">
                        <p class="muted small">"Click a tensor in a view, or a row above, to see where and why it lives."</p>
                    </section>
                }
                .into_any(),
            );
        };
        let pool = (m.pool_of(b)).map_or_else(String::new, |p| format!(" ({})", p.role.name()));
        // What a reader would ask only where it differs: the bytes its alignment rounds it up
        // to, and its address where its pool does not start at 0.
        let (occupied, address) = (b.occupied(), m.address(b));
        let occupies = match occupied != b.size {
            true => format!("; occupies {occupied} B"),
            false => String::new(),
        };
        let address = match address != b.offset {
            true => format!("; address {address}"),
            false => String::new(),
        };
        let loops: Vec<String> = m
            .loops
            .iter()
            .filter(|l| b.always_live || (b.first <= l.position && l.position <= b.last))
            .map(|l| {
                let trips = l.trip_count.map_or_else(String::new, |n| format!(" ×{n}"));
                let how = if !b.always_live && b.first == l.position && b.last == l.position {
                    "inside"
                } else {
                    "live across"
                };
                format!("{how} loop {}{trips} (position {})", l.id, l.position)
            })
            .collect();
        let views = b
            .tensor.views
            .iter()
            .map(|v| {
                view! {
                    <li>
                        <span class="name">{v.name.clone()}</span>
                        {format!(" · bytes {}..{} ({})", v.offset, v.offset + v.size, bytes(v.size))}
                    </li>
                }
            })
            .collect_view();
        let has_views = !b.tensor.views.is_empty();
        let stack = b
            .tensor
            .stack
            .get()
            .and_then(|k| m.stacks.get(k as usize))
            .map(|st| stack_view(&st.frames));
        Some(
            view! {
                <section class="panel details" data-testid="details">
                    <h3 data-testid="details-name">{b.tensor.display_name().to_string()}</h3>
                    <p class="muted small">{identity_text(b)}</p>
                    <dl class="facts">
                        <dt>"size"</dt><dd>{format!("{} ({} B{occupies})", bytes(b.size), b.size)}</dd>
                        <dt>"place"</dt><dd>{format!("pool {}{pool}, offset {}{address}", b.pool, b.offset)}</dd>
                        <dt>"lives"</dt><dd>{interval_text(m, b)}</dd>
                        {match b.tensor.allocation() {
                            Some(a) => view! {
                                <dt>"allocated"</dt><dd>{memplan_render::model::allocated_text(a)}</dd>
                                <dt>"ends"</dt><dd>{memplan_render::model::freed_text(a)}</dd>
                            }.into_any(),
                            None => view! {
                                <dt>"written by"</dt><dd>{step_list(m, &b.tensor.producers)}</dd>
                                <dt>"read by"</dt><dd>{step_list(m, &b.tensor.consumers)}</dd>
                            }.into_any(),
                        }}
                        {(!loops.is_empty()).then(|| view! { <dt>"loops"</dt><dd>{loops.join("; ")}</dd> })}
                    </dl>
                    {stack}
                    {has_views.then(|| view! { <h4>"Views into it"</h4> })}
                    <ul class="views-list" data-testid="details-views">{views}</ul>
                </section>
            }
            .into_any(),
        )
    }
}

/// The stack that allocated a tensor: the user's frames first, innermost first, then the
/// framework's frames folded (PyTorch's, Python's, native code).
fn stack_view(frames: &[memplan_core::graph::Frame]) -> impl IntoView + use<> {
    let (internal, user): (Vec<_>, Vec<_>) = frames.iter().partition(|f| f.is_internal());
    let line = |f: &memplan_core::graph::Frame| {
        let path = f.file.clone();
        view! { <li title=path>{f.to_string()}</li> }
    };
    let user = user.into_iter().map(line).collect_view();
    let folded = (!internal.is_empty()).then(|| {
        let n = internal.len();
        let items = internal.into_iter().map(line).collect_view();
        view! {
            <details class="small" data-testid="stack-internal">
                <summary class="muted">{memplan_human::counted(n, "framework frame")}</summary>
                <ol class="stack">{items}</ol>
            </details>
        }
    });
    view! {
        <h4>"Allocated from"</h4>
        <ol class="stack" data-testid="details-stack">{user}</ol>
        {folded}
    }
}

/// The tensors of the dump that own no bytes, with the reason; views are under their base.
#[component]
pub fn Unplanned(state: PageState) -> impl IntoView {
    move || {
        let a = state.analysis.get()?;
        let unplanned = &a.model.unplanned;
        if unplanned.is_empty() {
            return None;
        }
        let items = unplanned
            .iter()
            .map(|u| view! { <li><span class="name">{u.name.clone()}</span>{format!(" · {}", u.reason.name())}</li> })
            .collect_view();
        Some(view! {
            <details class="panel unplanned" data-testid="unplanned">
                <summary>{match unplanned.len() {
                    1 => "1 tensor owns no bytes".to_string(),
                    n => format!("{n} tensors own no bytes"),
                }}</summary>
                <ul>{items}</ul>
            </details>
        })
    }
}
