//! YAML parse errors as `line`, `column` and a one-line message in our own words, for our own
//! diagnostics: the YAML library's wording (which names its own API and Rust types) never
//! reaches a user.

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
    (line, column, reword(message))
}

/// `path:line:column: message` for a YAML parse error of the file `path`, in our words (for
/// YAML files other than plans, such as a kubeconfig).
pub fn located(path: &std::path::Path, error: &serde_saphyr::Error) -> String {
    let (line, column, message) = describe(error);
    if line == 0 {
        format!("{}: {message}", path.display())
    } else {
        format!("{}:{line}:{column}: {message}", path.display())
    }
}

/// The library's message in a sentence about the document that says what to change.
pub(crate) fn reword(message: &str) -> String {
    let quoted = |prefix: &str| {
        message
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('`'))
            .and_then(|rest| rest.split_once('`'))
            .map(|(name, _)| name.to_owned())
    };
    if let Some(field) = quoted("missing field ") {
        return format!("the required field `{field}` is missing");
    }
    if message.starts_with("unknown field `") {
        return message.to_owned();
    }
    // "variant" is the library's word for an enum's value.
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        return format!("unknown value `{rest}");
    }
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest
            .split(", set DuplicateKeyPolicy")
            .next()
            .unwrap_or(rest);
        return format!("the key `{key}` appears twice in this mapping; keep one");
    }
    let fixed = match message {
        "invalid u32" | "invalid u64" | "invalid u16" | "invalid u8" => {
            "expected a whole number from 0 to 4294967295"
        }
        "invalid boolean" => "expected true or false",
        "expected sequence start" => "expected a list here",
        "expected mapping start" => "expected a mapping (`key: value` lines) here",
        "expected string scalar" => "expected a string here",
        "alias references unknown anchor" => {
            "an alias (`*name`) refers to an anchor (`&name`) that is not defined before it"
        }
        "expected string key for externally tagged enum"
        | "externally tagged enum expected scalar or mapping"
        | "invalid enum variant" => {
            "expected one word here, one of the values docs/plan.md lists for this field"
        }
        _ => "",
    };
    if !fixed.is_empty() {
        return fixed.to_owned();
    }
    if message.starts_with("cannot deserialize null into") {
        return "this value is empty; write a value here".to_owned();
    }
    if message.starts_with("multiple YAML documents detected") {
        return "the file holds more than one YAML document (`---`); it must hold exactly one"
            .to_owned();
    }
    if message.starts_with("budget breached") {
        return "the document is too large or too deeply nested to be read".to_owned();
    }
    // A tag (`!!timestamp`, `!!float`, `!custom`) on a value read as a string.
    if let Some(rest) = message.strip_prefix("cannot deserialize tagged scalar into ") {
        return format!(
            "a YAML tag (`!!timestamp`, `!!float`, ...) on a value that must be {}: remove the tag and write the plain value",
            match rest {
                "string" => "a string",
                other => other,
            }
        );
    }
    if message.starts_with("invalid !!binary") {
        return "a `!!binary` value that is not base64; remove the `!!binary` tag".to_owned();
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some((found, expected)) = message
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once(", expected "))
        {
            let expected = match expected {
                "u8" | "u16" | "u32" | "u64" => "a whole number from 0 to 4294967295",
                "i32" | "i64" => "a whole number",
                "f64" | "f32" => "a number",
                "a string" | "string" => "a string",
                "a boolean" => "true or false",
                other if other.starts_with("struct ") => "a mapping (`key: value` lines)",
                other if other.starts_with("a sequence") => "a list",
                other => other,
            };
            return format!("expected {expected} here, found {found}");
        }
    }
    // Anything else comes from the YAML parser: the text is not valid YAML there.
    format!("YAML syntax: {message}")
}

/// At most `limit` characters of `text`, saying how long it was: an echoed value (a 4 MB
/// operation name, say) never floods a terminal or a log.
pub(crate) fn bounded(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        None => text.to_owned(),
        Some((end, _)) => format!(
            "{}… ({} characters in all)",
            &text[..end],
            text.chars().count()
        ),
    }
}

/// `message` with each quoted value (`"..."` or `` `...` ``) over `limit` characters shortened by
/// [`bounded`], so the sentence around it, which says what to change, stays whole.
pub(crate) fn bounded_quotes(message: &str, limit: usize) -> String {
    let mut out = String::with_capacity(message.len().min(4 * limit));
    let mut rest = message;
    while let Some(start) = rest.find(['"', '`']) {
        let quote = rest[start..].chars().next().unwrap_or('"');
        let after = &rest[start + 1..];
        // The closing quote: for "...", the first one not escaped.
        let mut end = None;
        let mut escaped = false;
        for (i, c) in after.char_indices() {
            if quote == '"' && c == '\\' && !escaped {
                escaped = true;
                continue;
            }
            if c == quote && !escaped {
                end = Some(i);
                break;
            }
            escaped = false;
        }
        let Some(end) = end else { break };
        out.push_str(&rest[..=start]);
        out.push_str(&bounded(&after[..end], limit));
        out.push(quote);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::{bounded, bounded_quotes, reword};

    #[test]
    fn library_words_become_sentences_about_the_document() {
        for (library, ours) in [
            (
                "missing field `shadow`",
                "the required field `shadow` is missing",
            ),
            (
                "duplicate mapping key: kind, set DuplicateKeyPolicy in Options if acceptable",
                "the key `kind` appears twice in this mapping; keep one",
            ),
            (
                "invalid u32",
                "expected a whole number from 0 to 4294967295",
            ),
            (
                "cannot deserialize null into string; use Option<String>",
                "this value is empty; write a value here",
            ),
            (
                "simple key expected ':'",
                "YAML syntax: simple key expected ':'",
            ),
        ] {
            assert_eq!(reword(library), ours);
        }
        for library in [
            "use from_str_multiple",
            "DuplicateKeyPolicy",
            "Option<String>",
            "budget",
        ] {
            for text in [
                "multiple YAML documents detected; use from_str_multiple or from_str_multiple_with_options",
                "budget breached: Nodes { nodes: 250001 }",
            ] {
                assert!(!reword(text).contains(library), "{text}");
            }
        }
    }

    #[test]
    fn echoed_values_are_bounded() {
        let long = "x".repeat(4 << 20);
        let short = bounded(&long, 200);
        assert!(short.len() < 300, "{}", short.len());
        assert!(short.ends_with("(4194304 characters in all)"));
        assert_eq!(bounded("name", 200), "name");
        let message = format!("\"{long}\" is not a valid operation name: start with a letter");
        let shortened = bounded_quotes(&message, 100);
        assert!(shortened.len() < 250, "{}", shortened.len());
        assert!(shortened.ends_with("is not a valid operation name: start with a letter"));
    }
}
