//! YAML parse errors as `line`, `column` and a one-line message, for our own diagnostics.

/// A parse error's location (0, 0 when unknown) and its message without location or snippet.
pub(crate) fn describe(error: &serde_saphyr::Error) -> (u64, u64, String) {
    let options = serde_saphyr::render_options! { snippets: serde_saphyr::SnippetMode::Off };
    let rendered = error.render_with_options(options);
    // The plain rendering may start with "error: line L column C: " and end with
    // " at line L, column C"; callers print the location themselves.
    let first_line = rendered.lines().next().unwrap_or_default();
    let mut message = first_line.strip_prefix("error: ").unwrap_or(first_line);
    if message.starts_with("line ") {
        message = message.split_once(": ").map_or(message, |(_, rest)| rest);
    }
    if let Some(at) = message.rfind(" at line ")
        && message[at..].contains(", column ")
    {
        message = &message[..at];
    }
    let (line, column) = error.location().map_or((0, 0), |l| (l.line(), l.column()));
    (line, column, message.to_owned())
}
