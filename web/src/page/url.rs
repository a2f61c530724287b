//! The state a link carries: `?view=arena&strategy=best&sel=h1&zoom=0,12,0,4096&...`.
//!
//! Parsing is forgiving (an unknown or malformed value falls back to the default: a link must
//! never break the page) but not silent: each value it could not use is named in
//! [`UrlState::warnings`], which the page shows. Writing is canonical (defaults left out, fixed
//! key order), so the same screen gives the same link.

use std::collections::BTreeMap;

use memplan_core::StrategyChoice;
use memplan_core::order::Order;
use memplan_render::color::ColorBy;
use memplan_render::model::RowOrder;
use memplan_render::scene::Viewport;

use memplan_engine::DEFAULT_UTIL;

/// The views with a tab.
/// The other side of a comparison, as a link carries it: the strategy and order (and whether
/// the flips shown apply), and the dump when it is another one at a URL. A dump from the user's disk cannot
/// travel; a comparison against one is left out of the link.
#[derive(Debug, Clone, PartialEq)]
pub struct Against {
    pub strategy: memplan_core::StrategyChoice,
    pub order: Order,
    pub flips: bool,
    pub src: Option<String>,
}

impl Default for Against {
    fn default() -> Self {
        Against {
            strategy: memplan_core::StrategyChoice::default(),
            order: Order::Given,
            flips: true,
            src: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tab {
    #[default]
    Timeline,
    Arena,
}

impl Tab {
    pub fn name(self) -> &'static str {
        match self {
            Tab::Timeline => "timeline",
            Tab::Arena => "arena",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Tab::Timeline, Tab::Arena]
            .into_iter()
            .find(|t| t.name() == s)
    }
}

/// The panel shown beside the views: the tools that change the plan or explain it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Panel {
    #[default]
    None,
    Flips,
    Sweep,
    Devices,
    Spaces,
    Compare,
    Sites,
    Advise,
}

impl Panel {
    pub fn name(self) -> &'static str {
        match self {
            Panel::None => "none",
            Panel::Flips => "flips",
            Panel::Devices => "devices",
            Panel::Sweep => "sweep",
            Panel::Spaces => "spaces",
            Panel::Compare => "compare",
            Panel::Sites => "sites",
            Panel::Advise => "advise",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Panel::None,
            Panel::Flips,
            Panel::Sweep,
            Panel::Devices,
            Panel::Spaces,
            Panel::Compare,
            Panel::Sites,
            Panel::Advise,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct UrlState {
    pub tab: Tab,
    pub panel: Panel,
    /// The tensors recomputed at their uses (one `flip=` each, in order).
    pub flips: Vec<String>,
    /// The flips panel's target field.
    pub target: String,
    /// A bundled device class every device of the dump is.
    pub device_class: Option<String>,
    /// The utilization of that device.
    pub util: f64,
    /// Values given to the dump's params (`set=NAME=VALUE`, repeated).
    pub params: BTreeMap<String, u64>,
    pub strategy: StrategyChoice,
    /// `search`'s work limit per region, in conflict visits (the CLI's `--work-limit`); `None`: the
    /// default.
    pub work_limit: Option<u64>,
    /// Only tensors of equal dtype share bytes (the CLI's default; `--no-precision-classes`).
    pub precision_classes: bool,
    /// The largest pool (the CLI's `--pool-cap`); `Some(u64::MAX)`, `pool-cap=none`: no cap
    /// even where the dump gives one.
    pub pool_cap: Option<u64>,
    /// The order the steps run in (the CLI's `--order`).
    pub order: Order,
    /// The selected tensor id.
    pub selected: Option<String>,
    /// The window of the current view.
    pub zoom: Option<Viewport>,
    pub device: Option<String>,
    pub sort: RowOrder,
    pub color_by: ColorBy,
    pub search: String,
    /// A bundled example to open.
    pub example: Option<String>,
    /// The routine of a program shown (its id).
    pub routine: Option<String>,
    /// A URL to fetch the dump from.
    pub src: Option<String>,
    /// A file from the user's disk: its name, for saying that it is not in the link.
    pub file: Option<String>,
    /// A dump the host page of an embed posted: its name. The embed that opens this link hands
    /// the bytes over; a link alone cannot carry them.
    pub posted: Option<String>,
    /// Whether the views leave the always-live buffers out; `None`: decided by the plan.
    pub arena_only: Option<bool>,
    /// The time axis labels step names rather than position numbers.
    pub axis_steps: bool,
    /// The plan the compare panel compares the one shown against, so a review can share both.
    pub against: Option<Against>,
    /// Show only the chosen view (for iframes).
    pub embed: bool,
    /// What the link asked for that the page could not use, as messages.
    pub warnings: Vec<String>,
}

impl Default for UrlState {
    fn default() -> Self {
        UrlState {
            tab: Tab::default(),
            panel: Panel::default(),
            flips: Vec::new(),
            target: String::new(),
            device_class: None,
            util: DEFAULT_UTIL,
            params: BTreeMap::new(),
            strategy: StrategyChoice::Best,
            work_limit: None,
            precision_classes: true,
            pool_cap: None,
            order: Order::Given,
            selected: None,
            zoom: None,
            device: None,
            sort: RowOrder::default(),
            color_by: ColorBy::default(),
            search: String::new(),
            example: None,
            routine: None,
            src: None,
            file: None,
            posted: None,
            arena_only: None,
            axis_steps: false,
            against: None,
            embed: false,
            warnings: Vec::new(),
        }
    }
}

/// A number for a link: integers as integers, others with 6 significant decimals.
fn short(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        let s = format!("{x:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

impl UrlState {
    /// Reads a query string (with or without the leading `?`).
    pub fn parse(query: &str) -> Self {
        let mut state = UrlState::default();
        let mut warnings = Vec::new();
        let mut unknown = |key: &str, value: &str, expected: &str| {
            warnings.push(format!(
                "the link's {key}={value:?} is not known (expected {expected}); showing the default"
            ))
        };
        for (key, value) in form_urlencoded::parse(query.trim_start_matches('?').as_bytes()) {
            let value = value.into_owned();
            match key.as_ref() {
                "view" => match Tab::parse(&value) {
                    Some(t) => state.tab = t,
                    None => unknown("view", &value, "timeline or arena"),
                },
                "panel" => match Panel::parse(&value) {
                    Some(p) => state.panel = p,
                    None => unknown(
                        "panel",
                        &value,
                        "flips, sweep, devices, spaces, compare, sites or advise",
                    ),
                },
                "flip" if !value.is_empty() => state.flips.push(value),
                // `budget=` and `hw=` are the keys' names before the glossary.
                "target" | "budget" => match memplan_human::parse_target(&value) {
                    Some(_) => state.target = value,
                    None => unknown(&key, &value, "a size (512MiB, 1.5GB, bytes) or minimize"),
                },
                "class" | "hw" => {
                    if memplan_formats::hardware::bundled(&value).is_some() {
                        state.device_class = Some(value);
                    } else {
                        let names = memplan_formats::hardware::bundled_names().join(" or ");
                        unknown(&key, &value, &names);
                    }
                }
                "util" => match value.parse::<f64>() {
                    Ok(u) if u > 0.0 && u <= 1.0 => state.util = u,
                    _ => unknown("util", &value, "a number in (0, 1]"),
                },
                "set" => match value
                    .split_once('=')
                    .and_then(|(k, v)| Some((k, v.parse::<u64>().ok()?)))
                {
                    Some((name, v)) if !name.is_empty() => {
                        state.params.insert(name.to_string(), v);
                    }
                    _ => unknown("set", &value, "NAME=VALUE with an integer value"),
                },
                "against" => match value.parse() {
                    Ok(strategy) => {
                        let a = state.against.get_or_insert_with(Against::default);
                        a.strategy = strategy;
                    }
                    Err(_) => unknown(
                        "against",
                        &value,
                        "first-fit, best-fit, tlsf, search, bump or best",
                    ),
                },
                "against-order" => match value.parse::<Order>() {
                    Ok(order) => state.against.get_or_insert_with(Against::default).order = order,
                    Err(_) => unknown("against-order", &value, "given, lpmf, bfs, dfs or best"),
                },
                "against-flips" => {
                    state.against.get_or_insert_with(Against::default).flips = value != "0";
                }
                "against-src" if !value.is_empty() => {
                    state.against.get_or_insert_with(Against::default).src = Some(value);
                }
                "strategy" => match value.parse() {
                    Ok(s) => state.strategy = s,
                    Err(_) => unknown(
                        "strategy",
                        &value,
                        "first-fit, best-fit, tlsf, search, bump or best",
                    ),
                },
                "work-limit" => match value.parse::<u64>() {
                    Ok(w) if w > 0 => state.work_limit = Some(w),
                    _ => unknown(
                        "work-limit",
                        &value,
                        "a positive whole number of conflict visits",
                    ),
                },
                "precision-classes" => match value.as_str() {
                    "on" => state.precision_classes = true,
                    "off" => state.precision_classes = false,
                    _ => unknown("precision-classes", &value, "on or off"),
                },
                "pool-cap" => match value.as_str() {
                    "none" => state.pool_cap = Some(u64::MAX),
                    _ => match memplan_human::parse_bytes(&value) {
                        Some(b) if b > 0 => state.pool_cap = Some(b),
                        _ => unknown("pool-cap", &value, "a size (4GiB, bytes) or none"),
                    },
                },
                "order" => match value.parse::<Order>() {
                    Ok(order) => state.order = order,
                    Err(_) => unknown("order", &value, "given, lpmf, bfs, dfs or best"),
                },
                "sel" if !value.is_empty() => state.selected = Some(value),
                "zoom" => match Viewport::parse(&value) {
                    Some(v) => state.zoom = Some(v),
                    None => unknown("zoom", &value, "x0,x1,y0,y1 with x0 < x1 and y0 < y1"),
                },
                "device" if !value.is_empty() => state.device = Some(value),
                "sort" => match RowOrder::parse(&value) {
                    Some(o) => state.sort = o,
                    None => unknown("sort", &value, "start, size or lifetime"),
                },
                "color" => match ColorBy::parse(&value) {
                    Some(c) => state.color_by = c,
                    None => unknown("color", &value, "kind or dtype"),
                },
                "q" => state.search = value,
                "example" if !value.is_empty() => {
                    if crate::page::examples::named(&value).is_some() {
                        state.example = Some(value);
                    } else {
                        let names: Vec<&str> = (crate::page::examples::EXAMPLES.iter())
                            .chain(crate::page::examples::PROGRAMS)
                            .map(|e| e.name)
                            .collect();
                        unknown("example", &value, &names.join(" or "));
                    }
                }
                "routine" if !value.is_empty() => state.routine = Some(value),
                "src" if !value.is_empty() => state.src = Some(value),
                "file" if !value.is_empty() => state.file = Some(value),
                "posted" if !value.is_empty() => state.posted = Some(value),
                "arena" => match value.as_str() {
                    "only" => state.arena_only = Some(true),
                    "all" => state.arena_only = Some(false),
                    _ => unknown("arena", &value, "only or all"),
                },
                "axis" => match value.as_str() {
                    "steps" => state.axis_steps = true,
                    "positions" => state.axis_steps = false,
                    _ => unknown("axis", &value, "steps or positions"),
                },
                "embed" => state.embed = value == "1" || value == "true",
                _ => {}
            }
        }
        state.warnings = warnings;
        state
    }

    /// The plan choices the link holds (strategy, work limit, precision classes, pool cap,
    /// params, flips), as a scenario without a device class.
    pub fn choices(&self) -> memplan_engine::Scenario {
        memplan_engine::Scenario {
            strategy: self.strategy,
            work_limit: self.work_limit,
            precision_classes: self.precision_classes,
            pool_cap: self.pool_cap,
            params: self.params.clone(),
            flips: self.flips.clone(),
            order: self.order,
            ..memplan_engine::Scenario::default()
        }
    }

    /// The canonical query string (without `?`; empty for the defaults).
    pub fn to_query(&self) -> String {
        let d = UrlState::default();
        let mut q = form_urlencoded::Serializer::new(String::new());
        if let Some(src) = &self.src {
            q.append_pair("src", src);
        }
        if let Some(example) = &self.example {
            q.append_pair("example", example);
        }
        if let Some(routine) = &self.routine {
            q.append_pair("routine", routine);
        }
        if let Some(file) = &self.file {
            q.append_pair("file", file);
        }
        if let Some(posted) = &self.posted {
            q.append_pair("posted", posted);
        }
        if self.tab != d.tab {
            q.append_pair("view", self.tab.name());
        }
        if self.panel != d.panel {
            q.append_pair("panel", self.panel.name());
        }
        if self.strategy != d.strategy {
            q.append_pair("strategy", self.strategy.name());
        }
        if let Some(work) = self.work_limit {
            q.append_pair("work-limit", &work.to_string());
        }
        if !self.precision_classes {
            q.append_pair("precision-classes", "off");
        }
        match self.pool_cap {
            Some(u64::MAX) => {
                q.append_pair("pool-cap", "none");
            }
            Some(cap) => {
                q.append_pair("pool-cap", &cap.to_string());
            }
            None => {}
        }
        if !self.order.is_given() {
            q.append_pair("order", self.order.name());
        }
        if let Some(class) = &self.device_class {
            q.append_pair("class", class);
        }
        if self.util != d.util {
            q.append_pair("util", &short(self.util));
        }
        for (name, value) in &self.params {
            q.append_pair("set", &format!("{name}={value}"));
        }
        for tensor in &self.flips {
            q.append_pair("flip", tensor);
        }
        if !self.target.is_empty() {
            q.append_pair("target", &self.target);
        }
        if let Some(device) = &self.device {
            q.append_pair("device", device);
        }
        if let Some(sel) = &self.selected {
            q.append_pair("sel", sel);
        }
        if let Some(v) = self.zoom {
            q.append_pair("zoom", &[v.x0, v.x1, v.y0, v.y1].map(short).join(","));
        }
        if self.sort != d.sort {
            q.append_pair("sort", self.sort.name());
        }
        if self.color_by != d.color_by {
            q.append_pair("color", self.color_by.name());
        }
        if !self.search.is_empty() {
            q.append_pair("q", &self.search);
        }
        if let Some(only) = self.arena_only {
            q.append_pair("arena", if only { "only" } else { "all" });
        }
        if self.axis_steps {
            q.append_pair("axis", "steps");
        }
        if let Some(a) = &self.against {
            q.append_pair("against", a.strategy.name());
            if !a.order.is_given() {
                q.append_pair("against-order", a.order.name());
            }
            if !a.flips {
                q.append_pair("against-flips", "0");
            }
            if let Some(src) = &a.src {
                q.append_pair("against-src", src);
            }
        }
        if self.embed {
            q.append_pair("embed", "1");
        }
        q.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_that_is_not_one_is_named_and_left_out() {
        let u = UrlState::parse("?target=lots&flip=x");
        assert_eq!(u.target, "");
        assert_eq!(u.flips, vec!["x".to_string()]);
        assert_eq!(u.warnings.len(), 1, "{:?}", u.warnings);
        assert!(
            u.warnings[0].contains(r#"target="lots""#),
            "{:?}",
            u.warnings
        );
    }

    #[test]
    fn the_keys_named_before_the_glossary_still_read() {
        let old = UrlState::parse("?hw=l4-24gb&budget=1GB&flip=x");
        assert_eq!(old.device_class.as_deref(), Some("l4-24gb"));
        assert_eq!(old.target, "1GB");
        assert_eq!(old.flips, vec!["x".to_string()]);
        assert!(old.warnings.is_empty(), "{:?}", old.warnings);
        // Written back under today's names.
        assert_eq!(
            old.to_query(),
            UrlState::parse("?class=l4-24gb&target=1GB&flip=x").to_query()
        );
        assert!(old.to_query().contains("class=l4-24gb") && old.to_query().contains("target=1GB"));
    }

    #[test]
    fn a_link_round_trips() {
        let state = UrlState {
            tab: Tab::Arena,
            panel: Panel::Flips,
            flips: vec!["act,1".into(), "act 2".into()],
            target: "1.5GB".into(),
            device_class: Some("l4-24gb".into()),
            util: 0.85,
            params: [("B".to_string(), 31), ("S".to_string(), 4096)].into(),
            strategy: memplan_core::Strategy::Tlsf.into(),
            work_limit: Some(200_000_000),
            precision_classes: false,
            pool_cap: Some(u64::MAX),
            order: Order::Best,
            selected: Some("h 1&<x>".into()),
            zoom: Some(Viewport {
                x0: 1.5,
                x1: 12.0,
                y0: 0.0,
                y1: 4096.0,
            }),
            device: Some("gpu0".into()),
            sort: RowOrder::Size,
            color_by: ColorBy::DType,
            search: "norm".into(),
            example: Some("mlp-training".into()),
            routine: Some("decode step&1".into()),
            src: None,
            file: Some("my model.json".into()),
            posted: Some("host &.json".into()),
            against: Some(Against {
                strategy: memplan_core::Strategy::Tlsf.into(),
                order: Order::Lpmf,
                flips: false,
                src: Some("https://x.org/after.json?v=2&k".into()),
            }),
            arena_only: Some(false),
            axis_steps: true,
            embed: true,
            warnings: Vec::new(),
        };
        let query = state.to_query();
        assert_eq!(UrlState::parse(&query), state);
        assert_eq!(UrlState::parse(&format!("?{query}")), state);
        assert_eq!(UrlState::default().to_query(), "");
        let capped = UrlState {
            pool_cap: Some(4 << 30),
            panel: Panel::Advise,
            ..UrlState::default()
        };
        assert_eq!(UrlState::parse(&capped.to_query()), capped);
        assert_eq!(UrlState::parse("pool-cap=4GiB").pool_cap, Some(4 << 30));
        assert_eq!(UrlState::parse("pool-cap=lots").warnings.len(), 1);
        assert_eq!(UrlState::parse("precision-classes=maybe").warnings.len(), 1);
        assert_eq!(UrlState::parse("order=dfs").order, Order::Dfs);
        assert_eq!(UrlState::parse("order=fastest").warnings.len(), 1);
    }

    #[test]
    fn malformed_values_fall_back_to_defaults() {
        let s = UrlState::parse(
            "view=nope&strategy=magic&work-limit=0&zoom=1,2,3&sort=up&color=red&embed=yes&example=gpt9",
        );
        assert_eq!(
            s.warnings,
            vec![
                r#"the link's view="nope" is not known (expected timeline or arena); showing the default"#,
                r#"the link's strategy="magic" is not known (expected first-fit, best-fit, tlsf, search, bump or best); showing the default"#,
                r#"the link's work-limit="0" is not known (expected a positive whole number of conflict visits); showing the default"#,
                r#"the link's zoom="1,2,3" is not known (expected x0,x1,y0,y1 with x0 < x1 and y0 < y1); showing the default"#,
                r#"the link's sort="up" is not known (expected start, size or lifetime); showing the default"#,
                r#"the link's color="red" is not known (expected kind or dtype); showing the default"#,
                r#"the link's example="gpt9" is not known (expected mlp-training or transformer-decode or convnet-training or decoder-serving or serving-program or schedule-search-program); showing the default"#,
            ]
        );
        assert_eq!(
            UrlState {
                warnings: Vec::new(),
                ..s
            },
            UrlState::default()
        );
        assert_eq!(UrlState::parse("zoom=5,1,0,1").zoom, None);
        assert_eq!(UrlState::parse("zoom=0,NaN,0,1").zoom, None);
    }
}
