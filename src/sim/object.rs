//! Helpers over JSON objects: metadata access, names, timestamps, uids, selectors.

use serde_json::{Map, Value};

use super::status::ApiError;

/// `metadata.<field>` as a string.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// The object's `metadata`, created if missing.
///
/// # Panics
/// If `obj` is not a JSON object (callers check first).
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let root = obj.as_object_mut().expect("objects are JSON objects");
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("metadata is an object")
}

/// Whether `name` is a valid object name (an RFC 1123 subdomain).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// The object without `metadata`, `status`, `kind` and `apiVersion`: what `generation` tracks.
pub fn spec_part(obj: &Value) -> Map<String, Value> {
    obj.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "kind" | "apiVersion")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// A version-4-shaped UUID from 128 random bits.
pub fn uuid(bits: u128) -> String {
    let b = (bits & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let hex = format!("{b:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// What the API server does to a Secret on every write: `stringData` entries are base64-encoded
/// into `data` (overriding keys of the same name) and `stringData` is dropped.
pub fn normalize_secret(secret: &mut Value) {
    let Some(map) = secret.as_object_mut() else {
        return;
    };
    // An absent or empty type is defaulted, as by the real server.
    if map
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        map.insert("type".into(), Value::String("Opaque".into()));
    }
    let Some(Value::Object(string_data)) = map.remove("stringData") else {
        return;
    };
    let data = map
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    if let Some(data) = data.as_object_mut() {
        for (key, value) in string_data {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            data.insert(
                key,
                Value::String(crate::util::base64::encode(text.as_bytes())),
            );
        }
    }
}

/// One requirement of a label or field selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A token of a selector, as the real server's lexer splits it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Bang,
    Equals,
    DoubleEquals,
    NotEquals,
    Comma,
    Open,
    Close,
    In,
    NotIn,
    Greater,
    Less,
}

impl Token {
    fn text(&self) -> &str {
        match self {
            Self::Word(w) => w,
            Self::Bang => "!",
            Self::Equals => "=",
            Self::DoubleEquals => "==",
            Self::NotEquals => "!=",
            Self::Comma => ",",
            Self::Open => "(",
            Self::Close => ")",
            Self::In => "in",
            Self::NotIn => "notin",
            Self::Greater => ">",
            Self::Less => "<",
        }
    }
}

fn tokens(s: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '!' | '=' => {
                chars.next();
                let double = chars.peek() == Some(&'=');
                if double {
                    chars.next();
                }
                out.push(match (c, double) {
                    ('!', true) => Token::NotEquals,
                    ('!', false) => Token::Bang,
                    (_, true) => Token::DoubleEquals,
                    _ => Token::Equals,
                });
            }
            ',' | '(' | ')' | '<' | '>' => {
                chars.next();
                out.push(match c {
                    ',' => Token::Comma,
                    '(' => Token::Open,
                    '<' => Token::Less,
                    '>' => Token::Greater,
                    _ => Token::Close,
                });
            }
            _ => {
                let mut word = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || "!=,()<>".contains(c) {
                        break;
                    }
                    word.push(c);
                    chars.next();
                }
                out.push(match word.as_str() {
                    "in" => Token::In,
                    "notin" => Token::NotIn,
                    _ => Token::Word(word),
                });
            }
        }
    }
    out
}

/// A parsed `labelSelector` or `fieldSelector`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

/// The values of `in (...)` / `notin (...)` from `tokens[at]` (the opening parenthesis); an
/// empty place between commas or parentheses is the empty value, as for the real server.
fn parse_set(tokens: &[Token], mut at: usize) -> Result<(Vec<String>, usize), ApiError> {
    if tokens.get(at) != Some(&Token::Open) {
        return Err(parse_error(tokens.get(at), "'('"));
    }
    at += 1;
    let mut values = Vec::new();
    let mut expect_value = true;
    loop {
        match tokens.get(at) {
            Some(Token::Close) => {
                if expect_value {
                    values.push(String::new());
                }
                return Ok((values, at + 1));
            }
            Some(Token::Comma) => {
                if expect_value {
                    values.push(String::new());
                }
                expect_value = true;
            }
            Some(t @ (Token::Word(_) | Token::In | Token::NotIn)) if expect_value => {
                values.push(t.text().to_owned());
                expect_value = false;
            }
            other => return Err(parse_error(other, "',' or ')'")),
        }
        at += 1;
    }
}

