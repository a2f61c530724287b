//! The summary: the dump's counts, the footprint, the lower bound and their gap, the checker's
//! verdict, the strategy selector and what a search found, the always-live pools, and each
//! device's figures when there are several.

use std::sync::Arc;

use leptos::prelude::*;
use memplan_core::StrategyChoice;
use memplan_core::order::Order;
use memplan_human::{bytes, ratio};

use crate::analysis::Analysis;
use crate::page::state::PageState;

/// What the summary offers after a search that ran out of work before proving its plan optimal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Longer {
    /// Nothing: the plan is proven optimal (more work cannot lower it), or not a search's.
    Nothing,
    /// Search again with more work.
    Offer,
    /// The last run, given more work than the one before, lowered the plan by this many bytes;
    /// more may lower it again.
    Gained(u64),
    /// The last run, given more work, found nothing lower: the button is not offered again.
    GainedNothing,
}

/// What to offer: `optimal` is the search's verdict (`None` where no search ran), `cancelled`
/// whether a cancel ended it, and `last` what the run before this one left, when this one was
/// asked for with more work: its footprint, and this one's.
fn longer(optimal: Option<bool>, cancelled: bool, last: Option<(u64, u64)>) -> Longer {
    if optimal != Some(false) {
        return Longer::Nothing;
    }
    match last {
        _ if cancelled => Longer::Offer,
        Some((before, now)) if now < before => Longer::Gained(before - now),
        Some(_) => Longer::GainedNothing,
        None => Longer::Offer,
    }
}

/// Where `search` ran out of work before proving its plan optimal: its work limit, and a button
/// that runs it again with four times as much (the search is deterministic for a given limit,
/// so asking again with the same one would give the same plan; on minimalloc's D four times
/// the work lands at 1,031,168 B against 1,048,576). After such a run it says what that run
/// gained, and when it gained nothing it says so instead of offering itself again.
fn search_longer(state: PageState, analysis: &Analysis) -> Option<impl IntoView + use<>> {
    let search = StrategyChoice::One(memplan_core::Strategy::Search);
    if analysis.strategy() != search {
        return None;
    }
    // The shown plan's work, not the controls': while a longer search runs, this plan is still
    // the one before it.
    let work = analysis.scenario.work_limit_or_default();
    let footprint = analysis.summary.footprint_bytes;
    let last = (state.longer.get())
        .filter(|asked| asked.work == work)
        .map(|asked| (asked.before_bytes, footprint));
    let offer = longer(analysis.summary.optimal, state.cancelled.get(), last);
    if offer == Longer::Nothing {
        return None;
    }
    let more = work.saturating_mul(4);
    let gap = footprint.saturating_sub(analysis.summary.proven_lower_bound_bytes.unwrap_or(0));
    let said = match offer {
        Longer::Gained(gain) => Some((gain, format!("; that found {} lower", bytes(gain)))),
        Longer::GainedNothing => Some((
            0,
            format!(
                "; that found nothing lower, {} above the proven bound",
                bytes(gap)
            ),
        )),
        _ => None,
    };
    let button = (offer != Longer::GainedNothing).then(|| {
        view! {
            <button
                data-testid="search-longer"
                title=format!("search again with four times the work (the CLI's --work-limit {more}); a cancel keeps its best plan so far")
                on:click=move |_| state.search_longer(more, footprint)
            >
                "search 4x longer"
            </button>
        }
    });
    Some(view! {
        <div>
            <dt>"work limit"</dt>
            <dd data-testid="work-limit" data-work=work.to_string()>
                {format!("{} ", memplan_human::grouped(work))}
                {said.map(|(gain, text)| view! {
                    <span data-testid="search-longer-gain" data-bytes=gain.to_string()>{text}</span>
                })}
                {button}
            </dd>
        </div>
    })
}

/// A time of the search, as the summary shows it: `740 ms`, `1.9 s`.
fn duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        _ => format!("{:.1} s", ms as f64 / 1000.0),
    }
}

