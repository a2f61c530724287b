//! The compare panel: the plan shown against another, tensor by tensor, as `memplan diff`
//! gives it. The other plan is the same dump under another strategy (with or without the
//! flips shown), or another dump (before and after a change), matched by tensor id. Each side's
//! footprint and lower bound, the counts, and a sortable table of what changed.

use leptos::prelude::*;
use memplan_core::StrategyChoice;
use memplan_engine::diff::{Change, TensorDiff};
use memplan_human::{bytes, change_text, diff_counts, footprint_change, placement_text};

use crate::page::state::PageState;
use crate::page::url::Against;
use crate::views::canvas::{PlotCanvas, Side};

/// How the diff table is sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// New, gone, changed, then the same; by id within each.
    Change,
    Tensor,
    /// The largest growth first.
    SizeDelta,
}

impl Order {
    const ALL: [(Order, &'static str); 3] = [
        (Order::Change, "change"),
        (Order::Tensor, "tensor"),
        (Order::SizeDelta, "size change"),
    ];
}

/// The other plan, drawn as the view below draws the plan shown and through the same window:
/// zooming or panning either moves both (time, and for the arena map addresses). Hover and
/// selection work on it as on the view below.
#[component]
fn AfterView(state: PageState) -> impl IntoView {
    let compared = Memo::new(move |_| state.comparison.with(Option::is_some));
    move || {
        let tab = state.tab.get();
        compared.get().then(|| {
            let side = move |before: bool| {
                state
                    .comparison
                    .with(|c| {
                        c.as_ref().map(|c| {
                            if before {
                                c.before.clone()
                            } else {
                                c.after.clone()
                            }
                        })
                    })
                    .unwrap_or_default()
            };
            let after = move || {
                format!(
                    "after: {} (here; one scale with the view below)",
                    side(false)
                )
            };
            let before = move || format!("before: {} (the view below)", side(true));
            view! {
                <p class="small compare-label" data-testid="compare-after-label">{after}</p>
                <div class="compare-view" data-testid="compare-after-view"
                    title="the other plan, through the window of the view below">
                    <PlotCanvas state=state tab=tab side=Side::Other />
                </div>
                <p class="small compare-label" data-testid="compare-before-label">{before}</p>
            }
        })
    }
}

#[component]
pub fn ComparePanel(state: PageState) -> impl IntoView {
    // Against the strategy shown (or the link's) unless another is chosen: a stale choice
    // misleads.
    let strategy = RwSignal::new(
        state
            .against
            .with_untracked(|a| a.as_ref().map(|a| a.strategy))
            .unwrap_or_else(|| state.strategy.get_untracked()),
    );
    let order = RwSignal::new(
        state
            .against
            .with_untracked(|a| a.as_ref().map(|a| a.order))
            .unwrap_or_else(|| state.order.get_untracked()),
    );
    let keep_flips = RwSignal::new(true);
    let no_candidates = crate::views::flips::no_candidates(state);
    // The other side as chosen is the plan shown: nothing to compare until one choice differs.
    let same_as_shown = Memo::new(move |_| {
        strategy.get() == state.strategy.get()
            && order.get() == state.order.get()
            && (keep_flips.get() || state.flips.with(Vec::is_empty))
    });
    // The other dump, when it is a file from the disk: no link can carry it.
    let compared_file = RwSignal::new(None::<String>);
    let scenario = move || {
        let mut s = state.scenario();
        s.strategy = strategy.get_untracked();
        s.order = order.get_untracked();
        if !keep_flips.get_untracked() {
            s.flips.clear();
        }
        s
    };
    let with_file = move |ev: leptos::ev::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        let files = input
            .files()
            .map(|l| crate::page::fetch::dump_files(&l))
            .unwrap_or_default();
        let Some(name) = files.first().map(web_sys::File::name) else {
            return;
        };
        leptos::task::spawn_local(async move {
            match crate::page::fetch::read_files(&files).await {
                Ok(buffer) => {
                    // Another dump's tensors differ: its plan starts from no flips.
                    let mut s = scenario();
                    s.flips.clear();
                    // A file from the disk cannot travel in a link: the panel says so.
                    state.against.set(None);
                    compared_file.set(Some(name.clone()));
                    state.compare(s, Some((name, buffer)));
                }
                Err(e) => state.error.set(Some(e)),
            }
        });
    };
    let sides = move || {
        let view = state.comparison.get()?;
        let d = &view.diff;
        let change = footprint_change(d);
        Some(view! {
            <dl class="budget compare-sides">
                <div><dt>"before: " {view.before.clone()}</dt>
                    <dd data-testid="compare-before" data-bytes=d.before.footprint_bytes.to_string()>
                        {format!("{} (lower bound {})", bytes(d.before.footprint_bytes), bytes(d.before.lower_bound_bytes))}
                    </dd></div>
                <div><dt>"after: " {view.after.clone()}</dt>
                    <dd data-testid="compare-after" data-bytes=d.after.footprint_bytes.to_string()>
                        {format!("{} (lower bound {}) {change}", bytes(d.after.footprint_bytes), bytes(d.after.lower_bound_bytes))}
                    </dd></div>
            </dl>
        })
    };
    // The plan the dump came with (XLA's, Vela's), against the plan shown: both footprints,
    // arenas and fragmentations, and its drawing on the arena map.
    let given = move || {
        state.analysis.with(|a| {
            let r = &a.as_ref()?.summary;
            let g = r.given_plan.clone()?;
            let text = memplan_human::given_plan_sentence(r)?;
            let arena: u64 = r.devices.iter().map(|d| d.arena_bytes).sum();
            Some(view! {
                <div class="compare-given" data-testid="compare-given">
                    <dl class="budget compare-sides">
                        <div><dt>{format!("{}'s plan", g.planner)}</dt>
                            <dd data-testid="compare-given-bytes" data-bytes=g.footprint_bytes.to_string()>
                                {format!("{} (arena {}, {} over the lower bound; {})", bytes(g.footprint_bytes), bytes(g.arena_bytes),
                                    bytes(g.footprint_bytes.saturating_sub(g.lower_bound_bytes)), memplan_human::given_plan_verdict(&g))}
                            </dd></div>
                        <div><dt>"memplan's plan"</dt>
                            <dd data-testid="compare-given-memplan" data-bytes=r.footprint_bytes.to_string()>
                                {format!("{} (arena {}, {} over the lower bound)", bytes(r.footprint_bytes), bytes(arena),
                                    bytes(r.footprint_bytes.saturating_sub(r.lower_bound_bytes)))}
                            </dd></div>
                    </dl>
                    <p class="small" title=text>
                        <button data-testid="compare-given-show" on:click=move |_| {
                            state.tab.set(crate::page::url::Tab::Arena);
                            state.source_layout.set(true);
                            state.arena_window.set(None);
                        }>{format!("show {}'s plan on the arena map", g.planner)}</button>
                    </p>
                </div>
            })
        })
    };
    view! {
        <div class="panel-table compare-panel" data-testid="compare-panel">
            {given}
            <div class="fit-form">
                <label>
                    "against "
                    <select data-testid="compare-strategy" on:change=move |ev| {
                        if let Ok(s) = event_target_value(&ev).parse() {
                            strategy.set(s);
                        }
                    }>
                        {StrategyChoice::ALL.iter().map(|s| view! {
                            <option value=s.name() selected=move || strategy.get() == *s>{s.name()}</option>
                        }).collect_view()}
                    </select>
                </label>
                <label>
                    "order "
                    <select data-testid="compare-order" on:change=move |ev| {
                        if let Ok(o) = event_target_value(&ev).parse() {
                            order.set(o);
                        }
                    }>
                        {memplan_core::order::Order::ALL.iter().map(|o| view! {
                            <option value=o.name() selected=move || order.get() == *o>{o.name()}</option>
                        }).collect_view()}
                    </select>
                </label>
                // A dump with nothing to flip has no flips to keep.
                <label style:display=move || if no_candidates.get() { "none" } else { "" }>
                    <input type="checkbox" data-testid="compare-keep-flips" prop:checked=move || keep_flips.get()
                    on:change=move |ev| keep_flips.set(event_target_checked(&ev)) />" with the flips shown"</label>
                <button data-testid="compare-button" prop:disabled=move || same_as_shown.get() on:click=move |_| {
                    compared_file.set(None);
                    state.compare_against(Against {
                        strategy: strategy.get_untracked(),
                        order: order.get_untracked(),
                        flips: keep_flips.get_untracked(),
                        src: None,
                    });
                }>"compare"</button>
                <label class="file-label">
                    "or another dump "
                    <input type="file" data-testid="compare-file" multiple accept=".json,.gz,.zip,.csv,.onnx,.tflite,.pickle,.pkl,.txt" on:change=with_file />
                </label>
            </div>
            {move || same_as_shown.get().then(|| {
                let flips = match state.flips.with(Vec::is_empty) {
                    true => "",
                    false => ", or leave out the flips",
                };
                view! {
                    <p class="small muted" data-testid="compare-same">
                        {format!("That is the plan shown: choose another strategy or order{flips} to compare against it, or another dump.")}
                    </p>
                }
            })}
            {sides}
            {move || compared_file.get().filter(|_| state.comparison.with(Option::is_some)).map(|name| view! {
                <p class="small note" data-testid="compare-file-notice">
                    {format!("the other side, {name}, is a file from your disk: a link cannot carry it, so the link shows this plan alone. To share the comparison, put the file at a URL and add against-src=URL to the link.")}
                </p>
            })}
            <AfterView state=state />
        </div>
    }
}

