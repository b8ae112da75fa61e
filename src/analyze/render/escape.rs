//! HTML escaping, shared by the report's sections.

/// `text` safe in HTML text and in a double-quoted attribute.
pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