fn parse_error(found: Option<&Token>, expected: &str) -> ApiError {
    // The end of the string reads as '' in the real server's messages.
    let found = found.map_or("", Token::text);
    ApiError::bad_request(format!(
        "unable to parse requirement: found '{found}', expected: {expected}"
    ))
}

/// An error between requirements: the real server words it without "unable to parse
/// requirement".
fn separator_error(found: Option<&Token>, expected: &str) -> ApiError {
    let found = found.map_or("", Token::text);
    ApiError::bad_request(format!("found '{found}', expected: {expected}"))
}
impl Selector {
    /// Parses a label selector as the real server does: comma-separated requirements `k=v`,
    /// `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>1`, `k<1`, `k`, `!k`. Keys and values
    /// are not validated as label keys and values (the real server answers 400 for invalid ones).
    pub fn labels(s: &str) -> Result<Self, ApiError> {
        let tokens = tokens(s);
        let mut at = 0;
        let mut reqs = Vec::new();
        // `in` and `notin` are words where a key or a value is expected.
        let word = |t: Option<&Token>| match t {
            Some(Token::Word(w)) => Some(w.clone()),
            Some(t @ (Token::In | Token::NotIn)) => Some(t.text().to_owned()),
            _ => None,
        };
        if tokens.is_empty() {
            return Ok(Self(reqs));
        }
        loop {
            let negated = tokens.get(at) == Some(&Token::Bang);
            if negated {
                at += 1;
            }
            let Some(key) = word(tokens.get(at)) else {
                return Err(if negated {
                    parse_error(tokens.get(at), "identifier")
                } else if at > 0 && tokens.get(at - 1) == Some(&Token::Comma) {
                    separator_error(tokens.get(at), "identifier after ','")
                } else {
                    separator_error(tokens.get(at), "!, identifier, or 'end of string'")
                });
            };
            at += 1;
            let op = tokens.get(at).cloned();
            let req = match op {
                None | Some(Token::Comma) => {
                    if negated {
                        Requirement::NotExists(key)
                    } else {
                        Requirement::Exists(key)
                    }
                }
                Some(_) if negated => {
                    return Err(separator_error(op.as_ref(), "',' or 'end of string'"));
                }
                Some(Token::Equals | Token::DoubleEquals | Token::NotEquals) => {
                    at += 1;
                    let value = match tokens.get(at) {
                        None | Some(Token::Comma) => String::new(),
                        t => {
                            at += 1;
                            word(t).ok_or_else(|| parse_error(t, "identifier"))?
                        }
                    };
                    if op == Some(Token::NotEquals) {
                        Requirement::NotEquals(key, value)
                    } else {
                        Requirement::Equals(key, value)
                    }
                }
                Some(Token::Greater | Token::Less) => {
                    at += 1;
                    let t = tokens.get(at);
                    at += 1;
                    let value = word(t).ok_or_else(|| parse_error(t, "identifier"))?;
                    let number = value.parse::<i64>().map_err(|_| {
                        ApiError::bad_request(format!(
                            "unable to parse requirement: values[0]: Invalid value: {value:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                        ))
                    })?;
                    if op == Some(Token::Greater) {
                        Requirement::GreaterThan(key, number)
                    } else {
                        Requirement::LessThan(key, number)
                    }
                }
                Some(Token::In | Token::NotIn) => {
                    at += 1;
                    let (values, next) = parse_set(&tokens, at)?;
                    at = next;
                    if op == Some(Token::In) {
                        Requirement::In(key, values)
                    } else {
                        Requirement::NotIn(key, values)
                    }
                }
                Some(other) => {
                    return Err(parse_error(Some(&other), "'=', '!=', '==', 'in', notin'"));
                }
            };
            reqs.push(req);
            match tokens.get(at) {
                None => break,
                Some(Token::Comma) => at += 1,
                other => return Err(separator_error(other, "',' or 'end of string'")),
            }
        }
        Ok(Self(reqs))
    }

    /// Parses a field selector; only `metadata.name` and `metadata.namespace` are supported (as
    /// for ConfigMaps and custom resources on the real server).
    pub fn fields(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (key, value, equal) = if let Some((k, v)) = term.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            if key != "metadata.name" && key != "metadata.namespace" {
                return Err(ApiError::bad_request(format!(
                    "{key:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                )));
            }
            let (key, value) = (key.to_owned(), value.to_owned());
            reqs.push(if equal {
                Requirement::Equals(key, value)
            } else {
                Requirement::NotEquals(key, value)
            });
        }
        Ok(Self(reqs))
    }

    /// Whether the selector has no requirement.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the object's labels satisfy the selector.
    pub fn matches_labels(&self, obj: &Value) -> bool {
        let labels = obj.get("metadata").and_then(|m| m.get("labels"));
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::NotExists(k) => label(k).is_none(),
            Requirement::GreaterThan(k, n) => label(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l > *n),
            Requirement::LessThan(k, n) => label(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l < *n),
        })
    }

    /// Whether the object's fields satisfy the selector.
    pub fn matches_fields(&self, obj: &Value) -> bool {
        let field = |k: &str| match k {
            "metadata.name" => meta_str(obj, "name").unwrap_or(""),
            "metadata.namespace" => meta_str(obj, "namespace").unwrap_or(""),
            _ => "",
        };
        self.0.iter().all(|req| match req {
            Requirement::Equals(k, v) => field(k) == v,
            Requirement::NotEquals(k, v) => field(k) != v,
            Requirement::In(..)
            | Requirement::NotIn(..)
            | Requirement::Exists(_)
            | Requirement::NotExists(_)
            | Requirement::GreaterThan(..)
            | Requirement::LessThan(..) => true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uuid_has_the_version_4_shape() {
        let id = uuid(0);
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        assert_ne!(uuid(1), uuid(2));
    }

    #[test]
    fn label_selectors() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let yes = [
            "app=web",
            "app==web",
            "app!=db",
            "tier",
            "!missing",
            "app=web,tier=front",
            "",
        ];
        for s in yes {
            assert!(Selector::labels(s).unwrap().matches_labels(&obj), "{s}");
        }
        for s in [
            "app=db",
            "app!=web",
            "missing",
            "!tier",
            "app=web,tier=back",
        ] {
            assert!(!Selector::labels(s).unwrap().matches_labels(&obj), "{s}");
        }
        for s in [
            "app in (web,db)",
            "app notin (db)",
            "tier notin (back)",
            "app in (web)",
        ] {
            assert!(Selector::labels(s).unwrap().matches_labels(&obj), "{s}");
        }
        for s in ["app in (db)", "app notin (web,db)", "missing in (x)"] {
            assert!(!Selector::labels(s).unwrap().matches_labels(&obj), "{s}");
        }
        for s in [
            "app in (web,)",
            "app in (,web)",
            "app notin ()",
            "app notin (in)",
        ] {
            assert!(Selector::labels(s).unwrap().matches_labels(&obj), "{s}");
        }
        for (s, found) in [
            ("app=web,", "identifier after ','"),
            ("app>x", "must be an integer"),
            ("app=web,", "found '', expected: identifier after ','"),
            ("app===", "'='"),
            ("app in a", "'a'"),
            ("app in (a", "found ''"),
            ("!app=x", "'='"),
            ("=x", "'='"),
            ("a b", "'b'"),
        ] {
            let err = Selector::labels(s).unwrap_err();
            assert_eq!(err.code, 400);
            assert!(err.message.contains(found), "{s}: {}", err.message);
        }
    }

    #[test]
    fn field_selectors() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}});
        assert!(
            Selector::fields("metadata.name=a")
                .unwrap()
                .matches_fields(&obj)
        );
        assert!(
            !Selector::fields("metadata.name=b")
                .unwrap()
                .matches_fields(&obj)
        );
        assert!(
            Selector::fields("metadata.namespace!=x")
                .unwrap()
                .matches_fields(&obj)
        );
        assert_eq!(Selector::fields("spec.nodeName=x").unwrap_err().code, 400);
    }

    #[test]
    fn string_data_becomes_data() {
        let mut secret = json!({"data": {"a": "YQ=="}, "stringData": {"b": "b", "a": "override"}});
        normalize_secret(&mut secret);
        assert_eq!(
            secret,
            json!({"data": {"a": "b3ZlcnJpZGU=", "b": "Yg=="}, "type": "Opaque"})
        );
    }

    #[test]
    fn names() {
        assert!(valid_name("a-b.c1"));
        for bad in ["", "A", "-a", "a-", "a_b", &"a".repeat(254)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
