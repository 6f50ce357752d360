//! The report's figures: grouped bar charts as SVG (`plotters`' SVG backend, no fonts loaded).

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One grouped bar chart: a group per workload, a bar per scheme.
pub struct Bars<'a> {
    /// Title above the chart.
    pub title: &'a str,
    /// The y axis' caption.
    pub y_label: &'a str,
    /// Group names (workloads), left to right.
    pub groups: &'a [String],
    /// Bar names (schemes), in each group's order and in the legend.
    pub series: &'a [String],
    /// `values[group][series]`; NaN leaves the bar out.
    pub values: &'a [Vec<f64>],
    /// A logarithmic y axis (values at or below its floor are drawn at the floor).
    pub log_floor: Option<f64>,
    /// A horizontal reference line (e.g. 0.95 for coverage).
    pub reference: Option<f64>,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(174, 199, 232),
    RGBColor(255, 127, 14),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

fn failed(e: impl std::fmt::Display) -> String {
    format!("drawing a figure: {e}")
}

/// Renders the chart and returns the SVG text. The legend sits right of the plot and each group's
/// name under its bars, so neither hides a bar.
pub fn bars(chart: &Bars) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let (plot_area, legend_area) = root.split_horizontally(780);
        let max = chart
            .values
            .iter()
            .flatten()
            .copied()
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max)
            .max(1e-9);
        let per_group = chart.series.len() as f64 + 1.0;
        let x_max = chart.groups.len().max(1) as f64 * per_group;
        let mut builder = ChartBuilder::on(&plot_area);
        builder
            .caption(chart.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(64);
        match chart.log_floor {
            Some(floor) => {
                let top = (max * 2.0).max(floor * 10.0);
                let mut c = builder
                    .build_cartesian_2d(0f64..x_max, (floor..top).log_scale())
                    .map_err(failed)?;
                c.configure_mesh()
                    .disable_x_mesh()
                    .x_labels(0)
                    .y_desc(chart.y_label)
                    .draw()
                    .map_err(failed)?;
                draw_bars(&mut c, chart, per_group, floor)?;
                name_groups(&plot_area, &c, chart, per_group, floor)?;
            }
            None => {
                let top = chart.reference.unwrap_or(0.0).max(max) * 1.1;
                let mut c = builder
                    .build_cartesian_2d(0f64..x_max, 0f64..top)
                    .map_err(failed)?;
                c.configure_mesh()
                    .disable_x_mesh()
                    .x_labels(0)
                    .y_desc(chart.y_label)
                    .draw()
                    .map_err(failed)?;
                draw_bars(&mut c, chart, per_group, 0.0)?;
                name_groups(&plot_area, &c, chart, per_group, 0.0)?;
            }
        }
        for (s, name) in chart.series.iter().enumerate() {
            let y = 60 + 24 * s as i32;
            legend_area
                .draw(&Rectangle::new(
                    [(8, y), (22, y + 14)],
                    PALETTE[s % PALETTE.len()].filled(),
                ))
                .map_err(failed)?;
            legend_area
                .draw(&Text::new(name.as_str(), (28, y + 1), ("sans-serif", 13)))
                .map_err(failed)?;
        }
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

type Chart<'a, 'b, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, Y>>;

fn draw_bars<'a, 'b: 'a, Y>(
    c: &mut Chart<'a, 'b, Y>,
    chart: &Bars,
    per_group: f64,
    floor: f64,
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64>,
{
    for s in 0..chart.series.len() {
        let colour = PALETTE[s % PALETTE.len()];
        let rects: Vec<Rectangle<(f64, f64)>> = chart
            .values
            .iter()
            .enumerate()
            .filter_map(|(g, row)| {
                let v = *row.get(s)?;
                if v.is_nan() {
                    return None;
                }
                let x = g as f64 * per_group + 0.5 + s as f64;
                Some(Rectangle::new(
                    [(x, floor), (x + 0.9, v.max(floor))],
                    colour.filled(),
                ))
            })
            .collect();
        c.draw_series(rects).map_err(failed)?;
    }
    if let Some(r) = chart.reference {
        let x_max = chart.groups.len() as f64 * per_group;
        c.draw_series(std::iter::once(PathElement::new(
            vec![(0.0, r), (x_max, r)],
            BLACK.stroke_width(1),
        )))
        .map_err(failed)?;
    }
    Ok(())
}

/// Writes each group's name under the middle of its bars, in the x-label area.
fn name_groups<Y>(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    c: &Chart<'_, '_, Y>,
    chart: &Bars,
    per_group: f64,
    floor: f64,
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64>,
{
    let style = TextStyle::from(("sans-serif", 15)).pos(Pos::new(HPos::Center, VPos::Top));
    for (g, name) in chart.groups.iter().enumerate() {
        let centre = g as f64 * per_group + per_group / 2.0;
        let (x, y) = c.backend_coord(&(centre, floor));
        area.draw(&Text::new(name.as_str(), (x, y + 8), style.clone()))
            .map_err(failed)?;
    }
    Ok(())
}
