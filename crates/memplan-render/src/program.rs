//! The program view's geometry: after each event, the pools allocated then, stacked (the
//! device's constants first, then each context's pools in declaration order), so that each
//! column's top is the program's used memory after that event. In bytes and event indices; the
//! page scales it. It computes no figure: the pools' sizes and when each is allocated and freed
//! come from the program plan.

use memplan_core::program::ProgramPlan;

use crate::color::{Rgb, series_color};

/// Who a band's pool belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The device's constants, shared by every context.
    Constants,
    /// A context, by index into the plan's contexts.
    Context(usize),
}

/// One pool allocated after one event: a rectangle from `bottom` to `top` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Band {
    pub event: usize,
    pub owner: Owner,
    /// Index into the owner's pools (the context's, or the plan's constants).
    pub pool: usize,
    pub bottom: u64,
    pub top: u64,
}

/// The chart of one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramChart {
    pub bands: Vec<Band>,
    /// Per event: the used memory after it (the top of its column).
    pub used: Vec<u64>,
    /// Per event: the model of the peak of the routine it runs, if it is a run on the device.
    pub model: Vec<Option<u64>>,
    /// The bytes the chart's height stands for: the largest used memory or model, and the
    /// usable line when it is within twice that (further up, the page names it instead).
    pub top_bytes: u64,
    /// Whether `usable` is drawn within the chart.
    pub usable_in_view: bool,
}

/// The chart of `device` (an index into the plan's devices), with the device's usable bytes
/// when its class is known.
pub fn chart(plan: &ProgramPlan, device: usize, usable: Option<u64>) -> ProgramChart {
    let id = &plan.devices[device].device;
    let mut bands = Vec::new();
    let mut used = Vec::with_capacity(plan.used_bytes.len());
    for event in 0..plan.used_bytes.len() {
        let mut top = 0u64;
        let constants = plan
            .constants
            .iter()
            .enumerate()
            .map(|(k, p)| (Owner::Constants, k, p));
        let pools = plan.contexts.iter().enumerate().flat_map(|(c, ctx)| {
            ctx.pools
                .iter()
                .enumerate()
                .map(move |(k, p)| (Owner::Context(c), k, p))
        });
        for (owner, pool, p) in constants.chain(pools) {
            if &p.device != id || !p.allocated_after(event) {
                continue;
            }
            // The plan's used memory bounds the sum.
            let bottom = top;
            top = top.saturating_add(p.page_rounded_bytes);
            bands.push(Band {
                event,
                owner,
                pool,
                bottom,
                top,
            });
        }
        used.push(top);
    }
    let mut model = vec![None; used.len()];
    for run in plan.runs.iter().filter(|r| &r.device == id) {
        model[run.event] = Some(run.model_bytes);
    }
    let highest = used
        .iter()
        .copied()
        .chain(model.iter().flatten().copied())
        .max()
        .unwrap_or(0)
        .max(1);
    let usable_in_view = usable.is_some_and(|u| u <= highest.saturating_mul(2));
    let top_bytes = match usable {
        Some(u) if usable_in_view => highest.max(u),
        _ => highest,
    };
    ProgramChart {
        bands,
        used,
        model,
        top_bytes,
        usable_in_view,
    }
}

/// The chart's viewBox: a column of `COLUMN` units an event, `HEIGHT` units for its top bytes
/// (the page stretches it to its box: `preserveAspectRatio="none"`, strokes unscaled).
const COLUMN: f64 = 100.0;
const HEIGHT: f64 = 1000.0;