/// The diff, tensor by tensor, in the side column beside the two views: its counts, a table
/// sortable by change, tensor or size change, each row saying what changed (both placements on
/// hover), and a click selects the tensor on both views.
#[component]
pub fn DiffTable(state: PageState) -> impl IntoView {
    let order = RwSignal::new(Order::Change);
    let unchanged = RwSignal::new(false);
    let select = move |id: &str| {
        let b = state
            .analysis
            .with_untracked(|a| a.as_ref().and_then(|a| a.model.buffer_of(id)));
        if let Some(b) = b {
            crate::views::panels::select(state, b);
        }
    };
    let table = move || {
        let view = state.comparison.get()?;
        let d = &view.diff;
        let mut rows: Vec<TensorDiff> = d
            .tensors
            .iter()
            .filter(|t| unchanged.get() || t.change != Change::Same)
            .cloned()
            .collect();
        match order.get() {
            Order::Change => {}
            Order::Tensor => rows.sort_by(|a, b| a.tensor.cmp(&b.tensor)),
            Order::SizeDelta => rows.sort_by_key(|t| std::cmp::Reverse(t.size_delta())),
        }
        Some(view! {
            <div class="table-wrap">
                <table class="data-table" data-testid="diff-table">
                    <thead><tr><th>"tensor"</th><th>"change"</th><th class="num">"size change"</th></tr></thead>
                    <tbody>
                        {rows.into_iter().map(|t| view! {
                            <tr data-testid="diff-row" data-tensor=t.tensor.clone() data-change=change_text(&t)
                                title=format!("before: {}\nafter: {}", placement_text(&t.before), placement_text(&t.after))
                                on:click={
                                    let id = t.tensor.clone();
                                    move |_| select(&id)
                                }>
                                <td class="name">{t.tensor.clone()}</td>
                                <td>{change_text(&t)}</td>
                                <td class="num" data-bytes=t.size_delta().to_string() title=format!("{:+} B", t.size_delta())>{memplan_human::signed_bytes(t.size_delta())}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        })
    };
    view! {
        <div class="panel diff-side" data-testid="diff-panel">
            <h3>"What changed"</h3>
            <div class="fit-form">
                <span class="small" data-testid="compare-counts">
                    {move || state.comparison.with(|c| c.as_ref().map(|c| diff_counts(&c.diff)))}
                </span>
                <label>
                    "sort "
                    <select data-testid="diff-sort" on:change=move |ev| {
                        let v = event_target_value(&ev);
                        if let Some((o, _)) = Order::ALL.iter().find(|(_, n)| *n == v) {
                            order.set(*o);
                        }
                    }>
                        {Order::ALL.iter().map(|(o, n)| view! {
                            <option value=*n selected=move || order.get() == *o>{*n}</option>
                        }).collect_view()}
                    </select>
                </label>
                <label><input type="checkbox" data-testid="diff-unchanged" prop:checked=move || unchanged.get()
                    on:change=move |ev| unchanged.set(event_target_checked(&ev)) />" unchanged too"</label>
            </div>
            {table}
        </div>
    }
}