#[component]
pub(super) fn Summary(state: PageState, analysis: Arc<Analysis>) -> impl IntoView {
    let r = &analysis.summary;
    let title = if analysis.model.title.is_empty() {
        analysis.source.clone()
    } else {
        analysis.model.title.clone()
    };
    let source = format!(
        "{} · {} · {} tensors, {} steps, {} positions",
        analysis.source, analysis.format, analysis.tensor_count, analysis.step_count, r.positions
    );
    let (title_text, source_title) = (title.clone(), source.clone());
    let verdict = if r.valid && !r.complete {
        "valid for the sized tensors".to_string()
    } else if r.valid {
        "valid".to_string()
    } else {
        format!(
            "INVALID (a bug, please report it): {}",
            r.violations.join("; ")
        )
    };
    let (always_live, arena): (u64, u64) = r
        .devices
        .iter()
        .fold((0, 0), |(s, a), d| (s + d.static_bytes, a + d.arena_bytes));
    let several = r.devices.len() > 1;
    let devices = r
        .devices
        .iter()
        .map(|d| view! {
            <tr>
                <td>{d.device.clone()}</td>
                <td>{d.strategy.clone()}</td>
                <td class="num" data-bytes=d.footprint_bytes.to_string()>{bytes(d.footprint_bytes)}</td>
                <td class="num" data-bytes=d.lower_bound_bytes.to_string()>{bytes(d.lower_bound_bytes)}</td>
                <td class="num">{ratio(d.footprint_bytes, d.lower_bound_bytes)}</td>
                <td class="num">{bytes(d.arena_bytes)}</td>
                <td class="num">{bytes(d.static_bytes)}</td>
                <td class="num">{d.pools.len()}</td>
            </tr>
        })
        .collect_view();
    let fallbacks: Vec<String> = r
        .devices
        .iter()
        .filter_map(|d| {
            Some(memplan_human::cap_fallback_sentence(
                &d.device,
                &d.cap_fallback?,
            ))
        })
        .collect();
    view! {
        <section class="summary" data-testid="summary">
            <div class="summary-head">
                <div class="what">
                    <h2 title=title_text>{title}</h2>
                    <span class="source" title=source_title>{source}</span>
                </div>
                <label class="control" title="leave the always-live pools (weights, optimizer state, caches) out of the views">
                    <input type="checkbox" data-testid="arena-only"
                        prop:checked=move || state.arena_only_now()
                        on:change=move |ev| {
                            state.arena_only.set(Some(event_target_checked(&ev)));
                            state.arena_window.set(None);
                            state.timeline_window.set(None);
                        }
                    />
                    " arena only"
                </label>
                <label class="control">
                    "strategy "
                    <select
                        data-testid="strategy-select"
                        on:change=move |ev| {
                            let value = event_target_value(&ev);
                            if let Ok(s) = value.parse::<StrategyChoice>() {
                                state.set_strategy(s);
                            }
                        }
                    >
                        {StrategyChoice::ALL
                            .iter()
                            .map(|s| view! { <option value=s.name() selected=*s == analysis.strategy()>{s.name()}</option> })
                            .collect_view()}
                    </select>
                </label>
                <label class="control" title="the order the steps run in: the dump's own, one of PyTorch Inductor's heuristics (lpmf, bfs, dfs), or the smallest plan memplan finds (best), never larger than the given order's">
                    "order "
                    <select
                        data-testid="order-select"
                        on:change=move |ev| {
                            if let Ok(order) = event_target_value(&ev).parse::<Order>() {
                                state.order.set(order);
                                state.set_strategy(state.strategy.get_untracked());
                            }
                        }
                    >
                        {Order::ALL
                            .iter()
                            .map(|o| view! { <option value=o.name() selected=*o == analysis.scenario.order>{o.name()}</option> })
                            .collect_view()}
                    </select>
                </label>
                <label class="control" title="only tensors of equal dtype share bytes; off, any may (the runtime must allow reinterpreting memory)">
                    <input type="checkbox" data-testid="precision-classes" prop:checked=analysis.scenario.precision_classes
                        on:change=move |ev| {
                            state.precision_classes.set(event_target_checked(&ev));
                            state.set_strategy(state.strategy.get_untracked());
                        } />
                    " precision classes"
                </label>
                {analysis.scenario.pool_cap.map(|cap| view! {
                    <span class="control" data-testid="pool-cap">
                        {if cap == u64::MAX { "no pool cap (64-bit offsets) ".to_string() } else { format!("pool cap {} ", bytes(cap)) }}
                        <button title="plan under the dump's own pool cap again" on:click=move |_| {
                            state.pool_cap.set(None);
                            state.set_strategy(state.strategy.get_untracked());
                        }>"reset"</button>
                    </span>
                })}
            </div>
            <dl class="figures">
                // `peak-bytes` and `peak-ratio` are earlier issues' names for these figures.
                <div class="key" data-testid="footprint-bytes" data-bytes=r.footprint_bytes.to_string()><dt>"footprint"</dt><dd data-testid="peak-bytes" data-bytes=r.footprint_bytes.to_string()>{bytes(r.footprint_bytes)}</dd></div>
                <div class="key"><dt>"lower bound"</dt><dd data-testid="lower-bound" data-bytes=r.lower_bound_bytes.to_string()>{bytes(r.lower_bound_bytes)}</dd></div>
                <div><dt>"fragmentation"</dt><dd data-testid="fragmentation" data-bytes=(r.footprint_bytes - r.lower_bound_bytes).to_string()>{bytes(r.footprint_bytes - r.lower_bound_bytes)}</dd></div>
                <div data-testid="footprint-ratio"><dt>"footprint / LB"</dt><dd data-testid="peak-ratio">{ratio(r.footprint_bytes, r.lower_bound_bytes)}</dd></div>
                <div><dt>"arena"</dt><dd data-testid="arena-bytes" data-bytes=arena.to_string()>{bytes(arena)}</dd></div>
                <div><dt>"always-live pools"</dt><dd data-testid="static-bytes" data-bytes=always_live.to_string()>{bytes(always_live)}</dd></div>
                {r.order.as_ref().map(|o| view! {
                    <div data-testid="order-summary" data-bytes=o.given_footprint_bytes.to_string() data-moved=o.moved_steps.to_string()>
                        <dt>"order"</dt><dd title=memplan_human::order_sentence(r.footprint_bytes, o)>
                            {format!("{} · {} of {} steps moved · given {}", o.order, o.moved_steps, o.steps.len(), bytes(o.given_footprint_bytes))}
                        </dd>
                    </div>
                })}
                <div><dt>"checker"</dt><dd data-testid="checker" class:bad=!r.valid || !r.complete>{verdict}</dd></div>
                {
                    // A proof over stacked precision classes covers the layouts that keep them
                    // apart, which the lower bound does not: it says so.
                    let scope = memplan_human::proof_scope(r.arena_regions);
                    let title = format!("the exact search proved no layout{scope} goes below this");
                    let apart = memplan_human::classes_apart(r.arena_regions).map(|a| format!(" · {a}"));
                    match (r.optimal, r.proven_lower_bound_bytes) {
                        (Some(true), _) => Some(view! {
                            <div><dt>"search"</dt><dd data-testid="optimal" class="badge" title=title>"optimal"{apart}</dd></div>
                        }.into_any()),
                        (Some(false), Some(proven)) => Some(view! {
                            <div><dt>"optimal is at least"</dt><dd data-testid="proven-bound" data-bytes=proven.to_string() title=title>{bytes(proven)}{apart}</dd></div>
                        }.into_any()),
                        _ => None,
                    }
                }
                {r.elapsed_ms.map(|ms| view! {
                    <div><dt>"search time"</dt><dd data-testid="search-time" data-ms=ms.to_string() title=format!("{} search nodes", r.nodes.unwrap_or(0))>{duration(ms)}</dd></div>
                })}
                {r.found_ms.map(|ms| view! {
                    <div><dt>"found after"</dt><dd data-testid="found-time" data-ms=ms.to_string() title="when the search found the plan shown: a search that found it early and nothing better since will not often do better given longer">{duration(ms)}</dd></div>
                })}
                {search_longer(state, &analysis)}
                <Show when=move || state.cancelled.get()>
                    <div><dt>"search"</dt><dd data-testid="cancelled">"cancelled: its best plan so far"</dd></div>
                </Show>
                <span data-testid="tensor-count" hidden>{analysis.tensor_count}</span>
                <span data-testid="step-count" hidden>{analysis.step_count}</span>
            </dl>
            {let a = analysis.clone(); move || footprint_bar(state, &a)}
            {fallbacks.into_iter().map(|f| view! { <p class="warning small" data-testid="cap-fallback">{f}</p> }).collect_view()}
            {memplan_human::given_plan_sentence(r).zip(r.given_plan.as_ref()).map(|(text, g)| view! {
                <p class="small" data-testid="given-plan" data-bytes=g.footprint_bytes.to_string()
                    data-arena-bytes=g.arena_bytes.to_string() data-valid=g.valid.to_string()>{text}</p>
            })}
            {r.reserved_bytes.map(|reserved| view! {
                <p class="small" data-testid="reserved">{memplan_human::reserved_sentence(r.footprint_bytes, reserved, r.lower_bound_bytes)}</p>
            })}
            {allocator_fragmentation(&analysis.model).into_iter().map(|(text, bytes)| view! {
                <p class="small" data-testid="allocator-fragmentation" data-bytes=bytes.map(|b| b.to_string())>{text}</p>
            }).collect_view()}
            {memplan_human::incomplete_sentence(r).map(|text| view! {
                <p class="incomplete" data-testid="incomplete" data-size-unknown=r.size_unknown_tensors.to_string()>{text}</p>
            })}
            {(analysis.format == memplan_formats::Format::Onnx.name()).then(|| {
                // Prefilled with the model's inputs at the values planned, symbolic dims named
                // beside them: the fix for an incomplete plan, in place.
                let value = |d: &String| d.parse::<u64>().ok().or_else(|| analysis.params.get(d).copied()).unwrap_or(1);
                let prefilled = (analysis.inputs.iter())
                    .map(|(name, dims)| format!("{name}={}", dims.iter().map(|d| value(d).to_string()).collect::<Vec<_>>().join("x")))
                    .collect::<Vec<_>>()
                    .join("; ");
                let described = (analysis.inputs.iter())
                    .map(|(name, dims)| format!("{name} [{}]", dims.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ");
                let shapes = RwSignal::new(prefilled);
                let apply = move || match memplan_formats::onnx::parse_input_shapes(&shapes.get_untracked()) {
                    Ok(import) => state.reimport(import),
                    Err(e) => state.error.set(Some(e.into())),
                };
                view! {
                    <p class="small control">
                        "input shapes "
                        <input data-testid="input-shape" class="search" placeholder="NAME=1x3x224x224; ..."
                            title=format!("the model's inputs: {described}")
                            prop:value=move || shapes.get()
                            on:input=move |ev| shapes.set(event_target_value(&ev))
                            on:keydown=move |ev: web_sys::KeyboardEvent| if ev.key() == "Enter" { apply() }
                        />
                        " "
                        <button data-testid="reimport" on:click=move |_| apply()>"import again"</button>
                        <span class="muted" data-testid="model-inputs">{format!(" the model's inputs: {described}")}</span>
                    </p>
                }
            })}
            {(!analysis.warnings.is_empty()).then(|| view! {
                <ul class="warning small" data-testid="import-warnings">
                    {analysis.warnings.iter().map(|w| view! { <li>{w.clone()}</li> }).collect_view()}
                </ul>
            })}
            {several.then(|| view! {
                <table class="devices">
                    <thead>
                        <tr>
                            <th>"device"</th><th>"strategy"</th><th>"footprint"</th><th>"lower bound"</th>
                            <th>"ratio"</th><th>"arena"</th><th>"static"</th><th>"pools"</th>
                        </tr>
                    </thead>
                    <tbody>{devices}</tbody>
                </table>
            })}
        </section>
    }
}

/// Per device the source allocator covers, its fragmentation at the peak (what it reserved
/// there beyond the live bytes) beside the plan's, in words, with the allocator's bytes. Where
/// the record has no reserved figure for the device (a profiler trace's CPU, whose reservations
/// the trace does not count) or one below what was live, it has no fragmentation to give, and
/// says so instead of a zero.
fn allocator_fragmentation(m: &memplan_render::ViewModel) -> Vec<(String, Option<u64>)> {
    (m.devices.iter().zip(m.allocator.iter()))
        .filter_map(|(d, r)| {
            let r = r.as_ref()?;
            let peak = d.peak_position?;
            let reserved = r.reserved.get(peak as usize).copied();
            let live = d.lower_bound;
            let bytes = memplan_human::bytes;
            let ours = format!(
                "memplan's plan: {} ({} fragmentation)",
                bytes(d.footprint_bytes),
                bytes(d.footprint_bytes.saturating_sub(live)),
            );
            let reserved = match reserved {
                None => {
                    let text = format!(
                        "{}: the trace counts no memory reserved on this device, so the allocator's fragmentation is unknown; {ours}",
                        d.id,
                    );
                    return Some((text, None));
                }
                Some(reserved) if reserved < live => {
                    let text = format!(
                        "{}: the allocator's record has {} reserved at the peak, less than the {} live there: it does not count this device's reservations, so its fragmentation is unknown; {ours}",
                        d.id,
                        bytes(reserved),
                        bytes(live),
                    );
                    return Some((text, None));
                }
                Some(reserved) => reserved,
            };
            let theirs = reserved - live;
            let text = format!(
                "{}: at the peak the allocator reserved {} for {} live: {} fragmentation{}; {ours}",
                d.id,
                bytes(reserved),
                bytes(live),
                bytes(theirs),
                if r.reserved_traced { "" } else { " (reserved as at the dump: the trace records no segment events)" },
            );
            Some((text, Some(theirs)))
        })
        .collect()
}

/// The footprint of the device shown, whole, as a bar by what fills it (the always-live pools by
/// kind, the arena's live bytes at the peak and the unused bytes of each part), against the
/// device's usable bytes when a class is chosen; and, with "arena only" on, what the views leave
/// out. It does not depend on "arena only": a review sees what fills the memory either way.
fn footprint_bar(state: PageState, analysis: &Analysis) -> impl IntoView + use<> {
    let m = &analysis.model;
    let device = m.clamp_device(state.device.get());
    let d = m.devices.get(device)?;
    let parts = m.footprint_parts(device);
    let usable = analysis.summary.budget.as_ref().map(|b| b.usable_bytes);
    // A little past the larger of the two, so the usable line shows at the end too.
    let scale = d.footprint_bytes.max(usable.unwrap_or(0)).max(1) as f64 * 1.02;
    let percent = |bytes: u64| format!("{:.3}%", bytes as f64 * 100.0 / scale);
    let segments = parts
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let color = if p.unused {
                "#f2b8b5".to_string()
            } else {
                memplan_render::color::series_color(k, parts.len(), false).css()
            };
            view! {
                <span class="bar-part" data-testid="footprint-part" data-part=p.name.clone() data-bytes=p.bytes.to_string()
                    title=format!("{}: {} ({} B)", p.name, bytes(p.bytes), memplan_human::grouped(p.bytes))
                    style=format!("width: {}; background: {color}", percent(p.bytes))></span>
            }
        })
        .collect_view();
    let legend = parts
        .iter()
        .map(|p| format!("{} {}", p.name, bytes(p.bytes)))
        .collect::<Vec<_>>()
        .join(" · ");
    let usable_mark = usable.map(|u| {
        view! {
            <span class="bar-usable" data-testid="footprint-usable" data-bytes=u.to_string()
                title=format!("usable {}", bytes(u)) style=format!("left: {}", percent(u))></span>
        }
    });
    let arena_only = state.arena_only_now() && d.static_bytes > 0;
    let left_out = arena_only.then(|| {
        view! {
            <p class="small" data-testid="arena-only-note">{format!(
                "arena only: the views and the table beside them show the arena ({}); the always-live pools ({}) are left out",
                bytes(d.arena_bytes),
                bytes(d.static_bytes)
            )}</p>
        }
    });
    let whose = if m.devices.len() > 1 {
        format!("{}: ", d.id)
    } else {
        String::new()
    };
    Some(view! {
        <div class="footprint-bar" data-testid="footprint-breakdown" data-bytes=d.footprint_bytes.to_string()>
            <div class="bar">{segments}{usable_mark}</div>
            <p class="small muted">{format!("{whose}footprint {} = {legend}", bytes(d.footprint_bytes))}</p>
        </div>
        {left_out}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_longer_is_offered_only_where_more_work_can_change_the_answer() {
        // Proven optimal, or not a search's: nothing to offer.
        assert_eq!(longer(Some(true), false, None), Longer::Nothing);
        assert_eq!(longer(None, false, None), Longer::Nothing);
        // Out of work with a gap: offered.
        assert_eq!(longer(Some(false), false, None), Longer::Offer);
        // After a longer run: what it gained, and the offer again; or that it gained nothing,
        // and no offer.
        assert_eq!(
            longer(Some(false), false, Some((1_048_576, 1_031_168))),
            Longer::Gained(17_408)
        );
        assert_eq!(
            longer(Some(false), false, Some((1_031_168, 1_031_168))),
            Longer::GainedNothing
        );
        // A cancelled run says nothing of what more work gives.
        assert_eq!(
            longer(Some(false), true, Some((1_031_168, 1_031_168))),
            Longer::Offer
        );
        // A longer run that proved its plan optimal offers nothing more.
        assert_eq!(
            longer(Some(true), false, Some((1_048_576, 1_031_168))),
            Longer::Nothing
        );
    }
}
