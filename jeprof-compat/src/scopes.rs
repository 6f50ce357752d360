//! Reports per scope, from dumps whose stacks carry per-scope figures (`# scope` lines, which the
//! jeprof-shim writes when the program entered scopes; see [`jeprof_dumpfmt::scopes`]).
//!
//! - [`scope_dumps`]: each dump reduced to one scope's in-use figures, for `report --scope`;
//! - [`by_scope`] and [`format_by_scope`]: every scope's in-use totals over the dumps, for
//!   `report --by-scope`.
//!
//! Only in-use figures: what each scope allocated since start is not in the dumps per stack.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use jeprof_dumpfmt::math::confidence_interval_95;
use jeprof_dumpfmt::{Estimate, Profile};

use crate::report::{perl_int, Measure};

/// Each dump reduced to `label`'s in-use figures per stack (everything else, symbols and maps
/// included, kept), with where it came from. `Err` lists the scopes the dumps do carry when none
/// has figures for `label`.
pub fn scope_dumps(
    dumps: Vec<(Profile, String)>,
    label: &str,
) -> Result<Vec<(Profile, String)>, Vec<String>> {
    if !dumps
        .iter()
        .any(|(p, _)| p.scopes.iter().any(|s| s.scope == label))
    {
        let mut known: Vec<String> = dumps
            .iter()
            .flat_map(|(p, _)| p.scopes.iter().map(|s| s.scope.clone()))
            .collect();
        known.sort_unstable();
        known.dedup();
        return Err(known);
    }
    Ok(dumps
        .into_iter()
        .map(|(p, source)| (jeprof_dumpfmt::scopes::scope_profile(&p, label), source))
        .collect())
}

/// Every scope's in-use totals (with variances) over all `dumps`, by label.
pub fn by_scope(dumps: &[(Profile, String)]) -> BTreeMap<String, Estimate> {
    let mut totals: BTreeMap<String, Estimate> = BTreeMap::new();
    for (p, _) in dumps {
        for (label, e) in jeprof_dumpfmt::scopes::scope_totals(p) {
            totals.entry(label).or_default().add(&e);
        }
    }
    totals
}

/// The `--by-scope` table: per scope, largest first, the in-use figure (`measure`: space or
/// objects), its share of all scoped figures, its 95% interval, the label; bytes printed as whole
/// bytes. `None` for an allocated-since-start `measure`, which the dumps do not hold per scope.
pub fn format_by_scope(totals: &BTreeMap<String, Estimate>, measure: Measure) -> Option<String> {
    let objects = match measure {
        Measure::InuseSpace => false,
        Measure::InuseObjects => true,
        Measure::AllocSpace | Measure::AllocObjects => return None,
    };
    let pick = |e: &Estimate| {
        if objects {
            (e.objects, e.objects_variance)
        } else {
            (e.bytes, e.bytes_variance)
        }
    };
    let mut rows: Vec<(&String, f64, f64)> = totals
        .iter()
        .map(|(label, e)| {
            let (x, v) = pick(e);
            (label, x, v)
        })
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let total: f64 = rows.iter().map(|r| r.1).sum();
    let unit = if objects { "objects" } else { "B" };
    let mut out = String::new();
    let _ = writeln!(out, "Total in scopes: {} {unit}", perl_int(total));
    let _ = writeln!(
        out,
        "{:>14} {:>6}  {:>29}  scope",
        unit, "%", "95% interval"
    );
    for (label, x, v) in rows {
        let (low, high) = confidence_interval_95(x, v);
        let share = if total > 0.0 { 100.0 * x / total } else { 0.0 };
        let interval = format!("[{}, {}]", perl_int(low), perl_int(high));
        let _ = writeln!(
            out,
            "{:>14} {share:>5.1}%  {interval:>29}  {label}",
            perl_int(x)
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jeprof_dumpfmt::ScopeStack;

    fn dump(scopes: &[(&str, f64)]) -> (Profile, String) {
        let mut p = Profile::new(512);
        p.scopes = scopes
            .iter()
            .map(|&(scope, bytes)| ScopeStack {
                scope: scope.into(),
                frames: vec![0x10],
                inuse: Estimate {
                    objects: bytes / 64.0,
                    bytes,
                    objects_variance: 0.0,
                    bytes_variance: 100.0,
                },
            })
            .collect();
        (p, "d".into())
    }

    #[test]
    fn by_scope_adds_dumps_up_and_lists_the_largest_first() {
        let dumps = [dump(&[("a", 100.0), ("b", 300.0)]), dump(&[("a", 50.0)])];
        let totals = by_scope(&dumps);
        assert_eq!(totals["a"].bytes, 150.0);
        let text = format_by_scope(&totals, Measure::InuseSpace).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Total in scopes: 450 B");
        assert!(
            lines[2].ends_with("  b") && lines[2].contains("66.7%"),
            "{text}"
        );
        assert!(
            lines[3].ends_with("  a") && lines[3].contains("[122, 177]"),
            "{text}"
        );
        assert!(format_by_scope(&totals, Measure::AllocSpace).is_none());
    }

    #[test]
    fn an_unknown_scope_is_refused_with_the_scopes_the_dumps_carry() {
        let dumps = vec![dump(&[("b", 1.0), ("a", 2.0)])];
        assert_eq!(
            scope_dumps(dumps.clone(), "c").unwrap_err(),
            vec!["a".to_string(), "b".to_string()]
        );
        let only_a = scope_dumps(dumps, "a").unwrap();
        assert_eq!(only_a[0].0.totals().inuse.bytes, 2.0);
    }
}