/// `text` safe inside an SVG element or attribute (names come from the dump).
fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The chart of `device` as SVG: the bands (each titled with its owner and pool), the used
/// memory as a line, each run's model of the peak as a bar, the usable line when in view, and
/// over each event a column (`data-testid="program-event-N"`, `data-event`, `data-used-bytes`,
/// titled with `labels[N]`) that a click picks; the columns of the runs of routine `shown`
/// are marked `shown`. Its layout depends on no font: the page draws the text around it.
pub fn chart_svg(
    plan: &ProgramPlan,
    device: usize,
    usable: Option<u64>,
    labels: &[String],
    shown: Option<&str>,
) -> String {
    use memplan_core::units::bytes;
    let c = chart(plan, device, usable);
    let events = c.used.len();
    let y = |b: u64| HEIGHT - (b as f64 / c.top_bytes as f64) * HEIGHT;
    let mut svg = format!(
        r#"<svg class="program-chart" data-testid="program-chart" data-device="{}" viewBox="0 0 {} {HEIGHT}" preserveAspectRatio="none" role="img" aria-label="the program's used memory after each event, its pools stacked by context">"#,
        escaped(&plan.devices[device].device),
        events as f64 * COLUMN
    );
    for b in &c.bands {
        let (owner, pool) = match b.owner {
            Owner::Constants => (
                "the device's constants".to_string(),
                &plan.constants[b.pool],
            ),
            Owner::Context(k) => (
                format!("context `{}`", plan.contexts[k].context),
                &plan.contexts[k].pools[b.pool],
            ),
        };
        let title = format!(
            "after event {}: {owner}, {} pool{} ({} B, {} page-rounded)",
            b.event,
            pool.role.name(),
            pool.routine
                .as_ref()
                .map(|r| format!(" of `{r}`"))
                .unwrap_or_default(),
            pool.bytes,
            bytes(pool.page_rounded_bytes)
        );
        let _ = std::fmt::Write::write_fmt(
            &mut svg,
            format_args!(
                r#"<rect x="{}" width="{}" y="{}" height="{}" fill="{}"><title>{}</title></rect>"#,
                b.event as f64 * COLUMN + 8.0,
                COLUMN - 16.0,
                y(b.top),
                (y(b.bottom) - y(b.top)).max(0.0),
                owner_color(b.owner, plan.contexts.len()).css(),
                escaped(&title)
            ),
        );
    }
    let mut points = String::new();
    for (e, used) in c.used.iter().enumerate() {
        let h = y(*used);
        points.push_str(&format!(
            "{},{h} {},{h} ",
            e as f64 * COLUMN,
            (e + 1) as f64 * COLUMN
        ));
    }
    svg.push_str(&format!(
        r#"<polyline class="program-used" points="{}" vector-effect="non-scaling-stroke"/>"#,
        points.trim_end()
    ));
    for (e, m) in c.model.iter().enumerate() {
        if let Some(m) = m {
            svg.push_str(&format!(
                r#"<line class="program-model" x1="{}" x2="{}" y1="{h}" y2="{h}" vector-effect="non-scaling-stroke"/>"#,
                e as f64 * COLUMN,
                (e + 1) as f64 * COLUMN,
                h = y(*m)
            ));
        }
    }
    if let Some(u) = usable.filter(|_| c.usable_in_view) {
        svg.push_str(&format!(
            r#"<line class="program-usable" x1="0" x2="{}" y1="{h}" y2="{h}" vector-effect="non-scaling-stroke"/>"#,
            events as f64 * COLUMN,
            h = y(u)
        ));
    }
    let runs: Vec<Option<&str>> = (0..events)
        .map(|e| match &plan.events[e] {
            memplan_core::program::EventOutcome::Run { routine, .. } => Some(routine.as_str()),
            _ => None,
        })
        .collect();
    for (e, run) in runs.iter().enumerate() {
        let class = match *run {
            Some(r) if Some(r) == shown => "program-column run shown",
            Some(_) => "program-column run",
            None => "program-column",
        };
        let label = labels.get(e).map_or("", String::as_str);
        svg.push_str(&format!(
            r#"<rect class="{class}" data-testid="program-event-{e}" data-event="{e}" data-used-bytes="{used}" x="{}" width="{COLUMN}" y="0" height="{HEIGHT}" vector-effect="non-scaling-stroke"><title>{}</title></rect>"#,
            e as f64 * COLUMN,
            escaped(&format!("event {e}: {label} · used {}", bytes(c.used[e]))),
            used = c.used[e],
        ));
    }
    svg.push_str("</svg>");
    svg
}

