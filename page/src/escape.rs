//! Text into HTML: every name and label that reaches the page goes through [`text`], so a symbol
//! name that holds markup (`<script>`, C++'s `operator<`, Rust's `<T as Trait>`) shows as the
//! characters it is, in element content and in quoted attribute values alike.

use std::fmt::Write as _;

/// `s` with `&`, `<`, `>`, `"` and `'` written as character references, and control characters
/// other than tab and newline as U+FFFD (a name cannot carry them meaningfully, and some are not
/// allowed in HTML at all).
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    push(&mut out, s);
    out
}

/// [`text`] appended to `out`.
pub fn push(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' => out.push(c),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
}

/// A finite number for a `data-v` attribute (what the table sorts by): `0` for what is not.
pub fn number(x: f64) -> String {
    let mut out = String::new();
    if x.is_finite() {
        let _ = write!(out, "{x}");
    } else {
        out.push('0');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_become_references() {
        assert_eq!(
            text(r#"<script>alert(1)</script> a<b>&"'"#),
            "&lt;script&gt;alert(1)&lt;/script&gt; a&lt;b&gt;&amp;&quot;&#39;"
        );
        assert_eq!(text("a\u{0}b\tc"), "a\u{fffd}b\tc");
        assert_eq!(number(f64::NAN), "0");
        assert_eq!(number(1.5), "1.5");
    }
}
