//! The in-use flame graph: inferno's interactive SVG (zoom on click, search with Ctrl-F), made
//! to sit inline in the page.

/// The folded lines inferno draws (`stack count`, the count truncated to an integer): the
/// stacks of at least one unit, without the empty stack (allocator frames only). One rule for the
/// page and `jeprof-compat report --flamegraph`.
pub fn inferno_lines(folded: &[(String, f64)]) -> Vec<String> {
    folded
        .iter()
        .filter(|(stack, value)| !stack.is_empty() && *value >= 1.0)
        .map(|(stack, value)| format!("{stack} {}", value.trunc() as u64))
        .collect()
}

/// The flame graph's width in pixels (the page's 1400-pixel window, less its margins).
pub const WIDTH: usize = 1300;

/// Inferno's SVG of `folded` (live bytes per folded stack), without the XML prolog and doctype
/// an inline `<svg>` must not carry. Stacks under one byte, and the empty stack (allocator frames
/// only), are left out, as `jeprof-compat report --flamegraph` leaves them out. `Err` says why
/// there is nothing to draw, or what inferno reported.
///
/// Inferno escapes every name it writes (in `<title>`, text and attributes), and its script
/// looks elements up by id and takes the document's first `<svg>` as its own: the page keeps
/// those ids to the flame graph and draws it before any other SVG.
pub fn svg(folded: &[(String, f64)], title: &str) -> Result<String, String> {
    draw(inferno_lines(folded), title)
}

/// Inferno's differential flame graph of `folded` (live bytes per folded stack then and now):
/// frames as wide as now, red where they grew and blue where they shrank, deeper for a larger
/// share of the change (inferno's differential mode, as Brendan Gregg's `difffolded.pl` feeds
/// it). The same rules as [`svg`] otherwise.
pub fn differential_svg(folded: &[(String, f64, f64)], title: &str) -> Result<String, String> {
    let lines = folded
        .iter()
        .filter(|(stack, then, now)| !stack.is_empty() && (*then >= 1.0 || *now >= 1.0))
        .map(|(stack, then, now)| {
            format!(
                "{stack} {} {}",
                then.max(0.0).trunc() as u64,
                now.max(0.0).trunc() as u64
            )
        })
        .collect();
    draw(lines, title)
}

fn draw(lines: Vec<String>, title: &str) -> Result<String, String> {
    if lines.is_empty() {
        return Err("no stack holds a live byte: nothing to draw".to_string());
    }
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.count_name = "bytes".to_string();
    // A fixed width: inferno's fluid drawing sizes itself from its parent, which an inline
    // `<svg>` in a block does not give it.
    options.image_width = Some(WIDTH);
    // Frames under a pixel wide are not drawn (inferno's default is a tenth of one): they cannot
    // be seen or clicked, and a profile of ten thousand stacks has tens of thousands of them.
    options.min_width = 1.0;
    // Differential lines are coloured by their change whatever the palette.
    options.colors =
        inferno::flamegraph::color::Palette::Multi(inferno::flamegraph::color::MultiPalette::Rust);
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut out)
        .map_err(|e| format!("drawing the flame graph failed: {e}"))?;
    let text = String::from_utf8(out).map_err(|e| format!("the flame graph is not UTF-8: {e}"))?;
    match text.find("<svg") {
        Some(start) => Ok(text[start..].to_string()),
        None => Err("the flame graph has no <svg> element".to_string()),
    }
}