/// The color of a band's owner: a context's own, the constants gray.
pub fn owner_color(owner: Owner, contexts: usize) -> Rgb {
    match owner {
        Owner::Constants => series_color(0, 1, true),
        Owner::Context(c) => series_color(c, contexts + 1, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_core::program::{
        ContextPools, EventOutcome, ProgramPool, ProgramPoolRole, UsedPeak,
    };

    fn pool(bytes: u64, allocated_at: usize, freed_at: Option<usize>) -> ProgramPool {
        ProgramPool {
            device: "d".into(),
            role: ProgramPoolRole::Arena,
            routine: Some("r".into()),
            bytes,
            page_rounded_bytes: bytes,
            allocated_at: Some(allocated_at),
            freed_at,
        }
    }

    /// Two contexts and the constants on one device, over four events.
    fn two_contexts() -> ProgramPlan {
        ProgramPlan {
            devices: vec![UsedPeak {
                device: "d".into(),
                page_bytes: 1,
                used_peak_bytes: 70,
                used_peak_event: 1,
                model_peak_bytes: 0,
                used_at_end_bytes: 5,
            }],
            contexts: vec![
                ContextPools {
                    context: "a".into(),
                    parent: None,
                    pools: vec![pool(40, 0, Some(2)), pool(10, 0, Some(3))],
                    page_rounded_bytes: 50,
                },
                ContextPools {
                    context: "b".into(),
                    parent: None,
                    pools: vec![pool(15, 1, None)],
                    page_rounded_bytes: 15,
                },
            ],
            constants: vec![ProgramPool {
                role: ProgramPoolRole::Constants,
                routine: None,
                ..pool(5, 0, None)
            }],
            events: vec![
                EventOutcome::Create {
                    context: "a".into(),
                    allocated: vec![0, 1],
                    constants_allocated: vec![0],
                };
                4
            ],
            used_bytes: vec![vec![55], vec![70], vec![30], vec![20]],
            runs: Vec::new(),
            unreleased: Vec::new(),
        }
    }

    #[test]
    fn each_column_stacks_the_pools_allocated_after_its_event_up_to_the_used_memory() {
        let plan = two_contexts();
        let c = chart(&plan, 0, Some(100));
        assert_eq!(c.used, [55, 70, 30, 20]);
        for (e, used) in plan.used_bytes.iter().enumerate() {
            let column: Vec<&Band> = c.bands.iter().filter(|b| b.event == e).collect();
            assert_eq!(column.first().map(|b| b.owner), Some(Owner::Constants));
            for pair in column.windows(2) {
                assert_eq!(pair[0].top, pair[1].bottom, "contiguous");
            }
            assert_eq!(column.last().unwrap().top, used[0]);
        }
        // The usable line is within twice the highest column: drawn, and the scale reaches it.
        assert!(c.usable_in_view);
        assert_eq!(c.top_bytes, 100);
        let far = chart(&plan, 0, Some(1000));
        assert!(!far.usable_in_view);
        assert_eq!(far.top_bytes, 70);
    }

    #[test]
    fn the_svg_has_a_column_per_event_with_its_used_bytes_and_escapes_every_name() {
        let mut plan = two_contexts();
        plan.contexts[0].context = "<script>alert(1)</script>".into();
        plan.contexts[0].pools[0].routine = Some("r\"&'".into());
        let labels: Vec<String> = (0..4).map(|e| format!("<b>{e}</b>")).collect();
        let svg = chart_svg(&plan, 0, Some(100), &labels, None);
        for (e, used) in [55, 70, 30, 20].into_iter().enumerate() {
            assert!(
                svg.contains(&format!(
                    r#"data-testid="program-event-{e}" data-event="{e}" data-used-bytes="{used}""#
                )),
                "{svg}"
            );
        }
        assert!(!svg.contains("<script>") && !svg.contains("<b>"), "{svg}");
        assert!(
            svg.contains("&lt;script&gt;") && svg.contains("r&quot;&amp;&#39;"),
            "{svg}"
        );
        assert!(svg.contains(r#"class="program-usable""#));
        assert_eq!(svg.matches("<rect").count(), c_bands(&plan) + 4);
    }

    fn c_bands(plan: &ProgramPlan) -> usize {
        chart(plan, 0, None).bands.len()
    }
}
