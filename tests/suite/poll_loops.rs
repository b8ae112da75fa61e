//! The tests and the benches wait through one helper, `tests/common/wait.rs` (`wait_until`,
//! `wait_for` and their async twins: a timeout names what was awaited, the timeout and the last
//! state seen). This test parses every Rust file of `tests/` and `benches/` with `syn` and fails,
//! naming file and line, on a hand-written poll anywhere else: a loop that sleeps and
//!
//! - checks a clock: compares a reading of one (`Instant::now()`, `.elapsed()`,
//!   `.duration_since(..)` and its variants, or a variable the loop set to one), or uses a name
//!   with `deadline` in it (in its code or in a macro's, `assert!` among them);
//! - or counts its attempts: a `for` over a bounded range that leaves early (`break`, `return`),
//!   or a variable both incremented (`+=`) and compared in the loop.
//!
//! A sleep that is not a poll has neither and stays: a pause of a scenario, a loop that paces
//! what it sends, a loop that samples a process until it exits. A loop is judged on its own code
//! (the loops inside it are judged on theirs); one whose sleep and check are split across the
//! loops inside it is named too, unless one of those is already.
//!
//! The tests at the bottom plant each kind of poll, and loops that are not polls, in made-up files
//! and check what is caught.

use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The one file whose loop may sleep until a deadline.
const HELPER: &str = "tests/common/wait.rs";

/// Methods that read a clock against a start or a deadline.
const CLOCK_METHODS: &[&str] = &[
    "elapsed",
    "duration_since",
    "saturating_duration_since",
    "checked_duration_since",
];

/// What a loop's code does.
#[derive(Default, Clone)]
struct Seen {
    sleeps: bool,
    clock: bool,
    /// Variables incremented with `+=`.
    incremented: Vec<String>,
    /// Variables compared (`<`, `>=`, `==`, ...).
    compared: Vec<String>,
}

impl Seen {
    fn merge(&mut self, other: &Self) {
        self.sleeps |= other.sleeps;
        self.clock |= other.clock;
        self.incremented.extend(other.incremented.iter().cloned());
        self.compared.extend(other.compared.iter().cloned());
    }

    fn counter(&self) -> bool {
        self.incremented.iter().any(|v| self.compared.contains(v))
    }
}

/// One loop being read.
struct Frame {
    line: usize,
    /// Variables the loop set to a clock's reading (`let elapsed = started.elapsed()`).
    clock_vars: Vec<String>,
    /// A `for` over a bounded range (`0..600`).
    bounded_range: bool,
    /// A `break` or `return` of the loop itself (not of a closure or an async block in it).
    leaves: bool,
    /// Closures and async blocks entered since the loop began.
    closures: usize,
    /// The loop's own code.
    own: Seen,
    /// Its code and that of the loops inside it.
    all: Seen,
    /// A loop inside it was named.
    inner_named: bool,
}

impl Frame {
    fn why(&self, seen: &Seen) -> Option<&'static str> {
        if !seen.sleeps {
            None
        } else if seen.clock {
            Some("checks a clock")
        } else if (self.bounded_range && self.leaves) || seen.counter() {
            Some("counts its attempts")
        } else {
            None
        }
    }
}

struct Finder<'a> {
    file: &'a str,
    frames: Vec<Frame>,
    problems: Vec<String>,
}

