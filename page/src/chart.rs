//! Live bytes over time as an inline SVG line chart: one line per site, suspects drawn thick and
//! dashed in red and marked in the legend. Plain SVG elements, no script; every label escaped.

use std::fmt::Write as _;

use crate::escape;
use crate::model::History;
use crate::units;

const WIDTH: f64 = 1000.0;
const PLOT_LEFT: f64 = 80.0;
const PLOT_TOP: f64 = 20.0;
const PLOT_WIDTH: f64 = 600.0;
const PLOT_HEIGHT: f64 = 300.0;

/// Line colours of the sites that are not suspects.
const COLOURS: [&str; 8] = [
    "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#7f7f7f", "#bcbd22", "#e377c2",
];

/// The chart of `history`, or `None` with fewer than two moments or no series.
pub fn svg(history: &History) -> Option<String> {
    let n = history.times.len();
    if n < 2 || history.series.is_empty() {
        return None;
    }
    let data_max = history
        .series
        .iter()
        .flat_map(|s| s.bytes.iter())
        .fold(0.0f64, |m, &b| if b.is_finite() { m.max(b) } else { m })
        .max(1.0);
    // Round ticks: the axes end at the first round figure at or past the data.
    let (scale, unit) = time_unit(history.times[n - 1]);
    let (_, time_ticks) = units::ticks(history.times[n - 1], scale, 5);
    let (_, byte_ticks) = units::ticks(data_max, units::byte_axis_unit(data_max), 4);
    let t_max = time_ticks
        .last()
        .copied()
        .unwrap_or(1.0)
        .max(f64::MIN_POSITIVE);
    let y_max = byte_ticks.last().copied().unwrap_or(1.0).max(1.0);
    let height = (PLOT_TOP + PLOT_HEIGHT + 50.0).max(30.0 + 18.0 * history.series.len() as f64);
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" \
         height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\">"
    );
    let _ = write!(
        out,
        "<rect x=\"{PLOT_LEFT}\" y=\"{PLOT_TOP}\" width=\"{PLOT_WIDTH}\" height=\"{PLOT_HEIGHT}\" \
         fill=\"#fff\" stroke=\"#999\"/>"
    );
    let x_of = |t: f64| PLOT_LEFT + PLOT_WIDTH * t / t_max;
    let y_of = |b: f64| PLOT_TOP + PLOT_HEIGHT * (1.0 - b / y_max);
    for &b in &byte_ticks {
        let y = y_of(b);
        let _ = write!(
            out,
            "<line x1=\"{PLOT_LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            PLOT_LEFT + PLOT_WIDTH,
            PLOT_LEFT - 6.0,
            y + 4.0,
            escape::text(&units::bytes(b)),
        );
    }
    for &t in &time_ticks {
        let _ = write!(
            out,
            "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x_of(t),
            PLOT_TOP + PLOT_HEIGHT + 16.0,
            // Multiples of a round step, without the float noise of k · 0.1.
            (t / scale * 1e6).round() / 1e6
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{unit} since the first moment</text>",
        PLOT_LEFT + PLOT_WIDTH / 2.0,
        PLOT_TOP + PLOT_HEIGHT + 36.0
    );
    let mut plain = 0usize;
    for (i, series) in history.series.iter().enumerate() {
        let (colour, style) = if series.suspect {
            ("#d62728", " stroke-width=\"3\" stroke-dasharray=\"8 4\"")
        } else {
            plain += 1;
            (
                COLOURS[(plain - 1) % COLOURS.len()],
                " stroke-width=\"1.5\"",
            )
        };
        let mut points = String::new();
        for (t, b) in history.times.iter().zip(&series.bytes) {
            let b = if b.is_finite() { *b } else { 0.0 };
            let _ = write!(points, "{:.1},{:.1} ", x_of(*t), y_of(b));
        }
        let _ = write!(
            out,
            "<polyline class=\"series\" fill=\"none\" stroke=\"{colour}\"{style} \
             points=\"{}\"><title>{}</title></polyline>",
            points.trim_end(),
            escape::text(&series.name)
        );
        let y = PLOT_TOP + 10.0 + 18.0 * i as f64;
        let x = PLOT_LEFT + PLOT_WIDTH + 20.0;
        let mut label: String = series.name.chars().take(48).collect();
        if label.len() < series.name.len() {
            label.push('…');
        }
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\"{style}/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}{}</text>",
            x + 18.0,
            x + 24.0,
            y + 4.0,
            if series.suspect { "suspect: " } else { "" },
            escape::text(&label)
        );
    }
    out.push_str("</svg>");
    Some(out)
}

/// The unit the time axis counts in, for a history `t_max` seconds long: its length in seconds
/// and its name.
fn time_unit(t_max: f64) -> (f64, &'static str) {
    if t_max >= 2.0 * 3_600.0 {
        (3_600.0, "hours")
    } else if t_max >= 120.0 {
        (60.0, "minutes")
    } else {
        (1.0, "seconds")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Series;

    /// The tick labels of a chart, in order.
    fn ticks(svg: &str) -> Vec<&str> {
        svg.split("<text class=\"tick\"")
            .skip(1)
            .filter_map(|t| {
                t.split_once('>')
                    .and_then(|(_, rest)| rest.split_once("</text>"))
            })
            .map(|(label, _)| label)
            .collect()
    }

    #[test]
    fn axes_are_labelled_at_round_figures() {
        // A redis series' figures: 15.088 s long, up to 235.5 MiB.
        let history = History {
            times: vec![0.0, 7.544, 15.088],
            series: vec![Series {
                name: "zmalloc".into(),
                bytes: vec![1e8, 1.8e8, 235.5 * 1048576.0],
                suspect: false,
            }],
            note: String::new(),
        };
        let svg = svg(&history).unwrap();
        assert_eq!(
            ticks(&svg),
            ["0 B", "100 MiB", "200 MiB", "300 MiB", "0", "5", "10", "15", "20"]
        );
    }
}
