//! Figures as people read them: bytes in binary prefixes (KiB, MiB, GiB: powers of 1024) and
//! counts in k, M, G (powers of 1000), each to three significant figures, an interval in its
//! high end's unit (`22.9–32.5 MiB`), durations in s, min, h; and round axis ticks (1, 2 or 5
//! times a power of ten in the axis's unit). The page puts the exact figure in each cell's
//! `title`, so nothing is lost to the rounding.

/// A scale of prefixes: each unit `base` times the one before, written after the number with
/// `separator`.
struct Scale {
    base: f64,
    units: &'static [&'static str],
    separator: &'static str,
}

/// Bytes: binary prefixes, each 1024 times the one before (`27.7 MiB`).
const BYTES: Scale = Scale {
    base: 1024.0,
    units: &["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"],
    separator: " ",
};

/// Counts: decimal prefixes, each 1000 times the one before (`1.23M`).
const COUNTS: Scale = Scale {
    base: 1000.0,
    units: &["", "k", "M", "G", "T"],
    separator: "",
};

/// The prefix index of `x` on a scale of `base` (the largest power of `base` at most `|x|`,
/// capped at the last unit), and that power.
fn prefix(x: f64, base: f64, units: usize) -> (usize, f64) {
    let mut index = 0;
    let mut scale = 1.0;
    while index + 1 < units && x.abs() >= scale * base {
        index += 1;
        scale *= base;
    }
    (index, scale)
}

/// `x` (already in its unit) with three significant figures: `27.7`, `235`, `1.02`; whole numbers
/// below 1000 of the smallest unit as they are.
fn three_figures(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// Three figures, unless the value has fewer digits than that in the base unit (an exact count
/// of bytes or objects below a thousand).
fn scaled(x: f64, scale: f64, index: usize) -> String {
    if index == 0 {
        format!("{:.0}", x.trunc())
    } else {
        three_figures(x / scale)
    }
}

/// `x` on `scale`, three significant figures.
fn scaled_figure(x: f64, scale: &Scale) -> String {
    if !x.is_finite() {
        return format!("{x}{}{}", scale.separator, scale.units[0]);
    }
    let (index, power) = prefix(x, scale.base, scale.units.len());
    format!(
        "{}{}{}",
        scaled(x, power, index),
        scale.separator,
        scale.units[index]
    )
}

/// `low`–`high` on `scale`, both in the unit of the larger end.
fn scaled_interval(low: f64, high: f64, scale: &Scale) -> String {
    if !low.is_finite() || !high.is_finite() {
        return format!(
            "{}–{}",
            scaled_figure(low, scale),
            scaled_figure(high, scale)
        );
    }
    let (index, power) = prefix(high.abs().max(low.abs()), scale.base, scale.units.len());
    format!(
        "{}–{}{}{}",
        scaled(low, power, index),
        scaled(high, power, index),
        scale.separator,
        scale.units[index]
    )
}

/// Bytes with a binary prefix, three significant figures: `28995669` → `27.7 MiB`.
pub fn bytes(x: f64) -> String {
    scaled_figure(x, &BYTES)
}

/// A byte interval in its high end's unit: `22.9–32.5 MiB`.
pub fn bytes_interval(low: f64, high: f64) -> String {
    scaled_interval(low, high, &BYTES)
}

/// A count (objects) with k, M, G: `1234567` → `1.23M`; below a thousand, whole.
pub fn count(x: f64) -> String {
    scaled_figure(x, &COUNTS)
}

/// A count interval in its high end's unit: `980–1.02k` reads badly, so `0.98–1.02k`.
pub fn count_interval(low: f64, high: f64) -> String {
    scaled_interval(low, high, &COUNTS)
}

/// A duration: seconds below two minutes, minutes below two hours, hours above; three figures.
pub fn duration(seconds: f64) -> String {
    let (value, unit) = if seconds >= 7_200.0 {
        (seconds / 3_600.0, "h")
    } else if seconds >= 120.0 {
        (seconds / 60.0, "min")
    } else {
        (seconds, "s")
    };
    let text = three_figures(value);
    // Whole values without the trailing zeros three figures would give them.
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text} {unit}")
}

/// Round ticks from 0 to at least `max`: the step is 1, 2 or 5 times a power of ten of `unit`
/// (1024 for bytes in MiB, 60 for minutes...), chosen so that there are at most `most` steps.
/// Returns the step (in the base unit) and the ticks, the last at or above `max`.
pub fn ticks(max: f64, unit: f64, most: usize) -> (f64, Vec<f64>) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        unit
    };
    let in_unit = max / unit;
    let rough = in_unit / most.max(1) as f64;
    let power = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| s * most as f64 >= in_unit)
        .unwrap_or(10.0 * power)
        * unit;
    let count = (max / step).ceil().max(1.0) as usize;
    (step, (0..=count).map(|k| k as f64 * step).collect())
}

/// The binary unit (a power of 1024) an axis of bytes up to `max` counts in.
pub fn byte_axis_unit(max: f64) -> f64 {
    prefix(max, BYTES.base, BYTES.units.len()).1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_in_binary_prefixes_with_three_significant_figures() {
        assert_eq!(bytes(28_995_669.0), "27.7 MiB");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.50 KiB");
        assert_eq!(bytes(246_415_360.0), "235 MiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.00 GiB");
        assert_eq!(bytes(0.0), "0 B");
        assert_eq!(bytes_interval(23_961_545.0, 34_029_793.0), "22.9–32.5 MiB");
        assert_eq!(bytes_interval(0.0, 2048.0), "0–2.00 KiB");
    }

    #[test]
    fn counts_read_in_decimal_prefixes_and_durations_in_their_unit() {
        assert_eq!(count(999.0), "999");
        assert_eq!(count(1_234_567.0), "1.23M");
        assert_eq!(count_interval(980.0, 1020.0), "0.98–1.02k");
        assert_eq!(duration(15.0), "15 s");
        assert_eq!(duration(7.5), "7.5 s");
        assert_eq!(duration(600.0), "10 min");
        assert_eq!(duration(3.0 * 3600.0), "3 h");
    }

    #[test]
    fn ticks_are_one_two_or_five_times_a_power_of_ten_of_the_unit() {
        // 15.088 s: steps of 5 s, not 3.772 s.
        let (step, t) = ticks(15.088, 1.0, 4);
        assert_eq!(step, 5.0);
        assert_eq!(t, [0.0, 5.0, 10.0, 15.0, 20.0]);
        // 235.5 MiB: steps of 100 MiB.
        let mib = 1024.0 * 1024.0;
        let (step, t) = ticks(235.5 * mib, mib, 4);
        assert_eq!(step, 100.0 * mib);
        assert_eq!(t.len(), 4);
        assert_eq!(byte_axis_unit(235.5 * mib), mib);
    }
}