impl Finder<'_> {
    fn note(&mut self, f: impl Fn(&mut Seen)) {
        if let Some(frame) = self.frames.last_mut() {
            f(&mut frame.own);
            f(&mut frame.all);
        }
    }

    fn enter(&mut self, line: usize, bounded_range: bool) {
        self.frames.push(Frame {
            line,
            clock_vars: Vec::new(),
            bounded_range,
            leaves: false,
            closures: 0,
            own: Seen::default(),
            all: Seen::default(),
            inner_named: false,
        });
    }

    fn leave(&mut self) {
        let frame = self.frames.pop().expect("a loop entered");
        let why = frame
            .why(&frame.own)
            .or_else(|| frame.why(&frame.all).filter(|_| !frame.inner_named));
        if let Some(why) = why {
            self.problems.push(format!(
                "{}:{}: a loop that sleeps and {why}: a hand-written poll; wait with {HELPER} (wait_until, wait_for, or their async twins)",
                self.file, frame.line
            ));
        }
        if let Some(outer) = self.frames.last_mut() {
            outer.all.merge(&frame.all);
            outer.inner_named |= why.is_some() || frame.inner_named;
        }
    }

    fn in_closure(&mut self, visit: impl FnOnce(&mut Self)) {
        if let Some(frame) = self.frames.last_mut() {
            frame.closures += 1;
        }
        visit(self);
        if let Some(frame) = self.frames.last_mut() {
            frame.closures -= 1;
        }
    }

    fn leaves_loop(&mut self) {
        if let Some(frame) = self.frames.last_mut()
            && frame.closures == 0
        {
            frame.leaves = true;
        }
    }

    /// A macro's tokens that do not parse as expressions (`matches!`): its clock and its sleeps,
    /// by name.
    fn tokens(&mut self, stream: TokenStream) {
        let tokens: Vec<TokenTree> = stream.into_iter().collect();
        for (i, token) in tokens.iter().enumerate() {
            match token {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(ident) => {
                    let name = ident.to_string();
                    let after_dot = i > 0
                        && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '.');
                    let clock = (after_dot && CLOCK_METHODS.contains(&name.as_str()))
                        || name.to_lowercase().contains("deadline")
                        || (name == "Instant"
                            && tokens.get(i + 3).is_some_and(|t| t.to_string() == "now"));
                    let sleeps = name == "sleep";
                    self.note(|seen| {
                        seen.clock |= clock;
                        seen.sleeps |= sleeps;
                    });
                }
                _ => {}
            }
        }
    }
}

/// Whether an expression reads a clock.
fn reads_clock(expr: &syn::Expr) -> bool {
    #[derive(Default)]
    struct Reads(bool);
    impl<'ast> Visit<'ast> for Reads {
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            self.0 |= CLOCK_METHODS.iter().any(|m| call.method == m);
            syn::visit::visit_expr_method_call(self, call);
        }
        fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
            if let syn::Expr::Path(p) = &*call.func {
                let names: Vec<String> = p
                    .path
                    .segments
                    .iter()
                    .map(|s| s.ident.to_string())
                    .collect();
                self.0 |= names.ends_with(&["Instant".to_owned(), "now".to_owned()]);
            }
            syn::visit::visit_expr_call(self, call);
        }
    }
    let mut reads = Reads::default();
    reads.visit_expr(expr);
    reads.0
}

/// The variable a simple expression names (`attempt`, not `self.attempt` or `a.b()`).
fn variable(expr: &syn::Expr) -> Option<String> {
    match expr {
        syn::Expr::Path(p) if p.path.segments.len() == 1 => {
            Some(p.path.segments[0].ident.to_string())
        }
        syn::Expr::Paren(p) => variable(&p.expr),
        _ => None,
    }
}

