//! `google.api.http` path templates: a configured pattern parsed into
//! segments once, matched against request paths, ranked by specificity
//! when several rules match.

use std::cmp::Ordering;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    /// A literal segment.
    Lit(String),
    /// `*` or `{var}` / `{var=*}`: exactly one non-empty segment.
    One,
    /// `**` or `{var=**}`: zero or more segments (always last).
    Rest,
}

impl Seg {
    fn rank(&self) -> u8 {
        match self {
            Seg::Lit(_) => 3,
            Seg::One => 2,
            Seg::Rest => 0,
        }
    }
}

/// A REST binding of an operation: HTTP method + path template.
#[derive(Clone, Debug)]
pub struct HttpRule {
    /// Upper-cased HTTP method.
    pub method: String,
    /// The template as configured; published as `http.route`.
    pub pattern: String,
    /// Index of the operation in [`OpMap::operations`](super::OpMap::operations).
    pub op: usize,
    /// `body` of the rule (request side), when set.
    pub body: Option<String>,
    /// `response_body` of the rule, when set.
    pub response_body: Option<String>,
    /// The key of its operation's labels with this route ([`labels_key`](super::labels_key)): a REST call's.
    pub key: String,
    segs: Vec<Seg>,
    verb: Option<String>,
    /// Variables: field path and the segments they cover (`end` past the
    /// last; `usize::MAX` for a trailing `**`).
    vars: Vec<(String, usize, usize)>,
}

impl HttpRule {
    /// The rule binding `method` (upper-cased) and `pattern` to operation
    /// `op`; `Err` says what is wrong with the template.
    pub(super) fn new(method: String, pattern: String, op: usize) -> Result<Self, String> {
        let (segs, verb, vars) = parse_template(&pattern)?;
        Ok(HttpRule {
            method,
            pattern,
            op,
            body: None,
            response_body: None,
            key: String::new(),
            segs,
            verb,
            vars,
        })
    }

    /// The field paths the template binds, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.vars.iter().map(|(name, _, _)| name.as_str())
    }

    /// The raw (still percent-encoded) value of each variable in `path`
    /// (no query string), which must match this rule; `each(field, value)`.
    pub fn captures<'p>(&self, path: &'p [u8], mut each: impl FnMut(&str, &'p [u8])) {
        let mut p = path;
        if let Some(verb) = &self.verb {
            p = &p[..p.len().saturating_sub(verb.len() + 1)];
        }
        let rest = p.strip_prefix(b"/").unwrap_or(p);
        // Byte offset where each segment starts, and the end.
        let mut starts = vec![0usize];
        starts.extend(
            rest.iter()
                .enumerate()
                .filter(|(_, &b)| b == b'/')
                .map(|(i, _)| i + 1),
        );
        let n = starts.len();
        for (name, from, to) in &self.vars {
            if *from >= n {
                each(name, b"");
                continue;
            }
            let begin = starts[*from];
            let end = if *to >= n {
                rest.len()
            } else {
                starts[*to] - 1
            };
            each(name, &rest[begin..end.max(begin)]);
        }
    }

    /// Does `path` (no query string) match this rule's template?
    pub(super) fn matches(&self, path: &[u8]) -> bool {
        let mut p = path;
        if let Some(verb) = &self.verb {
            let v = verb.as_bytes();
            if p.len() < v.len() + 1 || !p.ends_with(v) || p[p.len() - v.len() - 1] != b':' {
                return false;
            }
            p = &p[..p.len() - v.len() - 1];
        }
        let Some(rest) = p.strip_prefix(b"/") else {
            return false;
        };
        let mut parts = rest.split(|&b| b == b'/');
        if rest.is_empty() {
            // "/" has no segments.
            parts.next();
        }
        for seg in &self.segs {
            match seg {
                Seg::Rest => return true,
                Seg::Lit(l) => {
                    if parts.next() != Some(l.as_bytes()) {
                        return false;
                    }
                }
                Seg::One => match parts.next() {
                    Some(s) if !s.is_empty() => {}
                    _ => return false,
                },
            }
        }
        parts.next().is_none()
    }

    /// Ordering by specificity: `Greater` means `self` is more specific.
    /// Literal beats variable beats `**`; an exact end beats `**`; a verb
    /// beats none.
    pub(super) fn cmp_specificity(&self, other: &HttpRule) -> Ordering {
        let n = self.segs.len().max(other.segs.len());
        for i in 0..n {
            // A missing segment ranks between a variable and `**`.
            let a = self.segs.get(i).map_or(1, Seg::rank);
            let b = other.segs.get(i).map_or(1, Seg::rank);
            match a.cmp(&b) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        self.verb.is_some().cmp(&other.verb.is_some())
    }
}