fn bounded_range(expr: &syn::Expr) -> bool {
    match expr {
        syn::Expr::Range(r) => r.end.is_some(),
        syn::Expr::Paren(p) => bounded_range(&p.expr),
        _ => false,
    }
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_expr_loop(&mut self, expr: &'ast syn::ExprLoop) {
        self.enter(expr.loop_token.span.start().line, false);
        syn::visit::visit_expr_loop(self, expr);
        self.leave();
    }

    fn visit_expr_while(&mut self, expr: &'ast syn::ExprWhile) {
        self.enter(expr.while_token.span.start().line, false);
        syn::visit::visit_expr_while(self, expr);
        self.leave();
    }

    fn visit_expr_for_loop(&mut self, expr: &'ast syn::ExprForLoop) {
        self.enter(expr.for_token.span.start().line, bounded_range(&expr.expr));
        syn::visit::visit_expr_for_loop(self, expr);
        self.leave();
    }

    fn visit_expr_closure(&mut self, expr: &'ast syn::ExprClosure) {
        self.in_closure(|v| syn::visit::visit_expr_closure(v, expr));
    }

    fn visit_expr_async(&mut self, expr: &'ast syn::ExprAsync) {
        self.in_closure(|v| syn::visit::visit_expr_async(v, expr));
    }

    fn visit_expr_break(&mut self, expr: &'ast syn::ExprBreak) {
        self.leaves_loop();
        syn::visit::visit_expr_break(self, expr);
    }

    fn visit_expr_return(&mut self, expr: &'ast syn::ExprReturn) {
        self.leaves_loop();
        syn::visit::visit_expr_return(self, expr);
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*call.func {
            let sleeps = p
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "sleep" || s.ident == "sleep_until");
            self.note(|seen| seen.sleeps |= sleeps);
        }
        syn::visit::visit_expr_call(self, call);
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        let name = match &local.pat {
            syn::Pat::Ident(p) => Some(p.ident.to_string()),
            syn::Pat::Type(t) => match &*t.pat {
                syn::Pat::Ident(p) => Some(p.ident.to_string()),
                _ => None,
            },
            _ => None,
        };
        if let (Some(name), Some(init), Some(frame)) = (name, &local.init, self.frames.last_mut())
            && reads_clock(&init.expr)
        {
            frame.clock_vars.push(name);
        }
        syn::visit::visit_local(self, local);
    }

    fn visit_expr_path(&mut self, expr: &'ast syn::ExprPath) {
        let deadline = expr
            .path
            .segments
            .iter()
            .any(|s| s.ident.to_string().to_lowercase().contains("deadline"));
        self.note(|seen| seen.clock |= deadline);
        syn::visit::visit_expr_path(self, expr);
    }

    fn visit_expr_binary(&mut self, expr: &'ast syn::ExprBinary) {
        use syn::BinOp;
        match expr.op {
            BinOp::AddAssign(_) => {
                if let Some(v) = variable(&expr.left) {
                    self.note(|seen| seen.incremented.push(v.clone()));
                }
            }
            BinOp::Lt(_)
            | BinOp::Le(_)
            | BinOp::Gt(_)
            | BinOp::Ge(_)
            | BinOp::Eq(_)
            | BinOp::Ne(_) => {
                for side in [&*expr.left, &*expr.right] {
                    let var = variable(side);
                    let clock = reads_clock(side)
                        || var
                            .as_ref()
                            .is_some_and(|v| self.frames.iter().any(|f| f.clock_vars.contains(v)));
                    self.note(|seen| {
                        seen.clock |= clock;
                        seen.compared.extend(var.clone());
                    });
                }
            }
            _ => {}
        }
        syn::visit::visit_expr_binary(self, expr);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // `assert!(started.elapsed() < T, ...)`, `format!`, `panic!`: expressions, read as code.
        let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        match mac.parse_body_with(parser) {
            Ok(exprs) => {
                for expr in &exprs {
                    self.visit_expr(expr);
                }
            }
            Err(_) => self.tokens(mac.tokens.clone()),
        }
        syn::visit::visit_macro(self, mac);
    }

    // A function declared inside a loop is not the loop's code.
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        let outer = std::mem::take(&mut self.frames);
        syn::visit::visit_item_fn(self, item);
        self.frames = outer;
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        let outer = std::mem::take(&mut self.frames);
        syn::visit::visit_impl_item_fn(self, item);
        self.frames = outer;
    }
}

/// The hand-written polls of `files` (path from the repository root, text).
fn check(files: &[(String, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| p != HELPER) {
        let parsed = match syn::parse_file(text) {
            Ok(parsed) => parsed,
            Err(e) => {
                problems.push(format!("{path}: cannot parse: {e}"));
                continue;
            }
        };
        let mut finder = Finder {
            file: path,
            frames: Vec::new(),
            problems: Vec::new(),
        };
        finder.visit_file(&parsed);
        problems.extend(finder.problems);
    }
    problems
}

#[test]
fn the_tests_and_benches_wait_through_the_one_helper() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    crate::settings_carrier::rust_files(&root.join("tests"), root, &mut files);
    crate::settings_carrier::rust_files(&root.join("benches"), root, &mut files);
    assert!(
        files.iter().any(|(p, _)| p == HELPER)
            && files.iter().any(|(p, _)| p == "tests/common/apiserver.rs")
            && files.iter().any(|(p, _)| p.starts_with("benches/"))
            && files.len() > 80,
        "the walk found {} files of tests/ and benches/",
        files.len()
    );
    let problems = check(&files);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The helper is the one loop, and it sleeps until a deadline.
    let helper = &files.iter().find(|(p, _)| p == HELPER).unwrap().1;
    let planted = vec![("tests/common/moved.rs".to_owned(), helper.clone())];
    assert_eq!(
        check(&planted).len(),
        2,
        "the helper's two loops (sync and async) are polls: the check would see them elsewhere"
    );
}