fn is_var_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// Parses a `google.api.http` path template into segments and an optional
/// verb. Supported: literal segments, `*`, `**`, `{var}`, `{var=*}`,
/// `{var=**}`, `{var=literal/*/...}`, and a trailing `:verb`.
type Parsed = (Vec<Seg>, Option<String>, Vec<(String, usize, usize)>);

fn parse_template(t: &str) -> Result<Parsed, String> {
    let Some(body) = t.strip_prefix('/') else {
        return Err("must start with \"/\"".into());
    };
    if body.is_empty() {
        return Ok((Vec::new(), None, Vec::new()));
    }
    // Split into top-level segments (a '/' inside braces does not split).
    let mut raw: Vec<&str> = Vec::new();
    let mut depth = 0u32;
    let mut start = 0;
    for (i, c) in body.char_indices() {
        match c {
            '{' => {
                if depth > 0 {
                    return Err("nested \"{\"".into());
                }
                depth = 1;
            }
            '}' => {
                if depth == 0 {
                    return Err("unbalanced \"}\"".into());
                }
                depth = 0;
            }
            '/' if depth == 0 => {
                raw.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unclosed \"{\"".into());
    }
    raw.push(&body[start..]);
    // Verb: a ':' after the last top-level '/', outside braces.
    let mut verb = None;
    if let Some(last) = raw.last_mut() {
        let mut depth = 0u32;
        let mut colon = None;
        for (i, c) in last.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                ':' if depth == 0 => colon = Some(i),
                _ => {}
            }
        }
        if let Some(i) = colon {
            let v = &last[i + 1..];
            if v.is_empty() || v.contains(['{', '}', '*']) {
                return Err(format!("invalid verb {v:?}"));
            }
            verb = Some(v.to_string());
            *last = &last[..i];
        }
    }
    let mut segs = Vec::new();
    let mut vars = Vec::new();
    let push_plain = |segs: &mut Vec<Seg>, s: &str| -> Result<(), String> {
        match s {
            "" => Err("empty segment".into()),
            "*" => {
                segs.push(Seg::One);
                Ok(())
            }
            "**" => {
                segs.push(Seg::Rest);
                Ok(())
            }
            _ if s.contains(['{', '}', '*']) => Err(format!("invalid segment {s:?}")),
            _ => {
                segs.push(Seg::Lit(s.to_string()));
                Ok(())
            }
        }
    };
    for s in raw {
        if let Some(inner) = s.strip_prefix('{') {
            let Some(inner) = inner.strip_suffix('}') else {
                return Err(format!("invalid segment {s:?}"));
            };
            let (name, sub) = match inner.split_once('=') {
                Some((n, sub)) => (n, Some(sub)),
                None => (inner, None),
            };
            if !is_var_name(name) {
                return Err(format!("invalid variable name {name:?}"));
            }
            let from = segs.len();
            match sub {
                None => segs.push(Seg::One),
                Some(sub) => {
                    for part in sub.split('/') {
                        push_plain(&mut segs, part)?;
                    }
                }
            }
            let to = if segs.last() == Some(&Seg::Rest) {
                usize::MAX
            } else {
                segs.len()
            };
            vars.push((name.to_string(), from, to));
        } else {
            push_plain(&mut segs, s)?;
        }
    }
    if let Some(i) = segs.iter().position(|s| *s == Seg::Rest) {
        if i + 1 != segs.len() {
            return Err("\"**\" must be the last segment".into());
        }
    }
    Ok((segs, verb, vars))
}