#[test]
fn a_hand_written_poll_is_caught_with_its_file_and_line() {
    let planted = "\
fn until_a_deadline() {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ready() {
        assert!(Instant::now() < deadline, \"not ready\");
        std::thread::sleep(Duration::from_millis(50));
    }
}
async fn until_elapsed() {
    let started = Instant::now();
    loop {
        if done().await {
            return;
        }
        if started.elapsed() > PATIENCE {
            panic!(\"not done\");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
fn by_attempts() -> bool {
    for _ in 0..600 {
        if done() {
            return true;
        }
        sleep(Duration::from_millis(100));
    }
    false
}
fn by_a_counter() {
    let mut tries = 0;
    while !done() {
        tries += 1;
        assert!(tries < 100, \"gave up\");
        thread::sleep(Duration::from_millis(10));
    }
}
fn in_a_macro_that_is_not_code() {
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        assert!(matches!(signalled.elapsed(), d if d < LIMIT), \"still running\");
        std::thread::sleep(Duration::from_millis(200));
    };
}
";
    let problems = check(&[("tests/system/planted.rs".to_owned(), planted.to_owned())]);
    let expected = [
        ("tests/system/planted.rs:3:", "checks a clock"),
        ("tests/system/planted.rs:10:", "checks a clock"),
        ("tests/system/planted.rs:21:", "counts its attempts"),
        ("tests/system/planted.rs:31:", "counts its attempts"),
        ("tests/system/planted.rs:38:", "checks a clock"),
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    for (problem, (at, why)) in problems.iter().zip(expected) {
        assert!(
            problem.starts_with(at) && problem.contains(why) && problem.contains(HELPER),
            "{problem}: expected {at} ... {why}"
        );
    }
}

#[test]
fn pauses_paces_samples_and_the_helper_are_not_polls() {
    let planted = "\
fn scenario() {
    // A deliberate pause.
    std::thread::sleep(Duration::from_secs(2));
    // A pace: every round sent, no early way out.
    for i in 0..5 {
        send(i);
        std::thread::sleep(Duration::from_millis(100));
    }
    // Sampling a process until it exits, measured from outside the loop.
    let begin = Instant::now();
    loop {
        peak = peak.max(sample());
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let wall = begin.elapsed();
    // Sending for a while, without sleeping.
    for body in bodies {
        if begin.elapsed() > MAX_DURATION {
            break;
        }
        post(body);
    }
    // Waits through the helper, in a loop, with one patience for all.
    for name in [\"a\", \"b\"] {
        wait_for(name, LIMIT.saturating_sub(begin.elapsed()), Duration::from_millis(500), || Ok(()));
    }
    // A return of a closure does not leave the loop.
    for i in 0..3 {
        let first = |xs: &[u8]| {
            return xs[0];
        };
        std::thread::sleep(Duration::from_millis(first(&[i])));
    }
}
";
    let problems = check(&[
        ("tests/suite/scenario.rs".to_owned(), planted.to_owned()),
        (
            HELPER.to_owned(),
            "pub fn wait_until() { let started = Instant::now(); loop { \
             if started.elapsed() >= timeout { return; } std::thread::sleep(every); } }"
                .to_owned(),
        ),
    ]);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_poll_inside_a_loop_is_named_once_and_a_poll_around_one_too() {
    let planted = "\
fn kill_repeatedly() {
    for kill in 0..KILLS {
        std::thread::sleep(Duration::from_millis(draw()));
        let started = std::time::Instant::now();
        while no_data() {
            assert!(started.elapsed() < LIMIT);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
fn drive() {
    let started = Instant::now();
    for round in 0_u64.. {
        let step = loop {
            if paused() {
                break 1;
            }
            assert!(started.elapsed() < PATIENCE);
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(started.elapsed() < PATIENCE, \"not ended\");
        std::thread::sleep(Duration::from_secs(2));
    }
}
fn split() {
    let started = Instant::now();
    loop {
        for p in &processes {
            check(p);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(started.elapsed() < LIMIT);
    }
}
";
    let problems = check(&[("benches/planted.rs".to_owned(), planted.to_owned())]);
    let lines: Vec<&str> = problems
        .iter()
        .map(|p| p.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "benches/planted.rs:5",
            "benches/planted.rs:14",
            "benches/planted.rs:13",
            "benches/planted.rs:27",
        ],
        "{problems:#?}"
    );
}
